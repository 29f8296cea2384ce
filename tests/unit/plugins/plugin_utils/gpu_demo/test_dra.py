# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The walk through DRA: a DeviceClass read as a resource, the path chosen, the pre-flight's refusals and the evidence
that each hold pod got the device its claim was allocated. Ledgers are built from objects recorded on the simulated
cluster (tests/unit/fixtures/dra)."""

import copy
import json
from pathlib import Path

from ansible_collections.gpuops.scheduling.plugins.filter.gpu_demo import gpu_demo_preflight
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo import dra
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.preflight import judge_node
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.walk import judge_hold, judge_queue
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import ledger as ledger_utils
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.scheduling_events import parse_failed_scheduling

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dra"


def load(name):
    data = json.loads((FIXTURES / name).read_text())
    return data["items"] if isinstance(data, dict) and "items" in data else data


SLICES, CLAIMS, CLASSES, PODS, NODES = (load(name) for name in (
    "resourceslices.json", "resourceclaims.json", "deviceclasses.json", "pods.json", "nodes.json"))
HOLD_CLAIM = next(claim for claim in CLAIMS if (claim.get("status") or {}).get("allocation"))
UUID = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
SETTINGS = dict(node="prod102", resource="gpu.nvidia.com", namespace="default", allocation="dra", allocation_wanted="auto",
                pod_names=["gpu-demo-hold", "gpu-demo-queue", "gpu-demo-bypass-probe"], hold_mode="per_unit",
                hold_seconds=300, timeout=120, allow_busy_node=False, vllm_url="", vllm_require_healthy=True)


def ledger(claims=CLAIMS, classes=CLASSES, served=True):
    built = ledger_utils.build_ledger(NODES, PODS, dra={"slices": SLICES, "claims": claims, "classes": classes})
    built["dra_served"] = served
    return {"ledger": built}


def checks(judged):
    return {check["id"]: check for check in judged}


class TestClassEntry:
    def test_a_device_class_reads_like_a_resource(self):
        entry = dra.class_entry(ledger()["ledger"]["nodes"]["prod102"], "gpu.nvidia.com")
        assert (entry["capacity"], entry["allocatable"], entry["requested"], entry["free"]) == (1, 1, 1, 0)
        assert [(holder["name"], holder["units"]) for holder in entry["holders"]] == [("hold-0", 1)]
        assert entry["holders"][0]["claims"] == [HOLD_CLAIM["metadata"]["name"]]
        assert entry["dra"]["pools"] == ["prod102"] and entry["dra"]["devices"][0]["uuid"] == UUID

    def test_a_class_without_devices_on_the_node_is_empty(self):
        assert dra.class_entry(ledger()["ledger"]["nodes"]["prod102"], "mig.nvidia.com") == {}
        assert dra.class_entry({"resources": {}}, "gpu.nvidia.com") == {}

    def test_the_path_follows_the_node_unless_told(self):
        node = ledger()["ledger"]["nodes"]["prod102"]
        assert dra.choose_allocation("auto", node, "nvidia.com/gpu") == "dra"
        assert dra.choose_allocation("device_plugin", node, "nvidia.com/gpu") == "device_plugin"
        plugin_node = {"resources": {"nvidia.com/gpu": {"capacity": 1}}}
        assert dra.choose_allocation("auto", plugin_node, "nvidia.com/gpu") == "device_plugin"

    def test_the_role_takes_the_path_the_preflight_filter_chooses(self):
        """The role passes the DeviceClass and the extended resource; the filter chooses the way with choose_allocation."""
        settings = dict((key, value) for key, value in SETTINGS.items() if key not in ("resource", "allocation"))
        settings.update(device_class="gpu.nvidia.com", extended_resource="nvidia.com/gpu")
        before = gpu_demo_preflight(ledger(), {}, **settings)["before"]
        assert (before["allocation"], before["resource"]) == ("dra", "gpu.nvidia.com")
        before = gpu_demo_preflight(ledger(), {}, **dict(settings, allocation_wanted="device_plugin"))["before"]
        assert (before["allocation"], before["resource"]) == ("device_plugin", "nvidia.com/gpu")


class TestPreflight:
    def test_an_idle_dra_node_is_planned_device_by_device(self):
        free = [claim for claim in CLAIMS if claim is not HOLD_CLAIM]
        judged = judge_node(ledger(claims=free), {}, SETTINGS)
        found = checks(judged["checks"])
        assert all(check["passed"] for check in judged["checks"]), judged["checks"]
        assert found["node_found"]["detail"] == (
            "node prod102 publishes 1 device(s) of DeviceClass gpu.nvidia.com through DRA (driver gpu.nvidia.com, "
            "pool prod102): gpu-0 " + UUID)
        assert judged["plan"]["units"] == 1 and judged["before"]["allocation"] == "dra"

    def test_a_device_held_by_another_claim_makes_the_node_busy(self):
        found = checks(judge_node(ledger(), {}, SETTINGS)["checks"])
        assert found["node_not_busy"]["passed"] is False and "default/hold-0" in found["node_not_busy"]["detail"]

    def test_an_unknown_device_class_is_refused_naming_the_classes(self):
        found = checks(judge_node(ledger(), {}, dict(SETTINGS, resource="big.gpu.example.com"))["checks"])
        assert found["node_found"]["passed"] is False
        assert found["node_found"]["detail"].startswith("DeviceClass big.gpu.example.com does not exist; the cluster has: ")
        assert "gpu.nvidia.com" in found["node_found"]["detail"]

    def test_an_api_server_without_resource_v1_is_refused(self):
        judged = judge_node(ledger(served=False), {}, SETTINGS)
        found = checks(judged["checks"])
        assert found["node_found"]["passed"] is False
        assert "does not serve resource.k8s.io/v1" in found["node_found"]["detail"]

    REFUSED = ('DRA not readable with these credentials: forbidden (403) to list resourceslices on the Kubernetes API at '
               'https://127.0.0.1:16443: User "system:serviceaccount:gpu-operator:old" cannot list resource "resourceslices" '
               'in API group "resource.k8s.io" at the cluster scope. ' + ledger_utils.DRA_READS_HINT)

    def refused_ledger(self):
        """What gpu_ledger_facts reads on a device-plugin node with credentials made before the DRA reads."""
        node = copy.deepcopy(NODES[0])
        for key in ("capacity", "allocatable"):
            node["status"][key]["nvidia.com/gpu"] = "1"
        built = ledger_utils.build_ledger([node], [])
        built.update(dra_served=None, dra_refused=self.REFUSED)
        return {"ledger": built}

    def test_credentials_without_the_dra_reads_still_walk_a_device_plugin_node_saying_so(self):
        settings = dict(SETTINGS, resource="nvidia.com/gpu", allocation="device_plugin")
        judged = judge_node(self.refused_ledger(), {}, settings)
        found = checks(judged["checks"])
        assert all(check["passed"] for check in judged["checks"]), judged["checks"]
        assert found["node_found"]["detail"] == ("node prod102 advertises nvidia.com/gpu (walked through the device plugin; "
                                                 + self.REFUSED + ")")
        assert judged["before"]["dra_refused"] == self.REFUSED and judged["plan"]["units"] == 1

    def test_a_walk_through_dra_without_the_dra_reads_is_refused_naming_them(self):
        settings = dict(SETTINGS, allocation_wanted="dra")
        found = checks(judge_node(self.refused_ledger(), {}, settings)["checks"])
        assert found["node_found"]["passed"] is False
        assert found["node_found"]["detail"] == "node prod102 cannot be walked through DRA: " + self.REFUSED
        assert "playbooks/preflight_rbac.yml grants them" in found["node_found"]["detail"]

    def test_a_device_plugin_node_on_an_api_server_without_resource_v1_is_walked_saying_so(self):
        built = self.refused_ledger()
        built["ledger"].update(dra_served=False, dra_refused=None)
        judged = judge_node(built, {}, dict(SETTINGS, resource="nvidia.com/gpu", allocation="device_plugin"))
        found = checks(judged["checks"])
        assert all(check["passed"] for check in judged["checks"]), judged["checks"]
        assert found["node_found"]["detail"].startswith(
            "node prod102 advertises nvidia.com/gpu (walked through the device plugin; the API server does not serve "
            "resource.k8s.io/v1")
        assert judged["before"]["dra_served"] is False
        refused = checks(judge_node(built, {}, dict(SETTINGS, allocation_wanted="dra"))["checks"])["node_found"]
        assert refused["passed"] is False and "does not serve resource.k8s.io/v1" in refused["detail"]

    def test_an_unknown_allocation_is_refused(self):
        found = checks(judge_node(ledger(), {}, dict(SETTINGS, allocation_wanted="plugin"))["checks"])
        assert found["allocation_valid"]["passed"] is False and "'plugin'" in found["allocation_valid"]["detail"]


def without_extended_resource(classes=CLASSES):
    """The chart's classes as rendered without extendedResourceName (an older chart, or a v1beta API)."""
    changed = copy.deepcopy(classes)
    for item in changed:
        item["spec"].pop("extendedResourceName", None)
    return changed


