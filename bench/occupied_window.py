"""Occupied window and whole run: playbooks/gpu_demo.yml against the kubectl reference script.

Both run on the simulated cluster's default topology (prod102, one H20), alternating, `runs` times
each. The occupied window (first demo pod created -> last demo pod gone) is timed from outside by a
watch (bench/pod_clock.py); the whole run is the wall time of the command.
"""
from __future__ import annotations

import json
import os
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


def timed(command: list, env: dict, kubeconfig: str) -> dict:
    with PodClock(kubeconfig, "gpu-operator") as clock:
        started = time.monotonic()
        result = subprocess.run(command, cwd=CHECKOUT, env=env, capture_output=True, text=True, check=False)
        total = time.monotonic() - started
        if result.returncode != 0:
            raise RuntimeError(f"{command[0]} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
        return {"occupied_s": clock.window(), "total_s": total}


def main(runs: int = 5) -> dict:
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
    for index in range(runs):
        for name, command in (("playbook", playbook), ("kubectl", reference)) if index % 2 == 0 else \
                (("kubectl", reference), ("playbook", playbook)):
            samples[name].append(timed(command, env, sim["kubeconfig"]))
            print(f"[bench] run {index + 1}/{runs} {name}: {samples[name][-1]}", flush=True)
    median = {name: {key: statistics.median(sample[key] for sample in values) for key in ("occupied_s", "total_s")}
              for name, values in samples.items()}
    return {"runs": runs, "samples": samples, "median": median,
            "occupied_ratio": median["playbook"]["occupied_s"] / median["kubectl"]["occupied_s"],
            "total_ratio": median["playbook"]["total_s"] / median["kubectl"]["total_s"]}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5), indent=2))
