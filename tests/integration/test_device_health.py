"""The health of the handed-over devices, as the real kubelet (v1.36, ResourceHealthStatus on by default) writes it into
the pods' status: from what our device plugin says in ListAndWatch, and from what our DRA driver's DRAResourceHealth
service says. The product must fail the hand-over naming the Unhealthy device and its pod, and report Healthy ones.

Each test reads the pods' status through the API on its own and compares with what the collection concluded.
"""
from __future__ import annotations

import json
import threading

import pytest
from test_dra import run_demo as run_dra_demo
from test_gpu_demo import NAMESPACE, SEED_UUID, demo_pods, run_demo

pytestmark = pytest.mark.independent


def watch_hold_health(sim, seen: dict, stop: threading.Event) -> threading.Thread:
    """Record whether a hold pod ran and what the kubelet writes into its status (``seen``): a watch, because the demo
    holds the node for a few seconds at most."""
    from kubernetes import client, config, watch  # pylint: disable=import-outside-toplevel

    api = client.CoreV1Api(config.new_client_from_config(config_file=sim.kubeconfig))

    def run():
        stream = watch.Watch()
        for event in stream.stream(api.list_namespaced_pod, NAMESPACE, label_selector="gpuops.scheduling/role=hold",
                                   timeout_seconds=120):
            if stop.is_set():
                break
            pod = event["raw_object"]
            status = pod.get("status") or {}
            seen["running"] = seen.get("running") or status.get("phase") == "Running"
            for container in status.get("containerStatuses") or []:
                for resource in container.get("allocatedResourcesStatus") or []:
                    for entry in resource.get("resources") or []:
                        seen.setdefault("health", []).append((pod["metadata"]["name"], entry["resourceID"], entry["health"]))
        stream.stop()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_gpu_that_turns_unhealthy_while_the_hold_runs_fails_the_hold_naming_it(sim, tmp_path):
    # The plugin reports the GPU Unhealthy as soon as the kubelet has allocated it to the hold pod (an XID as the job
    # starts): the hold pod runs on it, and the kubelet writes its health into the pod's status while the hold runs.
    sim.use_topology("default")
    sim._simctl("fault", "prod102", json.dumps({"unhealthy_once_allocated": [SEED_UUID]}))  # pylint: disable=protected-access
    seen, stop = {}, threading.Event()
    watcher = watch_hold_health(sim, seen, stop)
    try:
        run = run_demo(sim, tmp_path, {"gpu_demo_timeout": 15})
        watcher.join(timeout=5)
        assert seen.get("running"), "the hold pod never ran"
        # The kubelet wrote it into the hold pod's status: the world the product judged.
        assert ("gpu-demo-hold", SEED_UUID, "Unhealthy") in seen.get("health", []), seen
        assert run.rc != 0, run.output[-3000:]
        # The kubelet also took the Unhealthy GPU out of the node's allocatable: the ledger reads it (ledger_full
        # during the queue, ledger_restored after, as the fault is still on).
        assert "hold_devices_healthy" in run.result["failed_checks"], run.result["failed_checks"]
        assert set(run.result["failed_checks"]) <= {"hold_devices_healthy", "ledger_full", "ledger_restored"}, run.result["failed_checks"]
        detail = run.check("hold_devices_healthy")["detail"]
        assert detail == "the kubelet reports Unhealthy: {0} in pod gpu-demo-hold".format(SEED_UUID), detail
        assert run.result["failure"]["task"].startswith("Queue")
        assert run.check("hold_running")["passed"] and run.check("run_pods_gone")["passed"]
        assert demo_pods(sim) == []
        # What outlives the job names the cause first: the condition's message and the Warning Event on the Node lead
        # with the Unhealthy device, not with the ledger it emptied.
        node = json.loads(sim.kubectl("get", "node", "prod102", "-o", "json").stdout)
        condition = next(entry for entry in node["status"]["conditions"] if entry["type"] == "gpuops.scheduling/GPUPreflightPassed")
        first = condition["message"].split(";")[0]
        assert first == ("GPU pre-flight failed at queue (hold_devices_healthy): the kubelet reports Unhealthy: {0} in pod "
                         "gpu-demo-hold".format(SEED_UUID)), condition["message"]
        events = json.loads(sim.kubectl("get", "events.events.k8s.io", "-n", "default", "-o", "json").stdout)["items"]
        notes = [event["note"] for event in events if event.get("reason") == "GPUPreflightFailed"
                 and (event.get("regarding") or {}).get("name") == "prod102" and run.result["run_id"] in event.get("note", "")]
        assert notes and notes[-1].split(";")[0] == first, notes
    finally:
        stop.set()
        sim._simctl("fault", "prod102", "{}")  # pylint: disable=protected-access


