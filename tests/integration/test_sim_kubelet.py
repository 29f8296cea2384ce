"""The simulated node behaves as a real kubelet + NVIDIA device plugin would, topology by topology."""
from __future__ import annotations

import json
import re
import time

import pytest

# Each test sets up the cluster it needs (its own topology first): any worker may run it (conftest.py).
pytestmark = pytest.mark.independent


def gpu_pod(name: str, command: str, units: int = 1, resource: str = "nvidia.com/gpu", image: str = "sim/cuda:12",
            deadline: int | None = None) -> str:
    # A short grace period: PID 1 without a trap ignores SIGTERM, and the kubelet waits it out before SIGKILL.
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 2, "containers": [{
        "name": "main", "image": image, "command": ["bash", "-c", command],
        "resources": {"limits": {resource: str(units)}} if units else {}}]}
    if deadline:
        spec["activeDeadlineSeconds"] = deadline
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})


def get(sim, name: str) -> dict:
    return json.loads(sim.kubectl("-n", "default", "get", "pod", name, "-o", "json").stdout)


def wait_phase(sim, name: str, phases: tuple, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = get(sim, name)
        if pod["status"].get("phase") in phases:
            return pod
        time.sleep(0.2)
    raise AssertionError(f"{name} did not reach {phases}: {pod['status']}")


def logs(sim, name: str) -> str:
    return sim.kubectl("-n", "default", "logs", name).stdout


@pytest.fixture()
def fresh(sim):
    yield sim
    sim.kubectl("-n", "default", "delete", "pods", "--all", "--wait=true")


def test_four_gpus_get_four_distinct_cards_and_the_fifth_pod_waits(fresh):
    fresh.use_topology("four-gpus")
    for index in range(4):
        fresh.kubectl("apply", "-f", "-", input=gpu_pod(f"hold-{index}", "nvidia-smi -L; sleep 60"))
    seen = []
    for index in range(4):
        wait_phase(fresh, f"hold-{index}", ("Running",))
        lines = [line for line in logs(fresh, f"hold-{index}").splitlines() if line.startswith("GPU ")]
        assert len(lines) == 1
        seen.append(lines[0].split("UUID: ")[1].rstrip(")"))
    assert len(set(seen)) == 4
    fresh.kubectl("apply", "-f", "-", input=gpu_pod("fifth", "nvidia-smi -L"))
    time.sleep(1.5)
    assert get(fresh, "fifth")["status"]["phase"] == "Pending"
    fresh.kubectl("-n", "default", "delete", "pod", "hold-2", "--wait=true")
    wait_phase(fresh, "fifth", ("Succeeded",))
    assert seen[2] in logs(fresh, "fifth")


def test_time_slicing_rejects_a_request_above_one(fresh):
    fresh.use_topology("time-slicing")
    node = json.loads(fresh.kubectl("get", "node", "prod102", "-o", "json").stdout)
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    fresh.kubectl("apply", "-f", "-", input=gpu_pod("two", "nvidia-smi -L", units=2))
    pod = wait_phase(fresh, "two", ("Failed",))
    assert pod["status"]["reason"] == "UnexpectedAdmissionError"
    assert "maximum request size for shared resources is 1" in pod["status"]["message"]


def test_cdi_devices_are_resolved_from_the_plugins_spec_which_voids_the_variable(fresh):
    """cdi-cri: the plugin sets no variable; the runtime resolves the CDI name against the spec the plugin wrote,
    which injects the card's device node and sets NVIDIA_VISIBLE_DEVICES=void, as NVIDIA's spec does."""
    fresh.use_topology("cdi")
    fresh.kubectl("apply", "-f", "-", input=gpu_pod("cdi", "nvidia-smi -L; echo visible=${NVIDIA_VISIBLE_DEVICES-unset}"))
    wait_phase(fresh, "cdi", ("Succeeded",))
    output = logs(fresh, "cdi")
    assert "visible=void" in output
    assert len([line for line in output.splitlines() if line.startswith("GPU 0: NVIDIA H20 (UUID: GPU-")]) == 1


def test_mixed_mig_advertises_instances(fresh):
    fresh.use_topology("mig-mixed")
    node = json.loads(fresh.kubectl("get", "node", "prod102", "-o", "json").stdout)
    assert node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "7"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "0"
    fresh.kubectl("apply", "-f", "-", input=gpu_pod("mig", "nvidia-smi -L", resource="nvidia.com/mig-1g.10gb"))
    wait_phase(fresh, "mig", ("Succeeded",))
    # The kubelet's device manager picks the instance (here through our plugin's preferred allocation).
    assert re.search(r"^  MIG 1g\.10gb     Device  \d: \(UUID: MIG-", logs(fresh, "mig"), re.MULTILINE)


def test_deadline_exit_codes_and_image_pulls_are_reported_as_a_kubelet_does(fresh):
    fresh.use_topology("default")
    fresh.kubectl("apply", "-f", "-", input=gpu_pod("deadline", "sleep 60", deadline=2))
    fresh.kubectl("apply", "-f", "-", input=gpu_pod("exit3", "echo bye; exit 3", units=0))
    fresh.kubectl("apply", "-f", "-", input=gpu_pod("nopull", "true", units=0, image="sim/missing:does-not-exist"))
    pod = wait_phase(fresh, "deadline", ("Failed",), timeout=15)
    assert pod["status"]["reason"] == "DeadlineExceeded"
    pod = wait_phase(fresh, "exit3", ("Failed",))
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    time.sleep(1)
    pod = get(fresh, "nopull")
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] in ("ErrImagePull", "ImagePullBackOff")
    # Every GPU went back: the deadline pod's card is free for the next one.
    fresh.kubectl("apply", "-f", "-", input=gpu_pod("after", "nvidia-smi -L"))
    wait_phase(fresh, "after", ("Succeeded",))


def test_a_pod_without_a_gpu_request_sees_every_card_on_a_ledger_bypass_node(fresh):
    fresh.use_topology("default")
    fresh.kubectl("apply", "-f", "-", input=gpu_pod("bypass", "nvidia-smi -L; echo visible=$NVIDIA_VISIBLE_DEVICES", units=0))
    wait_phase(fresh, "bypass", ("Succeeded",))
    output = logs(fresh, "bypass")
    assert "GPU 0: NVIDIA H20 (UUID: GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76)" in output
    assert "visible=all" in output