class TestExtendedResourcePath:
    FREE = [claim for claim in CLAIMS if claim is not HOLD_CLAIM]

    def judged(self, classes=CLASSES, **settings):
        return judge_node(ledger(claims=self.FREE, classes=classes), {},
                          dict(dict(SETTINGS, extended_resource="nvidia.com/gpu"), **settings))

    def test_auto_walks_with_plain_requests_where_the_class_serves_the_resource(self):
        judged = self.judged(dra_request="auto")
        assert judged["plan"]["dra_request"] == "extended_resource"
        found = checks(judged["checks"])
        assert all(check["passed"] for check in judged["checks"]), judged["checks"]
        assert found["extended_resource_served"]["detail"].startswith(
            "DeviceClass gpu.nvidia.com serves nvidia.com/gpu (extendedResourceName): the demo pods request plain "
            "nvidia.com/gpu")
        assert judged["before"]["dra"]["extended_resource_name"] == "nvidia.com/gpu"

    def test_auto_walks_with_claims_where_no_class_serves_it(self):
        judged = self.judged(classes=without_extended_resource(), dra_request="auto")
        assert judged["plan"]["dra_request"] == "claim"
        assert "extended_resource_served" not in checks(judged["checks"])
        assert all(check["passed"] for check in judged["checks"]), judged["checks"]

    def test_auto_walks_with_claims_when_the_class_serves_another_resource(self):
        judged = self.judged(dra_request="auto", extended_resource="nvidia.com/gpu.shared")
        assert judged["plan"]["dra_request"] == "claim"

    def test_plain_requests_asked_for_where_no_class_serves_them_are_refused(self):
        judged = self.judged(classes=without_extended_resource(), dra_request="extended_resource")
        served = checks(judged["checks"])["extended_resource_served"]
        assert served["passed"] is False and served["phase"] == "preflight"
        assert served["detail"].startswith("DeviceClass gpu.nvidia.com has no extendedResourceName, not nvidia.com/gpu: the "
                                           "scheduler cannot serve plain nvidia.com/gpu requests through DRA here")
        assert "gpu_demo_dra_request=claim" in served["detail"]

    def test_claims_asked_for_are_claims(self):
        assert self.judged(dra_request="claim")["plan"]["dra_request"] == "claim"

    def test_the_device_plugin_walk_has_no_dra_request(self):
        plugin = dict(SETTINGS, resource="nvidia.com/gpu", allocation="device_plugin", dra_request="auto")
        assert "dra_request" not in judge_node(TestPreflight().refused_ledger(), {}, plugin)["plan"]


