"""No preemption, with the real kube-scheduler and PriorityClasses.

A production pod of LOWER priority (a PriorityClass with a negative value) holds a GPU. A demo pod has
priority 0, so with the scheduler's default policy (PreemptLowerPriority) it WOULD evict that pod to get
a unit: only the no-preemption PriorityClass (preemptionPolicy Never) stops it. The control test shows
the sim's scheduler really preempts when allowed, so the other tests cannot pass by accident.
"""
from __future__ import annotations

import json
import time

import pytest

from safety_helpers import (NAMESPACE, NODE, core_api, demo_pods, ledger, new_run_id, read_report, run_env, run_playbook,
                            tail, wait_until, write_inventory)

# Each test sets up the cluster it needs (its own topology first): any worker may run it (conftest.py).
pytestmark = pytest.mark.independent

LOW_CLASS = "gpuops-it-low"
PREEMPTING_CLASS = "gpuops-it-preempting"
NO_PREEMPT_CLASS = "gpuops-preflight-no-preempt"
PRODUCTION_NAMESPACE = "gpuops-it-inference"
NOT_ELIGIBLE = "preemption: not eligible due to preemptionPolicy=Never"


def gpu_pod(name: str, priority_class: str, namespace: str = PRODUCTION_NAMESPACE) -> dict:
    """A pod pinned to the node through the scheduler (node selector), asking for one GPU."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": {"app": "gpuops-it"}},
            "spec": {"priorityClassName": priority_class, "nodeSelector": {"kubernetes.io/hostname": NODE},
                     "terminationGracePeriodSeconds": 1,
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": "registry.local/sim/llm:latest", "command": ["sleep", "3600"],
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


@pytest.fixture()
def classes(sim):
    """The low-priority production class, the no-preemption class, and a namespace for production pods."""
    admin = core_api(sim.kubeconfig)
    sim.kubectl("apply", "-f", "-", input="""
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: %s}
value: -10
description: gpuops integration test - a production workload of low priority
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: %s}
value: 0
preemptionPolicy: PreemptLowerPriority
description: gpuops integration test - control, a class that may preempt
""" % (LOW_CLASS, PREEMPTING_CLASS))
    if sim.kubectl("get", "priorityclass", NO_PREEMPT_CLASS, check=False).returncode != 0:
        applied = sim.playbook("playbooks/preflight_rbac.yml")
        assert applied.returncode == 0, tail(applied)
    sim.kubectl("create", "namespace", PRODUCTION_NAMESPACE, check=False)
    wait_until(lambda: admin.list_namespaced_service_account(PRODUCTION_NAMESPACE, field_selector="metadata.name=default").items,
               30, "the namespace's default ServiceAccount")
    yield admin
    sim.kubectl("delete", "pods", "--all", "-n", PRODUCTION_NAMESPACE, "--wait=true", "--timeout=60s", check=False)
    sim.kubectl("delete", "pods", "--all", "-n", "default", "-l", "app=gpuops-it", "--wait=true", "--timeout=60s", check=False)
    sim.kubectl("delete", "priorityclass", LOW_CLASS, PREEMPTING_CLASS, "--ignore-not-found")


def start_production_pod(sim, admin, name: str = "llm-low-0"):
    sim.kubectl("apply", "-f", "-", input=json.dumps(gpu_pod(name, LOW_CLASS)))
    return wait_until(lambda: _running(admin, name), 30, f"{name} to run")


def _running(admin, name: str, namespace: str = PRODUCTION_NAMESPACE):
    pod = admin.read_namespaced_pod(name, namespace)
    return pod if pod.status.phase == "Running" and pod.spec.node_name == NODE else None


def events_of(admin, namespace: str, name: str, uid: str | None = None) -> list:
    """(reason, message) of the events of a pod (of that very pod when uid is given: names come back)."""
    selector = f"involvedObject.name={name}" + (f",involvedObject.uid={uid}" if uid else "")
    return [(event.reason, event.message) for event in admin.list_namespaced_event(namespace, field_selector=selector).items]


def assert_untouched(admin, production, name: str = "llm-low-0") -> None:
    now = admin.read_namespaced_pod(name, PRODUCTION_NAMESPACE)
    assert now.metadata.uid == production.metadata.uid, "the production pod was replaced"
    assert now.status.phase == "Running" and not now.metadata.deletion_timestamp, (now.status.phase, now.metadata.deletion_timestamp)
    assert not [c for c in now.status.conditions or [] if c.type == "DisruptionTarget"], now.status.conditions
    assert not [reason for reason, _message in events_of(admin, PRODUCTION_NAMESPACE, name, now.metadata.uid)
                if reason in ("Preempted", "Killing")]


def test_playbook_on_a_busy_four_gpu_node_holds_only_the_free_units_and_preempts_nothing(sim, classes, tmp_path):
    admin = classes
    sim.use_topology("four-gpus")
    production = start_production_pod(sim, admin)
    before = ledger(admin)
    assert before["requested"] == 1 and before["allocatable"] == 4
    run_id = new_run_id("nopreempt")
    inventory = write_inventory(tmp_path, sim, gpu_demo_kubeconfig=sim.kubeconfig)
    run = run_playbook(inventory, run_env(sim), {"gpu_demo_run_id": run_id, "gpu_demo_allow_busy_node": True})
    assert run.returncode == 0, tail(run)
    report = read_report(tmp_path / "reports", run_id)
    assert report["passed"] is True, report["failed_checks"]
    assert report["plan"]["units"] == 3
    assert [pod["name"] for pod in report["hold"]["pods"]] == ["gpu-demo-hold-0", "gpu-demo-hold-1", "gpu-demo-hold-2"]
    assert report["during"]["requested"] == 4 and report["during"]["free"] == 0
    holders = {f"{holder['namespace']}/{holder['name']}" for holder in report["during"]["holders"]}
    assert f"{PRODUCTION_NAMESPACE}/llm-low-0" in holders
    # The queue pod (priority 0 > -10) stayed Pending: the scheduler did not even consider preemption.
    scheduling = report["queue"]["failed_scheduling"]
    assert "Insufficient nvidia.com/gpu" in scheduling["message"] and NOT_ELIGIBLE in scheduling["message"], scheduling
    queue_events = events_of(admin, NAMESPACE, "gpu-demo-queue")
    assert any(reason == "FailedScheduling" and NOT_ELIGIBLE in message for reason, message in queue_events), queue_events
    assert_untouched(admin, production)
    # The node ends as it began: the production pod alone holds its unit.
    assert ledger(admin) == before and demo_pods(admin) == []
    print(f"hold took {report['plan']['units']} of 4 units; queue: {scheduling['message']}")


def test_no_preempt_class_never_evicts_a_lower_priority_pod_holding_the_only_gpu(sim, classes):
    admin = classes
    sim.use_topology("default")
    production = start_production_pod(sim, admin)
    sim.kubectl("apply", "-f", "-", input=json.dumps(gpu_pod("gpuops-it-demo", NO_PREEMPT_CLASS, "default")))
    uid = admin.read_namespaced_pod("gpuops-it-demo", "default").metadata.uid
    message = wait_until(lambda: next((text for reason, text in events_of(admin, "default", "gpuops-it-demo", uid)
                                       if reason == "FailedScheduling"), None), 30, "the FailedScheduling event")
    assert "1 Insufficient nvidia.com/gpu" in message and NOT_ELIGIBLE in message, message
    demo = admin.read_namespaced_pod("gpuops-it-demo", "default")
    assert demo.spec.preemption_policy == "Never" and demo.spec.priority == 0
    # The scheduler retries unschedulable pods (backoff up to 10 s, and at every cluster event): give it
    # time to change its mind, then check again.
    time.sleep(6)
    demo = admin.read_namespaced_pod("gpuops-it-demo", "default")
    assert demo.status.phase == "Pending" and not demo.spec.node_name and not demo.status.nominated_node_name
    assert_untouched(admin, production)


def test_control_a_preempting_class_does_evict_it(sim, classes):
    """Without preemptionPolicy Never the same pod evicts the production pod: the sim's scheduler preempts."""
    admin = classes
    sim.use_topology("default")
    production = start_production_pod(sim, admin)
    sim.kubectl("apply", "-f", "-", input=json.dumps(gpu_pod("gpuops-it-preemptor", PREEMPTING_CLASS, "default")))
    wait_until(lambda: _running(admin, "gpuops-it-preemptor", "default"), 60, "the preempting pod to run")
    reasons = [reason for reason, _message in events_of(admin, PRODUCTION_NAMESPACE, "llm-low-0", production.metadata.uid)]
    assert "Preempted" in reasons, reasons
    gone = admin.list_namespaced_pod(PRODUCTION_NAMESPACE, field_selector="metadata.name=llm-low-0").items
    assert not gone or gone[0].metadata.uid != production.metadata.uid or gone[0].metadata.deletion_timestamp
