"""What the pre-flight says at the edges, on real kubelets and the real scheduler: DRA devices counted as the scheduler
counts them (two pods sharing one claim hold one device; a plain extended resource request served through DRA holds
its device through the scheduler's claim), a DeviceClass whose selector the collection cannot evaluate (never
"0 devices"), a taint the demo pods do not tolerate (refused before any pod, naming it), and a gate on a node without
the startup taint (passes, saying there was nothing to lift); a hold that never ran fails once, and what follows
from it is not judged.

Each test switches to the topology it needs first: any worker may run any of them.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from safety_helpers import MANAGED, PodRecorder
from test_dra import dra_state, kubectl_json, leftovers, run_demo
from test_node_verdict import CONDITION, LABEL, conditions, node, taints

pytestmark = pytest.mark.independent

FOREIGN = "team-a"
TAINT = {"key": "team.example.com/reserved", "value": "ml", "effect": "NoSchedule"}
DEFAULT_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def apply(sim, *items: dict) -> None:
    sim.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)}))


def foreign_pod(name: str, claim: str) -> dict:
    """Someone else's pod on prod102 that uses the pre-created claim ``claim`` (shared by every pod naming it)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": FOREIGN},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                         {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["prod102"]}]}]}}},
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}


def test_two_pods_sharing_one_claim_hold_one_device_and_the_busy_walk_holds_the_other(sim, tmp_path):
    sim.use_topology("dra-fleet")
    assert dra_state(sim)["prod102"] == {"gpu-0": None, "gpu-1": None}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared", "namespace": FOREIGN},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    pods = [foreign_pod("a", "shared"), foreign_pod("b", "shared")]
    apply(sim, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FOREIGN}}, claim, *pods)
    try:
        sim.kubectl("wait", "pod/a", "pod/b", "-n", FOREIGN, "--for=condition=Ready", "--timeout=90s")
        # What the cluster says: one device allocated to the claim, reserved for both pods; the other free.
        held = dra_state(sim)["prod102"]
        assert sorted(held.values(), key=str) == [("shared", ["a", "b"]), None], held
        device = next(name for name, value in held.items() if value)

        refused = run_demo(sim, tmp_path / "refused")
        assert refused.rc != 0, refused.output[-3000:]
        busy = refused.check("node_not_busy")
        assert busy["passed"] is False
        assert busy["detail"].startswith("1 device held by team-a/a, team-a/b (claim team-a/shared); refusing a busy node")
        assert refused.result["before"]["held_by_others"] == 1
        assert {check["phase"] for check in refused.result["checks"]} == {"preflight"}
        # The node has two devices, one of them allocated (to the shared claim): never two held.
        assert "ledger_before: 2 device(s), 1 allocated to claims" in refused.output
        assert not re.search(r"\b2 (unit|device)\(s\) held|\b2 allocated", refused.output), refused.output[-3000:]

        allowed = run_demo(sim, tmp_path / "allowed", gpu_demo_allow_busy_node=True)
        assert allowed.rc == 0, allowed.output[-3000:]
        # Every check passed but the device health, which this DRA driver does not report: not judged, never a pass.
        assert {check["id"] for check in allowed.result["checks"] if check["passed"] is not True} == {"hold_devices_healthy"}
        assert allowed.check("hold_devices_healthy")["passed"] is None, allowed.result["checks"]
        assert allowed.check("free_units")["detail"] == "1 free device(s) of gpu.nvidia.com to hold"
        assert allowed.result["plan"]["units"] == 1
        # The hold got the free device, never the shared one; the claim kept its device and both pods ran on.
        hold = allowed.check("hold_devices_prepared")["detail"]
        assert f"{device} (" not in hold and "gpu-" in hold
        assert allowed.check("queue_insufficient")["passed"] and "cannot allocate all claims" in allowed.check(
            "queue_insufficient")["detail"]
        assert dra_state(sim)["prod102"][device] == ("shared", ["a", "b"])
        phases = {item["metadata"]["name"]: item["status"]["phase"] for item in kubectl_json(sim, "pods", "-n", FOREIGN)}
        assert phases == {"a": "Running", "b": "Running"}
        assert leftovers(sim) == []
    finally:
        sim.kubectl("delete", "namespace", FOREIGN, "--wait=true", "--timeout=90s")


