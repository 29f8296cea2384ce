"""Wait until kube-scheduler sees pods created from now on, after kube-apiserver restarted.

A restarted API server answers /readyz before the other components watch it again: client-go's reflectors back off
while it is away (0.8 s doubling, capped at 30 s, plus up to as much jitter), so kube-scheduler may not see a new pod
for up to a minute after the API server is back (measured here: 1 to 57 s). A real cluster's users do not walk a node
in that window; a test that restarts the API server to configure it otherwise waits here, on that state.

The probe is a pod no node can take (a node selector no node carries): the scheduler's first attempt at it sets its
PodScheduled condition to False (Unschedulable), which proves the scheduler's pod watch is back, and it never binds
to a node, so no kubelet, ledger or test sees it. It is deleted before this returns.
"""
from __future__ import annotations

import time
import uuid

NAMESPACE = "kube-system"
NO_SUCH_NODE = {"gpuops.sim/scheduler-probe": "no-node-carries-this"}


def probe_pod(name: str) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/name": "sim-scheduler-probe"}},
        "spec": {"nodeSelector": NO_SUCH_NODE, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]},
    }


def tried_by_scheduler(pod) -> bool:
    conditions = (pod.status.conditions or []) if pod.status else []
    return any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable" for c in conditions)


def wait_until_scheduler_watches(core, timeout: float = 120) -> float:
    """Create the probe, wait until the scheduler has tried it, delete it; returns the seconds waited."""
    from kubernetes.client.exceptions import ApiException  # pylint: disable=import-outside-toplevel
    name = f"sim-scheduler-probe-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    core.create_namespaced_pod(NAMESPACE, probe_pod(name))
    try:
        while not tried_by_scheduler(core.read_namespaced_pod(name, NAMESPACE)):
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for kube-scheduler to try a new pod "
                                   f"({NAMESPACE}/{name}) after kube-apiserver restarted")
            time.sleep(0.25)
        return time.monotonic() - started
    finally:
        try:   # never bound to a node: nothing but the API server holds it
            core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise
