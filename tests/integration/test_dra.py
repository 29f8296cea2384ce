"""GPUs allocated through DRA, on real kubelets: our DRA driver (tests/sim/node dra-driver) registered with each node's
kubelet, the real scheduler allocating ResourceClaims, the real resourceclaim controller and kubelet DRA manager.

Each test reads the cluster through kubectl on its own and compares with what the collection says.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from safety_helpers import wait_until
from test_gpu_demo import Run, demo_vars

NAMESPACE = "gpu-operator"
MANAGED = "app.kubernetes.io/managed-by=gpuops.scheduling"
SEED_UUID = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"

# Each test switches to the topology it needs first: any worker may run any of them.
pytestmark = pytest.mark.independent


def kubectl_json(sim, *args: str) -> list:
    return json.loads(sim.kubectl("get", *args, "-o", "json").stdout)["items"]


def dra_state(sim) -> dict:
    """What `kubectl get resourceslices,resourceclaims -A -o json` says, per node: the devices, and per allocated
    device the claim and the pods it is reserved for."""
    slices = kubectl_json(sim, "resourceslices")
    claims = kubectl_json(sim, "resourceclaims", "-A")
    allocated = {}
    for claim in claims:
        for result in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
            allocated[(result["driver"], result["pool"], result["device"])] = (
                claim["metadata"]["name"], sorted(entry["name"] for entry in claim["status"].get("reservedFor") or []))
    nodes = {}
    for item in slices:
        spec = item["spec"]
        for device in spec.get("devices") or []:
            key = (spec["driver"], spec["pool"]["name"], device["name"])
            nodes.setdefault(spec["nodeName"], {})[device["name"]] = allocated.get(key)
    return nodes


def leftovers(sim) -> list:
    return (sim.kubectl("get", "pods,resourceclaims,resourceclaimtemplates", "-n", NAMESPACE, "-l", MANAGED, "-o", "name")
            .stdout.split())


# The v1.36 kubelet writes no device health for the claim the scheduler makes for a plain extended-resource request:
# that check is not judged (None), never passed.
HEALTH_NOT_REPORTED = {"hold_devices_healthy": None}


def not_passed(run: Run) -> dict:
    """The checks that did not pass -> {id: False (failed) or None (not judged)}."""
    return {check["id"]: check["passed"] for check in run.result["checks"] if check["passed"] is not True}


def run_demo(sim, tmp_path: Path, **extra) -> Run:
    run_id = "it-" + uuid.uuid4().hex[:8]
    process = sim.playbook("playbooks/gpu_demo.yml", extra_vars=demo_vars(sim, tmp_path, run_id, **extra))
    return Run(process, tmp_path, run_id)


@pytest.mark.parametrize("request_kind", ["claim", "extended_resource"])
def test_the_walkthrough_through_dra_passes_and_leaves_nothing(sim, tmp_path, request_kind):
    # claim: the pods name claims of the run's templates; extended_resource: they ask for plain nvidia.com/gpu and the
    # scheduler serves it through DRA (DeviceClass gpu.nvidia.com has extendedResourceName nvidia.com/gpu).
    sim.use_topology("dra")
    before = dra_state(sim)
    assert before == {"prod102": {"gpu-0": None}}
    run = run_demo(sim, tmp_path, gpu_demo_dra_request=request_kind)
    assert run.rc == 0, run.output[-3000:]
    assert not_passed(run) == ({} if request_kind == "claim" else HEALTH_NOT_REPORTED), run.result["checks"]
    assert run.result["before"]["allocation"] == "dra"
    # The reports say which way: the run's claims, or the scheduler's for a plain extended resource request.
    path = {"claim": "dra", "extended_resource": "dra_extended_resource"}[request_kind]
    assert run.result["allocation"] == path
    words = {"dra": "GPUs through DRA (ResourceClaims of the run)",
             "dra_extended_resource": "GPUs through DRA (an extended resource: ResourceClaims made by the scheduler)"}[path]
    assert words in run.svg.read_text()
    assert ("which the class serves (extendedResourceName): the scheduler makes their ResourceClaims" in run.markdown.read_text()) == (
        path == "dra_extended_resource")
    # The queue pod waited with the scheduler's own DRA refusal, while the hold's claim had the GPU.
    assert "cannot allocate all claims" in run.check("queue_insufficient")["detail"]
    claim = "gpu-demo-hold-gpu-" if request_kind == "claim" else "gpu-demo-hold-extended-resources-"
    prepared = run.check("hold_devices_prepared")["detail"]
    assert "gpu-0 ({0}, claim {1}".format(SEED_UUID, claim) in prepared
    assert ("made by the scheduler for an extended resource" in prepared) == (request_kind == "extended_resource")
    assert run.check("queue_got_held_gpu")["detail"] == "the queue pod saw {0}; the hold had {0}".format(SEED_UUID)
    during = run.result["during"]
    assert (during["allocatable"], during["requested"], during["free"]) == (1, 1, 0)
    assert [holder["name"] for holder in during["holders"]] == ["gpu-demo-hold"]
    # Inside the containers the GPU came as CDI device nodes, the variable as NVIDIA's spec sets it.
    assert run.result["hold"]["pods"][0]["visible_devices"]["mode"] == "void"
    assert leftovers(sim) == [] and dra_state(sim) == before
    assert not list((Path(sim.dir.run) / "nodes" / "prod102" / "var" / "run" / "cdi").glob("k8s.gpu.nvidia.com-claim_*"))
    assert_reports_speak_dra(run)
    assert_events_in_causal_order(run.result["events"])


def assert_reports_speak_dra(run: Run) -> None:
    """A DRA node advertises no allocatable count for its GPUs and kubectl describe node shows no row for them: no
    report (Markdown, SVG, JSON) says either; the ledger checks name the devices and the claims that hold them."""
    for text in (run.markdown.read_text(), run.svg.read_text(), json.dumps(run.result)):
        assert "allocatable gpu.nvidia.com" not in text and "Allocated resources" not in text
        assert "kubectl describe node prod102`, Allocated" not in text
    assert run.check("ledger_full")["detail"].startswith(
        "1 device(s) of DeviceClass gpu.nvidia.com in the ResourceSlices of prod102, 1 allocated to claims: gpu-0 (claim "
        "gpu-operator/gpu-demo-hold-"), run.check("ledger_full")
    assert run.check("ledger_restored")["detail"].startswith(
        "after: 1 device(s) of DeviceClass gpu.nvidia.com in the ResourceSlices of prod102, 0 allocated to claims")


def assert_events_in_causal_order(events: list) -> None:
    """The kubelet's events carry whole seconds, the scheduler's microseconds: each says which, and none of a pod is
    placed before that pod's Scheduled event."""
    kubelet = [event for event in events if event["source"] == "kubelet"]
    assert kubelet and all(event["precise"] is False for event in kubelet), events
    assert all(event["precise"] is True for event in events if event["reason"] == "Scheduled"), events
    for index, event in enumerate(events):
        scheduled = next((item for item in events if item["pod"] == event["pod"] and item["reason"] == "Scheduled"), None)
        if event["source"] == "kubelet" and scheduled:
            assert events.index(scheduled) < index and event["placed_epoch"] >= scheduled["at_epoch"], events


