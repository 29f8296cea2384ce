"""A failure's phase is data the run carries, never read from a task's name.

The collection is copied with every task of the role and of the playbook renamed ("Step 1", "Step 2", ...), and runs
that fail in different phases still name the same phase: in the node's result, in the run's summary and on the Node.
"""
from __future__ import annotations

import json
import shutil
import threading
import uuid
from pathlib import Path

import pytest
import yaml
from test_gpu_demo import Run, demo_pods, demo_vars, occupy_when_hold_runs

pytestmark = pytest.mark.independent

CHECKOUT = Path(__file__).resolve().parents[2]


def rename_every_task(path: Path, counter: list) -> None:
    """Every task's (and block's) name in a tasks or playbook file becomes "Step N"."""
    def walk(tasks):
        for task in tasks or []:
            if isinstance(task, dict):
                if "name" in task and "hosts" not in task:   # a task or a block, not a play
                    counter[0] += 1
                    task["name"] = "Step {0}".format(counter[0])
                for key in ("block", "rescue", "always", "tasks"):
                    walk(task.get(key))
    documents = yaml.safe_load(path.read_text())
    walk(documents)
    path.write_text(yaml.safe_dump(documents, sort_keys=False, width=1000))


@pytest.fixture(scope="module")
def renamed(tmp_path_factory) -> Path:
    """The collection, every role and playbook task renamed, installed where ansible finds it first."""
    root = tmp_path_factory.mktemp("renamed")
    copy = root / "ansible_collections" / "gpuops" / "scheduling"
    shutil.copytree(CHECKOUT, copy, ignore=shutil.ignore_patterns(".*", "tests", "bench", "reports", "docs", "__pycache__"))
    counter = [0]
    for path in sorted((copy / "roles" / "gpu_demo" / "tasks").glob("*.yml")) + [copy / "playbooks" / "gpu_demo.yml"]:
        rename_every_task(path, counter)
    assert counter[0] > 40
    text = (copy / "roles" / "gpu_demo" / "tasks" / "walk.yml").read_text()
    assert "Hold |" not in text and "Step " in text
    return root


def run_renamed(sim, renamed: Path, tmp_path: Path, **extra) -> Run:
    run_id = "ph-" + uuid.uuid4().hex[:8]
    playbook = renamed / "ansible_collections" / "gpuops" / "scheduling" / "playbooks" / "gpu_demo.yml"
    process = sim.playbook(str(playbook), extra_vars=demo_vars(sim, tmp_path, run_id, **extra),
                           env={"ANSIBLE_COLLECTIONS_PATH": str(renamed)})
    run = Run(process, tmp_path, run_id)
    assert "Step " in run.output, "the renamed collection did not run"
    return run


def summary_row(tmp_path: Path) -> dict:
    summary = json.loads(next(tmp_path.glob("gpu-demo-fleet-*.json")).read_text())
    return summary["rows"][0]


def test_a_refused_node_fails_in_the_preflight_whatever_the_tasks_are_called(sim, renamed, tmp_path):
    sim.use_topology("busy")
    run = run_renamed(sim, renamed, tmp_path)
    assert run.rc != 0
    assert run.result["failure"]["phase"] == "preflight" and run.result["failure"]["task"].startswith("Step ")
    assert run.result["failed_checks"] == ["node_not_busy"]
    assert summary_row(tmp_path)["phase"] == "preflight"


def test_a_failed_release_fails_in_the_release_whatever_the_tasks_are_called(sim, renamed, tmp_path):
    """A higher-priority pod of the test takes the unit the hold frees, so the queue pod never runs."""
    sim.use_topology("default")
    blocker_class = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": "it-phase-blocker"}, "value": 1000, "preemptionPolicy": "Never"}
    blocker = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "it-phase-blocker", "namespace": "default"},
               "spec": {"priorityClassName": "it-phase-blocker", "nodeSelector": {"kubernetes.io/hostname": "prod102"},
                        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    sim.kubectl("apply", "-f", "-", input=json.dumps(blocker_class))
    stop = threading.Event()
    watcher = occupy_when_hold_runs(sim, blocker, stop)
    try:
        run = run_renamed(sim, renamed, tmp_path, gpu_demo_timeout=8)
        watcher.join(timeout=10)
        assert run.rc != 0, run.output[-3000:]
        assert run.result["failure"]["phase"] == "release", run.result["failure"]
        assert "queue_ran_on_node" in run.result["failed_checks"]
        # The walk's own words, not the wait's: the pod that took the unit is named.
        assert "it-phase-blocker" in run.result["failure"]["message"]
        assert summary_row(tmp_path)["phase"] == "release"
        assert demo_pods(sim) == []
    finally:
        stop.set()
        sim.kubectl("delete", "pod", "-n", "default", "it-phase-blocker", "--ignore-not-found", "--wait=true")
        sim.kubectl("delete", "priorityclass", "it-phase-blocker", "--ignore-not-found")
