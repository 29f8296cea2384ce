"""The node's lock lives exactly as long as its run; other people's pods and missing pieces get clear, fast answers.

Every run here uses the role's default lock (a 15 s Lease renewed while ansible-playbook lives).
- A long run (slow inference server, a hold wait near its timeout), with a second run started in its middle:
  the second is refused naming the first, the first is never taken over and passes.
- The API server away for longer than the Lease during a live run, a second run started as it comes back: never
  two runs' pods live on the node at once; the first stops, the second takes over and cleans up.
- Someone else's pod (higher priority, pinned to the node) takes the unit the hold releases: the run fails within
  a few seconds of that pod's binding, naming it; that pod is still Running afterwards.
- A missing namespace, a device plugin that stopped: refused with the cause and what to look at, before any lock
  or pod is created.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

import cluster  # tests/sim, on the path from conftest.py
from safety_helpers import (CHECKOUT, MANAGED, NAMESPACE, NODE, core_api, demo_pods, fresh_scheduler, new_run_id, playbook_command,
                            read_report, run_env, run_playbook, write_inventory)

LOCK_SECONDS = 15   # the role's default; no variable here changes it
SIMCTL = [sys.executable, str(CHECKOUT / "tests" / "sim" / "simctl.py")]


def simctl(*args: str) -> None:
    subprocess.run([*SIMCTL, *args], check=True, cwd=CHECKOUT, capture_output=True, text=True, timeout=180)


def coordination(sim):
    from kubernetes import client, config  # pylint: disable=import-outside-toplevel
    return client.CoordinationV1Api(config.new_client_from_config(config_file=sim.kubeconfig))


def read_lease(sim):
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    try:
        return coordination(sim).read_namespaced_lease(f"gpuops-preflight-{NODE}", NAMESPACE)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def wait_for_pod(admin, selector: str, predicate, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = [pod for pod in admin.list_namespaced_pod(NAMESPACE, label_selector=selector).items if predicate(pod)]
        if pods:
            return pods[0]
        time.sleep(0.2)
    raise AssertionError(f"no pod matching {selector} in {timeout}s")


def start(inventory, env, run_id: str, **extra) -> subprocess.Popen:
    return subprocess.Popen(playbook_command(inventory, {"gpu_demo_run_id": run_id, **extra}), cwd=CHECKOUT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


class LiveRuns(threading.Thread):
    """Polls the demo pods; records every moment at which pods of two runs were live (not being deleted) at once."""

    def __init__(self, admin):
        super().__init__(daemon=True)
        self.admin, self.stop, self.overlaps, self.seen = admin, threading.Event(), [], set()

    def run(self):
        while not self.stop.is_set():
            try:
                pods = self.admin.list_pod_for_all_namespaces(label_selector=MANAGED, _request_timeout=2).items
            except Exception:  # pylint: disable=broad-except
                time.sleep(0.3)   # the API server is away: nothing changes meanwhile either
                continue
            live = {pod.metadata.labels.get("gpuops.scheduling/run-id") for pod in pods
                    if not pod.metadata.deletion_timestamp and pod.status.phase not in ("Succeeded", "Failed")}
            self.seen |= live
            if len(live) > 1:
                self.overlaps.append(sorted(live))
            time.sleep(0.2)


@pytest.fixture()
def node(sim, tmp_path):
    sim.use_topology("default")
    sim.set_vllm("ok")
    yield {"inventory": write_inventory(tmp_path, sim, gpu_demo_kubeconfig=sim.kubeconfig), "env": run_env(sim),
           "admin": core_api(sim.kubeconfig), "reports": tmp_path / "reports"}
    sim.set_vllm("ok")


def test_a_live_run_keeps_its_lock_and_a_second_run_is_refused(sim, node):
    """A slow vLLM (3 s per answer) and a hold that prints its GPUs 15 s in (timeout 20): the run lasts well over its
    15 s Lease; a second run started while the hold waits is refused naming it; nobody takes the lock over."""
    sim.set_vllm("slow")
    slow = {"gpu_demo_timeout": 20, "gpu_demo_evidence_command": "sleep 15; nvidia-smi -L; echo '{{ gpu_demo_evidence_marker }}'"}
    first_id, second_id = new_run_id("live"), new_run_id("second")
    started = time.monotonic()
    first = start(node["inventory"], node["env"], first_id, **slow)
    wait_for_pod(node["admin"], f"gpuops.scheduling/run-id={first_id},gpuops.scheduling/role=hold", lambda pod: pod.status.phase == "Running")
    time.sleep(LOCK_SECONDS)   # past the first renewal-free Lease: only renewals keep it
    lease = read_lease(sim)
    assert lease and first_id in lease.spec.holder_identity, lease
    second = run_playbook(node["inventory"], node["env"], {"gpu_demo_run_id": second_id, **slow})
    output, _errors = first.communicate(timeout=300)
    took = time.monotonic() - started
    assert first.returncode == 0, output[-3000:]
    assert took > 2 * LOCK_SECONDS, f"the run took {took:.0f}s: too short to prove the renewals"
    refusal = " ".join((second.stdout + second.stderr).split())
    assert second.returncode != 0
    assert f"node {NODE} is locked by another pre-flight run: holder '{first_id} on " in refusal, refusal[-2000:]
    assert "unless renewed" in refusal
    assert demo_pods(node["admin"], second_id) == [], "the refused run created pods"
    report = read_report(node["reports"], first_id)
    assert report["passed"] and not (report.get("lock") or {}).get("took_over")
    # The Lease changed holder never: the first run's own release removed it.
    assert read_lease(sim) is None


class Supervisor(threading.Thread):
    """Starts the components again whenever they are gone, as the kubelet restarts a static pod."""

    def __init__(self, components):
        super().__init__(daemon=True)
        self.components = components
        self.stop = threading.Event()
        self.restarts = []

    def run(self):
        sim_dir = cluster.SimDir()
        while not self.stop.is_set():
            for component in self.components:
                if not cluster.running_pid(sim_dir, component):
                    simctl("start", component)
                    self.restarts.append(component)
            self.stop.wait(0.5)


def test_api_server_away_longer_than_the_lease_never_gives_the_node_to_two_runs(sim, node):
    first_id, second_id = new_run_id("apiaway"), new_run_id("after")
    slow = {"gpu_demo_timeout": 30, "gpu_demo_evidence_command": "sleep 6; nvidia-smi -L; echo '{{ gpu_demo_evidence_marker }}'"}
    watcher = LiveRuns(node["admin"])
    watcher.start()
    first = start(node["inventory"], node["env"], first_id, **slow)
    try:
        wait_for_pod(node["admin"], f"gpuops.scheduling/run-id={first_id},gpuops.scheduling/role=hold",
                     lambda pod: pod.status.phase == "Running")
        simctl("stop", "kube-apiserver")
        time.sleep(LOCK_SECONDS + 5)
    finally:
        simctl("start", "kube-apiserver")
    # kube-scheduler and kube-controller-manager may end after an outage (the scheduler exits by design when its cache
    # meets a pod bound elsewhere than it assumed, e.g. a binding that reached the API server as it went away), and
    # are started again by whatever supervises them (the kubelet, for kubeadm's static pods): here, the test, until it
    # ends.
    supervisor = Supervisor(("kube-scheduler", "kube-controller-manager"))
    supervisor.start()
    try:
        second_run_and_its_checks(sim, node, first, first_id, second_id, slow, watcher)
    finally:
        supervisor.stop.set()
        supervisor.join(timeout=30)
        # A scheduler that lived through the outage may still exit later, in the next test on this cluster.
        fresh = fresh_scheduler(sim)
    print(f"\ncontrol-plane restarts after the outage: {supervisor.restarts or 'none'}; a fresh scheduler in {fresh:.1f}s")


def second_run_and_its_checks(sim, node, first, first_id, second_id, slow, watcher):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            node["admin"].list_namespaced_pod(NAMESPACE, _request_timeout=2)
            break
        except Exception:  # pylint: disable=broad-except
            time.sleep(0.5)
    second = run_playbook(node["inventory"], node["env"], {"gpu_demo_run_id": second_id, **slow})
    first_output, _errors = first.communicate(timeout=300)
    watcher.stop.set()
    watcher.join(timeout=10)
    assert not watcher.overlaps, f"two runs' pods live on the node at once: {watcher.overlaps[:3]}"
    assert first_id in watcher.seen
    first_report = read_report(node["reports"], first_id)
    second_report = read_report(node["reports"], second_id)
    # The first run could not go on without the API server: it stopped its walk (and said why).
    assert first.returncode != 0 and first_report and not first_report["passed"], first_output[-2000:]
    # The second one either found the first's lock still held (refused), or took it over once it expired and removed the
    # first's pods. (It may then fail on its own: after a long outage the kubelet's watches come back with a backoff of up
    # to 30 s, and the pods it deletes may take that long to go; that is the cluster, not a second run on the node.)
    said = " ".join((second.stdout + second.stderr).split())
    if "locked by another pre-flight run" not in said:
        assert second_report and first_id in ((second_report.get("lock") or {}).get("took_over") or {}).get("holder", ""), said[-2000:]
        assert f"took over the lock of node {NODE} from '{first_id}" in said
    deadline = time.monotonic() + 90
    while demo_pods(node["admin"], first_id) and time.monotonic() < deadline:
        time.sleep(1)
    assert demo_pods(node["admin"], first_id) == [], "the first run's pods were never removed"
    sim.kubectl("-n", NAMESPACE, "delete", "pods", "-l", MANAGED, "--wait=true", "--timeout=90s")
    sim.kubectl("-n", NAMESPACE, "delete", "lease", f"gpuops-preflight-{NODE}", "--ignore-not-found")


FOREIGN = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gpuops-test-training}
value: 1000
preemptionPolicy: Never
globalDefault: false
---
apiVersion: v1
kind: Pod
metadata: {name: train-0, namespace: default, labels: {app: training}}
spec:
  priorityClassName: gpuops-test-training
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [
    {matchFields: [{key: metadata.name, operator: In, values: [prod102]}]}]}}}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  terminationGracePeriodSeconds: 1
  containers:
    - name: train
      image: docker.m.daocloud.io/vllm/vllm-openai:latest
      command: [bash, -c, "trap 'exit 0' TERM; sleep 600 & wait"]
      resources: {limits: {nvidia.com/gpu: "1"}}
"""