def test_a_dra_device_unhealthy_from_the_start_fails_the_hold_naming_it_and_the_drivers_message(sim, tmp_path):
    sim.use_topology("dra")
    sim._simctl("fault", "prod102", json.dumps({"dra_health": {"gpu-0": {"xid": 79}}}))  # pylint: disable=protected-access
    try:
        run = run_dra_demo(sim, tmp_path, gpu_demo_dra_request="claim")
        assert run.rc != 0, run.output[-3000:]
        assert run.result["failed_checks"] == ["hold_devices_healthy"], run.result["failed_checks"]
        detail = run.check("hold_devices_healthy")["detail"]
        assert detail.startswith("the kubelet reports Unhealthy: gpu-0 in pod gpu-demo-hold (claim:"), detail
        assert detail.endswith("): critical XID 79 reported by NVML"), detail
        # What the product read is what the API says of the claim's device.
        health = run.result["hold"]["device_health"][0]["devices"]
        assert [(device["device"], device["health"]) for device in health] == [("gpu-0", "Unhealthy")]
        assert health[0]["resource_id"].startswith("k8s.gpu.nvidia.com/claim=")
        assert health[0]["resource_id"].endswith("-gpu-0")
        assert demo_pods(sim) == []
    finally:
        sim._simctl("fault", "prod102", "{}")  # pylint: disable=protected-access


@pytest.mark.parametrize("topology", ["default", "dra"])
def test_a_healthy_run_reports_every_device_healthy(sim, tmp_path, topology):
    sim.use_topology(topology)
    if topology == "dra":
        run = run_dra_demo(sim, tmp_path, gpu_demo_dra_request="claim")
        device, resource = "gpu-0", "claim:"
    else:
        run = run_demo(sim, tmp_path)
        device, resource = SEED_UUID, "nvidia.com/gpu"
    assert run.rc == 0, run.output[-3000:]
    assert run.result["passed"] is True, run.result["failed_checks"]
    detail = run.check("hold_devices_healthy")["detail"]
    assert detail.startswith("Healthy: {0} in pod gpu-demo-hold".format(device)), detail
    healthy = [(True, [(device, "Healthy")])]
    # The queue pod is read when it has Succeeded: a device plugin's devices are still reported then, but the kubelet
    # has un-prepared a DRA claim by then and reports nothing of it.
    queue = healthy if topology == "default" else [(False, [])]
    for pods, expected in ((run.result["hold"]["device_health"], healthy), ([run.result["queue"]["evidence"]["device_health"]], queue)):
        assert [(pod["reported"], [(item["device"], item["health"]) for item in pod["devices"]]) for pod in pods] == expected, pods
        assert all(item["resource"].startswith(resource) for pod in pods for item in pod["devices"])
    # The Markdown report says it in a line.
    assert "as the kubelet reports it: {0} **Healthy** (gpu-demo-hold).".format(device) in run.markdown.read_text()


def test_gpus_that_dra_serves_for_a_plain_request_have_no_health_and_that_is_said_not_failed(sim, tmp_path):
    # The v1.36 kubelet reports the health of the claims a container names, not of the claim the scheduler makes for
    # a plain nvidia.com/gpu request: even a device the driver reports Unhealthy is not in the pod's status.
    sim.use_topology("dra")
    sim._simctl("fault", "prod102", json.dumps({"dra_health": {"gpu-0": {"xid": 79}}}))  # pylint: disable=protected-access
    try:
        run = run_dra_demo(sim, tmp_path, gpu_demo_dra_request="extended_resource")
        assert run.rc == 0, run.output[-3000:]
        assert run.result["passed"] is True, run.result["failed_checks"]
        # Nothing was read to judge: not judged, never a pass (the report, the JUnit XML and the metrics say so).
        check = run.check("hold_devices_healthy")
        assert check["passed"] is None and check["detail"].startswith(
            "not judged: the kubelet writes no device health into the status of gpu-demo-hold ("), check
        assert [pod["reported"] for pod in run.result["hold"]["device_health"]] == [False]
    finally:
        sim._simctl("fault", "prod102", "{}")  # pylint: disable=protected-access
