"""The verdict on the Node, on real kubelets: the condition, the label and the report annotation a run writes, the
real kubelet's status updates leaving them alone, a failing run's phase as the reason; gate mode's startup taint, gone
after a pass and kept after a failure, alone and with node-readiness-controller's rule (its logic applied here).

Topologies: four-gpus (the verdict), gate (gate mode).
"""
from __future__ import annotations

import json
import threading
import time

import pytest
import yaml
from safety_helpers import core_api, wait_until
from test_gpu_demo import MANAGED, run_demo
from test_real_kubelet import allocatable, simctl

from conftest import CHECKOUT

CONDITION = "gpuops.scheduling/GPUPreflightPassed"
LABEL = "gpuops.scheduling/gpu-preflight"
REPORT = "gpuops.scheduling/gpu-preflight-report"
GATE_TAINT = "gpuops.scheduling/gpu-preflight-pending"
NRC_TAINT = "readiness.k8s.io/gpu-preflight-pending"
RULE = CHECKOUT / "docs" / "gate" / "nodereadinessrule.yaml"


def node(sim, name: str = "prod102") -> dict:
    return json.loads(sim.kubectl("get", "node", name, "-o", "json").stdout)


def conditions(found: dict) -> dict:
    return {entry["type"]: entry for entry in found["status"].get("conditions") or []}


def taints(found: dict) -> list:
    return [(taint["key"], taint.get("value"), taint["effect"]) for taint in found["spec"].get("taints") or []]


class NodeRecorder:
    """Every version of a Node while it runs: (our label, our condition's status, the kubelet's status write time)."""

    def __init__(self, kubeconfig: str, name: str):
        self.core = core_api(kubeconfig)
        self.name = name
        self.seen = []
        self._stop = threading.Event()
        self._version = self.core.read_node(name).metadata.resource_version
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kubernetes import watch  # pylint: disable=import-outside-toplevel
        while not self._stop.is_set():
            try:
                for change in watch.Watch().stream(self.core.list_node, field_selector=f"metadata.name={self.name}",
                                                   resource_version=self._version, timeout_seconds=2, _request_timeout=10):
                    found = change["object"]
                    self._version = found.metadata.resource_version
                    ours = [c for c in found.status.conditions or [] if c.type == CONDITION]
                    self.seen.append(((found.metadata.labels or {}).get(LABEL), ours[0].status if ours else None,
                                      dict((found.status.allocatable or {})).get("nvidia.com/gpu")))
            except Exception:  # pylint: disable=broad-except  # 410 Gone: relist from now
                time.sleep(0.5)
                self._version = self.core.read_node(self.name).metadata.resource_version

    def stop(self) -> list:
        self._stop.set()
        self._thread.join(timeout=15)
        return self.seen


def verdict_events(sim, run_id: str, name: str = "prod102") -> list:
    """The verdict Events (events.k8s.io/v1) on the Node whose note names the run."""
    found = json.loads(sim.kubectl("get", "events.v1.events.k8s.io", "-n", "default", "-o", "json").stdout)["items"]
    return [entry for entry in found if entry.get("regarding", {}).get("name") == name
            and entry.get("reportingController") == "gpuops.scheduling/preflight" and run_id in entry.get("note", "")]


def states(seen: list) -> list:
    """The (label, condition status) pairs in the order they appeared, each once in a row."""
    out = []
    for label, status, _allocatable in seen:
        if not out or out[-1] != (label, status):
            out.append((label, status))
    return out


@pytest.fixture()
def healed(sim):
    yield sim
    for name in ("prod102", "gate-a"):
        try:
            simctl("fault", name, "{}")
        except Exception:  # pylint: disable=broad-except  # the node is not in the current topology
            pass