def tainted_ledger(tainted=(1,)):
    """prod102 with two GPUs, free; the driver taints those in ``tainted`` (an XID error: NoSchedule)."""
    item = copy.deepcopy(SLICES[0])
    second = copy.deepcopy(item["spec"]["devices"][0])
    second["name"], second["attributes"]["uuid"] = "gpu-1", {"string": "GPU-second"}
    item["spec"]["devices"].append(second)
    for position in tainted:
        item["spec"]["devices"][position]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    free = [claim for claim in CLAIMS if claim is not HOLD_CLAIM]
    built = ledger_utils.build_ledger(NODES, [], dra={"slices": [item], "claims": free, "classes": CLASSES})
    built["dra_served"] = True
    return {"ledger": built}


class TestDeviceTaints:
    def test_a_tainted_device_is_not_allocatable_and_not_held(self):
        judged = judge_node(tainted_ledger(), {}, SETTINGS)
        assert all(check["passed"] for check in judged["checks"]), judged["checks"]
        entry = dra.class_entry(tainted_ledger()["ledger"]["nodes"]["prod102"], "gpu.nvidia.com")
        assert (entry["capacity"], entry["allocatable"], entry["free"]) == (2, 1, 1)
        # The plan holds the one untainted device: the queue then waits for it, as the scheduler will not give gpu-1.
        assert judged["plan"]["units"] == 1
        assert checks(judged["checks"])["resource_allocatable"]["detail"] == (
            "1 device(s) of DeviceClass gpu.nvidia.com on prod102 (0 allocated to other claims); 1 more not allocatable, "
            "tainted by the driver: gpu-1 GPU-second (gpu.nvidia.com/xid=79:NoSchedule)")

    def test_a_node_whose_every_device_is_tainted_is_refused_naming_the_taints(self):
        found = checks(judge_node(tainted_ledger(tainted=(0, 1)), {}, SETTINGS)["checks"])["resource_allocatable"]
        assert found["passed"] is False
        assert found["detail"].startswith("0 device(s) of DeviceClass gpu.nvidia.com on prod102 (0 allocated to other "
                                          "claims); 2 more not allocatable, tainted by the driver: gpu-0 " + UUID)
        assert "look at the driver's log" in found["detail"]


