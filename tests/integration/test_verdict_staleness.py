"""A verdict that knows when it has gone stale, on real kubelets (fleet topology): each cause made for real - the node
rebooted (a new boot id, the kubelet restarted), its device plugin pod replaced, the driver's label changed, a GPU
gone from allocatable, the verdict older than the maximum age - and the fleet's summary read from the cluster saying
stale with that reason; the revalidation playbook walks exactly the stale nodes, leaves the fresh one alone and taints
nothing; the verdict's Events (a pre-flight that refused a node is GPUPreflightRefused).
"""
from __future__ import annotations

import json
import uuid

import pytest
import yaml
from safety_helpers import wait_until
from test_real_kubelet import simctl

pytestmark = pytest.mark.independent

NODES = ("gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4")
REPORT = "gpuops.scheduling/gpu-preflight-report"
DRIVER_550 = {"nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "54", "nvidia.com/cuda.driver.rev": "15"}
DRIVER_570 = {"nvidia.com/cuda.driver.major": "570", "nvidia.com/cuda.driver.minor": "86", "nvidia.com/cuda.driver.rev": "10"}
PLUGIN = "nvidia-device-plugin-daemonset-q4m7c"


def node(sim, name: str) -> dict:
    return json.loads(sim.kubectl("get", "node", name, "-o", "json").stdout)


def report(sim, name: str) -> dict:
    return json.loads(node(sim, name)["metadata"]["annotations"][REPORT])


def plugin_pod(name: str) -> dict:
    """The GPU Operator's device plugin pod on a node, as its DaemonSet creates it (bound to the node)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": PLUGIN, "namespace": "gpu-operator", "labels": {"app": "nvidia-device-plugin-daemonset"}},
            "spec": {"nodeName": name, "containers": [{"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}],
                     "tolerations": [{"operator": "Exists"}]}}


def inventory(sim, directory, run_id) -> str:
    path = directory / "fleet.yml"
    path.write_text(yaml.safe_dump({"gpu_nodes": {"hosts": {name: None for name in NODES}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "gpu_demo_kubeconfig": sim.kubeconfig, "gpu_demo_vllm_health_url": sim.health_url,
        "gpu_demo_report_dir": str(directory / "reports"), "gpu_demo_run_id": run_id, "gpu_demo_timeout": 30}}}))
    return str(path)


def summary(sim, directory, inventory_path, **extra) -> dict:
    """The fleet's summary from the cluster: each node's row status and reason."""
    run_id = "read-" + uuid.uuid4().hex[:6]
    process = sim.playbook("playbooks/gpu_demo_fleet_summary.yml", inventory=inventory_path,
                           extra_vars={"gpu_demo_run_id": run_id, "gpu_demo_fleet_source": "cluster",
                                       "gpu_demo_report_dir": str(directory / "reports"), **extra})
    assert process.returncode in (0, 2), process.stdout[-3000:]
    found = json.loads((directory / "reports" / f"gpu-demo-fleet-{run_id}.json").read_text())
    return dict((row["host"], (row["status"], row.get("reason"))) for row in found["rows"])


def test_each_cause_makes_the_verdict_stale_and_only_stale_nodes_are_walked_again(sim, tmp_path):
    sim.use_topology("fleet")
    # What the nodes run before the verdicts: a device plugin pod on gpu-a3, GPU Feature Discovery's driver labels on gpu-a4.
    sim.kubectl("create", "namespace", "gpu-operator", check=False)
    sim.kubectl("apply", "-f", "-", input=json.dumps(plugin_pod("gpu-a3")))
    sim.kubectl("label", "node", "gpu-a4", *[f"{key}={value}" for key, value in DRIVER_550.items()])
    first = "stale-" + uuid.uuid4().hex[:6]
    hosts = inventory(sim, tmp_path, first)
    run = sim.playbook("playbooks/gpu_demo.yml", inventory=hosts, extra_vars={"gpu_demo_parallel": True})
    assert "PLAY RECAP" in run.stdout, run.stdout[-3000:]
    assert {name: report(sim, name)["state"] for name in NODES} == {
        "gpu-a1": "failed", "gpu-a2": "passed", "gpu-a3": "failed", "gpu-a4": "failed"}
    uid = json.loads(sim.kubectl("get", "pod", "-n", "gpu-operator", PLUGIN, "-o", "json").stdout)["metadata"]["uid"]
    assert report(sim, "gpu-a3")["basis"]["plugin_pod"] == uid
    assert report(sim, "gpu-a4")["basis"]["driver"] == "550.54.15"
    assert report(sim, "gpu-a1")["basis"]["boot"] == node(sim, "gpu-a1")["status"]["nodeInfo"]["bootID"]
    # A node the pre-flight refused (busy: another pod uses its GPU) gets a Warning that says so.
    events = sim.kubectl("events", "--for", "node/gpu-a1", "--types=Warning").stdout
    assert "GPUPreflightRefused" in events and "node_not_busy" in events and first in events, events

    read = summary(sim, tmp_path, hosts)
    assert read["gpu-a2"][0] == "passed" and all(read[name][0] == "failed" for name in ("gpu-a1", "gpu-a3", "gpu-a4")), read

    # The causes, made as they happen: a reboot, the DaemonSet's pod replaced, the driver upgraded (GFD relabels).
    boot = node(sim, "gpu-a1")["status"]["nodeInfo"]["bootID"]
    simctl("reboot", "gpu-a1")
    wait_until(lambda: node(sim, "gpu-a1")["status"]["nodeInfo"]["bootID"] != boot, 60, "the kubelet to report the new boot")
    sim.kubectl("delete", "pod", "-n", "gpu-operator", PLUGIN, "--wait=true")
    sim.kubectl("apply", "-f", "-", input=json.dumps(plugin_pod("gpu-a3")))
    sim.kubectl("label", "node", "gpu-a4", "--overwrite", *[f"{key}={value}" for key, value in DRIVER_570.items()])

    read = summary(sim, tmp_path, hosts)
    assert read["gpu-a2"][0] == "passed", read
    assert read["gpu-a1"][0] == "not_run" and read["gpu-a1"][1].startswith("stale: failed at "), read
    assert read["gpu-a1"][1].endswith(f": the node rebooted (boot {boot[:8]} -> "
                                      f"{node(sim, 'gpu-a1')['status']['nodeInfo']['bootID'][:8]})"), read
    assert read["gpu-a3"][1].endswith(": the device plugin pod was replaced"), read
    assert read["gpu-a4"][1].endswith(": the driver changed 550.54.15 -> 570.86.10"), read

    # Walk again: the three stale nodes, not the fresh one; no taint on any node.
    second = "revalidate-" + uuid.uuid4().hex[:6]
    hosts = inventory(sim, tmp_path, second)
    fresh = report(sim, "gpu-a2")
    taints = {name: node(sim, name)["spec"].get("taints") for name in NODES}
    again = sim.playbook("playbooks/gpu_demo_revalidate.yml", inventory=hosts)
    assert "PLAY RECAP" in again.stdout, again.stdout[-3000:]
    walked = json.loads((tmp_path / "reports" / f"gpu-demo-fleet-{second}.json").read_text())
    assert sorted(row["host"] for row in walked["rows"]) == ["gpu-a1", "gpu-a3", "gpu-a4"], walked["rows"]
    assert {name: report(sim, name)["run_id"] for name in NODES} == {
        "gpu-a1": second, "gpu-a2": first, "gpu-a3": second, "gpu-a4": second}
    assert report(sim, "gpu-a2") == fresh
    assert {name: node(sim, name)["spec"].get("taints") for name in NODES} == taints
    # Now every verdict holds: a revalidation walks nothing and says so.
    idle = sim.playbook("playbooks/gpu_demo_revalidate.yml", inventory=hosts)
    assert idle.returncode == 0 and "walk: []" in idle.stdout and "GPU scheduling pre-flight" not in idle.stdout.split(
        "skipping: no hosts matched")[-1], idle.stdout[-3000:]

    # A GPU gone from allocatable (the device plugin reports it unhealthy): the passed verdict no longer holds.
    gpus = json.loads((sim.dir.run / "nodes" / "gpu-a2" / "gpus.json").read_text())["gpus"]
    try:
        simctl("fault", "gpu-a2", json.dumps({"unhealthy": [gpus[1]["uuid"]]}))
        wait_until(lambda: node(sim, "gpu-a2")["status"]["allocatable"].get("nvidia.com/gpu") == "1", 30, "allocatable 1")
        read = summary(sim, tmp_path, hosts)
        assert read["gpu-a2"][0] == "not_run" and read["gpu-a2"][1].endswith(": allocatable changed 2 -> 1"), read
    finally:
        simctl("fault", "gpu-a2", "{}")
    wait_until(lambda: node(sim, "gpu-a2")["status"]["allocatable"].get("nvidia.com/gpu") == "2", 30, "allocatable 2")

    # Older than the maximum age: stale by age alone.
    read = summary(sim, tmp_path, hosts, gpu_demo_verdict_max_age=1)
    assert read["gpu-a2"][0] == "not_run" and read["gpu-a2"][1].endswith(": older than 1 s (gpu_demo_verdict_max_age)"), read
    assert summary(sim, tmp_path, hosts)["gpu-a2"][0] == "passed"