def test_another_pod_that_takes_the_released_unit_is_named_at_once_and_left_alone(sim, node):
    """A training pod of higher priority (never preempting), pinned to the node, waits while the hold runs; at the
    release the scheduler gives it the unit. The run fails within seconds of its binding, naming it."""
    run_id = new_run_id("taken")
    run = start(node["inventory"], node["env"], run_id, gpu_demo_timeout=60,
                gpu_demo_evidence_command="sleep 3; nvidia-smi -L; echo '{{ gpu_demo_evidence_marker }}'")
    try:
        wait_for_pod(node["admin"], f"gpuops.scheduling/run-id={run_id},gpuops.scheduling/role=hold",
                     lambda pod: pod.status.phase == "Running")
        sim.kubectl("apply", "-f", "-", input=FOREIGN)
        output, _errors = run.communicate(timeout=300)
        foreign = node["admin"].read_namespaced_pod("train-0", "default")
        bound = next(c.last_transition_time for c in foreign.status.conditions if c.type == "PodScheduled" and c.status == "True")
        report = read_report(node["reports"], run_id)
        assert run.returncode != 0 and not report["passed"], output[-2000:]
        release = next(check for check in report["checks"] if check["id"] == "queue_ran_on_node")
        assert not release["passed"]
        assert "pod default/train-0 (priority 1000, PriorityClass gpuops-test-training) was bound to node prod102 at" in release["detail"]
        # Within a few seconds of its binding, not at the 60 s timeout.
        finished = report["durations"]["release_to_queue_succeeded"]
        assert finished is not None and finished < 10, report["durations"]
        assert "train-0" in open(str(node["reports"] / f"gpu-demo-{NODE}-{run_id}.md"), encoding="utf-8").read()
        # Left alone: still Running, on the node; the run's own pods are gone.
        assert foreign.status.phase == "Running" and not foreign.metadata.deletion_timestamp and foreign.spec.node_name == NODE
        assert bound is not None
        assert demo_pods(node["admin"], run_id) == []
    finally:
        sim.kubectl("delete", "-f", "-", "--wait=true", "--ignore-not-found", input=FOREIGN)