def hold_wait(log_uuid, claims=CLAIMS):
    pod = {"name": "hold-0", "node_name": "prod102", "phase": "Running", "preemption_policy": "Never",
           "log": "GPU 0: NVIDIA H20 (UUID: {0})\nNVIDIA_VISIBLE_DEVICES=void\n".format(log_uuid)}
    return {"met": True, "elapsed": 1.0, "pods": [pod], "ledger": ledger(claims)["ledger"]}


class TestHoldEvidence:
    def test_the_pod_sees_the_device_its_claim_was_allocated(self):
        _summary, judged = judge_hold(hold_wait(UUID), ["hold-0"], {"units": 1}, "prod102", "gpu.nvidia.com")
        prepared = checks(judged)["hold_devices_prepared"]
        assert prepared["passed"] is True and HOLD_CLAIM["metadata"]["name"] in prepared["detail"]
        assert checks(judged)["hold_env_corroborates"]["detail"].startswith(
            "the DRA driver gpu.nvidia.com hands the GPUs over as the CDI devices of each claim")

    def test_a_wrongly_prepared_device_fails_naming_it(self):
        _summary, judged = judge_hold(hold_wait("GPU-other"), ["hold-0"], {"units": 1}, "prod102", "gpu.nvidia.com")
        prepared = checks(judged)["hold_devices_prepared"]
        assert prepared["passed"] is False
        assert prepared["detail"] == "hold-0 was allocated gpu-0 ({0}, claim {1}) but nvidia-smi in it shows GPU-other".format(
            UUID, HOLD_CLAIM["metadata"]["name"])

    def test_a_pod_whose_claim_holds_nothing_fails(self):
        unallocated = copy.deepcopy(CLAIMS)
        for claim in unallocated:
            claim.get("status", {}).pop("allocation", None)
            claim.get("status", {}).pop("reservedFor", None)
        _summary, judged = judge_hold(hold_wait(UUID, unallocated), ["hold-0"], {"units": 1}, "prod102", "gpu.nvidia.com")
        assert "hold-0 was allocated no device" in checks(judged)["hold_devices_prepared"]["detail"]


