"""Occupied window and whole run: playbooks/gpu_demo.yml against the kubectl reference script.

Both run on the simulated cluster's default topology (prod102, one H20), alternating, `runs` times
each. The occupied window (first demo pod created -> last demo pod gone) is timed from outside by a
watch (bench/pod_clock.py); the whole run is the wall time of the command, and its CPU-seconds those of the
command and every process it started. With ``busy``, as on a shared AWX execution node: one process per core spins
for the whole measurement (started here, stopped at the end), at the same priority as the run.
"""
from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pod_clock import PodClock

CHECKOUT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def sim_env() -> dict:
    """The running simulated cluster's kubeconfig and URLs (GPUOPS_SIM_DIR selects another than .sim/)."""
    return json.loads((Path(os.environ.get("GPUOPS_SIM_DIR") or CHECKOUT / ".sim") / "env.json").read_text())


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list, env: dict, kubeconfig: str) -> dict:
    with PodClock(kubeconfig, "gpu-operator") as clock:
        started, cpu_before = time.monotonic(), children_cpu_seconds()
        result = subprocess.run(command, cwd=CHECKOUT, env=env, capture_output=True, text=True, check=False)
        total, cpu = time.monotonic() - started, children_cpu_seconds() - cpu_before
        if result.returncode != 0:
            raise RuntimeError(f"{command[0]} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
        return {"occupied_s": clock.window(), "total_s": total, "cpu_s": cpu, "tasks": recap_tasks(result.stdout)}


def recap_tasks(output: str) -> dict | None:
    """The play recap's counts for the node (ok counts the changed tasks too), None for a script."""
    for line in output.splitlines():
        if line.startswith("prod102") and "ok=" in line:
            counts = dict(field.split("=") for field in line.split(":", 1)[1].split())
            return {key: int(counts[key]) for key in ("ok", "changed", "skipped")}
    return None


@contextlib.contextmanager
def busy_cores(busy: bool):
    """One spinning process per core while the block runs (none unless ``busy``)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _core in range(os.cpu_count() or 1)] if busy else []
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main(runs: int = 5, busy: bool = False) -> dict:
    sim = sim_env()
    subprocess.run([sys.executable, str(CHECKOUT / "tests" / "sim" / "simctl.py"), "topology", "default"], check=True,
                   stdout=subprocess.DEVNULL)
    env = {**os.environ, "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
           "KUBECONFIG": sim["kubeconfig"], "KUBECTL": sim["kubectl"]}
    playbook = [str(VENV_BIN / "ansible-playbook"), "playbooks/gpu_demo.yml", "-i", "inventory/sim",
                "-e", json.dumps({"gpu_demo_write_report": False, "gpu_demo_kubeconfig": sim["kubeconfig"],
                                  "gpu_demo_vllm_health_url": sim["health_url"]})]
    reference = ["bash", str(CHECKOUT / "bench" / "reference" / "gpu_demo_kubectl.sh"), "prod102"]
    samples = {"playbook": [], "kubectl": []}
    with busy_cores(busy):
        for index in range(runs):
            for name, command in (("playbook", playbook), ("kubectl", reference)) if index % 2 == 0 else \
                    (("kubectl", reference), ("playbook", playbook)):
                samples[name].append(timed(command, env, sim["kubeconfig"]))
                print(f"[bench] {'busy' if busy else 'quiet'} run {index + 1}/{runs} {name}: {samples[name][-1]}", flush=True)
    median = {name: {key: statistics.median(sample[key] for sample in values) for key in ("occupied_s", "total_s", "cpu_s")}
              for name, values in samples.items()}
    return {"runs": runs, "busy": busy, "samples": samples, "median": median, "tasks": samples["playbook"][-1]["tasks"],
            "occupied_ratio": median["playbook"]["occupied_s"] / median["kubectl"]["occupied_s"],
            "total_ratio": median["playbook"]["total_s"] / median["kubectl"]["total_s"]}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, busy="--busy" in sys.argv), indent=2))
