# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_ledger_facts and vllm_health through Ansible (ad hoc and a playbook) against the simulated cluster.

The ledger must read what `kubectl describe node` reads on the same cluster, in the seed's story:
prod102 idle (1 allocatable, 1 free), then held by gpu-demo-hold (1 requested, 0 free, the hold listed),
with gpu-demo-queue waiting. Everything talks to 127.0.0.1 only.
"""
from __future__ import annotations

import json
import socket

import pytest

from safety_helpers import wait_until

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
LEDGER = "gpuops.scheduling.gpu_ledger_facts"
HEALTH = "gpuops.scheduling.vllm_health"


def kubectl_allocated(sim, node: str, resource: str = "nvidia.com/gpu") -> list[int]:
    """Requests and limits of `resource` in kubectl describe node's Allocated resources table."""
    section = sim.kubectl("describe", "node", node).stdout.split("Allocated resources:")[1]
    row = next(line.split() for line in section.splitlines() if line.split()[:1] == [resource])
    return [int(row[1]), int(row[2])]


def pod_phase(sim, name: str) -> str:
    return json.loads(sim.kubectl("-n", "gpu-operator", "get", "pod", name, "-o", "json").stdout)["status"].get("phase")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def kubeconfig_variant(sim, tmp_path, server: str | None = None, token: str | None = None, drop_ca: bool = False) -> str:
    """A copy of the sim's kubeconfig pointing elsewhere, with another user's credentials, or without the cluster CA."""
    config = json.loads(sim.kubectl("config", "view", "--raw", "-o", "json").stdout)
    cluster = config["clusters"][0]["cluster"]
    if server:
        cluster["server"] = server
    if drop_ca:
        cluster.pop("certificate-authority-data", None)
        cluster.pop("certificate-authority", None)
    if token:
        config["users"][0]["user"] = {"token": token}
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.fixture(scope="module")
def walkthrough(sim):
    """The seed's cluster, set up once: tests that change it put it back."""
    sim.use_topology("default")
    sim.set_vllm("ok")
    return sim


@pytest.fixture()
def demo_pods(walkthrough):
    yield walkthrough
    walkthrough.kubectl("-n", "gpu-operator", "delete", "pod", "gpu-demo-hold", "gpu-demo-queue", "--ignore-not-found", "--wait=true")


@pytest.fixture()
def vllm_mode(walkthrough):
    yield walkthrough.set_vllm
    walkthrough.set_vllm("ok")


@pytest.fixture()
def topology(walkthrough):
    yield walkthrough.use_topology
    walkthrough.use_topology("default")


