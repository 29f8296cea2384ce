"""The run's summary for 500 nodes (issue 17: under 2 s on the controller). No cluster needed.

  1. pure: plugin_utils/_gpu_demo_fleet.py over 500 per-node results (rows, counts, JSON, Markdown, HTML), median of 5;
  2. as the playbook runs it: the summary play of playbooks/gpu_demo.yml and the play failing the failed nodes, as
     they are, over an inventory of 500 hosts that each carry a per-node result (as the role's facts would), the
     summary task's own duration (the json callback's start/end: templating its arguments from hostvars, the action,
     writing the three files), each task's, and the two plays' wall time.

The results are the unit tests' fixtures (tests/unit/fixtures/gpu_demo_results: a passed node with two H20s, 35 KB of
result, and a refused one), 9 in 10 passed, with every node's name in its result.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

CHECKOUT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
sys.path.insert(0, str(CHECKOUT / ".collections"))
from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _gpu_demo_fleet as fleet  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import (  # noqa: E402  pylint: disable=wrong-import-position
    fleet_html, fleet_markdown)

FIXTURES = CHECKOUT / "tests" / "unit" / "fixtures" / "gpu_demo_results"
NODES = 500
REPEATS = 5
TARGET_S = 2.0


def results(count: int) -> dict:
    passed = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
    refused = json.loads((FIXTURES / "gpu-a4-not-ready.json").read_text())
    hosts = ["gpu-%03d" % index for index in range(count)]
    return dict((host, dict(refused if index % 10 == 0 else passed, node=host)) for index, host in enumerate(hosts))


def pure(count: int) -> dict:
    data = results(count)
    times, sizes = [], {}
    for _repeat in range(REPEATS):
        started = time.perf_counter()
        summary = fleet.fleet_summary(list(data), data, {}, run_id="bench", report_dir="/tmp/reports")
        sizes = {"json": len(fleet.render_json(summary)), "markdown": len(fleet_markdown(summary)),
                 "html": len(fleet_html(summary))}
        times.append(time.perf_counter() - started)
    return {"nodes": count, "seconds": statistics.median(times), "bytes": sizes}


def in_playbook(count: int) -> dict:
    plays = yaml.safe_load((CHECKOUT / "playbooks" / "gpu_demo.yml").read_text())
    summary_play, failed_play = plays[-2:]
    assert summary_play["tasks"][0]["name"].startswith("Summary | Write"), "the summary play and the failed nodes' end the playbook"
    with tempfile.TemporaryDirectory(prefix="gpuops-summary-bench-") as workdir:
        work = Path(workdir)
        data = results(count)
        (work / "inventory.json").write_text(json.dumps({"gpu_nodes": {"hosts": dict(
            (host, {"_gpu_demo_result": result}) for host, result in data.items())}}))
        (work / "summary.yml").write_text(yaml.safe_dump([summary_play, failed_play], sort_keys=False))
        env = {**os.environ, "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
               "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
               "ANSIBLE_COLLECTIONS_PATH": str(CHECKOUT / ".collections")}
        started = time.monotonic()
        run = subprocess.run([str(VENV_BIN / "ansible-playbook"), str(work / "summary.yml"), "-i", str(work / "inventory.json"),
                              "-e", json.dumps({"gpu_demo_report_dir": str(work / "reports"), "gpu_demo_run_id": "bench",
                                                "gpu_demo_parallel": True}), "--forks", "10"],
                             cwd=CHECKOUT, env=env, capture_output=True, text=True, check=False)
        wall = time.monotonic() - started
        output = json.loads(run.stdout)
        tasks = [task for play in output["plays"] for task in play["tasks"]]
        seconds = dict((task["task"]["name"], elapsed(task["task"]["duration"])) for task in tasks)
        written = sorted(path.name for path in (work / "reports").iterdir())
        counts = json.loads((work / "reports" / "gpu-demo-fleet-bench.json").read_text())["counts"]
        failed_in_recap = sum(1 for stats in output["stats"].values() if stats["failures"])
    assert written == ["gpu-demo-fleet-bench.html", "gpu-demo-fleet-bench.json", "gpu-demo-fleet-bench.junit.xml",
                       "gpu-demo-fleet-bench.md"], written
    assert counts["nodes"] == count and counts["failed"] == count // 10, counts
    assert failed_in_recap == counts["failed"], (failed_in_recap, counts)
    # The summary's writing task, the first of the play's first block where that is a block (its failure path is a rescue).
    first = summary_play["tasks"][0]
    writing = first["block"][0]["name"] if "block" in first else first["name"]
    return {"nodes": count, "task_s": seconds[writing], "play_wall_s": wall, "tasks_s": seconds}


def elapsed(duration: dict) -> float:
    """The json callback's {start, end} (ISO 8601) -> seconds."""
    return (datetime.fromisoformat(duration["end"].replace("Z", "+00:00"))
            - datetime.fromisoformat(duration["start"].replace("Z", "+00:00"))).total_seconds()


def main(count: int = NODES) -> dict:
    row = {"pure": pure(count), "playbook": in_playbook(count), "target_s": TARGET_S}
    print(f"[bench] summary of {count} nodes: pure {row['pure']['seconds']:.2f} s (median of {REPEATS}), "
          f"summary task in ansible-playbook {row['playbook']['task_s']:.2f} s, its play {row['playbook']['play_wall_s']:.1f} s "
          f"(html {row['pure']['bytes']['html'] / 1e6:.2f} MB)", flush=True)
    return row


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
