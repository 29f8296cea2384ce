"""Every topology of tests/sim/topologies runs the full demo to its expected end on real-kubelet nodes.

(default, four-gpus, time-slicing, busy and no-gpu have their own tests in test_gpu_demo.py; cdi and strategy-* in
test_strategies.py; vllm-api-key in test_safety_secrets.py.)
"""
from __future__ import annotations

import json
import uuid

import pytest
import yaml
from test_gpu_demo import MANAGED, assert_clean_pass, run_demo, topology  # noqa: F401  pylint: disable=unused-import  # the fixture

# Each test sets up the cluster it needs (its own topology first): any worker may run it (conftest.py).
pytestmark = pytest.mark.independent


def test_mixed_mig_full_walk_holds_every_instance_and_hands_one_to_the_queue(sim, topology, tmp_path):
    topology("mig-mixed")
    run = run_demo(sim, tmp_path, {"gpu_demo_resource": "nvidia.com/mig-1g.10gb"})
    assert_clean_pass(run)
    hold = run.result["hold"]
    assert len(hold["distinct_uuids"]) == 7 and all(uuid.startswith("MIG-") for uuid in hold["distinct_uuids"])
    assert run.result["queue"]["evidence"]["unit_uuids"][0] in hold["distinct_uuids"]


def test_fleet_each_node_ends_as_its_state_says(sim, tmp_path):
    """One parallel play over the fleet topology (as fleets are pre-flighted): the free node passes, the others are
    refused before anything is created, each for its own reason."""
    sim.use_topology("fleet")
    run_id = "fleet-" + uuid.uuid4().hex[:6]
    hosts = {name: None for name in ("gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4", "cpu-b1")}
    inventory = tmp_path / "fleet.yml"
    inventory.write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "gpu_demo_kubeconfig": sim.kubeconfig, "gpu_demo_vllm_health_url": sim.health_url,
        "gpu_demo_report_dir": str(tmp_path), "gpu_demo_run_id": run_id, "gpu_demo_timeout": 30}}}))
    # An extra var: the play's `serial` is templated before any host's variables exist.
    process = sim.playbook("playbooks/gpu_demo.yml", inventory=str(inventory), extra_vars={"gpu_demo_parallel": True})
    reports = {name: json.loads((tmp_path / f"gpu-demo-{name}-{run_id}.json").read_text()) for name in hosts}
    expected = {"gpu-a1": ["node_not_busy"], "gpu-a2": [], "gpu-a3": ["node_schedulable"], "gpu-a4": ["node_ready"],
                "cpu-b1": ["node_found"]}
    assert {name: report["failed_checks"] for name, report in reports.items()} == expected, process.stdout[-4000:]
    assert "gpu-a2" in process.stdout and process.returncode != 0
    assert not sim.kubectl("get", "pods", "-A", "-l", MANAGED, "-o", "name").stdout.split()
