"""playbooks/gpu_demo.yml -i inventory/sim on the simulated cluster, one topology per test.

Every test asserts that the node ends as it began (the ledger, the pods on the node) and that no
pod of the run remains, whatever the outcome.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
import xml.dom.minidom
from pathlib import Path

import pytest
from examples import matches_example

# Each test sets up the cluster it needs (its own topology first): any worker may run it (conftest.py).
pytestmark = pytest.mark.independent

SEED_UUID = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
NAMESPACE = "gpu-operator"
MANAGED = "app.kubernetes.io/managed-by=gpuops.scheduling"
# The default checks link: the page of the collection installed on the controller (here, this checkout's).
CHECKS_URL = (Path(__file__).resolve().parents[2] / "docs" / "checks.md").as_uri()


def ledger(sim, node: str = "prod102") -> dict:
    """allocatable / requested nvidia.com/gpu and the pods bound to the node, as kubectl sees them."""
    node_object = json.loads(sim.kubectl("get", "node", node, "-o", "json").stdout)
    pods = json.loads(sim.kubectl("get", "pods", "-A", "-o", "json", "--field-selector", f"spec.nodeName={node}").stdout)
    requested = 0
    names = []
    for pod in pods["items"]:
        if pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        names.append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
        for container in pod["spec"]["containers"]:
            requested += int((container.get("resources", {}).get("limits") or {}).get("nvidia.com/gpu", 0))
    return {"allocatable": node_object["status"].get("allocatable", {}).get("nvidia.com/gpu"),
            "requested": requested, "pods": sorted(names)}


def demo_pods(sim) -> list:
    return sim.kubectl("get", "pods", "-A", "-l", MANAGED, "-o", "name").stdout.split()


class Run:
    def __init__(self, process: subprocess.CompletedProcess, report_dir: Path, run_id: str):
        self.process = process
        self.output = process.stdout + process.stderr
        self.rc = process.returncode
        files = sorted(report_dir.glob(f"gpu-demo-prod102-{run_id}.json"))
        self.result = json.loads(files[0].read_text()) if files else None
        self.markdown = (report_dir / f"gpu-demo-prod102-{run_id}.md")
        self.svg = (report_dir / f"gpu-demo-prod102-{run_id}.svg")

    def check(self, check_id: str) -> dict:
        return next(item for item in self.result["checks"] if item["id"] == check_id)


def demo_vars(sim, tmp_path: Path, run_id: str, **extra) -> dict:
    # inventory/sim names the default sim's kubeconfig and health URL; these follow the sim the
    # fixture started (GPUOPS_SIM_DIR / GPUOPS_SIM_PORT_OFFSET run a second one).
    return {"gpu_demo_report_dir": str(tmp_path), "gpu_demo_run_id": run_id, "gpu_demo_timeout": 30,
            "gpu_demo_kubeconfig": sim.kubeconfig, "gpu_demo_vllm_health_url": sim.health_url, **extra}


def run_demo(sim, tmp_path: Path, extra_vars: dict | None = None, check: bool = False) -> Run:
    run_id = "it-" + uuid.uuid4().hex[:8]
    variables = demo_vars(sim, tmp_path, run_id, **(extra_vars or {}))
    process = sim.playbook("playbooks/gpu_demo.yml", extra_vars=variables, check=check)
    return Run(process, tmp_path, run_id)


@pytest.fixture()
def topology(sim):
    """Switch the sim to a topology; afterwards no demo pod may remain and the node must be as found."""
    state = {}

    def use(name: str) -> dict:
        sim.use_topology(name)
        state["before"] = ledger(sim)
        return state["before"]

    yield use
    assert demo_pods(sim) == [], "a pod of the run remains"
    if "before" in state:
        assert ledger(sim) == state["before"], "the node did not end as it began"


def assert_clean_pass(run: Run) -> None:
    assert run.rc == 0, run.output[-3000:]
    assert run.result["passed"] is True, run.result["failed_checks"]
    assert run.result["failed_checks"] == []
    assert all(check["passed"] for check in run.result["checks"])


def test_default_topology_walkthrough(sim, topology, tmp_path):
    before = topology("default")
    run = run_demo(sim, tmp_path)
    assert_clean_pass(run)
    result = run.result
    assert result["allocation"] == "device_plugin" and "GPUs through the device plugin" in run.svg.read_text()
    assert result["hold"]["distinct_uuids"] == [SEED_UUID]
    assert result["queue"]["evidence"]["uuids"] == [SEED_UUID]
    assert result["before"]["allocatable"] == 1 and result["during"]["free"] == 0
    assert result["after"]["requested"] == 0 and before["requested"] == 0
    assert result["before"]["vllm"]["status"] == 200 and result["after"]["vllm"]["status"] == 200
    parsed = result["queue"]["failed_scheduling"]["parsed"]
    assert parsed["insufficient"] == ["nvidia.com/gpu"] and parsed["nodes_total"] == 1
    # memory in use by others on the card the ledger gave the demo (vLLM, out of the ledger)
    assert result["hold"]["memory"][0]["used_mib"] > 0 and result["hold"]["memory"][0]["total_mib"] == 97871
    messages = [(event["reason"], event["message"]) for event in result["events"]]
    assert ("Scheduled", "Successfully assigned gpu-operator/gpu-demo-hold to prod102") in messages
    assert ("Scheduled", "Successfully assigned gpu-operator/gpu-demo-queue to prod102") in messages
    assert any(reason == "FailedScheduling" and "1 Insufficient nvidia.com/gpu" in text for reason, text in messages)
    assert {"Pulled", "Created", "Started"} <= {reason for reason, _text in messages}
    durations = result["durations"]
    assert 0 < durations["occupied_window"] < durations["total"]
    # the human report tells the run's own events and ledger lines; the timeline is valid SVG
    markdown = run.markdown.read_text()
    assert "Successfully assigned gpu-operator/gpu-demo-hold to prod102" in markdown
    assert f"GPU 0: NVIDIA H20 (UUID: {SEED_UUID})" in markdown
    assert "nvidia.com/gpu     1           1" in markdown
    assert run.svg.name in markdown
    xml.dom.minidom.parse(str(run.svg))


def test_chinese_report(sim, topology, tmp_path):
    topology("default")
    run = run_demo(sim, tmp_path, {"gpu_demo_report_lang": "zh"})
    assert_clean_pass(run)
    markdown = run.markdown.read_text()
    assert "第一个任务：占住名额" in markdown and "调度器的原话" in markdown
    assert "0/1 nodes are available: 1 Insufficient nvidia.com/gpu." in markdown
    # docs/report-example shows what the current code writes for this run (make report-example).
    matches_example(run.result, markdown, "zh")


def test_four_gpus_hold_takes_four_and_queue_gets_one_of_them(sim, topology, tmp_path):
    topology("four-gpus")
    run = run_demo(sim, tmp_path)
    assert_clean_pass(run)
    hold = run.result["hold"]
    assert [pod["name"] for pod in hold["pods"]] == [f"gpu-demo-hold-{index}" for index in range(4)]
    assert len(hold["distinct_uuids"]) == 4 and hold["units_seen"] == 4
    assert run.result["during"]["free"] == 0 and run.result["during"]["requested"] == 4
    queue_uuids = run.result["queue"]["evidence"]["uuids"]
    assert len(queue_uuids) == 1 and queue_uuids[0] in hold["distinct_uuids"]
    matches_example(run.result, run.markdown.read_text(), "en-4gpus")


def test_four_gpus_in_one_pod(sim, topology, tmp_path):
    topology("four-gpus")
    run = run_demo(sim, tmp_path, {"gpu_demo_hold_mode": "single"})
    assert_clean_pass(run)
    assert [pod["name"] for pod in run.result["hold"]["pods"]] == ["gpu-demo-hold"]
    assert len(run.result["hold"]["pods"][0]["unit_uuids"]) == 4


def test_device_plugin_rejecting_requests_above_one(sim, topology, tmp_path):
    """time-slicing with failRequestsGreaterThanOne: 8 units on 2 GPUs; one pod per unit works."""
    topology("time-slicing")
    run = run_demo(sim, tmp_path)
    assert_clean_pass(run)
    hold = run.result["hold"]
    assert hold["units_seen"] == 8 and len(hold["distinct_uuids"]) == 2 and hold["replicas"] == 4


def test_one_pod_asking_for_every_unit_is_rejected_at_admission(sim, topology, tmp_path):
    topology("time-slicing")
    run = run_demo(sim, tmp_path, {"gpu_demo_hold_mode": "single"})
    assert run.rc != 0
    assert "hold_running" in run.result["failed_checks"]
    assert "UnexpectedAdmissionError" in run.check("hold_running")["detail"]
    assert run.check("run_pods_gone")["passed"] and run.check("ledger_restored")["passed"]


def test_mig_resource_hands_over_mig_devices(sim, topology, tmp_path):
    """The mixed strategy's nvidia.com/mig-1g.10gb: the units are MIG devices, the variable names their MIG UUIDs."""
    topology("mig-mixed")
    run = run_demo(sim, tmp_path, {"gpu_demo_resource": "nvidia.com/mig-1g.10gb"})
    assert_clean_pass(run)
    hold = run.result["hold"]
    assert hold["unit_kind"] == "mig" and hold["units_seen"] == 7 and len(hold["distinct_uuids"]) == 7
    assert all(device.startswith("MIG-") for device in hold["distinct_uuids"])
    assert len({unit["gpu_uuid"] for unit in hold["units"]}) == 1  # seven slices of one H100
    assert "they name the MIG devices nvidia-smi shows" in run.check("hold_env_corroborates")["detail"]
    seen = run.result["queue"]["evidence"]["unit_uuids"]
    assert len(seen) == 1 and seen[0] in hold["distinct_uuids"]
    assert run.markdown.read_text().startswith("# Walking nvidia.com/mig-1g.10gb through the scheduler on prod102")


