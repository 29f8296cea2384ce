"""`make report-example`: docs/report-example/, made anew from the current code on the running simulated cluster.

- gpu-demo-prod102-example-en-4gpus.* and gpu-demo-prod102-example-zh.*: one node's reports (JSON, Markdown, SVG) of
  the walkthrough on four H20s in English, and on the seed's one H20 in Chinese (topologies four-gpus and default);
  -dra-zh.* and -dra-failed-zh.*: in Chinese through DRA, passed, and failed with a driver the kubelet does not know
  (topologies dra and dra-unregistered).
- fleet/: the summary of a mixed 10-node parallel run, every node's reports, and the page's screenshots.

Fixed run ids; the machine's paths and the simulated cluster's ports (GPUOPS_SIM_PORT_OFFSET) are written as the
default cluster's, and the per-node Markdown and SVG are rendered again from the JSON so written
(tests/unit/test_report_examples.py checks they are what the current templates write; tests/integration/examples.py
that a run today has the examples' checks and sections). Times and UUIDs are the run's own.

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
from urllib.parse import urlsplit

import yaml

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from browser import screenshot  # noqa: E402  pylint: disable=wrong-import-position
from examples import EXAMPLES, FAILING, PER_NODE  # noqa: E402  pylint: disable=wrong-import-position

sys.path.insert(0, str(CHECKOUT / ".collections"))
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import (  # noqa: E402  pylint: disable=wrong-import-position
    fleet_markdown, render)

VENV_BIN = Path(sys.executable).parent
SIMCTL = [sys.executable, str(CHECKOUT / "tests" / "sim" / "simctl.py")]
OUT = EXAMPLES
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


# Where the examples say the collection is installed (the checks page each failed check links to), rather than the
# checkout that made them: ansible-galaxy's system-wide collections path.
INSTALLED = "file:///usr/share/ansible/collections/ansible_collections/gpuops/scheduling"


def canonical(text: str, sim: dict, work: Path) -> str:
    """A report's text as the default cluster on this checkout would have written it: the temporary directory is
    reports/, the cluster's ports those of offset 0, the collection installed system-wide."""
    text = text.replace(CHECKOUT.resolve().as_uri(), INSTALLED)
    text = text.replace(str(work / "reports"), "reports").replace(str(work), ".")
    offset = int(os.environ.get("GPUOPS_SIM_PORT_OFFSET") or 0)
    if offset:
        for key in ("health_url", "models_url", "api_url"):
            port = urlsplit(sim[key]).port
            if port:
                text = text.replace(f"127.0.0.1:{port}", f"127.0.0.1:{port - offset}")
    return text


def write_node_reports(source: Path, target: Path, sim: dict, work: Path, lang: str = "en") -> None:
    """A node's three reports: its JSON made canonical, the Markdown and SVG rendered from it."""
    result = json.loads(canonical(source.read_text(), sim, work))
    target.with_suffix(".json").write_text(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    target.with_suffix(".md").write_text(render(f"report.{lang}.md.j2", _gpu_demo_result=result))
    target.with_suffix(".svg").write_text(render("timeline.svg.j2", _gpu_demo_result=result))


def run_playbook(inventory: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    run = subprocess.run([str(VENV_BIN / "ansible-playbook"), "playbooks/gpu_demo.yml", "-i", str(inventory), *args],
                         cwd=CHECKOUT, env=env, capture_output=True, text=True, check=False)
    print(run.stdout[run.stdout.rindex("PLAY RECAP"):] if "PLAY RECAP" in run.stdout else run.stdout[-3000:] + run.stderr[-3000:])
    return run


def inventory_for(work: Path, sim: dict, hosts: dict, run_id: str, **variables) -> Path:
    path = work / f"inventory-{run_id}.yml"
    path.write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "gpu_demo_kubeconfig": sim["kubeconfig"],
        "gpu_demo_vllm_health_url": sim["health_url"], "gpu_demo_report_dir": str(work / "reports"),
        "gpu_demo_run_id": run_id, **variables}}}, sort_keys=False))
    return path


def per_node_examples(sim: dict) -> None:
    for name, (topology, lang) in PER_NODE.items():
        run_id = f"example-{name}"
        with tempfile.TemporaryDirectory(prefix="gpuops-example-") as workdir:
            work = Path(workdir)
            subprocess.run([*SIMCTL, "topology", topology], check=True, stdout=subprocess.DEVNULL)
            run = run_playbook(inventory_for(work, sim, {"prod102": None}, run_id, gpu_demo_report_lang=lang))
            if (run.returncode != 0) != (name in FAILING):
                raise SystemExit(f"the {name} example's run {'passed' if name in FAILING else 'failed'}, which it "
                                 "should not: nothing written")
            base = f"gpu-demo-prod102-{run_id}"
            write_node_reports(work / "reports" / f"{base}.json", OUT / base, sim, work, lang)


def fleet_example(sim: dict) -> Path:
    with tempfile.TemporaryDirectory(prefix="gpuops-example-") as workdir:
        work = Path(workdir)
        (work / "topology.yaml").write_text(yaml.safe_dump(TOPOLOGY, sort_keys=False))
        subprocess.run([*SIMCTL, "topology", str(work / "topology.yaml")], check=True, stdout=subprocess.DEVNULL)
        try:
            run_playbook(inventory_for(work, sim, HOSTS, RUN_ID), "-e", "gpu_demo_parallel=true", "--forks", "10")
        finally:
            subprocess.run([*SIMCTL, "topology", "default"], check=True, stdout=subprocess.DEVNULL)
        fleet = OUT / "fleet"
        shutil.rmtree(fleet, ignore_errors=True)
        fleet.mkdir(parents=True)
        for path in sorted((work / "reports").iterdir()):
            if path.name.startswith("gpu-demo-fleet-"):
                # The example's paths are where a person finds them, not this machine's temporary directory.
                (fleet / path.name).write_text(canonical(path.read_text(), sim, work))
            elif path.suffix == ".json":
                write_node_reports(path, fleet / path.stem, sim, work)
        # The Markdown summary from the JSON as written (the HTML page draws each node's timeline, which only the
        # run had: it is kept as the run wrote it, made canonical).
        summary = json.loads((fleet / f"gpu-demo-fleet-{RUN_ID}.json").read_text())
        (fleet / f"gpu-demo-fleet-{RUN_ID}.md").write_text(fleet_markdown(summary))
    return fleet


def main() -> int:
    sim = json.loads((Path(os.environ.get("GPUOPS_SIM_DIR") or CHECKOUT / ".sim") / "env.json").read_text())
    per_node_examples(sim)
    fleet = fleet_example(sim)
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
    print(json.dumps(summary["counts"]), f"-> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