class TestQueue:
    MESSAGE = ("0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, preemption: not eligible due to "
               "preemptionPolicy=Never.")

    def queue_wait(self, message):
        pods = [{"name": "hold-0", "phase": "Running"}, {"name": "queue", "phase": "Pending"}]
        return {"met": True, "pods": pods, "ledger": ledger()["ledger"],
                "failed_scheduling": [{"message": message, "parsed": parse_failed_scheduling(message)}]}

    def test_the_dra_refusal_is_the_queues_evidence(self):
        _scheduling, during, judged = judge_queue(self.queue_wait(self.MESSAGE), ["hold-0"], {"units": 1}, "prod102",
                                                  "gpu.nvidia.com", "default", "queue")
        found = checks(judged)
        assert found["queue_insufficient"]["passed"] is True and found["ledger_full"]["passed"] is True, judged
        assert during["dra"]["device_class"] == "gpu.nvidia.com"

    def test_another_refusal_is_not(self):
        message = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
        _scheduling, _during, judged = judge_queue(self.queue_wait(message), ["hold-0"], {"units": 1}, "prod102",
                                                   "gpu.nvidia.com", "default", "queue")
        assert checks(judged)["queue_insufficient"]["passed"] is False


def test_the_claim_templates_of_the_dry_run_have_no_preemption_policy_to_judge():
    from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.preflight import judge_admission
    dry_run = {"changed": False, "admitted": True, "objects": [
        {"kind": "ResourceClaimTemplate", "name": "gpu-demo-hold", "admitted": True, "preemption_policy": None},
        {"kind": "Pod", "name": "gpu-demo-hold", "admitted": True, "preemption_policy": "Never"},
        {"kind": "Pod", "name": "gpu-demo-queue", "admitted": True, "preemption_policy": "Never"}]}
    found = checks(judge_admission(dry_run, "gpuops-preflight-no-preempt", True)["checks"])
    assert found["demo_pods_never_preempt"]["passed"] is True
    assert found["demo_pods_admitted"]["detail"] == "the API server admits the 2 demo pod(s) and 1 ResourceClaimTemplate(s) (dry run)"


def test_the_runs_claims_are_found_by_label_or_by_owner():
    objects = [
        {"kind": "ResourceClaimTemplate", "metadata": {"name": "gpu-demo-hold", "labels": {
            "gpuops.scheduling/run-id": "r1", "gpuops.scheduling/node": "prod102"}}},
        {"kind": "ResourceClaim", "metadata": {"name": "gpu-demo-hold-extended-resources-x", "ownerReferences": [{"uid": "pod-1"}]}},
        {"kind": "ResourceClaim", "metadata": {"name": "other-run", "labels": {
            "gpuops.scheduling/run-id": "r2", "gpuops.scheduling/node": "prod102"}}},
        {"kind": "ResourceClaim", "metadata": {"name": "vllm-gpu-y", "ownerReferences": [{"uid": "pod-vllm"}]}},
    ]
    assert dra.run_objects(objects, "r1", "prod102", ["pod-1"]) == [
        "ResourceClaim/gpu-demo-hold-extended-resources-x", "ResourceClaimTemplate/gpu-demo-hold"]