def test_a_hold_that_the_scheduler_never_binds_held_no_gpu_and_reports_no_occupied_window(sim, tmp_path):
    # The wrong world: the DeviceClass selects no device of the node, with a selector the pre-flight cannot evaluate
    # (so it lets the run go on "up to 1 device"); the scheduler then finds no device for the hold's claim, and the
    # hold pod stays Pending until the wait gives up and the cleanup deletes it.
    sim.use_topology("dra")
    before = dra_state(sim)
    nothing = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type.startsWith('no-such-')"
    sim.kubectl("patch", "deviceclass", "gpu.nvidia.com", "--type=merge",
                "-p", json.dumps({"spec": {"selectors": [{"cel": {"expression": nothing}}]}}))
    try:
        run = run_demo(sim, tmp_path, gpu_demo_dra_request="claim", gpu_demo_timeout=8)
    finally:
        sim.kubectl("patch", "deviceclass", "gpu.nvidia.com", "--type=merge",
                    "-p", json.dumps({"spec": {"selectors": [{"cel": {"expression": (
                        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'")}}]}}))
    assert run.rc != 0
    assert run.check("hold_running")["passed"] is False, run.check("hold_running")
    # The pod existed for the whole wait, but was never bound: no GPU was held, so there is no window to report.
    assert "scheduled" not in run.result["timeline"]["offsets"].get("gpu-demo-hold", {}), run.result["timeline"]
    assert run.result["timeline"]["held"] is False and run.result["timeline"]["window"] is None
    assert run.result["durations"]["occupied_window"] is None
    assert ("| GPUs held (occupied window) | none: no demo pod ever ran on the node, so no GPU was held |"
            in run.markdown.read_text())
    assert leftovers(sim) == [] and dra_state(sim) == before


def test_the_ledger_equals_what_kubectl_says_on_a_mixed_fleet(sim):
    sim.use_topology("dra-fleet")
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dra-holder", "namespace": "default"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["prod102"]}]}]}}},
                    "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                    "resources": {"claims": [{"name": "gpu"}]}}]}}
    sim.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [template, pod]}))
    try:
        sim.kubectl("wait", "pod/dra-holder", "-n", "default", "--for=condition=Ready", "--timeout=60s")
        result = sim.ansible_module("gpuops.scheduling.gpu_ledger_facts", {"kubeconfig": sim.kubeconfig})
        assert "failed" not in result, result
        expected = dra_state(sim)
        ledger = result["ledger"]
        found = {}
        for node, entry in ledger["nodes"].items():
            for driver in ((entry.get("dra") or {}).get("drivers") or {}).values():
                for device in driver["devices"]:
                    found.setdefault(node, {})[device["name"]] = (
                        (device["claim"]["name"], sorted(holder["name"] for holder in device["holders"]))
                        if device["allocated"] else None)
        assert found == expected
        assert sorted(held for held in expected["prod102"].values() if held)[0][1] == ["dra-holder"]
        # Beside the device-plugin ledger, in a constant number of lists (nodes, pods, slices, claims, classes).
        assert ledger["nodes"]["prod103"]["allocation"] == "device_plugin"
        assert ledger["nodes"]["prod103"]["resources"]["nvidia.com/gpu"]["allocatable"] == 1
        assert (ledger["nodes"]["prod102"]["allocation"], ledger["nodes"]["prod104"]["allocation"]) == ("dra", "dra")
        assert ledger["dra_totals"]["gpu.nvidia.com"] == {"total": 4, "allocated": 1, "tainted": 0, "free": 3}
        mig = ledger["nodes"]["prod104"]["dra"]["drivers"]["gpu.nvidia.com"]
        assert mig["classes"]["mig.nvidia.com"]["total"] == 2 and {device["type"] for device in mig["devices"]} == {"mig"}
        assert result["api_calls"] == 5
        # One node: its slices, the DeviceClasses and the claim its pod uses, besides the node and pod reads.
        one = sim.ansible_module("gpuops.scheduling.gpu_ledger_facts", {"kubeconfig": sim.kubeconfig, "node": "prod102"})
        assert one["ledger"]["nodes"]["prod102"]["dra"] == ledger["nodes"]["prod102"]["dra"]
        assert one["api_calls"] == 3 + 2 + 1
    finally:
        sim.kubectl("delete", "pod/dra-holder", "resourceclaimtemplate/one-gpu", "-n", "default", "--wait=true")


def test_a_device_the_driver_prepares_wrongly_fails_the_evidence_naming_it(sim, tmp_path):
    sim.use_topology("dra-fleet")
    before = dra_state(sim)
    sim._simctl("fault", "prod102", json.dumps({"dra_wrong_device": "first"}))
    try:
        run = run_demo(sim, tmp_path)
    finally:
        sim._simctl("fault", "prod102", "{}")
    assert run.rc != 0
    prepared = run.check("hold_devices_prepared")
    assert prepared["passed"] is False
    # gpu-1 was allocated to one hold pod's claim, but the driver handed it gpu-0's device node.
    uuids = {device["name"]: device["uuid"] for device in run.result["during"].get("dra", {}).get("devices", [])} or None
    assert " was allocated gpu-1 (" in prepared["detail"] and "but nvidia-smi in it shows" in prepared["detail"], prepared
    assert uuids is None  # the walk stopped at the hold: no queue, no ledger while queued
    assert leftovers(sim) == [] and dra_state(sim) == before


def test_a_driver_the_kubelet_does_not_know_fails_naming_failed_prepare(sim, tmp_path):
    sim.use_topology("dra-unregistered")
    before = dra_state(sim)
    run = run_demo(sim, tmp_path)
    assert run.rc != 0
    running = run.check("hold_running")
    assert running["passed"] is False
    assert "FailedPrepareDynamicResources" in running["detail"] and "gpu.nvidia.com" in running["detail"], running
    # Bound, its claim allocated, but never running: no container had the GPU, so there is no occupied window.
    assert "scheduled" in run.result["timeline"]["offsets"]["gpu-demo-hold"], run.result["timeline"]
    assert run.result["timeline"]["held"] is False and run.result["durations"]["occupied_window"] is None
    assert "| GPUs held (occupied window) | none: no demo pod ever ran on the node, so no GPU was held |" in run.markdown.read_text()
    assert leftovers(sim) == [] and dra_state(sim) == before


def test_an_unknown_device_class_is_refused_before_anything_is_created(sim, tmp_path):
    sim.use_topology("dra")
    run = run_demo(sim, tmp_path, gpu_demo_device_class="big.gpu.example.com")
    assert run.rc != 0
    found = run.check("node_found")
    assert found["passed"] is False
    assert found["detail"].startswith("DeviceClass big.gpu.example.com does not exist; the cluster has: ")
    assert "Refusing node prod102: DeviceClass big.gpu.example.com does not exist" in run.output
    # Refused in the pre-flight, before anything was created: no pod, template or claim, and no hold was tried.
    assert run.result["failure"]["task"].startswith("Preflight | Refuse")
    assert leftovers(sim) == [] and not run.result["hold"].get("pods")


def test_auto_recognises_plain_gpu_requests_served_through_dra_and_walks_them(sim, tmp_path):
    # No gpu_demo_dra_request: the chart's DeviceClass gpu.nvidia.com serves nvidia.com/gpu (extendedResourceName) and no
    # device plugin registers it, so the walk asks for plain nvidia.com/gpu, as the node's existing workloads do.
    sim.use_topology("dra")
    before = dra_state(sim)
    node = json.loads(sim.kubectl("get", "node", "prod102", "-o", "json").stdout)
    assert "nvidia.com/gpu" not in node["status"].get("allocatable", {})
    run = run_demo(sim, tmp_path)
    assert run.rc == 0, run.output[-3000:]
    assert not_passed(run) == HEALTH_NOT_REPORTED, run.result["checks"]
    assert (run.result["before"]["allocation"], run.result["plan"]["dra_request"]) == ("dra", "extended_resource")
    assert run.check("extended_resource_served")["detail"].startswith("DeviceClass gpu.nvidia.com serves nvidia.com/gpu")
    hold = run.result["pods"]["hold"][0]
    assert "resourceClaims" not in hold["spec"]
    assert hold["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    # Judged on its own evidence: the device came through the claim the scheduler made for the plain request.
    prepared = run.check("hold_devices_prepared")["detail"]
    assert "claim gpu-demo-hold-extended-resources-" in prepared and "made by the scheduler for an extended resource" in prepared
    assert "cannot allocate all claims" in run.check("queue_insufficient")["detail"]
    assert "the pods request plain `nvidia.com/gpu`" in run.markdown.read_text()
    assert leftovers(sim) == [] and dra_state(sim) == before


def test_without_extended_resource_name_auto_uses_claims_and_plain_requests_are_refused(sim, tmp_path):
    # The wrong world for the extended-resource path: the class serves no extended resource (a chart rendered for an older
    # API), so plain nvidia.com/gpu would find no GPU: auto takes claims, and asking for plain requests is refused.
    sim.use_topology("dra")
    before = dra_state(sim)
    sim.kubectl("patch", "deviceclass", "gpu.nvidia.com", "--type=json",
                "-p", '[{"op": "remove", "path": "/spec/extendedResourceName"}]')
    try:
        run = run_demo(sim, tmp_path, gpu_demo_dra_request="extended_resource")
        assert run.rc != 0
        served = run.check("extended_resource_served")
        assert served["passed"] is False and served["detail"].startswith(
            "DeviceClass gpu.nvidia.com has no extendedResourceName, not nvidia.com/gpu"), served
        assert run.result["failure"]["task"].startswith("Preflight | Refuse") and not run.result["hold"].get("pods")
        assert leftovers(sim) == []
        run = run_demo(sim, tmp_path)
        assert run.rc == 0, run.output[-3000:]
        assert run.result["plan"]["dra_request"] == "claim"
        assert run.result["pods"]["hold"][0]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "gpu-demo-hold"
        assert "claim gpu-demo-hold-gpu-" in run.check("hold_devices_prepared")["detail"]
    finally:
        sim.kubectl("patch", "deviceclass", "gpu.nvidia.com", "--type=merge", "-p", '{"spec": {"extendedResourceName": "nvidia.com/gpu"}}')
    assert leftovers(sim) == [] and dra_state(sim) == before


def published_taints(sim, node: str) -> dict:
    """{device: ["key=value:Effect", ...]} of the node's ResourceSlices, as kubectl shows them."""
    taints = {}
    for item in kubectl_json(sim, "resourceslices", "--field-selector", f"spec.nodeName={node}"):
        for device in item["spec"].get("devices") or []:
            taints[device["name"]] = sorted(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in device.get("taints") or [])
    return taints


def taint_devices(sim, node: str, devices: list) -> None:
    """The driver taints ``devices`` as NVIDIA's taints a GPU with an XID error; waits until the slice shows it."""
    sim._simctl("fault", node, json.dumps({"dra_taints": {name: {"key": "gpu.nvidia.com/xid", "value": "79"} for name in devices}}))
    wait_until(lambda: all(published_taints(sim, node).get(name) == ["gpu.nvidia.com/xid=79:NoSchedule"] for name in devices),
               30, f"the driver to publish the taints of {', '.join(devices)}")


def test_a_tainted_device_is_left_out_of_the_walk_and_counted_as_not_allocatable(sim, tmp_path):
    sim.use_topology("dra-fleet")   # prod102: two H20 served by DRA
    before = dra_state(sim)
    taint_devices(sim, "prod102", ["gpu-1"])
    try:
        ledger = sim.ansible_module("gpuops.scheduling.gpu_ledger_facts", {"kubeconfig": sim.kubeconfig, "node": "prod102"})
        gpu = ledger["ledger"]["nodes"]["prod102"]["dra"]["drivers"]["gpu.nvidia.com"]
        assert (gpu["total"], gpu["tainted"], gpu["free"]) == (2, 1, 1)
        assert [device["taints"] for device in gpu["devices"]] == [[], ["gpu.nvidia.com/xid=79:NoSchedule"]]
        run = run_demo(sim, tmp_path)
        assert run.rc == 0, run.output[-3000:]
        assert not_passed(run) == HEALTH_NOT_REPORTED, run.result["checks"]
        # The walk holds the one device the scheduler may give; the queue then waits, the tainted GPU unused.
        assert (run.result["before"]["capacity"], run.result["before"]["allocatable"], run.result["plan"]["units"]) == (2, 1, 1)
        assert "1 more not allocatable, tainted by the driver: gpu-1 " in run.check("resource_allocatable")["detail"]
        assert "gpu.nvidia.com/xid=79:NoSchedule" in run.check("resource_allocatable")["detail"]
        during = run.result["during"]
        assert (during["allocatable"], during["requested"], during["free"]) == (1, 1, 0)
        assert "cannot allocate all claims" in run.check("queue_insufficient")["detail"]
        held = [device for device in during["dra"]["devices"] if device["allocated"]]
        assert [device["name"] for device in held] == ["gpu-0"]
        assert "not allocatable (tainted gpu.nvidia.com/xid=79:NoSchedule)" in run.markdown.read_text()
        assert leftovers(sim) == []
        # Every GPU tainted: refused before anything is created, the taints named.
        taint_devices(sim, "prod102", ["gpu-0", "gpu-1"])
        run = run_demo(sim, tmp_path)
        assert run.rc != 0
        refused = run.check("resource_allocatable")
        assert refused["passed"] is False and refused["detail"].startswith(
            "0 device(s) of DeviceClass gpu.nvidia.com on prod102 (0 allocated to other claims); 2 more not allocatable, "
            "tainted by the driver: gpu-0 "), refused
        assert run.result["failure"]["task"].startswith("Preflight | Refuse") and not run.result["hold"].get("pods")
    finally:
        sim._simctl("fault", "prod102", "{}")
    assert leftovers(sim) == [] and dra_state(sim) == before


def test_the_walk_through_dra_on_mig_devices_holds_each_and_hands_one_over(sim, tmp_path):
    # NVIDIA's driver publishes a MIG-mode GPU's MIG devices (DeviceClass mig.nvidia.com), not the GPU; each claim's
    # CDI spec gives the GPU's node and the MIG device's two capability nodes, and nvidia-smi -L lists that MIG device.
    sim.use_topology("dra-mig")
    before = dra_state(sim)
    assert sorted(before["prod102"]) == ["gpu-0-mig-1g10gb-19-0", "gpu-0-mig-1g10gb-19-1"] and not any(before["prod102"].values())
    run = run_demo(sim, tmp_path, gpu_demo_device_class="mig.nvidia.com")
    assert run.rc == 0, run.output[-3000:]
    assert not_passed(run) == {}, run.result["checks"]
    # mig.nvidia.com serves no extended resource: the pods name claims of the run's templates.
    assert (run.result["plan"]["dra_request"], run.result["plan"]["units"]) == ("claim", 2)
    during = run.result["during"]
    assert (during["allocatable"], during["requested"], during["free"]) == (2, 2, 0)
    migs = {device["uuid"]: device["name"] for device in during["dra"]["devices"]}
    assert all(uuid.startswith("MIG-") for uuid in migs) and len(migs) == 2
    # Each hold pod saw its own MIG device, not the whole GPU nor the other one.
    assert sorted(run.result["hold"]["distinct_uuids"]) == sorted(migs)
    prepared = run.check("hold_devices_prepared")["detail"]
    assert all(f"{name} ({uuid}, claim gpu-demo-hold-" in prepared for uuid, name in migs.items()), prepared
    assert "cannot allocate all claims" in run.check("queue_insufficient")["detail"]
    queue_uuids = run.result["queue"]["evidence"]["unit_uuids"]
    assert len(queue_uuids) == 1 and queue_uuids[0] in migs
    assert leftovers(sim) == [] and dra_state(sim) == before
    # The class of whole GPUs has no device on this node: refused before anything is created.
    run = run_demo(sim, tmp_path)
    assert run.rc != 0
    assert run.check("node_found")["detail"].startswith("node prod102 publishes no device of DeviceClass gpu.nvidia.com")
    assert leftovers(sim) == []