def test_a_node_whose_hostname_label_is_not_its_name(sim, topology, tmp_path):
    """Cloud providers and --hostname-override setups: kubernetes.io/hostname is not the node's name. The demo pods
    are pinned by the node's name (matchFields metadata.name) and land on it whatever its labels; a pin by the
    hostname label, as the role had, leaves the hold Pending and the run says so."""
    topology("default")
    sim.kubectl("label", "node", "prod102", "kubernetes.io/hostname=ip-10-0-1-47.ec2.internal", "--overwrite")
    try:
        run = run_demo(sim, tmp_path)
        assert_clean_pass(run)
        spec = run.result["pods"]["hold"][0]["spec"]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["prod102"]}]}]
        assert "nodeSelector" not in spec
        # the wrong world: the old pin by label finds no node, and the run names why at once
        run = run_demo(sim, tmp_path, {"gpu_demo_node_selector": {"kubernetes.io/hostname": "prod102"}})
        assert run.rc != 0 and "hold_running" in run.result["failed_checks"], run.result["failed_checks"]
        assert "node affinity/selector" in run.check("hold_running")["detail"], run.check("hold_running")["detail"]
        assert run.result["durations"]["walk"] < 10, run.result["durations"]
    finally:
        sim.kubectl("label", "node", "prod102", "kubernetes.io/hostname=prod102", "--overwrite")