def test_a_device_class_whose_selector_is_not_evaluated_is_walked_and_never_reported_as_zero_devices(sim, tmp_path):
    sim.use_topology("dra")
    # CEL beyond the equalities the collection reads; the scheduler evaluates it and selects the node's H20.
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "h20.example.com"},
                    "spec": {"selectors": [{"cel": {"expression": (
                        "device.driver == 'gpu.nvidia.com' && "
                        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('h20')")}}]}}
    apply(sim, device_class)
    try:
        run = run_demo(sim, tmp_path, gpu_demo_device_class="h20.example.com", gpu_demo_dra_request="claim")
        assert run.rc == 0, run.output[-3000:]
        assert all(check["passed"] for check in run.result["checks"]), [check for check in run.result["checks"] if not check["passed"]]
        found = run.check("node_found")["detail"]
        assert "may select" in found and "could not be evaluated here" in found and "left to the scheduler" in found
        assert run.check("resource_allocatable")["detail"].startswith("up to 1 device(s) of DeviceClass h20.example.com")
        assert "publish 1 device(s) that DeviceClass `h20.example.com` may select" in run.markdown.read_text()
        everything = run.output + run.markdown.read_text() + json.dumps(run.result)
        assert "0 device(s)" not in everything and "0 devices" not in everything
        # The hold's own outcome judged the node: the scheduler allocated the class's device to the hold's claim.
        assert "gpu-0 (GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76, claim gpu-demo-hold-gpu-" in run.check(
            "hold_devices_prepared")["detail"]
        assert leftovers(sim) == []
    finally:
        sim.kubectl("delete", "deviceclass", "h20.example.com", "--ignore-not-found")


def test_a_taint_the_demo_pods_do_not_tolerate_is_refused_before_any_pod_and_walks_once_tolerated(sim, tmp_path):
    sim.use_topology("default")
    spec = "{key}={value}:{effect}".format(**TAINT)
    sim.kubectl("taint", "node", "prod102", spec)
    try:
        recorder = PodRecorder(sim.kubeconfig, MANAGED)
        try:
            refused = run_demo(sim, tmp_path / "refused")
        finally:
            created = recorder.stop()
        assert refused.rc != 0, refused.output[-3000:]
        taint = refused.check("node_taints_tolerated")
        assert taint["passed"] is False
        assert "key team.example.com/reserved, value ml, effect NoSchedule" in taint["detail"]
        assert "add a toleration to gpu_demo_tolerations" in taint["detail"]
        assert "Refusing node prod102" in refused.output and "team.example.com/reserved" in refused.output
        # Before the first pod: only pre-flight checks, and no pod of the collection was ever created.
        assert {check["phase"] for check in refused.result["checks"]} == {"preflight"}
        assert refused.result["failed_checks"] == ["node_taints_tolerated"]
        assert created == [], created

        tolerated = run_demo(sim, tmp_path / "tolerated", gpu_demo_tolerations=DEFAULT_TOLERATIONS + [
            dict(TAINT, operator="Equal")])
        assert tolerated.rc == 0, tolerated.output[-3000:]
        assert all(check["passed"] for check in tolerated.result["checks"]), tolerated.result["checks"]
        assert tolerated.check("node_taints_tolerated")["detail"] == (
            "the demo pods tolerate every NoSchedule and NoExecute taint of node prod102: team.example.com/reserved=ml:NoSchedule")
    finally:
        sim.kubectl("taint", "node", "prod102", spec + "-")


def test_a_gate_on_a_node_without_the_startup_taint_passes_saying_there_was_nothing_to_lift(sim, tmp_path):
    sim.use_topology("default")
    assert not [entry for entry in taints(node(sim)) if entry[0] == "gpuops.scheduling/gpu-preflight-pending"]
    reports = tmp_path / "reports"
    inventory = tmp_path / "gate.yml"
    inventory.write_text(yaml.safe_dump({"new_gpu_nodes": {"hosts": {"prod102": None}, "vars": {
        "gpu_demo_kubeconfig": sim.kubeconfig, "gpu_demo_vllm_health_url": sim.health_url,
        "gpu_demo_report_dir": str(reports), "gpu_demo_timeout": 30}}}))
    run = sim.playbook("playbooks/gpu_preflight_gate.yml", inventory=str(inventory))
    assert run.returncode == 0, run.stdout[-3000:]
    found = node(sim)
    assert (conditions(found)[CONDITION]["status"], found["metadata"]["labels"][LABEL]) == ("True", "passed")
    said = "no startup taint to remove (gpuops.scheduling/gpu-preflight-pending:NoSchedule was not on the node)"
    assert said in conditions(found)[CONDITION]["message"]
    result = json.loads(next(Path(reports).glob("gpu-demo-prod102-*.json")).read_text())
    assert result["gate"] == {"taint": "gpuops.scheduling/gpu-preflight-pending", "remove": True, "present": False}
    assert "**No startup taint to remove**" in next(Path(reports).glob("gpu-demo-prod102-*.md")).read_text()
    summary = json.loads(next(Path(reports).glob("gpu-demo-fleet-*.json")).read_text())
    row = next(row for row in summary["rows"] if row["host"] == "prod102")
    assert row["status"] == "passed" and row["reason"].startswith("no startup taint to remove")
    assert "no startup taint to remove" in next(Path(reports).glob("gpu-demo-fleet-*.md")).read_text()


def test_a_device_held_through_the_extended_resource_path_is_counted_with_the_schedulers_claim(sim, tmp_path):
    sim.use_topology("dra-fleet")
    # A workload written for a device plugin: plain nvidia.com/gpu, served through DRA (extendedResourceName).
    pod = foreign_pod("plain", "unused")
    del pod["spec"]["resourceClaims"]
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    apply(sim, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FOREIGN}}, pod)
    try:
        sim.kubectl("wait", "pod/plain", "-n", FOREIGN, "--for=condition=Ready", "--timeout=90s")
        claims = kubectl_json(sim, "resourceclaims", "-n", FOREIGN)
        assert [item["metadata"]["name"].startswith("plain-extended-resources-") for item in claims] == [True], claims
        refused = run_demo(sim, tmp_path)
        assert refused.rc != 0, refused.output[-3000:]
        busy = refused.check("node_not_busy")["detail"]
        assert busy.startswith("1 device held by team-a/plain (claim team-a/{0}, made by the scheduler for an extended "
                               "resource request); refusing a busy node".format(claims[0]["metadata"]["name"])), busy
        assert refused.result["plan"]["units"] == 1
    finally:
        sim.kubectl("delete", "namespace", FOREIGN, "--wait=true", "--timeout=90s")


def test_a_hold_that_never_ran_fails_once_and_what_follows_is_not_judged(sim, tmp_path):
    sim.use_topology("default")
    run = run_demo(sim, tmp_path, gpu_demo_image="registry.local/gpuops/smi:does-not-exist")
    assert run.rc != 0, run.output[-3000:]
    # One cause, reported once: the pods never ran, so what they would have printed is not judged.
    assert run.result["failed_checks"] == ["hold_running"], run.result["failed_checks"]
    first = run.check("hold_running")["detail"]
    assert "registry.local/gpuops/smi:does-not-exist" in first
    for follows in ("hold_one_gpu_per_unit", "hold_env_corroborates"):
        assert run.check(follows) == {"id": follows, "phase": "hold", "passed": None,
                                      "detail": f"not judged: hold_running failed first ({first})"}
    assert "| hold_one_gpu_per_unit | not judged |" in run.markdown.read_text()
    assert "0 device(s)" not in run.output
    assert leftovers(sim) == []
