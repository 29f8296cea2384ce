"""`make report-example`: docs/report-example/fleet/, the summary of a mixed 10-node parallel run, and its screenshots.

Ten light nodes (tests/sim/fakelet.py: ten real kubelets would not fit on a 2-core machine beside the run) on the
running simulated cluster: plain, tainted, busy, cordoned, NotReady, without a GPU, one whose H20 vLLM uses without
requesting it, and one host with bad input. playbooks/gpu_demo.yml runs them in parallel as users run a fleet; the
summary and every node's reports are copied to docs/report-example/fleet/, and headless Chromium takes the
screenshots (the page, and the whole page with a failed and a passed node's stories open). The default topology is put back afterwards.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from browser import screenshot  # noqa: E402  pylint: disable=wrong-import-position

VENV_BIN = Path(sys.executable).parent
SIMCTL = [sys.executable, str(CHECKOUT / "tests" / "sim" / "simctl.py")]
OUT = CHECKOUT / "docs" / "report-example"
RUN_ID = "example-10"
H20 = {"product": "NVIDIA H20", "memory_mib": 97871}
TOPOLOGY = {
    "light_nodes": True,
    "nodes": [
        {"name": "gpu-01", "gpu": dict(H20, count=2)},
        {"name": "gpu-02", "gpu": dict(H20, count=1, memory_used_mib={0: 92160})},
        {"name": "gpu-03", "gpu": dict(H20, count=2), "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        {"name": "gpu-04", "gpu": {"product": "NVIDIA H200", "memory_mib": 143771, "count": 4}},
        {"name": "gpu-05", "gpu": dict(H20, count=1), "unschedulable": True},
        {"name": "gpu-06", "gpu": dict(H20, count=1), "ready": False},
        {"name": "gpu-07", "gpu": dict(H20, count=2)},
        {"name": "cpu-08"},
        {"name": "gpu-09", "gpu": dict(H20, count=1)},
    ],
    "pods": [{"namespace": "inference", "name": "llm-07-0", "node": "gpu-07", "gpus": 1, "labels": {"app": "llm"}}],
}
HOSTS = {**{node["name"]: None for node in TOPOLOGY["nodes"]},
         "gpu-10": {"gpu_demo_node": "gpu-09", "gpu_demo_hold_mode": "all-at-once"}}


def main() -> int:
    sim = json.loads((Path(os.environ.get("GPUOPS_SIM_DIR") or CHECKOUT / ".sim") / "env.json").read_text())
    with tempfile.TemporaryDirectory(prefix="gpuops-example-") as workdir:
        work = Path(workdir)
        (work / "topology.yaml").write_text(yaml.safe_dump(TOPOLOGY, sort_keys=False))
        (work / "inventory.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": HOSTS, "vars": {
            "ansible_connection": "local", "gpu_demo_kubeconfig": sim["kubeconfig"],
            "gpu_demo_vllm_health_url": sim["health_url"], "gpu_demo_report_dir": str(work / "reports"),
            "gpu_demo_run_id": RUN_ID}}}, sort_keys=False))
        subprocess.run([*SIMCTL, "topology", str(work / "topology.yaml")], check=True, stdout=subprocess.DEVNULL)
        try:
            env = {**os.environ, "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
            run = subprocess.run([str(VENV_BIN / "ansible-playbook"), "playbooks/gpu_demo.yml", "-i", str(work / "inventory.yml"),
                                  "-e", "gpu_demo_parallel=true", "--forks", "10"],
                                 cwd=CHECKOUT, env=env, capture_output=True, text=True, check=False)
        finally:
            subprocess.run([*SIMCTL, "topology", "default"], check=True, stdout=subprocess.DEVNULL)
        print(run.stdout[run.stdout.rindex("PLAY RECAP"):])
        fleet = OUT / "fleet"
        shutil.rmtree(fleet, ignore_errors=True)
        # The example's paths are where a person finds them, not this machine's temporary directory.
        shutil.copytree(work / "reports", fleet)
        for path in fleet.iterdir():
            text = path.read_text()
            if str(work) in text:
                path.write_text(text.replace(str(work / "reports"), "reports").replace(str(work), "."))
    page = fleet / f"gpu-demo-fleet-{RUN_ID}.html"
    screenshot(page, OUT / "gpu-demo-fleet-example.png", width=1600, height=1250)
    # The stories of the first failed and the first passed node, opened (as a click on their row opens them).
    summary = json.loads((fleet / f"gpu-demo-fleet-{RUN_ID}.json").read_text())
    statuses = [row["status"] for row in summary["rows"]]
    opened = page.read_text()
    for index in (statuses.index("failed"), statuses.index("passed")):
        opened = opened.replace(f'<details class="node" id="node-{index}">', f'<details class="node" id="node-{index}" open>')
    with tempfile.TemporaryDirectory(prefix="gpuops-example-") as workdir:
        stories = Path(workdir) / page.name
        stories.write_text(opened)
        screenshot(stories, OUT / "gpu-demo-fleet-example-stories.png", width=1600, height=2000)
    print(json.dumps(summary["counts"]), f"-> {fleet}, {OUT / 'gpu-demo-fleet-example.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