def test_the_verdict_lives_on_the_node_through_the_kubelets_updates_and_names_the_failed_phase(healed, tmp_path):
    sim = healed
    sim.use_topology("four-gpus")
    # Another tool's condition, label and annotation: a verdict must leave them as they are.
    other = {"type": "example.com/DiskHealthy", "status": "True", "reason": "DiskOK", "message": "disk ok",
             "lastHeartbeatTime": "2026-12-01T00:00:00Z", "lastTransitionTime": "2026-12-01T00:00:00Z"}
    sim.kubectl("patch", "node", "prod102", "--subresource=status", "--type=strategic",
                "-p", json.dumps({"status": {"conditions": [other]}}))
    sim.kubectl("label", "node", "prod102", "team=inference")
    sim.kubectl("annotate", "node", "prod102", "example.com/owner=platform")

    recorder = NodeRecorder(sim.kubeconfig, "prod102")
    run = run_demo(sim, tmp_path / "pass")
    assert run.rc == 0, run.output[-3000:]
    wait_until(lambda: (recorder.seen or [(None,)])[-1][0] == "passed", 10, "the watch to see the verdict")
    seen = states(recorder.stop())
    # Unknown while running, then True; never anything else. The label changes before the condition, so the condition
    # never says passed while the label does not.
    assert ("running", "Unknown") in seen and seen[-1] == ("passed", "True"), seen
    assert set(seen[seen.index(("running", "Unknown")):]) <= {
        ("running", "Unknown"), ("passed", "Unknown"), ("passed", "True")}, seen

    found = node(sim)
    ours = conditions(found)[CONDITION]
    assert (ours["status"], ours["reason"]) == ("True", "PreflightPassed")
    assert ours["message"] == f"GPU pre-flight passed: 4 unit(s) of nvidia.com/gpu held, 4 GPU(s) seen, occupied " \
        f"{json.loads(found['metadata']['annotations'][REPORT])['window']['seconds']:.1f} s; run {run.result['run_id']}"
    report = json.loads(found["metadata"]["annotations"][REPORT])
    assert (report["state"], report["run_id"], report["units"], len({gpu["uuid"] for gpu in report["gpus"]})) == \
        ("passed", run.result["run_id"], 4, 4)
    assert found["metadata"]["annotations"]["gpuops.scheduling/gpu-preflight-time"] == report["at"]
    # What it was proven against: this boot of this kubelet, its 4 units, the GPU Operator's device plugin pod on the
    # node (no GFD driver label on this node).
    plugin = json.loads(sim.kubectl("get", "pods", "-n", "gpu-operator", "-l", "app=nvidia-device-plugin-daemonset",
                                    "--field-selector", "spec.nodeName=prod102", "-o", "json").stdout)["items"]
    assert report["basis"] == {"boot": found["status"]["nodeInfo"]["bootID"], "allocatable": "4",
                               "kubelet": found["status"]["nodeInfo"]["kubeletVersion"],
                               "plugin_pod": plugin[0]["metadata"]["uid"]}, report["basis"]
    # Its Event, where kubectl events and kubectl describe node show the Node's.
    passed_event = verdict_events(sim, run.result["run_id"])
    assert [(e["type"], e["reason"], e["reportingController"], e["action"], e["regarding"]["kind"]) for e in passed_event] \
        == [("Normal", "GPUPreflightPassed", "gpuops.scheduling/preflight", "Preflight", "Node")], passed_event
    assert passed_event[0]["note"] == ours["message"] and passed_event[0]["metadata"]["namespace"] == "default"
    listed_events = sim.kubectl("events", "--for", "node/prod102").stdout
    assert "GPUPreflightPassed" in listed_events and run.result["run_id"] in listed_events, listed_events
    # What people see.
    listed = sim.kubectl("get", "node", "prod102", "-L", LABEL).stdout
    assert listed.split("\n")[0].split()[-1] == "GPU-PREFLIGHT" and listed.split("\n")[1].split()[-1] == "passed", listed
    described = sim.kubectl("describe", "node", "prod102").stdout
    assert CONDITION in described and "PreflightPassed" in described and run.result["run_id"] in described
    assert "GPUPreflightPassed" in described.split("Events:")[-1], described
    # Written by our field manager, on the Node and on its status; nothing of anyone else's changed.
    managers = {(entry["manager"], entry.get("subresource")) for entry in
                json.loads(sim.kubectl("get", "node", "prod102", "--show-managed-fields", "-o", "json").stdout)
                ["metadata"]["managedFields"]}
    assert {("gpuops.scheduling", None), ("gpuops.scheduling", "status")} <= managers, managers
    assert conditions(found)["example.com/DiskHealthy"] == other and conditions(found)["Ready"]["status"] == "True"
    assert found["metadata"]["labels"]["team"] == "inference"
    assert found["metadata"]["annotations"]["example.com/owner"] == "platform"
    assert found["spec"].get("unschedulable") in (None, False) and taints(found) == []

    # The real kubelet writes the node's status whenever it changes: a device turning unhealthy and healthy again,
    # twice, is four status updates of its own (allocatable 4 -> 3 -> 4 -> 3 -> 4). The condition stays, as written.
    recorder = NodeRecorder(sim.kubeconfig, "prod102")
    gpus = json.loads((sim.dir.run / "nodes" / "prod102" / "gpus.json").read_text())["gpus"]
    for _round in range(2):
        simctl("fault", "prod102", json.dumps({"unhealthy": [gpus[1]["uuid"]]}))
        wait_until(lambda: allocatable(sim) == "3", 30, "allocatable to drop to 3")
        simctl("fault", "prod102", "{}")
        wait_until(lambda: allocatable(sim) == "4", 30, "allocatable back to 4")
    seen = recorder.stop()
    kubelet_writes = [entry for before, entry in zip(seen, seen[1:]) if entry[2] != before[2]]
    assert len(kubelet_writes) >= 3 and all(entry[:2] == ("passed", "True") for entry in seen), seen
    again = node(sim)
    assert conditions(again)[CONDITION] == ours and conditions(again)["example.com/DiskHealthy"] == other
    assert conditions(again)["Ready"]["lastHeartbeatTime"] >= conditions(found)["Ready"]["lastHeartbeatTime"]

    # The device plugin hands every pod the first GPU: the hold's check fails, and the Node says so.
    simctl("fault", "prod102", json.dumps({"wrong_id": "first"}))
    failed = run_demo(sim, tmp_path / "fail")
    assert failed.rc != 0 and "hold_one_gpu_per_unit" in failed.result["failed_checks"], failed.output[-3000:]
    found = node(sim)
    ours = conditions(found)[CONDITION]
    assert (ours["status"], ours["reason"]) == ("False", "HoldCheckFailed"), ours
    assert ours["message"].startswith("GPU pre-flight failed at hold (hold_one_gpu_per_unit): ")
    assert ours["message"].endswith(f"; run {failed.result['run_id']}") and "\n" not in ours["message"]
    assert ours["lastTransitionTime"] >= conditions(again)[CONDITION]["lastTransitionTime"]
    assert found["metadata"]["labels"][LABEL] == "failed"
    report = json.loads(found["metadata"]["annotations"][REPORT])
    assert (report["phase"], report["check"], report["run_id"]) == ("hold", "hold_one_gpu_per_unit", failed.result["run_id"])
    failed_event = verdict_events(sim, failed.result["run_id"])
    assert [(e["type"], e["reason"]) for e in failed_event] == [("Warning", "GPUPreflightFailed")], failed_event
    assert failed_event[0]["note"] == ours["message"]
    listed_events = sim.kubectl("events", "--for", "node/prod102", "--types=Warning").stdout
    assert "GPUPreflightFailed" in listed_events and "hold_one_gpu_per_unit" in listed_events, listed_events
    assert conditions(found)["example.com/DiskHealthy"] == other and found["metadata"]["labels"]["team"] == "inference"
    assert not sim.kubectl("get", "pods", "-A", "-l", MANAGED, "-o", "name").stdout.split()

    # Check mode writes nothing on the Node.
    version = node(sim)["metadata"]["annotations"][REPORT]
    checked = run_demo(sim, tmp_path / "check", check=True)
    assert checked.rc == 0, checked.output[-3000:]
    assert node(sim)["metadata"]["annotations"][REPORT] == version and node(sim)["metadata"]["labels"][LABEL] == "failed"