def test_busy_node_is_refused_and_nothing_is_created(sim, topology, tmp_path):
    before = topology("busy")
    run = run_demo(sim, tmp_path)
    assert run.rc != 0
    assert run.result["failed_checks"] == ["node_not_busy"]
    assert "held by inference/llm-prod-0" in run.result["failure"]["message"]
    assert run.result["timeline"]["transitions"] == {}
    assert "inference/llm-prod-0" in before["pods"]


def test_node_without_gpus_is_a_clear_error(sim, topology, tmp_path):
    topology("no-gpu")
    run = run_demo(sim, tmp_path)
    assert run.result["allocation"] is None   # no way to GPUs on a node without any
    assert run.rc != 0
    assert run.result["failed_checks"] == ["node_found"]
    assert "node prod102 advertises none of nvidia.com/gpu" in run.result["failure"]["message"]
    assert "node prod102 advertises none of nvidia.com/gpu" in run.output


def test_check_mode_creates_nothing(sim, topology, tmp_path):
    topology("default")
    watch = subprocess.Popen([sim.kubectl_path, "--kubeconfig", sim.kubeconfig, "get", "pods", "-A", "-l", MANAGED,
                              "--watch", "-o", "name"], stdout=subprocess.PIPE, text=True)
    try:
        run = run_demo(sim, tmp_path, check=True)
    finally:
        watch.terminate()
    seen = watch.communicate(timeout=10)[0]
    assert run.rc == 0, run.output[-3000:]
    assert seen.strip() == "", f"check mode created pods: {seen}"
    assert "would_create" in run.output and "gpu-demo-hold" in run.output
    assert not list(tmp_path.iterdir()), "check mode wrote report files"


