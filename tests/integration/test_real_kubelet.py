"""What only a real kubelet can show: the node's GPUs come from our device plugin's registration, the device
manager's allocation reaches the container only through the plugin's answer, and a misbehaving plugin is seen
by the product for what it is."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from safety_helpers import wait_until
from test_gpu_demo import MANAGED, run_demo

from conftest import CHECKOUT, SIM_SRC

# Each test sets up the cluster it needs (its own topology first): any worker may run it (conftest.py).
pytestmark = pytest.mark.independent


def node(sim, name: str = "prod102") -> dict:
    return json.loads(sim.kubectl("get", "node", name, "-o", "json").stdout)


def allocatable(sim, resource: str = "nvidia.com/gpu", name: str = "prod102") -> str | None:
    return (node(sim, name)["status"].get("allocatable") or {}).get(resource)


def simctl(*args: str) -> None:
    subprocess.run([sys.executable, str(SIM_SRC / "simctl.py"), *args], check=True, cwd=CHECKOUT, stdout=subprocess.DEVNULL)


@pytest.fixture()
def healed(sim):
    """Whatever a test breaks in the node's plugin is healed afterwards."""
    yield sim
    simctl("fault", "prod102", "{}")
    simctl("start", "plugin-prod102-nvidia.com-gpu")


def test_prod102_is_a_real_kubelet_and_its_gpu_comes_from_the_plugin(healed):
    sim = healed
    sim.use_topology("default")
    info = node(sim)["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.36.3"
    assert info["containerRuntimeVersion"].startswith("gpuops-sim-runtime://")
    assert allocatable(sim) == "1"
    simctl("stop", "plugin-prod102-nvidia.com-gpu")
    # The device manager marks a vanished plugin's devices unhealthy: allocatable 0, capacity kept a while.
    wait_until(lambda: allocatable(sim) == "0", 30, "allocatable nvidia.com/gpu to drop to 0 without the plugin")
    simctl("start", "plugin-prod102-nvidia.com-gpu")
    wait_until(lambda: allocatable(sim) == "1", 30, "allocatable nvidia.com/gpu back to 1 once the plugin registers")


def test_an_unhealthy_device_leaves_the_ledger_and_the_preflight_sees_it(healed):
    sim = healed
    sim.use_topology("four-gpus")
    gpus = json.loads((sim.dir.run / "nodes" / "prod102" / "gpus.json").read_text())["gpus"]
    simctl("fault", "prod102", json.dumps({"unhealthy": [gpus[1]["uuid"]]}))
    wait_until(lambda: allocatable(sim) == "3", 30, "allocatable to drop to 3")
    ledger = sim.ansible_module("gpuops.scheduling.gpu_ledger_facts", {"node": "prod102"})
    entry = ledger["ledger"]["nodes"]["prod102"]["resources"]["nvidia.com/gpu"]
    assert (entry["capacity"], entry["allocatable"], entry["free"]) == (4, 3, 3), entry
    simctl("fault", "prod102", "{}")
    wait_until(lambda: allocatable(sim) == "4", 30, "allocatable back to 4")


def test_a_plugin_that_names_the_wrong_device_fails_the_evidence_check(healed, tmp_path):
    """Every Allocate answer names the node's first GPU, whatever the kubelet allocated: four hold pods all see
    one card. Only the plugin's answer reaches the container, so the demo must see it and say which check."""
    sim = healed
    sim.use_topology("four-gpus")
    simctl("fault", "prod102", json.dumps({"wrong_id": "first"}))
    run = run_demo(sim, tmp_path)
    assert run.rc != 0, run.output[-3000:]
    failed = {check["id"]: check for check in run.result["checks"] if not check["passed"]}
    assert "hold_one_gpu_per_unit" in failed, run.result["checks"]
    assert "1 distinct" in failed["hold_one_gpu_per_unit"]["detail"]
    # Nothing left behind: cleanup ran although the check failed.
    assert not sim.kubectl("get", "pods", "-A", "-l", MANAGED, "-o", "name").stdout.split()


@pytest.mark.exclusive   # it times the kubelet's signal delivery: other tests' load would blur the two apart
def test_stop_reaches_the_main_process_only_as_in_a_container(sim):
    """PID 1 without a handler ignores SIGTERM: the kubelet waits out the grace period, then kills. A trap exits at
    once. (A long grace period keeps the two apart on a loaded machine: deletion also pays the kubelet's latency.)"""
    grace = 10
    sim.use_topology("default")
    for name, command in (("no-trap", "sleep 300"), ("trap", "trap 'exit 0' TERM; while true; do sleep 0.1; done")):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
               "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace,
                        "containers": [{"name": "main", "image": "sim/shell", "command": ["sh", "-c", command]}]}}
        sim.kubectl("apply", "-f", "-", input=json.dumps(pod))
    sim.kubectl("-n", "default", "wait", "--for=condition=Ready", "pod/no-trap", "pod/trap", "--timeout=60s")
    timings = {}
    for name in ("trap", "no-trap"):
        started = time.monotonic()
        sim.kubectl("-n", "default", "delete", "pod", name, "--wait=true")
        timings[name] = time.monotonic() - started
    assert timings["trap"] < grace / 2, timings
    assert timings["no-trap"] >= grace, timings


def test_gpu_process_facts_reads_the_live_pod_resources_socket_of_the_kubelet(sim):
    """The hold's allocation as the kubelet itself reports it (PodResources List over grpcio), next to the
    devices it can allocate: the same UUID nvidia-smi printed inside the pod."""
    sim.use_topology("default")
    hold = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "podres-hold", "namespace": "default"},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [{
                "name": "hold", "image": "sim/cuda", "command": ["bash", "-c", "trap 'exit 0' TERM; nvidia-smi -L; sleep 60 & wait"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    sim.kubectl("apply", "-f", "-", input=json.dumps(hold))
    try:
        sim.kubectl("-n", "default", "wait", "--for=condition=Ready", "pod/podres-hold", "--timeout=60s")
        node_dir = sim.dir.run / "nodes" / "prod102"
        # No checkpoint to fall back on: the answer can only come from the kubelet's socket.
        no_checkpoint = node_dir / "no-such-checkpoint"
        result = sim.ansible_module("gpuops.scheduling.gpu_process_facts", {
            "source": "nvidia-smi", "nvidia_smi_path": str(node_dir / "bin" / "nvidia-smi"), "proc_root": str(node_dir / "proc"),
            "host_root": str(node_dir), "pod_resources_socket": str(node_dir / "kubelet" / "pod-resources" / "kubelet.sock"),
            "checkpoint_path": str(no_checkpoint)})
        facts = result["ansible_facts"]["gpu_process_facts"]["allocations"]
        assert facts["source"] == "pod-resources-grpc", facts["errors"]
        held = [entry for entry in facts["allocations"] if entry.get("pod_name") == "podres-hold"]
        assert held and held[0]["namespace"] == "default" and held[0]["resource_name"] == "nvidia.com/gpu", facts
        seen = sim.kubectl("-n", "default", "logs", "podres-hold").stdout
        assert held[0]["device_ids"][0] in seen
        assert facts["allocatable"]["nvidia.com/gpu"] == ["GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"]
    finally:
        sim.kubectl("-n", "default", "delete", "pod", "podres-hold", "--wait=true")
