"""`make bench`: every benchmark in one run, a table on stdout, results and a plot in bench/results/.

  1. occupied window and whole run: playbooks/gpu_demo.yml against the kubectl reference script, on a quiet machine and
     with every core kept busy by a load the bench starts itself (as on a shared AWX execution node)
  2. ledger at scale: gpu_ledger_facts over 100 / 500 / 2,000 fake GPU nodes (10 pods each)
  3. fleet pre-flight: the playbook over 1 / 10 / 50 fake GPU nodes in parallel, each size --fleet-runs times (medians)
  4. the run's summary for 500 nodes (no cluster): bench/fleet_summary.py
  5. (only when asked: --only scale, or `make bench-scale`) the ledger at 5,000 nodes / 150,000 pods: bench/ledger_big.py

Usage: run.py [--only window ledger fleet summary scale] [--runs 5] [--fleet-runs 3]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet  # noqa: E402  pylint: disable=wrong-import-position
import fleet_summary  # noqa: E402  pylint: disable=wrong-import-position
import ledger_big  # noqa: E402  pylint: disable=wrong-import-position
import ledger_scale  # noqa: E402  pylint: disable=wrong-import-position
import occupied_window  # noqa: E402  pylint: disable=wrong-import-position
import plot  # noqa: E402  pylint: disable=wrong-import-position

RESULTS = Path(__file__).resolve().parent / "results"
# The GPUs held no longer than the kubectl script holds them, the whole run within 2x its time on a quiet machine and 3x
# with every core busy; at most 6 CPU-seconds of the controller a node in a fleet, 50 nodes in 300 s (forks 10); a
# passing node at most 40 tasks (the recap's ok, which counts the changed ones, and skipped).
TARGETS = {"occupied_ratio": 1.0, "total_ratio": 2.0, "total_ratio_busy": 3.0, "ledger_2000_s": 2.0, "ledger_list_calls": 3,
           "fleet_50_s": 300, "fleet_cpu_per_node_s": 6, "tasks": 40, "summary_500_s": fleet_summary.TARGET_S}


def machine() -> dict:
    versions = {}
    ansible = subprocess.run([str(ledger_scale.VENV_BIN / "ansible"), "--version"], capture_output=True, text=True,
                             check=False).stdout.splitlines()[0]
    versions.update({"ansible": ansible, "python": platform.python_version()})
    env_file = ledger_scale.CHECKOUT / ".sim" / "env.json"
    if env_file.exists():
        sim = json.loads(env_file.read_text())
        versions.update(kubernetes=sim["kubernetes_version"], etcd=sim["etcd_version"])
    # The code measured (a number is current only while the code it was measured on is) and how loaded the machine was.
    commit = subprocess.run(["git", "-C", str(ledger_scale.CHECKOUT), "describe", "--always", "--dirty"], capture_output=True,
                            text=True, check=False).stdout.strip()
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
            "machine": platform.machine(), "kernel": platform.release(), "versions": versions, "commit": commit,
            "load_average": [round(value, 1) for value in os.getloadavg()]}


def table(results: dict) -> str:
    lines = []
    for key, machine_state in (("window", "quiet machine"), ("window_busy", "every core busy")):
        window = results.get(key)
        if not window:
            continue
        median = window["median"]
        total_target = TARGETS["total_ratio_busy" if window.get("busy") else "total_ratio"]
        lines += ["| %s (median of %d) | playbook | kubectl reference | ratio | target |" % (machine_state, window["runs"]),
                  "| --- | ---: | ---: | ---: | ---: |",
                  "| GPUs held | %.2f s | %.2f s | %.2f | <= %.1f |" % (
                      median["playbook"]["occupied_s"], median["kubectl"]["occupied_s"], window["occupied_ratio"], TARGETS["occupied_ratio"]),
                  "| whole run | %.2f s | %.2f s | %.2f | <= %.1f |" % (
                      median["playbook"]["total_s"], median["kubectl"]["total_s"], window["total_ratio"], total_target),
                  "| CPU-seconds | %.1f | %.1f | %.1f | |" % (
                      median["playbook"]["cpu_s"], median["kubectl"]["cpu_s"],
                      median["playbook"]["cpu_s"] / max(median["kubectl"]["cpu_s"], 0.01)), ""]
        if window.get("tasks"):
            tasks = window["tasks"]
            lines += ["Tasks on the passing node (play recap): ok %(ok)d (of which changed %(changed)d), skipped %(skipped)d" % tasks
                      + ": %d, target <= %d." % (tasks["ok"] + tasks["skipped"], TARGETS["tasks"]), ""]
    if results.get("ledger"):
        lines += ["| ledger: nodes | pods | ansible task | read + sums | list calls | HTTP requests | peak MiB |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        lines += ["| %(nodes)d | %(pods)d | %(task_s).2f s | %(read_and_sum_s).2f s | %(list_calls)d | %(http_requests)d | %(peak_mib).0f |" % row
                  for row in results["ledger"]]
        lines.append("")
    if results.get("fleet"):
        lines += ["| fleet: nodes | forks | runs | seconds (median) | nodes / minute | controller CPU-s | CPU-s / node (median) "
                  "| the card's four steps alone: CPU-s / node (median) |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        lines += ["| %(nodes)d | %(forks)d | %(runs)d | %(seconds).1f | %(nodes_per_minute).1f | %(controller_cpu_seconds).1f "
                  "| %(controller_cpu_seconds_per_node).2f | %(card_alone_cpu_seconds_per_node).2f |" % row for row in results["fleet"]]
        lines += ["", "Controller CPU-seconds per node (ansible-playbook, its forks and the modules they ran): target <= %s. "
                  "The last column is bench/reference/gpu_demo_card.yml on the same fleet: the four kubernetes.core.k8s steps "
                  "alone, the floor under a node while they stay module processes." % TARGETS["fleet_cpu_per_node_s"], ""]
    summary = results.get("summary")
    if summary:
        tasks = summary["playbook"]["tasks_s"]
        lines += ["| run's summary: nodes | rows + JSON + Markdown + HTML (median) | summary task in ansible-playbook | "
                  "set_stats | failing the failed nodes (one task on every host) | HTML | target (summary task) |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
                  "| %d | %.2f s | %.2f s | %.2f s | %.1f s | %.2f MB | < %.0f s |" % (
                      summary["pure"]["nodes"], summary["pure"]["seconds"], summary["playbook"]["task_s"],
                      next(value for name, value in tasks.items() if "set_stats" in name),
                      next(value for name, value in tasks.items() if name.startswith("Fail")),
                      summary["pure"]["bytes"]["html"] / 1e6, TARGETS["summary_500_s"])]
    if results.get("scale"):
        lines += ["", ledger_big.table(results["scale"])]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=["window", "ledger", "fleet", "summary", "scale"],
                        default=["window", "ledger", "fleet", "summary"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fleet-runs", type=int, default=3)
    options = parser.parse_args()
    results = {"machine": machine()}
    if "window" in options.only:
        results["window"] = occupied_window.main(options.runs)
        results["window_busy"] = occupied_window.main(options.runs, busy=True)
    if "ledger" in options.only:
        results["ledger"] = ledger_scale.main()
    if "fleet" in options.only:
        results["fleet"] = fleet.main(runs=options.fleet_runs)
    if "scale" in options.only:
        results["scale"] = ledger_big.main()
    if "summary" in options.only:
        results["summary"] = fleet_summary.main()
    results["machine"]["load_average_end"] = [round(value, 1) for value in os.getloadavg()]
    RESULTS.mkdir(exist_ok=True)
    stamp = results["machine"]["date"].replace(":", "").replace("+0000", "Z")
    (RESULTS / f"{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    summary = table(results)
    (RESULTS / f"{stamp}.md").write_text(f"# Benchmark {results['machine']['date']}\n\n{json.dumps(results['machine'])}\n\n{summary}\n")
    panels = []
    if results.get("ledger"):
        panels.append(("gpu_ledger_facts at scale", "pods (10 per node)", "seconds", {
            "ansible task": [(row["pods"], row["task_s"]) for row in results["ledger"]],
            "read + sums": [(row["pods"], row["read_and_sum_s"]) for row in results["ledger"]]}))
    if results.get("fleet"):
        panels.append(("fleet pre-flight", "nodes", "seconds", {
            "playbook, parallel": [(row["nodes"], row["seconds"]) for row in results["fleet"]]}))
    if panels:
        (RESULTS / f"{stamp}.svg").write_text(plot.chart(panels))
    print(summary)
    print(f"\n[bench] results in {RESULTS}/{stamp}.{{json,md,svg}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
