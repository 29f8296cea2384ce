"""The seed walkthrough, replayed with kubectl alone on the simulated cluster.

What a real GPU node showed on 2026-10-12 must show here too: the hold runs and sees the H20, the
ledger reads 1/1, the queue pod waits with the real scheduler's FailedScheduling message, and gets
the same card once the hold is deleted; afterwards the node is as before and /health stayed 200.
"""
from __future__ import annotations

import json
import urllib.request

import pytest
import simctl  # tests/sim, put on sys.path by conftest
from safety_helpers import wait_until

UUID = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: gpu-operator
spec:
  restartPolicy: Never
  containers:
    - name: smi
      image: docker.m.daocloud.io/vllm/vllm-openai:latest
      imagePullPolicy: IfNotPresent
      command: ["bash", "-lc", "{command}"]
      resources:
        limits:
          nvidia.com/gpu: "1"
"""


def health(sim) -> int:
    with urllib.request.urlopen(sim.health_url, timeout=5) as response:
        return response.status


def pod(sim, name: str) -> dict:
    return json.loads(sim.kubectl("-n", "gpu-operator", "get", "pod", name, "-o", "json").stdout)


def allocated_gpus(sim) -> str:
    describe = sim.kubectl("describe", "node", "prod102").stdout
    section = describe.split("Allocated resources:")[1]
    return next(line.split(None, 1)[1].strip() for line in section.splitlines() if line.strip().startswith("nvidia.com/gpu"))


@pytest.fixture()
def walkthrough_cluster(sim):
    sim.use_topology("default")
    yield sim
    sim.kubectl("-n", "gpu-operator", "delete", "pod", "gpu-demo-hold", "gpu-demo-queue", "--ignore-not-found", "--wait=true")


def test_walkthrough_replays_with_kubectl(walkthrough_cluster):
    sim = walkthrough_cluster
    node = json.loads(sim.kubectl("get", "node", "prod102", "-o", "json").stdout)
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    assert node["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H20"
    assert {a["address"] for a in node["status"]["addresses"]} <= {"127.0.0.1", "prod102"}
    assert health(sim) == 200

    sim.kubectl("apply", "-f", "-", input=POD.format(name="gpu-demo-hold", command="nvidia-smi -L; env | grep NVIDIA; sleep 180"))
    hold = wait_until(lambda: (p := pod(sim, "gpu-demo-hold"))["status"].get("phase") == "Running" and p)
    assert hold["spec"]["nodeName"] == "prod102"
    logs = wait_until(lambda: "NVIDIA_VISIBLE_DEVICES" in (out := sim.kubectl("-n", "gpu-operator", "logs", "gpu-demo-hold").stdout) and out)
    assert f"GPU 0: NVIDIA H20 (UUID: {UUID})" in logs
    assert f"NVIDIA_VISIBLE_DEVICES={UUID}" in logs
    assert allocated_gpus(sim).split() == ["1", "1"]

    sim.kubectl("apply", "-f", "-", input=POD.format(name="gpu-demo-queue", command="nvidia-smi -L"))
    queue_uid = pod(sim, "gpu-demo-queue")["metadata"]["uid"]
    # By UID: events of earlier pods with the same name outlive them.
    events = wait_until(lambda: json.loads(sim.kubectl(
        "-n", "gpu-operator", "get", "events", "-o", "json",
        "--field-selector", f"involvedObject.uid={queue_uid},reason=FailedScheduling").stdout)["items"])
    message = events[0]["message"]
    assert message.startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    assert "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod." in message
    queue = pod(sim, "gpu-demo-queue")
    assert queue["status"]["phase"] == "Pending"
    assert not queue["spec"].get("nodeName") and not queue["status"].get("podIP")
    assert pod(sim, "gpu-demo-hold")["status"]["phase"] == "Running"
    assert health(sim) == 200

    sim.kubectl("-n", "gpu-operator", "delete", "pod", "gpu-demo-hold", "--wait=true")
    queue = wait_until(lambda: (p := pod(sim, "gpu-demo-queue"))["status"].get("phase") == "Succeeded" and p)
    assert queue["spec"]["nodeName"] == "prod102"
    assert f"GPU 0: NVIDIA H20 (UUID: {UUID})" in sim.kubectl("-n", "gpu-operator", "logs", "gpu-demo-queue").stdout
    scheduled = json.loads(sim.kubectl("-n", "gpu-operator", "get", "events", "-o", "json",
                                       "--field-selector", f"involvedObject.uid={queue_uid},reason=Scheduled").stdout)
    assert scheduled["items"][0]["message"] == "Successfully assigned gpu-operator/gpu-demo-queue to prod102"

    sim.kubectl("-n", "gpu-operator", "delete", "pod", "gpu-demo-queue", "--wait=true")
    assert allocated_gpus(sim).split() == ["0", "0"]
    node = json.loads(sim.kubectl("get", "node", "prod102", "-o", "json").stdout)
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    remaining = sim.kubectl("-n", "gpu-operator", "get", "pods", "-o", "name").stdout.split()
    assert not [name for name in remaining if "gpu-demo" in name]
    assert health(sim) == 200


def test_every_listener_is_loopback(sim):
    sockets = simctl.component_listeners(sim.dir)
    assert sockets["kube-apiserver"] and sockets["etcd"] and sockets["kubelet-prod102"]
    addresses = {address for entries in sockets.values() for address, _port in entries}
    assert addresses == {"127.0.0.1"}, sockets
