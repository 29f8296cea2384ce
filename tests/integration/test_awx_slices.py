"""An AWX sliced job, emulated with ansible-runner as AWX runs it: the fleet's nodes dealt to three slices round-robin
by sorted name, each slice a job of its own (its own awx_job_id and private data dir, run at the same time), their
set_stats artifacts combined as AWX combines them for the workflow's next node (a shallow dict update, the slice that
finished last winning each top-level key) in every finish order, then the summary job
(playbooks/gpu_demo_fleet_summary.yml) run with the combined artifacts as its extra variables: from the Nodes'
verdicts, and from the artifacts alone when the cluster cannot be read. Both list every node with its verdict.

Topology: fleet.
"""
from __future__ import annotations

import itertools
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safety_helpers import CHECKOUT, closed_loopback_port

VENV_BIN = Path(sys.executable).parent
HOSTS = ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4", "cpu-b1"]
SLICES = 3
# What the fleet topology makes of each node (tests/integration/test_fleet_summary.py runs the same nodes at once).
EXPECTED = {"gpu-a2": ("passed", None, None), "gpu-a1": ("failed", "preflight", "node_not_busy"),
            "gpu-a3": ("failed", "preflight", "node_schedulable"), "gpu-a4": ("failed", "preflight", "node_ready"),
            "cpu-b1": ("failed", "preflight", "node_found")}