def test_idle_node(walkthrough):
    result = walkthrough.ansible_module(LEDGER, {"node": "prod102", "operator_namespace": "gpu-operator"})
    assert "failed" not in result, result.get("msg")
    node = result["ledger"]["nodes"]["prod102"]
    assert node["resources"]["nvidia.com/gpu"] == {"capacity": 1, "allocatable": 1, "requested": 0, "limits": 0, "free": 1, "holders": []}
    assert (node["ready"], node["unschedulable"]) == (True, False)
    assert node["labels"]["nvidia.com/gpu.present"] == "true" and node["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H20"
    assert node["operator_running"]["device_plugin"] is True
    assert result["ledger"]["operator"]["running"]["gpu_feature_discovery"] is True
    assert result["ledger"]["pending"] == []
    # One node: the node, its pods, the unscheduled pods, the operator's pods on the node.
    # The node, its pods, the unscheduled pods, the operator's pods; and for the DRA ledger its ResourceSlices, the
    # DeviceClasses and one list of the ResourceClaims (a claim allocated on the node but reserved for no pod holds its
    # device too, and only the claims say so).
    assert (result["read_strategy"], result["api_calls"]) == ("node", 7)
    assert kubectl_allocated(walkthrough, "prod102") == [0, 0]


def test_hold_and_queue_as_in_the_walkthrough(demo_pods):
    sim = demo_pods
    sim.kubectl("apply", "-f", "-", input=POD.format(name="gpu-demo-hold", command="nvidia-smi -L; env | grep NVIDIA; sleep 180"))
    wait_until(lambda: pod_phase(sim, "gpu-demo-hold") == "Running")

    held = sim.ansible_module(LEDGER, {"node": "prod102"})["ledger"]["nodes"]["prod102"]["resources"]["nvidia.com/gpu"]
    assert (held["allocatable"], held["requested"], held["limits"], held["free"]) == (1, 1, 1, 0)
    hold_uid = json.loads(sim.kubectl("-n", "gpu-operator", "get", "pod", "gpu-demo-hold", "-o", "json").stdout)["metadata"]["uid"]
    assert held["holders"] == [{"namespace": "gpu-operator", "name": "gpu-demo-hold", "uid": hold_uid, "phase": "Running", "units": 1,
                                "priority": 0, "priority_class_name": None, "terminating": False}]
    assert kubectl_allocated(sim, "prod102") == [held["requested"], held["limits"]]

    sim.kubectl("apply", "-f", "-", input=POD.format(name="gpu-demo-queue", command="nvidia-smi -L"))

    def scheduler_gave_up():
        ledger = sim.ansible_module(LEDGER, {"node": "prod102"})["ledger"]
        return ledger if ledger["pending"] and ledger["pending"][0]["reason"] == "Unschedulable" else None

    ledger = wait_until(scheduler_gave_up)
    queued = ledger["pending"]
    assert [entry["name"] for entry in queued] == ["gpu-demo-queue"]
    assert queued[0]["requests"] == {"nvidia.com/gpu": 1}
    assert queued[0]["message"].startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    assert [holder["name"] for holder in ledger["nodes"]["prod102"]["resources"]["nvidia.com/gpu"]["holders"]] == ["gpu-demo-hold"]


def test_check_mode_reads_the_same(walkthrough):
    normal = walkthrough.ansible_module(LEDGER, {"node": "prod102"})
    checked = walkthrough.ansible_module(LEDGER, {"node": "prod102"}, check=True)
    assert checked["changed"] is False
    assert checked["ledger"] == normal["ledger"]


def test_unknown_node(walkthrough):
    result = walkthrough.ansible_module(LEDGER, {"node": "prod999"})
    assert result["failed"] is True
    assert result["msg"] == "node 'prod999' not found on {0}".format(walkthrough.api_url)


def test_node_without_the_resource(walkthrough):
    result = walkthrough.ansible_module(LEDGER, {"node": "prod102", "resource_names": ["nvidia.com/mig-*"]})
    assert result["msg"].startswith("node prod102 advertises none of nvidia.com/mig-*; it advertises: cpu, ephemeral-storage, "
                                    "hugepages-1Gi, hugepages-2Mi, memory, nvidia.com/gpu, pods")


def test_cpu_node(walkthrough, topology):
    topology("no-gpu")
    result = walkthrough.ansible_module(LEDGER, {"node": "prod102"})
    assert result["msg"] == ("node prod102 advertises none of nvidia.com/gpu; it advertises: cpu, ephemeral-storage, hugepages-1Gi, "
                             "hugepages-2Mi, memory, pods; no ResourceSlice publishes devices on it either")


def test_bad_kubeconfig(walkthrough, tmp_path):
    missing = str(tmp_path / "missing-kubeconfig")
    result = walkthrough.ansible_module(LEDGER, {"node": "prod102"}, env={"K8S_AUTH_KUBECONFIG": missing, "KUBECONFIG": missing})
    assert result["failed"] is True
    assert result["msg"].endswith("(kubeconfig file not found: {0})".format(missing))


def test_unreachable_api(walkthrough, tmp_path):
    server = "https://127.0.0.1:{0}".format(closed_port())
    result = walkthrough.ansible_module(LEDGER, {"node": "prod102", "kubeconfig": kubeconfig_variant(walkthrough, tmp_path, server=server)})
    assert result["msg"] == "cannot reach the Kubernetes API at {0} (connection refused) when trying to connect to the Kubernetes API".format(server)


def test_invalid_token(walkthrough, tmp_path):
    result = walkthrough.ansible_module(LEDGER, {"node": "prod102", "kubeconfig": kubeconfig_variant(walkthrough, tmp_path, token="not-a-valid-token")})
    assert result["failed"] is True
    assert "rejected the credentials (401 Unauthorized)" in result["msg"] and walkthrough.api_url in result["msg"]


def test_untrusted_certificate(walkthrough, tmp_path):
    result = walkthrough.ansible_module(LEDGER, {"node": "prod102", "kubeconfig": kubeconfig_variant(walkthrough, tmp_path, drop_ca=True)})
    assert result["msg"].startswith("TLS verification failed for the Kubernetes API at {0}".format(walkthrough.api_url))
    assert "CERTIFICATE_VERIFY_FAILED" in result["msg"]


def test_fleet_in_constant_calls(walkthrough, topology):
    topology("fleet")
    # Every node: no `node`. (Ad hoc `-a '{}'` reads as raw params, hence the explicit default.)
    result = walkthrough.ansible_module(LEDGER, {"resource_names": ["nvidia.com/gpu"]})
    assert "failed" not in result, result.get("msg")
    nodes = result["ledger"]["nodes"]
    assert sorted(nodes) == ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4"]  # cpu-b1 has no GPU
    assert nodes["gpu-a1"]["resources"]["nvidia.com/gpu"]["free"] == 1
    assert nodes["gpu-a1"]["resources"]["nvidia.com/gpu"]["holders"][0]["name"] == "llm-a1-0"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in nodes["gpu-a2"]["taints"]
    assert nodes["gpu-a3"]["unschedulable"] is True
    assert nodes["gpu-a4"]["ready"] is False
    assert result["ledger"]["totals"]["nvidia.com/gpu"] == {"capacity": 6, "allocatable": 6, "requested": 1, "limits": 1, "free": 5}
    # Nodes and pods; and for the DRA ledger ResourceSlices, ResourceClaims and DeviceClasses: five lists for any fleet.
    assert result["api_calls"] == 5


QUEUED = """
apiVersion: v1
kind: Pod
metadata:
  name: queued-big
  namespace: default
spec:
  restartPolicy: Never
  containers:
    - name: c
      image: bench:1
      command: ["true"]
      resources:
        limits: {nvidia.com/gpu: "8"}
"""


def test_one_node_reads_only_that_node_and_equals_the_fleet_read(walkthrough, topology):
    """Issue 16: one node's ledger from the node's own pods (and the unscheduled ones) is the fleet read's entry for it."""
    topology("fleet")
    sim = walkthrough
    sim.kubectl("apply", "-f", "-", input=QUEUED)
    try:
        wait_until(lambda: json.loads(sim.kubectl("-n", "default", "get", "pod", "queued-big", "-o", "json").stdout)
                   ["status"].get("conditions"))
        fleet = sim.ansible_module(LEDGER, {"resource_names": ["nvidia.com/gpu"]})
        assert fleet["read_strategy"] == "fleet", fleet.get("msg")
        for name in ("gpu-a1", "gpu-a2"):
            by_node = sim.ansible_module(LEDGER, {"node": name})
            assert "failed" not in by_node, by_node.get("msg")
            forced_fleet = sim.ansible_module(LEDGER, {"node": name, "read_strategy": "fleet"})
            assert (by_node["read_strategy"], forced_fleet["read_strategy"]) == ("node", "fleet")
            assert by_node["ledger"] == forced_fleet["ledger"]
            assert by_node["ledger"]["nodes"] == {name: fleet["ledger"]["nodes"][name]}
            assert by_node["ledger"]["pending"] == fleet["ledger"]["pending"]
            assert [(entry["name"], entry["requests"]) for entry in by_node["ledger"]["pending"]] == [("queued-big", {"nvidia.com/gpu": 8})]
            # With the DRA ledger: + the node's ResourceSlices, the DeviceClasses and the ResourceClaims (node), + three
            # lists (fleet).
            assert (by_node["api_calls"], forced_fleet["api_calls"]) == (6, 5)
            assert by_node["api_bytes"] > 0   # what it saves shows at scale: bench/ledger_big.py
        holders_a1 = fleet["ledger"]["nodes"]["gpu-a1"]["resources"]["nvidia.com/gpu"]["holders"]
        assert [holder["name"] for holder in holders_a1] == ["llm-a1-0"]
        a2 = sim.ansible_module(LEDGER, {"node": "gpu-a2"})["ledger"]["nodes"]["gpu-a2"]["resources"]["nvidia.com/gpu"]
        assert (a2["requested"], a2["holders"]) == (0, [])   # llm-a1-0 runs on another node
        assert kubectl_allocated(sim, "gpu-a1") == [1, 1]
    finally:
        sim.kubectl("-n", "default", "delete", "pod", "queued-big", "--ignore-not-found", "--wait=true")


def test_mig_slices(walkthrough, topology):
    topology("mig-mixed")
    result = walkthrough.ansible_module(LEDGER, {"node": "prod102", "resource_names": ["nvidia.com/gpu", "nvidia.com/mig-*"]})
    assert "failed" not in result, result.get("msg")
    resources = result["ledger"]["nodes"]["prod102"]["resources"]
    assert resources["nvidia.com/mig-1g.10gb"]["allocatable"] == 7
    assert resources["nvidia.com/gpu"]["allocatable"] == 0  # mixed MIG: whole GPUs advertised as 0


def test_module_defaults_group_and_fact(walkthrough, tmp_path):
    playbook = tmp_path / "ledger.yml"
    playbook.write_text("""
- name: Read the ledger through the action group
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"
  module_defaults:
    group/gpuops.scheduling.k8s:
      kubeconfig: {kubeconfig}
  tasks:
    - name: Read the ledger
      gpuops.scheduling.gpu_ledger_facts:
        node: prod102
      register: read

    - name: Use the ledger it returned
      ansible.builtin.assert:
        that:
          - read.ledger.nodes.prod102.resources['nvidia.com/gpu'].free == 1
""".format(kubeconfig=walkthrough.kubeconfig))
    run = walkthrough.playbook(str(playbook), inventory="localhost,", env={"K8S_AUTH_KUBECONFIG": "", "KUBECONFIG": ""})
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_tasks_environment_reaches_the_task_run_in_process_and_only_that_task(walkthrough, tmp_path):
    """The collection's API tasks run in ansible-playbook's worker (plugin_utils/_in_process.py): the task's
    `environment:` must reach them as it reaches a module's process, and must not leak into the next task."""
    playbook = tmp_path / "environment.yml"
    playbook.write_text("""
- name: Read the ledger with credentials from the task's environment
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"
  tasks:
    - name: With the kubeconfig in the task's environment
      gpuops.scheduling.gpu_ledger_facts:
        node: prod102
      environment:
        K8S_AUTH_KUBECONFIG: {kubeconfig}
      register: with_env

    - name: Without it
      gpuops.scheduling.gpu_ledger_facts:
        node: prod102
      register: without_env
      ignore_errors: true

    - name: Only the first found the cluster
      ansible.builtin.assert:
        that:
          - with_env.ledger.nodes.prod102.resources['nvidia.com/gpu'].allocatable == 1
          - without_env is failed
          - "'kubeconfig file not found' in without_env.msg"
""".format(kubeconfig=walkthrough.kubeconfig))
    home = tmp_path / "home"   # no ~/.kube/config to fall back on
    home.mkdir()
    run = walkthrough.playbook(str(playbook), inventory="localhost,", extra_args=("-vvv",),
                               env={"K8S_AUTH_KUBECONFIG": "", "KUBECONFIG": "", "HOME": str(home)})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert run.stdout.count("gpuops.scheduling.gpu_ledger_facts: running in the controller's process") == 2


def test_vllm_healthy(walkthrough):
    result = walkthrough.ansible_module(HEALTH, {"url": walkthrough.health_url, "models_url": walkthrough.models_url})
    assert (result["healthy"], result["status"], result["attempts"]) == (True, 200, 1)
    assert result["models"] == ["Qwen/Qwen2.5-7B-Instruct"]
    assert result["changed"] is False


def test_vllm_healthy_in_check_mode(walkthrough):
    assert walkthrough.ansible_module(HEALTH, {"url": walkthrough.health_url}, check=True)["healthy"] is True


def test_vllm_503(walkthrough, vllm_mode):
    vllm_mode("503")
    result = walkthrough.ansible_module(HEALTH, {"url": walkthrough.health_url, "retries": 1, "delay": 0.1})
    assert result["failed"] is True
    assert result["msg"] == "GET {0} answered 503, expected 200 (after 2 attempts)".format(walkthrough.health_url)
    reported = walkthrough.ansible_module(HEALTH, {"url": walkthrough.health_url, "fail_on_unhealthy": False})
    assert "failed" not in reported and (reported["healthy"], reported["status"]) == (False, 503)


def test_vllm_down(walkthrough, vllm_mode):
    vllm_mode("down")
    result = walkthrough.ansible_module(HEALTH, {"url": walkthrough.health_url})
    assert result["msg"] == "GET {0} failed: connection refused".format(walkthrough.health_url)


def test_vllm_slow_times_out(walkthrough, vllm_mode):
    vllm_mode("slow")
    result = walkthrough.ansible_module(HEALTH, {"url": walkthrough.health_url, "timeout": 1})
    assert result["msg"] == "GET {0} failed: timed out".format(walkthrough.health_url)
