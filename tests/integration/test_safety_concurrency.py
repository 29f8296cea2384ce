"""Two pre-flights on one node: exactly one proceeds, the other fails fast naming the holder."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def start(sim, run_id: str, report_dir: Path) -> subprocess.Popen:
    variables = {"gpu_demo_run_id": run_id, "gpu_demo_report_dir": str(report_dir), "gpu_demo_kubeconfig": sim.kubeconfig,
                 "gpu_demo_vllm_health_url": sim.health_url}
    return subprocess.Popen([str(VENV_BIN / "ansible-playbook"), "playbooks/gpu_demo.yml", "-i", "inventory/sim",
                             "-e", json.dumps(variables)], cwd=CHECKOUT, env=sim.env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_two_runs_at_the_same_moment_one_proceeds(sim, tmp_path):
    sim.use_topology("default")
    runs = {run_id: start(sim, run_id, tmp_path / run_id) for run_id in ("concurrent-a", "concurrent-b")}
    started = time.monotonic()
    outcomes = {}
    for run_id, process in runs.items():
        output, _errors = process.communicate(timeout=300)
        outcomes[run_id] = (process.returncode, output, time.monotonic() - started)
    passed = [run_id for run_id, (code, _output, _took) in outcomes.items() if code == 0]
    refused = [run_id for run_id, (code, _output, _took) in outcomes.items() if code != 0]
    assert len(passed) == 1 and len(refused) == 1, {run_id: out[-2000:] for run_id, (_c, out, _t) in outcomes.items()}
    message = outcomes[refused[0]][1]
    assert f"node prod102 is locked by another pre-flight run: holder '{passed[0]}" in " ".join(message.split())
    # The refused run created nothing: every pod the node saw belongs to the winner, and none is left.
    pods = json.loads(sim.kubectl("get", "pods", "-A", "-l", "app.kubernetes.io/managed-by=gpuops.scheduling", "-o", "json").stdout)
    assert pods["items"] == []
    report = json.loads(next((tmp_path / passed[0]).glob("gpu-demo-prod102-*.json")).read_text())
    assert report["passed"] and not report["leftovers"]
    # The refused run tested nothing, so it wrote no verdict: the Node shows the winner's.
    node = json.loads(sim.kubectl("get", "node", "prod102", "-o", "json").stdout)
    verdict = json.loads(node["metadata"]["annotations"]["gpuops.scheduling/gpu-preflight-report"])
    assert (verdict["run_id"], verdict["state"]) == (passed[0], "passed"), verdict
    # The lock went with the winner: a third run right after takes it.
    third = start(sim, "concurrent-c", tmp_path / "c")
    output, _errors = third.communicate(timeout=300)
    assert third.returncode == 0, output[-3000:]