def nrc_decision(rule: dict, found: dict) -> str:
    """What node-readiness-controller's rule does to a node (its internal/controller logic), as a word.

    The node must match the rule's nodeSelector; each of the rule's conditions is met when the node's condition of that
    type has the required status (a missing condition counts as Unknown); allOf (the default) needs all, anyOf one. Not
    met: the rule's taint is added ("add", or "keep" when there). Met: it is removed ("remove", or "met" when absent),
    and in bootstrap-only mode the node is marked completed (annotation readiness.k8s.io/bootstrap-completed-<rule>) and
    left alone from then on ("completed").
    """
    spec = rule["spec"]
    labels = found["metadata"].get("labels") or {}
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector", {}).get("matchLabels") or {}).items()):
        return "not selected"
    if spec.get("enforcementMode") == "bootstrap-only" and completed_key(rule) in (found["metadata"].get("annotations") or {}):
        return "completed"
    met = [conditions(found).get(entry["type"], {}).get("status", "Unknown") == entry["requiredStatus"]
           for entry in spec["conditions"]]
    taint = spec["taint"]
    present = any(entry["key"] == taint["key"] and entry["effect"] == taint["effect"] for entry in found["spec"].get("taints") or [])
    if any(met) if spec.get("conditionPolicy") == "anyOf" else all(met):
        return "remove" if present else "met"
    return "keep" if present else "add"


