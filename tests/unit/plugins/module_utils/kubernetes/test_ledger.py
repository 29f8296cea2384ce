# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ledger's sums, checked against `kubectl describe node` on objects recorded from a real API server.

tests/unit/fixtures/ledger/ holds nodes and pods as the kube-apiserver stored them and kubectl's
description of each node (re-record with tests/unit/fixtures/ledger/record.py).
"""

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import ledger
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import select_fields

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "ledger"
NODES = json.loads((FIXTURES / "nodes.json").read_text())
PODS = json.loads((FIXTURES / "pods.json").read_text())
NODE_A, NODE_B = NODES


def kubectl_allocated(node_name):
    """kubectl describe node's Allocated resources table: {resource: (requests, limits)} as Decimals."""
    text = (FIXTURES / "describe-{0}.txt".format(node_name)).read_text()
    table = text.split("Allocated resources:")[1].split("Events:")[0]
    rows = {}
    for line in table.splitlines():
        match = re.match(r"^\s+(\S+)\s+(\S+)(?: \(\d+%\))?\s+(\S+)(?: \(\d+%\))?\s*$", line)
        if match and match.group(1) not in ("Resource", "--------"):
            rows[match.group(1)] = (ledger.parse_quantity(match.group(2)), ledger.parse_quantity(match.group(3)))
    return rows


def pod(name):
    return next(item for item in PODS if item["metadata"]["name"] == name)


def container(name, requests=None, limits=None, restart_policy=None):
    spec = {"name": name, "resources": {}}
    if requests:
        spec["resources"]["requests"] = requests
    if limits:
        spec["resources"]["limits"] = limits
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def pod_spec(containers, init_containers=(), overhead=None, node=None, phase="Running", name="p", namespace="ns"):
    spec = {"containers": list(containers), "initContainers": list(init_containers)}
    if overhead:
        spec["overhead"] = overhead
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": {"phase": phase}}


def gpu_node(name, units, resource="nvidia.com/gpu", labels=None):
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {},
            "status": {"capacity": {resource: str(units), "cpu": "8"}, "allocatable": {resource: str(units), "cpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize("text, expected", [
    ("1", 1), ("2", 2), ("0", 0), ("+3", 3), ("1k", 1000), ("1e3", 1000), ("1e0", 1), ("1E", 10 ** 18),
    ("500m", Decimal("0.5")), ("2750m", Decimal("2.75")), ("1Ki", 1024), ("16Gi", 16 * 1024 ** 3), (".5", Decimal("0.5")),
    ("1.5k", 1500), (7, 7),
])
def test_parse_quantity(text, expected):
    assert ledger.parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "one", "1 GPU", "1KB", "--1"])
def test_parse_quantity_rejects_what_is_not_a_quantity(text):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        ledger.parse_quantity(text)


def test_as_number_keeps_whole_units_integer():
    assert ledger.as_number(Decimal("1E+3")) == 1000 and isinstance(ledger.as_number(Decimal("1E+3")), int)
    assert ledger.as_number(Decimal("0.5")) == 0.5


@pytest.mark.parametrize("name, patterns, expected", [
    ("nvidia.com/gpu", ["nvidia.com/gpu"], True),
    ("nvidia.com/gpu.shared", ["nvidia.com/gpu"], False),
    ("nvidia.com/gpu.shared", ["nvidia.com/gpu", "nvidia.com/gpu.shared"], True),
    ("nvidia.com/mig-1g.10gb", ["nvidia.com/mig-*"], True),
    ("nvidia.com/mig-1g.10gb", ["nvidia.com/gpu"], False),
    ("amd.com/gpu", ["*/gpu"], True),
])
def test_matches_any(name, patterns, expected):
    assert ledger.matches_any(name, patterns) is expected


