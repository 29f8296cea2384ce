# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The DRA ledger's sums, on ResourceSlices, ResourceClaims, DeviceClasses and pods recorded from the simulated
cluster's real API server, scheduler and kubelet (tests/unit/fixtures/dra/README.md)."""

import copy
import json
from pathlib import Path

import pytest
from select_fields import select_fields

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import dra_ledger, ledger
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import K8sApiError

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dra"


def load(name):
    data = json.loads((FIXTURES / name).read_text())
    return data.get("items", data) if isinstance(data, dict) and "items" in data else data


SLICES, CLAIMS, CLASSES = load("resourceslices.json"), load("resourceclaims.json"), load("deviceclasses.json")
PODS, NODES = load("pods.json"), load("nodes.json")
EXTENDED_CLAIM, EXTENDED_POD = load("extended-resource-claim.json"), load("extended-resource-pod.json")
HOLD = next(item for item in PODS if item["metadata"]["name"] == "hold-0")
HOLD_CLAIM = next(claim for claim in CLAIMS if (claim.get("status") or {}).get("allocation"))


def two_gpu_slice():
    """The recorded slice with a second GPU, gpu-1 (NVIDIA's names follow the minor)."""
    item = copy.deepcopy(SLICES[0])
    second = copy.deepcopy(item["spec"]["devices"][0])
    second["name"] = "gpu-1"
    second["attributes"]["uuid"] = {"string": "GPU-second"}
    item["spec"]["devices"].append(second)
    return item


class TestNodeDevices:
    def test_devices_from_the_slice_and_holders_from_the_claims(self):
        node = dra_ledger.build_node_dra("prod102", SLICES, CLAIMS, CLASSES)
        gpu = node["drivers"]["gpu.nvidia.com"]
        assert (gpu["pools"], gpu["total"], gpu["allocated"], gpu["free"]) == (["prod102"], 1, 1, 0)
        device = gpu["devices"][0]
        assert (device["name"], device["uuid"], device["product"], device["type"]) == (
            "gpu-0", "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76", "NVIDIA H20", "gpu")
        assert device["memory"] == 97871 * 2 ** 20
        assert device["classes"] == ["gpu.nvidia.com"]
        assert device["claim"]["name"].startswith("hold-0-gpu-") and device["request"] == "gpu"
        assert [(holder["name"], holder["uid"]) for holder in device["holders"]] == [("hold-0", HOLD["metadata"]["uid"])]

    def test_device_classes_counted_by_the_charts_selectors(self):
        classes = dra_ledger.build_node_dra("prod102", SLICES, CLAIMS, CLASSES)["drivers"]["gpu.nvidia.com"]["classes"]
        # mig.nvidia.com and vfio.gpu.nvidia.com select other types: no device of this node is in them.
        assert classes == {"gpu.nvidia.com": {"total": 1, "allocated": 1, "tainted": 0, "free": 0, "evaluated": True,
                                              "extended_resource_name": "nvidia.com/gpu"}}

    def test_a_claim_pending_allocation_holds_nothing(self):
        pending_only = [claim for claim in CLAIMS if not (claim.get("status") or {}).get("allocation")]
        assert pending_only, "the recording has the queue pod's unallocated claim"
        gpu = dra_ledger.build_node_dra("prod102", SLICES, pending_only, CLASSES)["drivers"]["gpu.nvidia.com"]
        assert (gpu["allocated"], gpu["free"], gpu["devices"][0]["holders"]) == (0, 1, [])

    def test_the_schedulers_extended_resource_claim_is_a_holder_too(self):
        device = dra_ledger.build_node_dra("prod102", SLICES, [EXTENDED_CLAIM], CLASSES)["drivers"]["gpu.nvidia.com"]["devices"][0]
        assert device["claim"]["extended_resource"] is True
        assert device["holders"][0]["name"] == EXTENDED_POD["metadata"]["name"]
        assert dra_ledger.pod_claim_refs(EXTENDED_POD) == [("default", EXTENDED_CLAIM["metadata"]["name"])]

    def test_claims_of_other_nodes_count_nothing_here(self):
        elsewhere = copy.deepcopy(CLAIMS)
        for claim in elsewhere:
            for result in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
                result["pool"] = "prod103"
        assert dra_ledger.build_node_dra("prod102", SLICES, elsewhere, CLASSES)["drivers"]["gpu.nvidia.com"]["allocated"] == 0

    def test_a_node_no_slice_names_has_no_dra_ledger(self):
        assert dra_ledger.build_node_dra("prod103", SLICES, CLAIMS, CLASSES) is None

    def test_only_the_newest_generation_of_a_pool_counts(self):
        old = two_gpu_slice()
        new = copy.deepcopy(SLICES[0])
        new["spec"]["pool"]["generation"] = old["spec"]["pool"]["generation"] + 1
        assert dra_ledger.build_node_dra("prod102", [old, new], [], CLASSES)["drivers"]["gpu.nvidia.com"]["total"] == 1

    def test_devices_sort_by_minor_not_as_text(self):
        item = two_gpu_slice()
        item["spec"]["devices"][1]["name"] = "gpu-10"
        item["spec"]["devices"].append(dict(copy.deepcopy(item["spec"]["devices"][0]), name="gpu-2"))
        names = [device["name"] for device in dra_ledger.build_node_dra("prod102", [item], [], CLASSES)["drivers"]["gpu.nvidia.com"]["devices"]]
        assert names == ["gpu-0", "gpu-2", "gpu-10"]