def completed_key(rule: dict) -> str:
    return "readiness.k8s.io/bootstrap-completed-" + rule["metadata"]["name"]


def nrc_reconcile(sim, rule: dict, name: str) -> str:
    """The rule's decision for a node, carried out as the controller does (a JSON patch that tests before it removes)."""
    found = node(sim, name)
    decision = nrc_decision(rule, found)
    taint = rule["spec"]["taint"]
    if decision == "remove":
        index = next(index for index, entry in enumerate(found["spec"]["taints"])
                     if entry["key"] == taint["key"] and entry["effect"] == taint["effect"])
        sim.kubectl("patch", "node", name, "--type=json", "-p", json.dumps([
            {"op": "test", "path": f"/spec/taints/{index}/key", "value": taint["key"]},
            {"op": "remove", "path": f"/spec/taints/{index}"}]))
    if decision in ("remove", "met") and rule["spec"].get("enforcementMode") == "bootstrap-only":
        sim.kubectl("annotate", "node", name, f"{completed_key(rule)}=" + json.dumps({"rule-name": rule["metadata"]["name"]}))
    return decision


def test_gate_lifts_the_startup_taint_after_a_pass_and_keeps_it_after_a_failure(healed, tmp_path):
    sim = healed
    sim.use_topology("gate")
    # The kubelets registered the nodes with their startup taints (registerWithTaints), as a provisioning pool does.
    assert (GATE_TAINT, None, "NoSchedule") in taints(node(sim, "gate-a"))
    assert ("nvidia.com/gpu", "present", "NoSchedule") in taints(node(sim, "gate-a"))
    assert taints(node(sim, "gate-b")) == [(NRC_TAINT, "pending", "NoSchedule")]
    simctl("fault", "gate-a", json.dumps({"wrong_id": "first"}))
    inventory = tmp_path / "gate.yml"
    reports = tmp_path / "reports"
    inventory.write_text(yaml.safe_dump({"new_gpu_nodes": {"hosts": {
        "gate-a": None,
        # node-readiness-controller owns this node's taint: the collection only writes the condition.
        "gate-b": {"gpu_demo_gate_taint_key": NRC_TAINT, "gpu_demo_gate_remove_taint": False}},
        "vars": {"gpu_demo_kubeconfig": sim.kubeconfig, "gpu_demo_vllm_health_url": sim.health_url,
                 "gpu_demo_report_dir": str(reports), "gpu_demo_timeout": 30}}}))
    run = sim.playbook("playbooks/gpu_preflight_gate.yml", inventory=str(inventory))
    assert run.returncode != 0, run.stdout[-3000:]
    a, b = node(sim, "gate-a"), node(sim, "gate-b")
    # gate-a failed: its startup taint and the other tool's stay, the node is not cordoned, the Node says why.
    assert taints(a) == [(GATE_TAINT, None, "NoSchedule"), ("nvidia.com/gpu", "present", "NoSchedule")], taints(a)
    assert (conditions(a)[CONDITION]["status"], conditions(a)[CONDITION]["reason"]) == ("False", "HoldCheckFailed")
    assert a["metadata"]["labels"][LABEL] == "failed" and not a["spec"].get("unschedulable")
    # gate-b passed on its tainted node (the demo pods tolerate the taint); its taint is the rule's to remove.
    assert (conditions(b)[CONDITION]["status"], b["metadata"]["labels"][LABEL]) == ("True", "passed")
    assert taints(b) == [(NRC_TAINT, "pending", "NoSchedule")]
    rule = yaml.safe_load(RULE.read_text())
    assert rule["kind"] == "NodeReadinessRule" and rule["spec"]["taint"]["key"] == NRC_TAINT
    assert rule["spec"]["conditions"] == [{"type": CONDITION, "requiredStatus": "True"}]
    assert nrc_reconcile(sim, rule, "gate-b") == "remove" and taints(node(sim, "gate-b")) == []
    # Bootstrap-only: once completed, the rule leaves the node alone.
    assert nrc_reconcile(sim, rule, "gate-b") == "completed"
    # The failed node does not meet the rule: it would keep (here: get) the rule's taint too.
    assert nrc_decision(rule, a) == "add"

    # Healed, gate-a passes: only its startup taint goes.
    simctl("fault", "gate-a", "{}")
    again = sim.playbook("playbooks/gpu_preflight_gate.yml", inventory=str(inventory), extra_args=("--limit", "gate-a"))
    assert again.returncode == 0, again.stdout[-3000:]
    a = node(sim, "gate-a")
    assert taints(a) == [("nvidia.com/gpu", "present", "NoSchedule")], taints(a)
    assert conditions(a)[CONDITION]["status"] == "True" and a["metadata"]["labels"][LABEL] == "passed"
    assert not a["spec"].get("unschedulable")
    assert not [entry for entry in taints(a) + taints(node(sim, "gate-b")) if entry[2] == "NoExecute"]
    assert not sim.kubectl("get", "pods", "-A", "-l", MANAGED, "-o", "name").stdout.split()