def occupy_when_hold_runs(sim, blocker: dict, stop: threading.Event) -> threading.Thread:
    """Create ``blocker`` the moment a hold pod runs: a watch, because the demo holds the node for well
    under a second."""
    from kubernetes import client, config, watch  # pylint: disable=import-outside-toplevel

    api = client.CoreV1Api(config.new_client_from_config(config_file=sim.kubeconfig))

    def run():
        stream = watch.Watch()
        for event in stream.stream(api.list_namespaced_pod, NAMESPACE, label_selector="gpuops.scheduling/role=hold",
                                   timeout_seconds=120):
            if stop.is_set():
                break
            if event["object"].status.phase == "Running":
                api.create_namespaced_pod("default", blocker)
                break
        stream.stop()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_failure_mid_run_deletes_every_pod_and_names_the_failed_check(sim, topology, tmp_path):
    """While the hold runs, a higher-priority pod of the test queues for the same GPU: it gets the
    unit the hold releases, so the queue pod never runs."""
    topology("default")
    blocker_class = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": "it-blocker"}, "value": 1000, "preemptionPolicy": "Never"}
    blocker = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "it-blocker", "namespace": "default"},
               "spec": {"priorityClassName": "it-blocker", "nodeSelector": {"kubernetes.io/hostname": "prod102"},
                        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    sim.kubectl("apply", "-f", "-", input=json.dumps(blocker_class))
    stop = threading.Event()
    watcher = occupy_when_hold_runs(sim, blocker, stop)
    try:
        run = run_demo(sim, tmp_path, {"gpu_demo_timeout": 8})
        watcher.join(timeout=10)
        assert run.rc != 0, run.output[-3000:]
        assert "queue_ran_on_node" in run.result["failed_checks"], run.result["failed_checks"]
        assert run.result["failure"]["task"].startswith("Release") and run.result["failure"]["phase"] == "release"
        # Named at once (not at the timeout): the pod that took the unit, and that it is left alone.
        detail = run.check("queue_ran_on_node")["detail"]
        assert "pod default/it-blocker (priority 1000, PriorityClass it-blocker) was bound to node prod102" in detail, detail
        assert "timed out" not in detail
        assert run.check("run_pods_gone")["passed"]
        # the blocker still holds the unit: the node is not as it was found, and the report says so
        assert not run.check("ledger_restored")["passed"]
        assert demo_pods(sim) == []
        # The failed check links to its entry on the checks page (gpu_demo_checks_url, the default here).
        link = CHECKS_URL + "#queue_ran_on_node"
        assert run.check("queue_ran_on_node")["url"] == link
        assert "url" not in run.check("run_pods_gone")
        assert f"[queue_ran_on_node]({link})" in run.markdown.read_text()
    finally:
        stop.set()
        sim.kubectl("delete", "pod", "-n", "default", "it-blocker", "--ignore-not-found", "--wait=true")
        sim.kubectl("delete", "priorityclass", "it-blocker", "--ignore-not-found")


def test_prod_inventory_reproduces_the_walkthrough_cluster():
    """Only parsed, never used: nothing here may reach inventory/prod's addresses."""
    checkout = Path(__file__).resolve().parents[2]
    listing = subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", "inventory/prod", "--list"],
                             cwd=checkout, capture_output=True, text=True, check=True,
                             env={**os.environ, "ANSIBLE_CONFIG": str(checkout / "ansible.cfg")})
    inventory = json.loads(listing.stdout)
    assert inventory["gpu_nodes"]["hosts"] == ["prod102"]
    host = inventory["_meta"]["hostvars"]["prod102"]
    assert host["ansible_host"] == "10.0.1.47"
    assert host["gpu_demo_namespace"] == "gpu-operator"
    assert host["gpu_demo_image"] == "docker.m.daocloud.io/vllm/vllm-openai:latest"
    assert host["gpu_demo_vllm_health_url"] == "http://10.0.1.47:8000/health"
    # credentials come from the user's kubeconfig or K8S_AUTH_*, never from the inventory
    assert "gpu_demo_kubeconfig" not in host


