"""Fleet pre-flight: playbooks/gpu_demo.yml over 1, 10 and 50 fake GPU nodes, nodes in parallel, each size ``runs``
times (the row is the median run by CPU-seconds per node).

Each run is followed by one of bench/reference/gpu_demo_card.yml on the same fleet: the design card's four
kubernetes.core.k8s steps alone, the floor under a node's CPU-seconds that the playbook cannot go below while those
steps stay module processes.

The documented parallel setting: `-e gpu_demo_parallel=true` (every node in one batch) with
`--forks` = the number of nodes at once. Each fleet is a topology of N one-GPU nodes on the default
simulated cluster; the default topology is put back afterwards.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

CHECKOUT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
SIMCTL = [sys.executable, str(CHECKOUT / "tests" / "sim" / "simctl.py")]


def topology(count: int) -> dict:
    # Light nodes (tests/sim/fakelet.py): fifty real kubelets would not fit on a 2-core machine beside the run.
    return {"light_nodes": True,
            "nodes": [{"name": f"fleet-{index:03d}", "gpu": {"product": "NVIDIA H20", "count": 1}} for index in range(count)]}


def inventory(count: int, sim: dict, reports: Path) -> dict:
    """Every node's run as users get it, reports included (written into the bench's temporary directory)."""
    hosts = {f"fleet-{index:03d}": None for index in range(count)}
    return {"gpu_nodes": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "gpu_demo_kubeconfig": sim["kubeconfig"],
        "gpu_demo_vllm_health_url": sim["health_url"], "gpu_demo_report_dir": str(reports)}}}


PLAYBOOK = "playbooks/gpu_demo.yml"
CARD_ALONE = "bench/reference/gpu_demo_card.yml"


def run_fleet(count: int, forks: int, sim: dict, workdir: Path, playbook: str = PLAYBOOK) -> dict:
    topology_file = workdir / f"fleet-{count}.yaml"
    topology_file.write_text(yaml.safe_dump(topology(count)))
    inventory_file = workdir / f"fleet-{count}-inventory.yml"
    inventory_file.write_text(yaml.safe_dump(inventory(count, sim, workdir / "reports")))
    subprocess.run([*SIMCTL, "topology", str(topology_file)], check=True, stdout=subprocess.DEVNULL)
    env = {**os.environ, "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    started, cpu_before = time.monotonic(), children_cpu_seconds()
    result = subprocess.run([str(VENV_BIN / "ansible-playbook"), playbook, "-i", str(inventory_file),
                             "-e", "gpu_demo_parallel=true", "--forks", str(min(forks, count))],
                            cwd=CHECKOUT, env=env, capture_output=True, text=True, check=False)
    seconds, cpu_seconds = time.monotonic() - started, children_cpu_seconds() - cpu_before
    if result.returncode != 0:
        raise RuntimeError(f"fleet of {count} ({playbook}) failed:\n{failures(result.stdout)}")
    return {"nodes": count, "forks": min(forks, count), "seconds": seconds, "nodes_per_minute": count * 60 / seconds,
            "controller_cpu_seconds": cpu_seconds, "controller_cpu_seconds_per_node": cpu_seconds / count}


def children_cpu_seconds() -> float:
    """CPU time (user + system) of the finished child processes: ansible-playbook, its forks and every module they
    ran (kubernetes.core.k8s runs as a process of its own on the controller). The simulated cluster's processes are
    not ours and do not count."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def failures(output: str) -> str:
    """What each failed node said (the role's "GPU scheduling demo on <node> failed: ..." and fatal task results),
    then the recap: the tail of a 50-node output would show neither."""
    lines = output.splitlines()
    said = [line for line in lines if "GPU scheduling demo on" in line or line.startswith(("fatal:", "failed:"))]
    recap = lines[next((index for index, line in enumerate(lines) if line.startswith("PLAY RECAP")), len(lines)):]
    return "\n".join(said[:40] + recap)


def sim_env() -> dict:
    """The running simulated cluster's kubeconfig, health URL and versions (written by simctl up)."""
    return json.loads((Path(os.environ.get("GPUOPS_SIM_DIR") or CHECKOUT / ".sim") / "env.json").read_text())


def median_run(samples: list) -> dict:
    """The samples' medians, key by key (seconds and CPU-seconds are medians of their own)."""
    row = dict(samples[0], runs=len(samples))
    for key in ("seconds", "nodes_per_minute", "controller_cpu_seconds", "controller_cpu_seconds_per_node",
                "card_alone_cpu_seconds_per_node"):
        row[key] = statistics.median(sample[key] for sample in samples)
    return row


def main(counts=(1, 10, 50), forks: int = 10, runs: int = 3) -> list:
    sim = sim_env()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpuops-fleet-") as workdir:
        try:
            for count in counts:
                samples = []
                for index in range(runs):
                    sample = run_fleet(count, forks, sim, Path(workdir))
                    card = run_fleet(count, forks, sim, Path(workdir), playbook=CARD_ALONE)
                    sample["card_alone_cpu_seconds_per_node"] = card["controller_cpu_seconds_per_node"]
                    samples.append(sample)
                    print(f"[bench] fleet {index + 1}/{runs} {samples[-1]}", flush=True)
                rows.append(median_run(samples))
        finally:
            subprocess.run([*SIMCTL, "topology", "default"], check=True, stdout=subprocess.DEVNULL)
    return rows


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