class TestSelectors:
    @pytest.mark.parametrize("expression, expected", [
        ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
         [("driver", "gpu.nvidia.com"), ("attribute", "gpu.nvidia.com", "type", "gpu")]),
        ("device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].id == 0",
         [("driver", "compute-domain.nvidia.com"), ("attribute", "compute-domain.nvidia.com", "id", 0)]),
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", None),
        ("device.driver == 'a' || device.driver == 'b'", None),
        ("", None),
    ])
    def test_only_the_charts_kind_of_selector_is_evaluated(self, expression, expected):
        assert dra_ledger.compile_selector(expression) == expected

    def test_a_class_with_a_selector_not_evaluated_says_so(self):
        custom = {"metadata": {"name": "big.gpu.example.com"}, "spec": {"selectors": [
            {"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"}}]}}
        classes = dra_ledger.build_node_dra("prod102", SLICES, CLAIMS, CLASSES + [custom])["drivers"]["gpu.nvidia.com"]["classes"]
        # Not established here: unknown counts (never 0), and the devices it may select.
        assert classes["big.gpu.example.com"] == {"total": None, "allocated": None, "tainted": None, "free": None,
                                                  "evaluated": False, "candidates": 1, "extended_resource_name": None}
        device = dra_ledger.build_node_dra("prod102", SLICES, CLAIMS, CLASSES + [custom])["drivers"]["gpu.nvidia.com"]["devices"][0]
        assert device["classes"] == ["gpu.nvidia.com"] and device["maybe_classes"] == ["big.gpu.example.com"]

    @pytest.mark.parametrize("expression, maybe", [
        # The driver term is read: another driver's class cannot select this device.
        ("device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].id.matches('x')", []),
        ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('h20')",
         ["custom"]),
        # Nothing can be read of a disjunction or a negation: any device may be selected.
        ("device.driver == 'other' || device.attributes['gpu.nvidia.com'].productName.matches('h20')", ["custom"]),
        ("!(device.driver == 'other')", ["custom"]),
    ])
    def test_the_readable_terms_of_a_selector_not_evaluated_rule_devices_out(self, expression, maybe):
        custom = {"metadata": {"name": "custom"}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}
        gpu = dra_ledger.build_node_dra("prod102", SLICES, CLAIMS, CLASSES + [custom])["drivers"]["gpu.nvidia.com"]
        assert gpu["devices"][0]["maybe_classes"] == maybe
        assert ("custom" in gpu["classes"]) == bool(maybe)

    def test_mig_class_selects_mig_devices(self):
        item = copy.deepcopy(SLICES[0])
        device = item["spec"]["devices"][0]
        device.update(name="gpu-0-mig-1g10gb-19-0")
        device["attributes"]["type"] = {"string": "mig"}
        entry = dra_ledger.build_node_dra("prod102", [item], [], CLASSES)["drivers"]["gpu.nvidia.com"]
        assert entry["devices"][0]["classes"] == ["mig.nvidia.com"] and entry["devices"][0]["type"] == "mig"