def test_claims_gone_says_what_is_left_and_never_gone_for_a_list_that_failed():
    template = {"kind": "ResourceClaimTemplate", "metadata": {"name": "gpu-demo-hold", "labels": {
        "gpuops.scheduling/run-id": "r1", "gpuops.scheduling/node": "prod102"}}}
    foreign = {"kind": "ResourceClaim", "metadata": {"name": "vllm-gpu-y", "ownerReferences": [{"uid": "pod-vllm"}]}}
    listed = [{"failed": False, "resources": [foreign]}, {"failed": False, "resources": []}]
    gone = dra.judge_claims_gone(listed, "r1", "prod102", ["pod-1"], "gpu-operator")
    assert (gone["id"], gone["phase"], gone["passed"]) == ("claims_gone", "cleanup", True)
    assert gone["detail"] == "no ResourceClaim or ResourceClaimTemplate of the run is left in gpu-operator"
    left = dra.judge_claims_gone([listed[0], {"resources": [template]}], "r1", "prod102", ["pod-1"], "gpu-operator")
    assert (left["passed"], left["detail"]) == (False, "left in gpu-operator: ResourceClaimTemplate/gpu-demo-hold")
    # The templates could not be listed (the claims could): nothing is said gone that was not read.
    refused = {"failed": True, "msg": "resourceclaimtemplates is forbidden: User \"ci\" cannot list", "resources": []}
    unread = dra.judge_claims_gone([listed[0], refused], "r1", "prod102", ["pod-1"], "gpu-operator")
    assert unread["passed"] is False
    assert unread["detail"] == ('could not list the claims and templates of gpu-operator: resourceclaimtemplates is '
                                'forbidden: User "ci" cannot list')


def two_gpus():
    """prod102's recorded slice with a second GPU, gpu-1."""
    item = copy.deepcopy(SLICES[0])
    second = copy.deepcopy(item["spec"]["devices"][0])
    second["name"], second["attributes"]["uuid"] = "gpu-1", {"string": "GPU-second"}
    item["spec"]["devices"].append(second)
    return item


def claim(name, devices=("gpu-0",), pods=(), namespace="team", admin=False, extended=False):
    """A claim allocated on prod102 (the recorded hold's, renamed), reserved for ``pods``."""
    made = copy.deepcopy(HOLD_CLAIM)
    made["metadata"].update(name=name, namespace=namespace, uid="uid-" + name)
    if extended:
        made["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    made["status"]["allocation"]["devices"]["results"] = [
        dict({"device": device, "driver": "gpu.nvidia.com", "pool": "prod102", "request": "gpu"},
             **({"adminAccess": True} if admin else {})) for device in devices]
    made["status"]["reservedFor"] = [{"resource": "pods", "name": pod, "uid": "uid-" + pod} for pod in pods]
    return made


def two_gpu_ledger(claims, classes=CLASSES):
    built = ledger_utils.build_ledger(NODES, [], dra={"slices": [two_gpus()], "claims": claims, "classes": classes})
    built["dra_served"] = True
    return {"ledger": built}