class TestPodFormula:
    """k8s.io/component-helpers/resource PodRequests/PodLimits on hand-made pods."""

    def test_app_containers_are_summed(self):
        pod_object = pod_spec([container("a", limits={"nvidia.com/gpu": "1"}), container("b", limits={"nvidia.com/gpu": "2"})])
        assert ledger.pod_requests(pod_object) == {"nvidia.com/gpu": 3}
        assert ledger.pod_limits(pod_object) == {"nvidia.com/gpu": 3}

    def test_a_limit_alone_is_the_request(self):
        assert ledger.pod_requests(pod_spec([container("a", limits={"nvidia.com/gpu": "2"})])) == {"nvidia.com/gpu": 2}

    def test_an_explicit_request_wins_over_the_limit(self):
        pod_object = pod_spec([container("a", requests={"cpu": "1"}, limits={"cpu": "2"})])
        assert ledger.pod_requests(pod_object) == {"cpu": 1}
        assert ledger.pod_limits(pod_object) == {"cpu": 2}

    def test_a_larger_init_container_sets_the_floor(self):
        pod_object = pod_spec([container("app", limits={"nvidia.com/gpu": "1"})], [container("init", limits={"nvidia.com/gpu": "4"})])
        assert ledger.pod_requests(pod_object) == {"nvidia.com/gpu": 4}

    def test_a_smaller_init_container_changes_nothing(self):
        pod_object = pod_spec([container("app", limits={"nvidia.com/gpu": "2"})], [container("init", limits={"nvidia.com/gpu": "1"})])
        assert ledger.pod_requests(pod_object) == {"nvidia.com/gpu": 2}

    def test_init_containers_take_the_largest_not_the_sum(self):
        init = [container("one", limits={"nvidia.com/gpu": "2"}), container("two", limits={"nvidia.com/gpu": "3"})]
        assert ledger.pod_requests(pod_spec([container("app")], init)) == {"nvidia.com/gpu": 3}

    def test_a_sidecar_runs_alongside_the_app(self):
        sidecar = container("proxy", limits={"nvidia.com/gpu": "1"}, restart_policy="Always")
        pod_object = pod_spec([container("app", limits={"nvidia.com/gpu": "1"})], [sidecar])
        assert ledger.pod_requests(pod_object) == {"nvidia.com/gpu": 2}
        assert ledger.pod_limits(pod_object) == {"nvidia.com/gpu": 2}

    def test_an_init_container_after_a_sidecar_runs_beside_it(self):
        init = [container("proxy", limits={"nvidia.com/gpu": "1"}, restart_policy="Always"), container("setup", limits={"nvidia.com/gpu": "2"})]
        assert ledger.pod_requests(pod_spec([container("app", limits={"nvidia.com/gpu": "1"})], init)) == {"nvidia.com/gpu": 3}

    def test_an_init_container_before_a_sidecar_runs_alone(self):
        init = [container("setup", limits={"nvidia.com/gpu": "2"}), container("proxy", limits={"nvidia.com/gpu": "1"}, restart_policy="Always")]
        assert ledger.pod_requests(pod_spec([container("app", limits={"nvidia.com/gpu": "1"})], init)) == {"nvidia.com/gpu": 2}

    def test_overhead_adds_to_requests_and_to_nonzero_limits_only(self):
        pod_object = pod_spec([container("app", requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "2"})],
                              overhead={"cpu": "250m", "memory": "64Mi"})
        assert ledger.pod_requests(pod_object) == {"cpu": Decimal("1.25"), "memory": (1024 + 64) * 1024 ** 2}
        assert ledger.pod_limits(pod_object) == {"cpu": Decimal("2.25")}

    def test_a_pod_without_resources_requests_nothing(self):
        assert ledger.pod_requests({"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "c"}]}}) == {}


class TestAgainstKubectl:
    """Every Allocated resources row of kubectl describe node, from the same recorded objects."""

    @pytest.mark.parametrize("node", NODES, ids=ledger.node_name)
    def test_requests_and_limits_equal_kubectl_describe(self, node):
        result = ledger.build_ledger([node], PODS, patterns=["*"])["nodes"][ledger.node_name(node)]["resources"]
        compared = 0
        for resource, (requests, limits) in kubectl_allocated(ledger.node_name(node)).items():
            if resource not in result:  # kubectl prints ephemeral-storage even when the node does not advertise it
                continue
            assert (result[resource]["requested"], result[resource]["limits"]) == (ledger.as_number(requests), ledger.as_number(limits)), resource
            compared += 1
        assert compared >= 3

    def test_gpu_row_of_the_busy_node(self):
        gpu = ledger.build_ledger(NODES, PODS)["nodes"]["ledger-fixture-a"]["resources"]["nvidia.com/gpu"]
        # 3 (two containers) + 4 (init larger) + 3 (sidecar then init) + 2 (init then sidecar) + 1 + 1 (overhead pod) + 1 (terminating)
        assert {key: gpu[key] for key in ("capacity", "allocatable", "requested", "limits", "free")} == {
            "capacity": 8, "allocatable": 7, "requested": 15, "limits": 15, "free": -8}
        holders = {holder["name"]: holder for holder in gpu["holders"]}
        assert sorted(holders) == ["being-deleted", "explicit-requests", "init-larger", "init-then-sidecar",
                                   "sidecar-then-init", "two-containers", "with-overhead"]
        assert holders["two-containers"] == {"namespace": "gpuops-ledger-fixtures", "name": "two-containers",
                                             "uid": pod("two-containers")["metadata"]["uid"], "phase": "Running",
                                             "units": 3, "priority": 0, "priority_class_name": None, "terminating": False}
        assert holders["init-larger"]["phase"] == "Pending"  # bound, not started: still holds its units
        assert holders["being-deleted"]["terminating"] is True


class TestLedger:
    def test_terminated_pods_hold_nothing(self):
        names = [holder["name"] for holder in ledger.build_ledger(NODES, PODS)["nodes"]["ledger-fixture-a"]["resources"]["nvidia.com/gpu"]["holders"]]
        assert "finished" not in names and "crashed" not in names

    def test_pods_bound_to_other_nodes_are_left_out(self):
        result = ledger.build_ledger([NODE_B], PODS)
        assert list(result["nodes"]) == ["ledger-fixture-b"]
        gpu = result["nodes"]["ledger-fixture-b"]["resources"]["nvidia.com/gpu"]
        assert (gpu["requested"], gpu["free"], [h["name"] for h in gpu["holders"]]) == (2, 0, ["elsewhere"])

    def test_mig_and_shared_resources_by_name_and_pattern(self):
        resources = ledger.build_ledger([NODE_A], PODS, patterns=["nvidia.com/mig-*", "nvidia.com/gpu.shared"])["nodes"]["ledger-fixture-a"]["resources"]
        assert sorted(resources) == ["nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb"]
        assert (resources["nvidia.com/mig-1g.10gb"]["requested"], resources["nvidia.com/mig-1g.10gb"]["free"]) == (2, 5)
        shared = resources["nvidia.com/gpu.shared"]
        assert (shared["requested"], shared["free"]) == (1, 7)
        assert shared["holders"][0]["priority_class_name"] == "system-cluster-critical"
        assert shared["holders"][0]["priority"] == 2000000000

    def test_unbound_pods_asking_for_the_resource_are_pending(self):
        pending = ledger.build_ledger(NODES, PODS)["pending"]
        assert [entry["name"] for entry in pending] == ["waiting"]
        waiting = pending[0]
        assert waiting["requests"] == {"nvidia.com/gpu": 1}
        assert waiting["phase"] == "Pending" and waiting["reason"] == "Unschedulable"
        assert "didn't match Pod's node affinity/selector" in waiting["message"]

    def test_pending_pods_only_for_the_resources_asked(self):
        assert ledger.build_ledger(NODES, PODS, patterns=["nvidia.com/mig-*"])["pending"] == []

    def test_node_state_labels_and_taints(self):
        node = ledger.build_ledger(NODES, PODS)["nodes"]["ledger-fixture-a"]
        assert node["unschedulable"] is True
        assert node["ready"] is False  # no kubelet ever reported the fixture nodes Ready
        assert node["labels"] == {
            "feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559",
            "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/mig.strategy": "mixed"}
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["taints"]
        assert "operator_running" not in node

    def test_totals_add_up_over_nodes(self):
        totals = ledger.build_ledger(NODES, PODS)["totals"]
        assert totals == {"nvidia.com/gpu": {"capacity": 10, "allocatable": 9, "requested": 17, "limits": 17, "free": -8}}

    def test_fleet_leaves_out_nodes_without_gpus_but_keeps_labelled_ones(self):
        cpu_node = {"metadata": {"name": "cpu-1", "labels": {}}, "status": {"capacity": {"cpu": "8"}}}
        broken = {"metadata": {"name": "gpu-broken", "labels": {"nvidia.com/gpu.present": "true"}}, "status": {"capacity": {"cpu": "8"}}}
        result = ledger.build_ledger([cpu_node, broken, gpu_node("gpu-1", 1)], [])
        assert sorted(result["nodes"]) == ["gpu-1", "gpu-broken"]
        assert result["nodes"]["gpu-broken"]["resources"] == {}
        assert result["nodes"]["gpu-1"]["ready"] is True

    def test_an_idle_node(self):
        gpu = ledger.build_ledger([gpu_node("prod102", 1)], [])["nodes"]["prod102"]["resources"]["nvidia.com/gpu"]
        assert gpu == {"capacity": 1, "allocatable": 1, "requested": 0, "limits": 0, "free": 1, "holders": []}

    def test_zero_allocatable_mixed_mig_node_is_reported(self):
        node = gpu_node("mig-node", 0)
        node["status"]["capacity"]["nvidia.com/mig-1g.10gb"] = node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "7"
        resources = ledger.build_ledger([node], [], patterns=["nvidia.com/gpu", "nvidia.com/mig-*"])["nodes"]["mig-node"]["resources"]
        assert (resources["nvidia.com/gpu"]["allocatable"], resources["nvidia.com/mig-1g.10gb"]["free"]) == (0, 7)

    def test_allocatable_falls_back_to_capacity_like_kubectl(self):
        node = gpu_node("old-node", 2)
        del node["status"]["allocatable"]
        assert ledger.build_ledger([node], [])["nodes"]["old-node"]["resources"]["nvidia.com/gpu"]["allocatable"] == 2


class TestOperatorPods:
    @pytest.mark.parametrize("name, labels, component", [
        ("nvidia-device-plugin-daemonset-7xk2p", {"app": "nvidia-device-plugin-daemonset"}, "device_plugin"),
        ("nvdp-nvidia-device-plugin-x2k9q", {"app.kubernetes.io/name": "nvidia-device-plugin"}, "device_plugin"),
        ("nvidia-device-plugin-daemonset-7xk2p", {}, "device_plugin"),
        ("gpu-feature-discovery-r8d5m", {"app": "gpu-feature-discovery"}, "gpu_feature_discovery"),
        ("gpu-operator-node-feature-discovery-worker-9xk2m", {"app.kubernetes.io/name": "node-feature-discovery"}, "node_feature_discovery"),
        ("gpu-operator-node-feature-discovery-worker-9xk2m", {}, "node_feature_discovery"),
        ("gpu-operator-node-feature-discovery-master-6c8f7d9b5-x2x7k", {}, "node_feature_discovery"),
        ("nvidia-device-plugin-mps-control-daemon-abcde", {}, None),
        ("nvidia-operator-validator-2kq9w", {"app": "nvidia-operator-validator"}, None),
        ("gpu-demo-hold", {}, None),
    ])
    def test_components_are_recognised(self, name, labels, component):
        assert ledger.operator_component({"metadata": {"name": name, "labels": labels}}) == component

    def test_running_per_cluster_and_per_node(self):
        def operator_pod(name, node, phase, ready):
            return {"metadata": {"name": name, "labels": {}}, "spec": {"nodeName": node},
                    "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}

        operator = ledger.summarize_operator_pods("gpu-operator", [
            operator_pod("nvidia-device-plugin-daemonset-7xk2p", "prod102", "Running", True),
            operator_pod("nvidia-device-plugin-daemonset-9zz9z", "prod103", "Pending", False),
            operator_pod("gpu-feature-discovery-r8d5m", "prod103", "Running", True),
            operator_pod("nvidia-cuda-validator-hx4fz", "prod102", "Succeeded", False),
        ])
        assert operator["running"] == {"device_plugin": True, "gpu_feature_discovery": True, "node_feature_discovery": False}
        assert [entry["name"] for entry in operator["pods"]] == [
            "nvidia-device-plugin-daemonset-7xk2p", "nvidia-device-plugin-daemonset-9zz9z", "gpu-feature-discovery-r8d5m"]
        assert operator["pods"][0] == {"name": "nvidia-device-plugin-daemonset-7xk2p", "component": "device_plugin",
                                       "node": "prod102", "phase": "Running", "ready": True}
        nodes = ledger.build_ledger([gpu_node("prod102", 1), gpu_node("prod103", 1)], [], operator=operator)
        assert nodes["operator"] is operator
        assert nodes["nodes"]["prod102"]["operator_running"] == {
            "device_plugin": True, "gpu_feature_discovery": False, "node_feature_discovery": False}
        assert nodes["nodes"]["prod103"]["operator_running"]["device_plugin"] is False


class TestOnlyTheFieldsRead:
    """Readers may decode only NODE_FIELDS, POD_FIELDS and OPERATOR_POD_FIELDS: the ledger must not change."""

    @pytest.mark.parametrize("patterns", [["nvidia.com/gpu"], ["nvidia.com/*"], ["*"]])
    def test_selected_fields_give_the_same_ledger(self, patterns):
        nodes = [select_fields(node, ledger.NODE_FIELDS) for node in NODES]
        pods = [select_fields(pod_object, ledger.POD_FIELDS) for pod_object in PODS]
        operator_pods = [select_fields(pod_object, ledger.OPERATOR_POD_FIELDS) for pod_object in PODS]
        assert len(json.dumps(pods)) < len(json.dumps(PODS)) / 3
        full = ledger.build_ledger(NODES, PODS, patterns, ledger.summarize_operator_pods("ns", PODS))
        assert ledger.build_ledger(nodes, pods, patterns, ledger.summarize_operator_pods("ns", operator_pods)) == full

    @pytest.mark.parametrize("patterns", [["nvidia.com/gpu"], ["nvidia.com/mig-*", "cpu"], ["*"]])
    def test_wanted_resources_only(self, patterns):
        wanted = ledger.ResourceFilter(patterns)
        for pod_object in PODS:
            for formula in (ledger.pod_requests, ledger.pod_limits):
                every = formula(pod_object)
                expected = {name: units for name, units in every.items() if ledger.matches_any(name, patterns)}
                assert formula(pod_object, wanted) == expected, (pod_object["metadata"]["name"], formula.__name__)
        assert wanted == {name: ledger.matches_any(name, patterns) for name in wanted}


class CountingReader:
    """A reader like _k8s_client.CoreV1Reader, over in-memory objects, counting its calls.

    It returns only the fields asked for, as CoreV1Reader does with msgspec: every read_ledger test
    then also checks that NODE_FIELDS, POD_FIELDS and OPERATOR_POD_FIELDS hold all the ledger reads.
    """

    host = "https://127.0.0.1:16443"

    def __init__(self, nodes, pods):
        self.nodes, self.pods, self.calls = nodes, pods, []

    def get_node(self, name, fields=None):
        self.calls.append(("get_node", name))
        found = next((node for node in self.nodes if ledger.node_name(node) == name), None)
        return select_fields(found, fields)

    def list_nodes(self, fields=None):
        self.calls.append(("list_nodes",))
        return [select_fields(node, fields) for node in self.nodes]

    def list_pods(self, namespace=None, field_selector=None, fields=None):
        self.calls.append(("list_pods", namespace, field_selector))
        return [select_fields(pod_object, fields) for pod_object in self.pods
                if namespace in (None, pod_object["metadata"]["namespace"])]


class TestReadLedger:
    def test_one_node_takes_two_reads(self):
        reader = CountingReader(NODES, PODS)
        result = ledger.read_ledger(reader, node="ledger-fixture-b")
        assert list(result["nodes"]) == ["ledger-fixture-b"]
        assert reader.calls == [("get_node", "ledger-fixture-b"), ("list_pods", None, "status.phase!=Succeeded,status.phase!=Failed")]

    @pytest.mark.parametrize("node_count", [1, 50, 500])
    def test_the_fleet_takes_three_reads_whatever_its_size(self, node_count):
        nodes = [gpu_node("gpu-{0}".format(index), 4) for index in range(node_count)]
        pods = [pod_spec([container("c", limits={"nvidia.com/gpu": "1"})], node="gpu-{0}".format(index % node_count),
                         name="p{0}".format(index)) for index in range(node_count * 3)]
        reader = CountingReader(nodes, pods)
        result = ledger.read_ledger(reader, operator_namespace="gpu-operator")
        assert len(reader.calls) == 3
        assert result["totals"]["nvidia.com/gpu"]["requested"] == node_count * 3

    def test_unknown_node(self):
        with pytest.raises(ledger.LedgerError, match="^node 'prod999' not found on https://127.0.0.1:16443$"):
            ledger.read_ledger(CountingReader(NODES, PODS), node="prod999")

    def test_node_without_the_resource(self):
        cpu_node = {"metadata": {"name": "prod102", "labels": {}}, "status": {"capacity": {"cpu": "8", "memory": "1Gi", "pods": "110"}}}
        with pytest.raises(ledger.LedgerError) as error:
            ledger.read_ledger(CountingReader([cpu_node], []), node="prod102")
        assert str(error.value) == "node prod102 advertises none of nvidia.com/gpu; it advertises: cpu, memory, pods"

    def test_labelled_gpu_node_without_the_resource_hints_at_the_device_plugin(self):
        node = {"metadata": {"name": "prod102", "labels": {"nvidia.com/gpu.present": "true"}}, "status": {"capacity": {"cpu": "8"}}}
        with pytest.raises(ledger.LedgerError, match=r"is the device plugin running on it\?"):
            ledger.read_ledger(CountingReader([node], []), node="prod102", patterns=["nvidia.com/gpu", "nvidia.com/mig-*"])