class TestLedgerWithDRA:
    def dra(self):
        return {"slices": SLICES, "claims": CLAIMS, "classes": CLASSES}

    def test_a_dra_node_is_a_gpu_node_with_its_allocation_path(self):
        node = copy.deepcopy(NODES[0])
        node["metadata"]["labels"].pop("nvidia.com/gpu.present", None)
        result = ledger.build_ledger([node], PODS, dra=self.dra())
        entry = result["nodes"]["prod102"]
        assert entry["resources"] == {} and entry["allocation"] == "dra"
        assert result["dra_totals"] == {"gpu.nvidia.com": {"total": 1, "allocated": 1, "tainted": 0, "free": 0}}
        assert "gpu.nvidia.com" in result["device_classes"]

    def test_the_queue_pod_is_pending_with_its_claim(self):
        pending = ledger.build_ledger(NODES, PODS, dra=self.dra())["pending"]
        queue = next(entry for entry in pending if entry["name"] == "queue")
        assert queue["requests"] == {} and queue["reason"] == "Unschedulable"
        assert "cannot allocate all claims" in queue["message"]
        assert len(queue["claims"]) == 1 and queue["claims"][0].startswith("queue-gpu-")

    def test_without_dra_the_ledger_is_as_before(self):
        assert "dra" not in ledger.build_ledger(NODES, PODS)["nodes"]["prod102"]

    @pytest.mark.parametrize("strategy", ["node", "fleet"])
    def test_a_dra_node_is_read_not_refused(self, strategy):
        reader = DRAReader(NODES, PODS, SLICES, CLAIMS, CLASSES)
        result = ledger.read_ledger(reader, node="prod102", strategy=strategy, dra=True)
        assert result["nodes"]["prod102"]["dra"]["drivers"]["gpu.nvidia.com"]["allocated"] == 1
        assert result["dra_served"] is True

    def test_node_and_fleet_reads_agree(self):
        by_node = ledger.read_ledger(DRAReader(NODES, PODS, SLICES, CLAIMS, CLASSES), node="prod102", strategy="node", dra=True)
        by_fleet = ledger.read_ledger(DRAReader(NODES, PODS, SLICES, CLAIMS, CLASSES), node="prod102", strategy="fleet", dra=True)
        assert by_node == by_fleet

    def test_a_node_read_counts_a_claim_no_pod_of_the_node_uses(self):
        # Allocated on the node and reserved for no pod: the scheduler keeps the device, so the ledger does too.
        orphan = copy.deepcopy(HOLD_CLAIM)
        orphan["metadata"].update(name="kept", namespace="other")
        orphan["status"]["reservedFor"] = []
        reader = DRAReader(NODES, [pod for pod in PODS if pod is not HOLD], SLICES, [orphan], CLASSES)
        result = ledger.read_ledger(reader, node="prod102", strategy="node", dra=True)
        device = result["nodes"]["prod102"]["dra"]["drivers"]["gpu.nvidia.com"]["devices"][0]
        assert (device["allocated"], device["claim"]["name"], device["holders"]) == (True, "kept", [])
        assert [call for call in reader.calls if "resource_claim" in call[0]] == [("list_resource_claims",)]
        assert ("list_resource_slices", "spec.nodeName=prod102") in reader.calls

    def test_the_fleet_read_is_a_constant_number_of_lists(self):
        reader = DRAReader(NODES, PODS, SLICES, CLAIMS, CLASSES)
        ledger.read_ledger(reader, dra=True)
        assert sorted(call[0] for call in reader.calls) == [
            "list_device_classes", "list_nodes", "list_pods", "list_resource_claims", "list_resource_slices"]

    def test_a_node_without_gpus_or_slices_is_still_refused(self):
        node = copy.deepcopy(NODES[0])
        node["metadata"]["name"] = "cpu-1"
        with pytest.raises(ledger.LedgerError, match="cpu-1 advertises none of nvidia.com/gpu.*no ResourceSlice publishes devices on it"):
            ledger.read_ledger(DRAReader([node], [], SLICES, CLAIMS, CLASSES), node="cpu-1", dra=True)

    def test_an_api_server_without_resource_v1_gives_the_device_plugin_ledger(self):
        reader = DRAReader(NODES, PODS, None, None, None)
        with pytest.raises(ledger.LedgerError, match="advertises none of"):
            ledger.read_ledger(reader, node="prod102", dra=True)
        result = ledger.read_ledger(DRAReader(NODES, PODS, None, None, None), dra=True)
        assert result["dra_served"] is False and "dra" not in result["nodes"].get("prod102", {})