@pytest.mark.parametrize("name, sees", [("default", True), ("four-gpus", False)])
def test_ledger_bypass_probe(sim, topology, tmp_path, name, sees):
    """A pod without a GPU request sees the H20 on the walkthrough's node (its image sets
    NVIDIA_VISIBLE_DEVICES=all, as vLLM's does) and nothing where the runtime hides the cards."""
    topology(name)
    run = run_demo(sim, tmp_path, {"gpu_demo_bypass_probe": True})
    assert_clean_pass(run)
    probe = run.result["probe"]
    assert probe["ran"] is True
    assert probe["sees_gpus"] is sees
    if sees:
        assert probe["uuids"] == ["GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"]
        assert probe["visible_devices"]["mode"] == "all"
    else:
        assert probe["uuids"] == [] and probe["visible_devices"]["mode"] == "unset"


def test_node_processes_read_on_the_node_show_who_is_outside_the_ledger(sim, topology, tmp_path):
    """gpu_demo_node_processes: the sim's node view stands in for the node (nvidia-smi, /proc, checkpoint)."""
    topology("default")
    node_dir = sim.dir.run / "nodes" / "prod102"
    run = run_demo(sim, tmp_path, {
        "gpu_demo_node_processes": True, "gpu_demo_node_connection": "local", "gpu_demo_node_become": False,
        "gpu_demo_node_python_interpreter": sys.executable,
        "gpu_demo_node_processes_options": {
            "source": "nvidia-smi", "nvidia_smi_path": str(node_dir / "bin" / "nvidia-smi"), "proc_root": str(node_dir / "proc"),
            "host_root": str(node_dir), "checkpoint_path": str(node_dir / "device-plugins" / "kubelet_internal_checkpoint"),
            "pod_resources_socket": str(node_dir / "kubelet" / "pod-resources" / "kubelet.sock")}})
    assert_clean_pass(run)
    audit = run.result["node_processes"]
    gpu = audit["gpus"][0]
    assert gpu["uuid"] == "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76" and gpu["ledger_state"] == "free"
    assert gpu["memory_bytes"]["out_of_ledger_pod"] == 86016 * 2**20 and gpu["memory_bytes"]["host"] == 6144 * 2**20
    assert [user["pod_name"] for user in gpu["users"]["out_of_ledger_pod"]] == ["vllm-h20"]
    assert "is free in the ledger but 90.0 GiB of its memory is in use" in run.markdown.read_text()
