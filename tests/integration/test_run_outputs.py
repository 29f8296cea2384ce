"""One outcome, said everywhere, on real kubelets: what the run writes after the nodes' verdicts (the metrics textfile,
the report folder) is proven writable before the first pod, and refused naming the variable and the path, with nothing
on the Node changed; a textfile folder that goes read-only after that probe (once the verdict said passed) makes the
run fail and the Node's verdict say so: condition, label, report and a Warning Event.
"""
from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from test_gpu_demo import demo_vars

pytestmark = pytest.mark.independent

OURS = ("gpuops.scheduling/gpu-preflight", "gpuops.scheduling/gpu-preflight-report",
        "gpuops.scheduling/GPUPreflightPassed")


def node(sim) -> dict:
    return json.loads(sim.kubectl("get", "node", "prod102", "-o", "json").stdout)


def verdict_state(sim) -> tuple:
    """What the Node says of the pre-flight: its label, report annotation and condition."""
    found = node(sim)
    condition = [entry for entry in found["status"]["conditions"] if entry["type"] == OURS[2]]
    return (found["metadata"].get("labels", {}).get(OURS[0]), found["metadata"].get("annotations", {}).get(OURS[1]),
            [(entry["status"], entry["reason"], entry["message"]) for entry in condition])


@pytest.fixture
def tmpfs(tmp_path):
    folder = tmp_path / "textfile"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


def refused(sim, tmp_path, **extra) -> subprocess.CompletedProcess:
    before = verdict_state(sim)
    run = sim.playbook("playbooks/gpu_demo.yml", extra_vars=demo_vars(sim, tmp_path, "out-" + uuid.uuid4().hex[:6], **extra))
    assert run.returncode != 0, run.stdout[-3000:]
    assert "Refused before any pod: " in run.stdout, run.stdout[-3000:]
    # No pod was made and nothing on the Node changed: the role never started.
    assert "Hold every free unit" not in run.stdout and "Preflight |" not in run.stdout, run.stdout[-3000:]
    assert verdict_state(sim) == before
    return run


def test_a_textfile_in_a_missing_folder_is_refused_before_any_pod(sim, tmp_path):
    sim.use_topology("default")
    run = refused(sim, tmp_path, gpu_demo_metrics_textfile="/nonexistent/x.prom")
    assert "gpu_demo_metrics_textfile=/nonexistent/x.prom: its folder /nonexistent does not exist" in run.stdout


def test_a_read_only_textfile_folder_and_report_folder_are_refused_before_any_pod(sim, tmp_path, tmpfs):
    sim.use_topology("default")
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    run = refused(sim, tmp_path, gpu_demo_metrics_textfile=str(tmpfs / "gpu.prom"))
    assert f"gpu_demo_metrics_textfile={tmpfs / 'gpu.prom'}: a file cannot be written in its folder {tmpfs} " \
           "(Read-only file system)" in run.stdout, run.stdout[-3000:]
    run = refused(sim, tmp_path, gpu_demo_report_dir=str(tmpfs / "reports"))
    assert f"gpu_demo_report_dir={tmpfs / 'reports'}: the folder cannot be made (Read-only file system)" in run.stdout


def test_a_textfile_folder_that_goes_read_only_after_the_verdict_fails_the_run_and_the_node_says_so(sim, tmp_path, tmpfs):
    sim.use_topology("default")
    run_id = "late-" + uuid.uuid4().hex[:6]
    variables = demo_vars(sim, tmp_path, run_id, gpu_demo_metrics_textfile=str(tmpfs / "gpu.prom"))
    command = [str(sim_bin(sim) / "ansible-playbook"), "playbooks/gpu_demo.yml", "-i", "inventory/sim", "-e", json.dumps(variables)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=sim.env)
    # The folder goes read-only once the Node's verdict says passed: after the probe, before the summary.
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        label, report, _condition = verdict_state(sim)
        if label == "passed" and report and json.loads(report).get("run_id") == run_id:
            subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
            break
        time.sleep(0.1)
    output = process.communicate(timeout=300)[0]
    assert process.returncode != 0, output[-3000:]
    assert f"cannot write the metrics textfile {tmpfs / 'gpu.prom'}" in output, output[-3000:]
    label, report, condition = verdict_state(sim)
    verdict = json.loads(report)
    assert (label, verdict["state"], verdict["run_id"], verdict["phase"]) == ("failed", "failed", run_id, "report"), verdict
    assert condition[0][:2] == ("False", "PreflightError"), condition
    assert "the run failed after this verdict: cannot write the metrics textfile" in condition[0][2], condition
    events = sim.kubectl("events", "--for", "node/prod102", "--types=Warning").stdout
    assert "GPUPreflightFailed" in events and run_id in events, events


def sim_bin(sim):
    from conftest import VENV_BIN  # pylint: disable=import-outside-toplevel
    return VENV_BIN