class TestDevicesCountedAsTheSchedulerCounts:
    """Per device, not per pod: the shapes a claim can have on a node with two GPUs."""

    def entry(self, claims):
        return dra.class_entry(two_gpu_ledger(claims)["ledger"]["nodes"]["prod102"], "gpu.nvidia.com")

    def test_a_claim_shared_by_two_pods_holds_one_device(self):
        entry = self.entry([claim("c", pods=("a", "b"))])
        assert (entry["requested"], entry["free"]) == (1, 1)
        assert entry["claims"] == [{"namespace": "team", "name": "c", "extended_resource": False, "devices": ["gpu-0"],
                                    "pods": [{"namespace": "team", "name": "a", "uid": "uid-a"},
                                             {"namespace": "team", "name": "b", "uid": "uid-b"}]}]
        judged = judge_node(two_gpu_ledger([claim("c", pods=("a", "b"))]), {}, SETTINGS)
        busy = checks(judged["checks"])["node_not_busy"]
        assert busy["passed"] is False
        assert busy["detail"].startswith("1 device held by team/a, team/b (claim team/c); refusing a busy node")
        assert "to hold only the free devices" in busy["detail"]
        assert judged["before"]["held_by_others"] == 1 and judged["plan"]["units"] == 1

    def test_allowed_busy_the_hold_takes_the_free_device(self):
        judged = judge_node(two_gpu_ledger([claim("c", pods=("a", "b"))]), {}, dict(SETTINGS, allow_busy_node=True))
        found = checks(judged["checks"])
        assert all(check["passed"] for check in judged["checks"]), judged["checks"]
        assert found["node_not_busy"]["detail"] == (
            "1 device held by team/a, team/b (claim team/c); allowed by gpu_demo_allow_busy_node, the hold takes the 1 "
            "free device(s)")
        assert found["free_units"]["detail"] == "1 free device(s) of gpu.nvidia.com to hold"
        assert judged["plan"]["units"] == 1

    def test_a_claim_reserved_for_no_pod_still_holds_its_device(self):
        judged = judge_node(two_gpu_ledger([claim("kept", devices=("gpu-0", "gpu-1"))]), {},
                            dict(SETTINGS, allow_busy_node=True))
        found = checks(judged["checks"])
        assert found["node_not_busy"]["detail"].startswith("2 devices held by no pod (allocated, reserved for none")
        assert "(claim team/kept)" in found["node_not_busy"]["detail"]
        assert found["free_units"]["passed"] is False
        assert found["free_units"]["detail"].startswith("0 free device(s) of gpu.nvidia.com to hold: other pods hold every device")

    def test_an_admin_access_claim_holds_no_device(self):
        entry = self.entry([claim("watch", devices=("gpu-0", "gpu-1"), pods=("monitor",), admin=True)])
        assert (entry["requested"], entry["free"], entry["claims"]) == (0, 2, [])
        judged = judge_node(two_gpu_ledger([claim("watch", devices=("gpu-0",), pods=("monitor",), admin=True)]), {}, SETTINGS)
        assert all(check["passed"] for check in judged["checks"]), judged["checks"]
        assert judged["plan"]["units"] == 2

    def test_an_admin_access_claim_beside_a_real_one_leaves_the_real_holder(self):
        entry = self.entry([claim("c", pods=("a",)), claim("watch", devices=("gpu-0",), pods=("monitor",), admin=True)])
        assert [(item["name"], item["devices"]) for item in entry["claims"]] == [("c", ["gpu-0"])]

    def test_a_device_held_through_the_extended_resource_path_counts(self):
        judged = judge_node(two_gpu_ledger([claim("train-extended-resources-x7k2p", pods=("train",), extended=True)]), {},
                            SETTINGS)
        busy = checks(judged["checks"])["node_not_busy"]["detail"]
        assert busy.startswith("1 device held by team/train (claim team/train-extended-resources-x7k2p, made by the "
                               "scheduler for an extended resource request)")
        assert judged["plan"]["units"] == 1

    def test_a_pod_with_two_claims_holds_both_devices(self):
        entry = self.entry([claim("c1", pods=("a",)), claim("c2", devices=("gpu-1",), pods=("a",))])
        assert entry["requested"] == 2 and entry["holders"][0]["units"] == 2
        busy = checks(judge_node(two_gpu_ledger([claim("c1", pods=("a",)), claim("c2", devices=("gpu-1",), pods=("a",))]),
                                 {}, SETTINGS)["checks"])["node_not_busy"]["detail"]
        assert busy.startswith("1 device held by team/a (claim team/c1); 1 device held by team/a (claim team/c2)")

    def test_the_runs_own_leftover_claim_is_no_other_pods(self):
        leftover = claim("gpu-demo-hold-gpu-abcde", pods=("gpu-demo-hold",), namespace="default")
        judged = judge_node(two_gpu_ledger([leftover]), {}, SETTINGS)
        assert checks(judged["checks"])["node_not_busy"]["passed"] is True
        assert judged["plan"]["units"] == 2 and [pod["name"] for pod in judged["before"]["leftovers"]] == ["gpu-demo-hold"]


CUSTOM_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "h20.example.com"},
                "spec": {"selectors": [{"cel": {"expression": (
                    "device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('h20')")}}]}}


