"""Nothing tested is never a pass: a run whose host pattern or group matches no host fails, naming the pattern and the
inventory's groups and hosts, and writes a summary that says no node was tested (playbooks/gpu_demo.yml,
playbooks/gpu_preflight_gate.yml, playbooks/gpu_demo_fleet_summary.yml).

The refusals need no cluster: inventory/sim and temporary inventories are only parsed (nothing is contacted: the
environment names no kubeconfig). The controls, a pattern that matches and a fleet with nodes, run against the sim.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from safety_helpers import CHECKOUT, CONNECTION_ENV, NODE, tail, write_inventory

pytestmark = pytest.mark.independent

VENV_BIN = Path(sys.executable).parent


def playbook(playbook_path: str, inventory, directory: Path, extra_vars: dict | None = None, args: tuple = (),
             env: dict | None = None) -> subprocess.CompletedProcess:
    command = [str(VENV_BIN / "ansible-playbook"), playbook_path, "-i", str(inventory),
               "-e", json.dumps({"gpu_demo_report_dir": str(directory / "reports"), **(extra_vars or {})}), *args]
    base = {key: value for key, value in os.environ.items() if key not in CONNECTION_ENV}
    base.update({"ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "PATH": f"{VENV_BIN}:{os.environ['PATH']}"})
    return subprocess.run(command, capture_output=True, text=True, cwd=CHECKOUT, env={**base, **(env or {})}, timeout=300,
                          check=False)


def summary_of(directory: Path) -> tuple[dict, str]:
    """The run's only summary: (its JSON, its Markdown)."""
    found = sorted((directory / "reports").glob("gpu-demo-fleet-*.json"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text()), found[0].with_suffix(".md").read_text()


def one_line(run: subprocess.CompletedProcess) -> str:
    """The output with ansible's line wrapping and YAML quoting undone, so a sentence can be searched whole."""
    return " ".join((run.stdout + run.stderr).replace("''", "'").split())


def assert_nothing_tested(run, directory, *said):
    assert run.returncode != 0, tail(run)
    text = one_line(run)
    assert "No node was tested: " in text or "The fleet's summary has no node: " in text, tail(run)
    for words in said:
        assert words in text, (words, tail(run))
    summary, markdown = summary_of(directory)
    assert summary["passed"] is False and summary["counts"]["nodes"] == 0 and summary["rows"] == []
    for words in said:
        assert words in summary["nothing_tested"], (words, summary["nothing_tested"])
    assert "**No node was tested: " in markdown
    # Nothing of the walk ran: no node's play, no node's report.
    assert "TASK [gpuops.scheduling.gpu_demo : Start the run]" not in run.stdout
    assert [path.name for path in (directory / "reports").glob("gpu-demo-*.json")
            if not path.name.startswith("gpu-demo-fleet-")] == []


def empty_group_inventory(directory: Path, group: str, other: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "empty.yml"
    path.write_text(json.dumps({group: {"hosts": {}}, **(other or {})}))
    return path


def test_a_host_pattern_that_matches_no_host_fails_naming_it_and_what_the_inventory_has(tmp_path):
    run = playbook("playbooks/gpu_demo.yml", "inventory/sim", tmp_path, {"gpu_demo_hosts": "prod999"})
    assert_nothing_tested(run, tmp_path, "the host pattern 'prod999' (gpu_demo_hosts) matches no host of the inventory",
                          "The inventory's groups: gpu_nodes (1 host(s)); its hosts: prod102.")


def test_an_empty_gpu_nodes_group_fails(tmp_path):
    inventory = empty_group_inventory(tmp_path, "gpu_nodes", {"cpu_nodes": {"hosts": {"cpu-b1": None}}})
    run = playbook("playbooks/gpu_demo.yml", inventory, tmp_path)
    assert_nothing_tested(run, tmp_path, "the host pattern 'gpu_nodes' (gpu_demo_hosts) matches no host",
                          "gpu_nodes (0 host(s))", "cpu_nodes (1 host(s))", "its hosts: cpu-b1.")


def test_a_pattern_outside_the_limit_fails_naming_the_limit(tmp_path):
    # --limit names a host that exists (ansible itself refuses a limit that matches nothing), the pattern another.
    run = playbook("playbooks/gpu_demo.yml", "inventory/sim", tmp_path, {"gpu_demo_hosts": "prod999"}, ("--limit", NODE))
    assert_nothing_tested(run, tmp_path, f"the host pattern 'prod999' (gpu_demo_hosts) matches no host of the inventory "
                                         f"within --limit {NODE}.")


def test_the_gate_over_no_new_node_fails(tmp_path):
    # inventory/sim has no group new_gpu_nodes (the gate's default); a temporary one has it empty.
    run = playbook("playbooks/gpu_preflight_gate.yml", "inventory/sim", tmp_path)
    assert_nothing_tested(run, tmp_path, "the host pattern 'new_gpu_nodes' (gpu_preflight_gate_hosts) matches no host",
                          "its hosts: prod102.")
    other = tmp_path / "empty-group"
    inventory = empty_group_inventory(other, "new_gpu_nodes", {"gpu_nodes": {"hosts": {NODE: None}}})
    run = playbook("playbooks/gpu_preflight_gate.yml", inventory, other)
    assert_nothing_tested(run, other, "'new_gpu_nodes' (gpu_preflight_gate_hosts)", "new_gpu_nodes (0 host(s))")


def test_a_fleet_summary_of_no_node_fails(tmp_path):
    # From the jobs' statistics (no cluster read): no job named a node and the inventory's group is empty.
    inventory = empty_group_inventory(tmp_path, "gpu_nodes")
    run = playbook("playbooks/gpu_demo_fleet_summary.yml", inventory, tmp_path, {"gpu_demo_fleet_source": "jobs"})
    assert_nothing_tested(run, tmp_path, "the statistics of the jobs name no node",
                          "the inventory's group 'gpu_nodes' (gpu_demo_hosts) has no host", "gpu_nodes (0 host(s))")


def test_a_fleet_summary_of_a_cluster_where_nothing_matches_fails_and_one_with_nodes_passes(sim, tmp_path):
    sim.use_topology("default")   # no Node carries a verdict yet
    inventory = empty_group_inventory(tmp_path, "gpu_nodes")
    env = {"K8S_AUTH_KUBECONFIG": sim.kubeconfig}
    run = playbook("playbooks/gpu_demo_fleet_summary.yml", inventory, tmp_path,
                   {"gpu_demo_fleet_source": "cluster", "gpu_demo_fleet_node_selector": "gpuops-it/no-such=label"}, env=env)
    assert_nothing_tested(run, tmp_path, "no Node of the cluster matches the selector gpuops-it/no-such=label or carries a "
                                         "verdict")
    # Control: the same inventory, the GPU nodes' selector: the cluster's GPU node is summarised (never pre-flighted).
    other = tmp_path / "control"
    run = playbook("playbooks/gpu_demo_fleet_summary.yml", inventory, other, {"gpu_demo_fleet_source": "cluster"}, env=env)
    assert run.returncode == 0, tail(run)
    summary, _markdown = summary_of(other)
    assert summary["counts"]["nodes"] >= 1 and summary["nothing_tested"] is None


def test_a_pattern_that_matches_runs_the_pre_flight(sim, tmp_path):
    """Control: the check lets a run with nodes through, with and without a limit (check mode: nothing created)."""
    sim.use_topology("default")
    inventory = write_inventory(tmp_path, sim, gpu_demo_kubeconfig=sim.kubeconfig)
    for args in ((), ("--limit", NODE)):
        run = playbook("playbooks/gpu_demo.yml", inventory, tmp_path, {"gpu_demo_hosts": NODE}, ("--check", *args))
        assert run.returncode == 0, tail(run)
        assert "No node was tested" not in run.stdout
        assert "TASK [gpuops.scheduling.gpu_demo : Start the run]" in run.stdout
        # The check adds no host to the play recap (AWX's hosts): only the node.
        recap = run.stdout[run.stdout.rindex("PLAY RECAP"):].splitlines()[1:]
        assert [line.split()[0] for line in recap if line.strip()] == [NODE], recap