class DRAReader:
    """CoreV1Reader's reads over in-memory objects; None slices mean resource.k8s.io/v1 is not served."""

    host = "https://127.0.0.1:16443"

    def __init__(self, nodes, pods, slices, claims, classes):
        self.nodes, self.pods, self.slices, self.claims, self.classes = nodes, pods, slices, claims, classes
        self.calls = []

    def get_node(self, name, fields=None):
        self.calls.append(("get_node", name))
        return select_fields(next((node for node in self.nodes if node["metadata"]["name"] == name), None), fields)

    def list_nodes(self, fields=None):
        self.calls.append(("list_nodes",))
        return [select_fields(node, fields) for node in self.nodes]

    def list_pods(self, namespace=None, field_selector=None, fields=None, keep=None, page_size=None):
        self.calls.append(("list_pods", namespace, field_selector))
        selected = []
        for item in self.pods:
            node = item["spec"].get("nodeName") or ""
            if field_selector and field_selector.startswith("spec.nodeName=,"):
                wanted = node == "" and item["status"]["phase"] == "Pending"
            elif field_selector and field_selector.startswith("spec.nodeName="):
                wanted = node == field_selector.split(",")[0].split("=", 1)[1] and item["status"]["phase"] not in ("Succeeded", "Failed")
            else:
                wanted = True
            if wanted and namespace in (None, item["metadata"]["namespace"]):
                selected.append(select_fields(item, fields))
        return [item for item in selected if keep is None or keep(item)]

    def list_resource_slices(self, field_selector=None):
        self.calls.append(("list_resource_slices", field_selector))
        if self.slices is None:
            return None
        node = field_selector.split("=", 1)[1] if field_selector else None
        return [item for item in self.slices if node in (None, item["spec"].get("nodeName"))]

    def list_resource_claims(self):
        self.calls.append(("list_resource_claims",))
        return self.claims

    def list_device_classes(self):
        self.calls.append(("list_device_classes",))
        return self.classes


def forbidden(read):
    """The error CoreV1Reader raises when the credentials may not make ``read`` (as client.explain_api_errors words it)."""
    return K8sApiError('forbidden (403) to {0} on the Kubernetes API at https://127.0.0.1:16443: resourceslices.resource.k8s.io '
                       'is forbidden: User "system:serviceaccount:gpu-operator:old" cannot {0}'.format(read), status=403)


class RefusingReader(DRAReader):
    """An identity made before the DRA reads were granted: the reads named in ``refused`` answer 403."""

    def __init__(self, nodes, pods, refused, status=403):
        super().__init__(nodes, pods, SLICES, CLAIMS, CLASSES)
        self.refused, self.status = set(refused), status

    def _maybe_refuse(self, read):
        if read in self.refused:
            error = forbidden(read)
            error.status = self.status
            raise error

    def list_resource_slices(self, field_selector=None):
        self._maybe_refuse("list resourceslices")
        return super().list_resource_slices(field_selector)

    def list_resource_claims(self):
        self._maybe_refuse("list resourceclaims")
        return super().list_resource_claims()

    def list_device_classes(self):
        self._maybe_refuse("list deviceclasses")
        return super().list_device_classes()


def device_plugin_node(name="prod103", units="1"):
    node = copy.deepcopy(NODES[0])
    node["metadata"]["name"] = name
    for key in ("capacity", "allocatable"):
        node["status"].setdefault(key, {})["nvidia.com/gpu"] = units
    return node