# Refuses any write that puts a passed verdict in the report annotation, and nothing else (the kubelet's and the
# controllers' writes leave the annotation as it was): the API server then refuses the run's last write on the Node.
REFUSE_PASSED = "gpuops-it-refuse-passed-verdicts"
# The report annotation of object or oldObject, '' where it has none.
ANNOTATION_OF = ("has({0}.metadata.annotations) && '%s' in {0}.metadata.annotations"
                 " ? {0}.metadata.annotations['%s'] : ''") % (REPORT, REPORT)
REFUSING_POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": REFUSE_PASSED},
    "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                                "resources": ["nodes"]}]},
        "variables": [
            {"name": "now", "expression": ANNOTATION_OF.format("object")},
            {"name": "before", "expression": ANNOTATION_OF.format("oldObject")},
        ],
        "validations": [{"expression": "variables.now == variables.before"
                                       " || !variables.now.contains('\"state\":\"passed\"')",
                         "message": "this cluster refuses passed verdicts (integration test)"}],
    },
}
REFUSING_BINDING = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
    "metadata": {"name": REFUSE_PASSED}, "spec": {"policyName": REFUSE_PASSED, "validationActions": ["Deny"]},
}


def test_a_verdict_the_api_server_refuses_fails_the_run_naming_the_write(sim, tmp_path):
    sim.use_topology("default")
    refusing = {"apiVersion": "v1", "kind": "List", "items": [REFUSING_POLICY, REFUSING_BINDING]}
    sim.kubectl("apply", "-f", "-", input=json.dumps(refusing))
    try:
        # The policy is in force once a passed verdict is refused (a server-side dry run changes nothing).
        passed = json.dumps({"metadata": {"annotations": {REPORT: '{"state":"passed"}'}}})
        wait_until(lambda: sim.kubectl("patch", "node", "prod102", "--type=merge", "--dry-run=server", "-p", passed,
                                       check=False).returncode != 0, timeout=30)
        run = run_demo(sim, tmp_path)
    finally:
        sim.kubectl("delete", "validatingadmissionpolicybinding", REFUSE_PASSED, "--ignore-not-found")
        sim.kubectl("delete", "validatingadmissionpolicy", REFUSE_PASSED, "--ignore-not-found")
    # The walk passed (its report says so), but a verdict that could not be written fails the run.
    assert run.result is not None and run.result["passed"] is True, run.output[-3000:]
    assert run.rc != 0, run.output[-3000:]
    summary = json.loads((tmp_path / f"gpu-demo-fleet-{run.result['run_id']}.json").read_text())
    row, = [row for row in summary["rows"] if row["node"] == "prod102"]
    assert row["status"] == "failed", row
    # Refused at its first write (the label and report), the verdict never reached the condition: still the run's Unknown.
    assert conditions(node(sim))[CONDITION]["status"] == "Unknown" and node(sim)["metadata"]["labels"][LABEL] == "running"
    said = json.dumps(row)
    assert row["phase"] == "report" and "refuses passed verdicts" in said, row