class TestSelectorNotEvaluated:
    """A class whose CEL the collection cannot evaluate: never "0 devices"; the scheduler decides, the hold judges."""

    def test_the_node_is_walked_saying_the_selector_was_not_evaluated(self):
        judged = judge_node(two_gpu_ledger([], classes=CLASSES + [CUSTOM_CLASS]), {},
                            dict(SETTINGS, resource="h20.example.com"))
        assert all(check["passed"] for check in judged["checks"]), judged["checks"]
        text = json.dumps(judged)
        assert "0 device" not in text
        found = checks(judged["checks"])
        assert found["node_found"]["detail"].startswith(
            "node prod102 publishes 2 device(s) through DRA that DeviceClass h20.example.com may select (driver "
            "gpu.nvidia.com, pool prod102): gpu-0 " + UUID + ", gpu-1 GPU-second; the selector of DeviceClass "
            "h20.example.com could not be evaluated here")
        assert found["resource_allocatable"]["detail"].startswith(
            "up to 2 device(s) of DeviceClass h20.example.com on prod102 (0 allocated to other claims): the selector")
        assert "left to the scheduler" in found["resource_allocatable"]["detail"]
        assert judged["plan"]["units"] == 2 and judged["before"]["dra"]["evaluated"] is False
        assert judged["plan"]["selector_evaluated"] is False

    def test_a_selector_whose_readable_terms_rule_every_device_out_names_no_device(self):
        other = copy.deepcopy(CUSTOM_CLASS)
        other["spec"]["selectors"][0]["cel"]["expression"] = other["spec"]["selectors"][0]["cel"]["expression"].replace(
            "device.driver == 'gpu.nvidia.com'", "device.driver == 'other.example.com'")
        found = checks(judge_node(two_gpu_ledger([], classes=CLASSES + [other]), {},
                                  dict(SETTINGS, resource="h20.example.com"))["checks"])
        assert found["node_found"]["passed"] is False
        assert found["node_found"]["detail"].startswith("node prod102 publishes no device of DeviceClass h20.example.com")


class TestLedgerInDRAsWords:
    """A DRA node advertises no allocatable count for its GPUs and kubectl describe node shows no row for them: the
    checks that read the ledger name the devices of the class and the claims that hold them."""

    def test_the_queues_ledger_names_the_devices_and_their_claims(self):
        _scheduling, _during, judged = judge_queue(TestQueue().queue_wait(TestQueue.MESSAGE), ["hold-0"], {"units": 1},
                                                   "prod102", "gpu.nvidia.com", "default", "queue")
        detail = checks(judged)["ledger_full"]["detail"]
        assert "allocatable" not in detail and "requested" not in detail, detail
        assert detail.startswith("1 device(s) of DeviceClass gpu.nvidia.com in the ResourceSlices of prod102, "
                                 "1 allocated to claims: gpu-0 (claim default/{0} for hold-0); free 0".format(
                                     HOLD_CLAIM["metadata"]["name"])), detail

    def test_the_cleanups_ledger_names_the_devices_and_no_allocatable(self):
        from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.cleanup import judge_cleanup
        idle = [claim for claim in CLAIMS if not (claim.get("status") or {}).get("allocation")]
        before = {"allocatable": 1, "held_by_others": 0, "others": [], "vllm": {}, "dra": {"device_class": "gpu.nvidia.com"}}
        final = {"met": True, "ledger": ledger(claims=idle)["ledger"], "pods": []}
        judged = judge_cleanup(final, before, {}, {"node": "prod102", "resource": "gpu.nvidia.com", "run_id": "r1",
                                                   "vllm_url": "", "removal": None})
        detail = checks(judged["checks"])["ledger_restored"]["detail"]
        assert "allocatable" not in detail, detail
        assert detail == ("after: 1 device(s) of DeviceClass gpu.nvidia.com in the ResourceSlices of prod102, 0 allocated "
                          "to claims, holders none; before: 1 device(s), 0 allocated to other pods' claims, holders none")
        assert checks(judged["checks"])["ledger_restored"]["passed"] is True