class TestDRAReadsRefused:
    """With DRA read by default, credentials without the resource.k8s.io reads still get the device-plugin ledger."""

    @pytest.mark.parametrize("strategy", ["node", "fleet"])
    @pytest.mark.parametrize("refused", [["list resourceslices"], ["list deviceclasses"],
                                         ["list resourceclaims", "list resourceslices", "list deviceclasses"]])
    def test_a_device_plugin_node_is_still_read_and_told_what_was_refused(self, strategy, refused):
        reader = RefusingReader(NODES + [device_plugin_node()], PODS, refused)
        result = ledger.read_ledger(reader, node="prod103", strategy=strategy, dra=True)
        node = result["nodes"]["prod103"]
        assert node["resources"]["nvidia.com/gpu"]["allocatable"] == 1
        assert "dra" not in node and "allocation" not in node
        assert result["dra_served"] is None
        message = result["dra_refused"]
        assert message.startswith("DRA not readable with these credentials: forbidden (403) to list ")
        assert "playbooks/preflight_rbac.yml grants them" in message
        # What was refused is named.
        assert ("list resourceslices" in message) == ("list resourceslices" in refused)

    def test_the_fleet_read_keeps_every_device_plugin_node(self):
        reader = RefusingReader(NODES + [device_plugin_node()], PODS, ["list resourceclaims"])
        result = ledger.read_ledger(reader, dra=True)
        assert result["totals"]["nvidia.com/gpu"]["allocatable"] == 1 and "dra_totals" not in result
        assert "cannot list resourceclaims" in result["dra_refused"]

    @pytest.mark.parametrize("strategy", ["node", "fleet"])
    @pytest.mark.parametrize("refused", [["list resourceslices"], ["list deviceclasses"], ["list resourceclaims"]])
    def test_a_dra_node_is_refused_naming_the_missing_permission(self, strategy, refused):
        # Both reads list the claims (a node read too: a claim reserved for no pod holds its devices).
        wanted = refused
        reader = RefusingReader(NODES, PODS, wanted)
        with pytest.raises(ledger.LedgerError) as raised:
            ledger.read_ledger(reader, node="prod102", strategy=strategy, dra=True)
        message = str(raised.value)
        assert message.startswith("node prod102 advertises none of nvidia.com/gpu; it advertises: ")
        assert "its GPUs may be published through DRA, but DRA not readable with these credentials: forbidden (403) to " \
               + wanted[0] in message
        assert "playbooks/preflight_rbac.yml grants them" in message

    def test_the_same_credentials_with_the_reads_see_the_dra_node(self):
        result = ledger.read_ledger(RefusingReader(NODES, PODS, []), node="prod102", dra=True)
        assert result["dra_refused"] is None and result["dra_served"] is True
        assert result["nodes"]["prod102"]["allocation"] == "dra"

    def test_other_failures_of_the_dra_reads_still_fail_the_read(self):
        reader = RefusingReader(NODES + [device_plugin_node()], PODS, ["list resourceslices"], status=500)
        with pytest.raises(K8sApiError, match="list resourceslices"):
            ledger.read_ledger(reader, node="prod103", dra=True)


def tainted_slice(effect="NoSchedule"):
    """Two GPUs, gpu-1 tainted by the driver as NVIDIA's health monitor taints a GPU with an XID error."""
    item = two_gpu_slice()
    item["spec"]["devices"][1]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": effect,
                                             "timeAdded": "2026-12-01T12:00:00Z"}]
    return item


class TestDeviceTaints:
    def test_a_tainted_device_is_counted_but_not_free(self):
        free_claims = [claim for claim in CLAIMS if not (claim.get("status") or {}).get("allocation")]
        gpu = dra_ledger.build_node_dra("prod102", [tainted_slice()], free_claims, CLASSES)["drivers"]["gpu.nvidia.com"]
        assert (gpu["total"], gpu["allocated"], gpu["tainted"], gpu["free"]) == (2, 0, 1, 1)
        assert gpu["classes"]["gpu.nvidia.com"]["free"] == 1
        tainted = gpu["devices"][1]
        assert (tainted["name"], tainted["tainted"], tainted["taints"]) == ("gpu-1", True, ["gpu.nvidia.com/xid=79:NoSchedule"])
        assert gpu["devices"][0]["taints"] == [] and gpu["devices"][0]["tainted"] is False

    def test_a_taint_that_only_informs_blocks_nothing(self):
        gpu = dra_ledger.build_node_dra("prod102", [tainted_slice("None")], [], CLASSES)["drivers"]["gpu.nvidia.com"]
        assert (gpu["tainted"], gpu["free"]) == (0, 2)
        assert gpu["devices"][1]["taints"] == ["gpu.nvidia.com/xid=79:None"]

    def test_an_allocated_tainted_device_stays_its_claims(self):
        gpu = dra_ledger.build_node_dra("prod102", [tainted_slice()], CLAIMS, CLASSES)["drivers"]["gpu.nvidia.com"]
        # gpu-0 is the recorded hold's; gpu-1 tainted: nothing free.
        assert (gpu["allocated"], gpu["tainted"], gpu["free"]) == (1, 1, 0)