def nothing_written(sim, admin) -> list:
    problems = []
    if read_lease(sim) is not None:
        problems.append("a Lease was left")
    if demo_pods(admin):
        problems.append(f"pods: {demo_pods(admin)}")
    return problems


def test_a_missing_namespace_is_named_before_any_write(sim, node):
    run_id = new_run_id("nons")
    result = run_playbook(node["inventory"], node["env"], {"gpu_demo_run_id": run_id, "gpu_demo_namespace": "no-such-ns"})
    text = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0
    assert "namespace no-such-ns does not exist" in text and "kubectl create namespace no-such-ns" in text, text[-2000:]
    assert "not found (404) when trying to write Lease" not in text
    assert sim.kubectl("get", "leases", "-A", "-o", "name").stdout.count("gpuops-preflight") == 0
    assert not nothing_written(sim, node["admin"])


@pytest.mark.parametrize("fault", ["plugin stopped", "every device unhealthy"])
def test_a_device_plugin_that_gives_no_device_is_named_before_any_lock(sim, node, fault):
    uuid = json.loads(sim.kubectl("get", "node", NODE, "-o", "json").stdout)
    assert int(uuid["status"]["allocatable"]["nvidia.com/gpu"]) == 1
    component = f"plugin-{NODE}-nvidia.com-gpu"
    devices = json.loads((sim.dir.run / "nodes" / NODE / "plugin-nvidia.com-gpu.json").read_text())["devices"]
    try:
        if fault == "plugin stopped":
            simctl("stop", component)
        else:
            simctl("fault", NODE, json.dumps({"unhealthy": [device["id"] for device in devices]}))
        deadline = time.monotonic() + 60
        while int(json.loads(sim.kubectl("get", "node", NODE, "-o", "json").stdout)["status"]["allocatable"].get("nvidia.com/gpu", 0)):
            assert time.monotonic() < deadline, "the kubelet never dropped allocatable to 0"
            time.sleep(0.5)
        run_id = new_run_id("noplugin")
        result = run_playbook(node["inventory"], node["env"], {"gpu_demo_run_id": run_id})
        text = " ".join((result.stdout + result.stderr).split())
        assert result.returncode != 0
        assert "allocatable nvidia.com/gpu = 0 while its capacity is 1" in text, text[-2000:]
        assert "device plugin stopped" in text and "Unhealthy" in text
        assert f"kubectl -n {NAMESPACE} get pods -o wide --field-selector spec.nodeName={NODE}" in text
        assert "Lock |" not in result.stdout, "the run took the lock before refusing the node"
        assert not nothing_written(sim, node["admin"])
    finally:
        if fault == "plugin stopped":
            simctl("start", component)
        else:
            simctl("fault", NODE, "{}")
        deadline = time.monotonic() + 60
        while not int(json.loads(sim.kubectl("get", "node", NODE, "-o", "json").stdout)["status"]["allocatable"].get("nvidia.com/gpu", 0)):
            assert time.monotonic() < deadline, "the plugin never came back"
            time.sleep(0.5)
