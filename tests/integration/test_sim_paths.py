"""A checkout at any path runs the simulated cluster: its nodes' Unix sockets (at most 107 bytes a path) live in a
short folder of their own, removed by `make sim-down`. A clone 150 characters deep runs `make demo` and passes; a run
folder that still cannot hold them is refused before anything starts, naming the limit and the variable that moves it.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.independent

CHECKOUT = Path(__file__).resolve().parents[2]
# The clone's cluster runs beside this worker's: 1350 ports above it, clear of the parallel workers' 200-wide blocks (up to
# 7 workers) and of the benchmarks' clusters (offsets 1000 and 1500), none of their ports among the 128 kubelet ports
# `simctl down` watches close.
OFFSET = int(os.environ.get("GPUOPS_TEST_CLONE_PORT_OFFSET") or int(os.environ.get("GPUOPS_SIM_PORT_OFFSET", "0")) + 1350)


def deep_folder(base: Path, length: int) -> Path:
    """A folder whose path is ``length`` characters or more, as a clone under ~/src/github.com/<org>/<team>/ is."""
    path = base
    while len(str(path)) < length:
        path = path / ("gpuops-scheduling-checkout"[: max(1, min(26, length - len(str(path)) - 1))])
    return path


def clean_env(**extra) -> dict:
    env = {key: value for key, value in os.environ.items()
           if key not in ("GPUOPS_SIM_DIR", "GPUOPS_SIM_RUN_DIR", "K8S_AUTH_KUBECONFIG", "KUBECONFIG")}
    env["GPUOPS_SIM_PORT_OFFSET"] = str(OFFSET)
    return dict(env, **extra)


def test_a_run_folder_too_deep_for_a_socket_is_refused_before_anything_starts(tmp_path):
    sim_dir = tmp_path / "sim"
    run_dir = deep_folder(tmp_path / "run", 120)
    process = subprocess.run([str(CHECKOUT / ".venv" / "bin" / "python"), "tests/sim/simctl.py", "up"], cwd=CHECKOUT,
                             capture_output=True, text=True, timeout=120, check=False,
                             env=clean_env(GPUOPS_SIM_DIR=str(sim_dir), GPUOPS_SIM_RUN_DIR=str(run_dir)))
    output = process.stdout + process.stderr
    assert process.returncode != 0, output
    assert "Unix socket path holds at most 107 bytes" in output and "Set GPUOPS_SIM_RUN_DIR to a shorter folder" in output
    assert str(run_dir / "nodes" / "prod102") in output, output
    # Nothing started: no process recorded, no node folder made.
    assert not list((sim_dir / "pids").glob("*")) if (sim_dir / "pids").exists() else True
    assert not run_dir.exists()


def test_a_clone_150_characters_deep_runs_make_demo_and_sim_down_removes_its_sockets_folder(tmp_path):
    deep = deep_folder(tmp_path, 150)
    assert len(str(deep)) >= 150
    subprocess.run(["git", "clone", "--quiet", str(CHECKOUT), str(deep)], check=True, timeout=120)
    # The clone has what is committed; what this checkout changed and has not committed yet goes with it.
    changed = subprocess.run(["git", "ls-files", "-z", "--modified", "--others", "--exclude-standard"], cwd=CHECKOUT,
                             capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, changed):
        if (CHECKOUT / name).is_file():
            (deep / name).parent.mkdir(parents=True, exist_ok=True)
            (deep / name).write_bytes((CHECKOUT / name).read_bytes())
    env = clean_env()
    env["PATH"] = os.pathsep.join(part for part in env["PATH"].split(os.pathsep) if not part.startswith(str(CHECKOUT)))
    try:
        demo = subprocess.run(["make", "demo"], cwd=deep, capture_output=True, text=True, timeout=540, check=False, env=env)
        assert demo.returncode == 0, demo.stdout[-4000:] + demo.stderr[-2000:]
        assert "failed=0" in demo.stdout and "prod102" in demo.stdout, demo.stdout[-3000:]
        run_link = deep / ".sim" / "run"
        assert run_link.is_symlink() and len(str(run_link.resolve())) < 40, run_link
        sockets_folder = run_link.resolve()
    finally:
        down = subprocess.run(["make", "sim-down"], cwd=deep, capture_output=True, text=True, timeout=180, check=False,
                              env=env)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not sockets_folder.exists() and not (deep / ".sim" / "run").exists()