def runner_job(sim, directory: Path, ident: str, playbook: str, hosts: list, extravars: dict) -> subprocess.Popen:
    """A private data dir as AWX lays one out for a job (project, inventory of the job's hosts, extra vars), started."""
    private = directory / ident
    (private / "project").mkdir(parents=True)
    shutil.copytree(CHECKOUT / "playbooks", private / "project" / "playbooks")
    (private / "inventory").mkdir()
    (private / "inventory" / "hosts").write_text(json.dumps({"gpu_nodes": {"hosts": {host: {} for host in hosts}, "vars": {
        "ansible_connection": "local", "gpu_demo_kubeconfig": sim.kubeconfig, "gpu_demo_vllm_health_url": sim.health_url,
        "gpu_demo_timeout": 30}}}))
    (private / "env").mkdir()
    (private / "env" / "extravars").write_text(json.dumps({"gpu_demo_report_dir": str(directory / "reports"), **extravars}))
    (private / "env" / "envvars").write_text(json.dumps({"ANSIBLE_COLLECTIONS_PATH": str(CHECKOUT / ".collections")}))
    env = {key: value for key, value in sim.env.items() if not key.startswith(("K8S_AUTH_", "ANSIBLE_CONFIG"))}
    env.pop("KUBECONFIG", None)
    return subprocess.Popen([str(VENV_BIN / "ansible-runner"), "run", str(private), "-p", playbook, "--ident", ident, "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def artifacts(directory: Path, ident: str) -> tuple:
    """(status, the set_stats artifacts) of a finished job, as AWX reads them (the playbook_on_stats event)."""
    job = directory / ident / "artifacts" / ident
    events = [json.loads(path.read_text()) for path in (job / "job_events").glob("*.json")]
    stats, = [event for event in events if event["event"] == "playbook_on_stats"]
    return (job / "status").read_text().strip(), stats["event_data"].get("artifact_data") or {}


def awx_combine(finished: list) -> dict:
    """WorkflowJob.get_effective_artifacts: each successful or failed job's artifacts, in finish order, dict.update."""
    combined = {}
    for status, data in finished:
        if status in ("successful", "failed"):
            combined.update(data)
    return combined


@pytest.fixture(scope="module")
def sliced(sim, tmp_path_factory):
    sim.use_topology("fleet")
    directory = tmp_path_factory.mktemp("awx-slices")
    ordered = sorted(HOSTS)
    slices = [ordered[number::SLICES] for number in range(SLICES)]
    jobs = {f"job{201 + number}": runner_job(sim, directory, f"job{201 + number}", "playbooks/gpu_demo.yml", hosts,
                                             {"awx_job_id": 201 + number, "awx_workflow_job_id": 200, "gpu_demo_parallel": True})
            for number, hosts in enumerate(slices)}
    outputs = {ident: process.communicate(timeout=600)[0] for ident, process in jobs.items()}
    return {"directory": directory, "slices": dict(zip(jobs, slices)), "outputs": outputs,
            "finished": {ident: artifacts(directory, ident) for ident in jobs}}


def test_a_sliced_job_keeps_every_node_under_per_job_keys_in_any_finish_order(sliced):
    finished, slices = sliced["finished"], sliced["slices"]
    assert {ident: status for ident, (status, _data) in finished.items()} == {
        ident: ("successful" if hosts == ["gpu-a2"] else "failed") for ident, hosts in slices.items()}, sliced["outputs"]
    for order in itertools.permutations(finished):
        combined = awx_combine([finished[ident] for ident in order])
        # The one shared key holds the last slice's nodes only: what AWX users lose today.
        assert set(combined["gpu_demo"]) == set(slices[order[-1]]) != set(HOSTS)
        # Under each job's own key, every node of every slice, with its verdict.
        per_job = {key: value for key, value in combined.items() if key.startswith("gpu_demo_j")}
        assert sorted(per_job) == ["gpu_demo_j201", "gpu_demo_j202", "gpu_demo_j203"]
        verdicts = {node: verdict for value in per_job.values() for node, verdict in value.items()}
        assert {node: (verdict["state"], verdict["phase"], verdict["check"]) for node, verdict in verdicts.items()} == EXPECTED
        assert all(verdict["job"] == key[len("gpu_demo_j"):] for key, value in per_job.items() for verdict in value.values())
        counts = [combined[f"gpu_demo_fleet_j{ident[3:]}"]["counts"]["nodes"] for ident in finished]
        assert sum(counts) == len(HOSTS)


@pytest.mark.parametrize("source", ["the Nodes", "the statistics of the jobs"])
def test_the_summary_job_after_the_slices_lists_every_node(sim, sliced, source):
    directory = sliced["directory"]
    order = list(sliced["finished"])
    random.Random(source).shuffle(order)
    extravars = awx_combine([sliced["finished"][ident] for ident in order])
    name = "summary-nodes" if source == "the Nodes" else "summary-jobs"
    extravars.update(awx_job_id=300, gpu_demo_run_id=name)
    if source != "the Nodes":
        # The summary job's execution environment cannot reach the cluster: the slices' statistics are all it has.
        closed = directory / "closed.kubeconfig"
        config = json.loads(Path(sim.kubeconfig).read_text())
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{closed_loopback_port()}"
        closed.write_text(json.dumps(config))
        extravars["gpu_demo_fleet_kubeconfig"] = str(closed)
    process = runner_job(sim, directory, name, "playbooks/gpu_demo_fleet_summary.yml", HOSTS, extravars)
    output = process.communicate(timeout=300)[0]
    status, data = artifacts(directory, name)
    assert status == "successful", output[-4000:]
    assert f'"source": "{source}"' in (directory / name / "artifacts" / name / "stdout").read_text()
    summary = data["gpu_demo_fleet"]
    rows = {row["host"]: (row["status"], row["phase"], row["check"]) for row in summary["rows"]}
    assert rows == EXPECTED, summary["rows"]
    assert summary["mode"] == "verdicts" and summary["counts"]["nodes"] == len(HOSTS)
    written = json.loads((directory / "reports" / f"gpu-demo-fleet-{name}.json").read_text())
    assert {row["host"] for row in written["rows"]} == set(HOSTS)
    for ext in ("md", "html"):
        assert "gpu-a4" in (directory / "reports" / f"gpu-demo-fleet-{name}.{ext}").read_text()
