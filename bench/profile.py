"""`make profile`: where a pre-flight's time and CPU go, for the targets `make bench` misses.

  1. one run of playbooks/gpu_demo.yml with ansible.posix.profile_tasks: seconds per task, split into
     API tasks (the collection's modules, run in the controller's task worker by their action plugins, and
     kubernetes.core.k8s, a module process) and the role's other tasks, and the start-up before the first task;
  2. a fleet of N fake GPU nodes (default 10) in parallel, once plain for the controller's whole CPU time,
     once under py-spy (--subprocesses) to split it: the ansible-playbook main process, its per-task worker
     processes (how much of that is templating task arguments, how much the collection's API tasks), module
     processes if any. Per node, in CPU seconds.

Writes bench/results/<date>-profile.md (and prints it). py-spy must be allowed to ptrace its children
(it is when it starts them, as here). Usage: profile.py [--nodes 10]
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet  # noqa: E402  pylint: disable=wrong-import-position

CHECKOUT = fleet.CHECKOUT
VENV_BIN = fleet.VENV_BIN
RESULTS = Path(__file__).resolve().parent / "results"
SAMPLE_HZ = 100
# Leaf frames of a sampled stack that mean the process was waiting, not computing.
IDLE_LEAVES = ("sleep", "select", "poll", "wait", "recv", "readinto", "accept", "read (socket")
TASK_LINE = re.compile(r"^(?P<name>.+?) -{3,} (?P<seconds>[0-9.]+)s$")
MODULE_TASKS = ("node_lock", "pod_wait", "gpu_ledger_facts", "vllm_health", "kubernetes.core.k8s")


def ansible_env() -> dict:
    return {**os.environ, "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}


def task_modules() -> dict:
    """Task name -> module, from the role's task files (profile_tasks prints names only)."""
    modules = {}
    for path in sorted((CHECKOUT / "roles" / "gpu_demo" / "tasks").glob("*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            for item in [task] + task.get("block", []) + task.get("always", []) + task.get("rescue", []):
                action = next((key for key in item if "." in key and key.count(".") >= 2), None)
                if item.get("name") and action:
                    modules[item["name"]] = action
    return modules


def profile_one_run() -> dict:
    subprocess.run([*fleet.SIMCTL, "topology", "default"], check=True, stdout=subprocess.DEVNULL)
    env = {**ansible_env(), "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
           "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all", "PROFILE_TASKS_SORT_ORDER": "none"}
    started = time.monotonic()
    completed = subprocess.run([str(VENV_BIN / "ansible-playbook"), "playbooks/gpu_demo.yml", "-i", "inventory/sim"],
                               cwd=CHECKOUT, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if completed.returncode != 0:
        raise RuntimeError("the profiled run failed:\n" + completed.stdout[-3000:])
    recap = completed.stdout.split("TASKS RECAP", 1)[1]
    modules = task_modules()
    tasks = []
    for line in recap.splitlines():
        match = TASK_LINE.match(line.strip())
        if match:
            name = match["name"].split(" : ", 1)[-1]
            action = modules.get(name, "")
            tasks.append({"task": name, "seconds": float(match["seconds"]),
                          "module": action.rsplit(".", 1)[-1] if any(action.endswith(m) for m in MODULE_TASKS) else ""})
    in_tasks = sum(task["seconds"] for task in tasks)
    return {"wall_s": wall, "tasks": tasks, "task_s": in_tasks,
            "module_s": sum(task["seconds"] for task in tasks if task["module"]),
            "modules": sum(1 for task in tasks if task["module"]),
            "controller_s": sum(task["seconds"] for task in tasks if not task["module"]),
            "controller_tasks": sum(1 for task in tasks if not task["module"]),
            "outside_tasks_s": wall - in_tasks}


def classify(processes: list[str]) -> str:
    last = processes[-1]
    module = re.search(r"AnsiballZ_(\w+)\.py", last)
    if module:
        return "module " + module.group(1)
    if len(processes) == 1:
        return "ansible-playbook main process"
    if "ansible-playbook" in last:
        return "ansible-playbook task workers"
    return "other: " + last[:60]


def profile_fleet(nodes: int) -> dict:
    sim = fleet.sim_env()
    with tempfile.TemporaryDirectory(prefix="gpuops-profile-") as workdir:
        work = Path(workdir)
        topology_file = work / "topology.yaml"
        topology_file.write_text(yaml.safe_dump(fleet.topology(nodes)))
        inventory_file = work / "inventory.yml"
        inventory_file.write_text(yaml.safe_dump(fleet.inventory(nodes, sim, work / "reports")))
        raw = work / "samples.raw"
        subprocess.run([*fleet.SIMCTL, "topology", str(topology_file)], check=True, stdout=subprocess.DEVNULL)
        try:
            # Once without py-spy for the controller's true CPU time (every process of the tree, waited for):
            # py-spy attaches to each module process only after it started, so it misses their imports.
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            plain, main_cpu = run_watching_main([str(VENV_BIN / "ansible-playbook"), "playbooks/gpu_demo.yml", "-i",
                                                 str(inventory_file), "-e", "gpu_demo_parallel=true",
                                                 "--forks", str(min(nodes, 10))])
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            controller_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if plain.returncode != 0:
                raise RuntimeError("the fleet failed:\n" + fleet.failures(plain.stdout))
            started = time.monotonic()
            completed = subprocess.run(
                [str(VENV_BIN / "py-spy"), "record", "--subprocesses", "--rate", str(SAMPLE_HZ), "--format", "raw",
                 "--output", str(raw), "--", str(VENV_BIN / "ansible-playbook"), "playbooks/gpu_demo.yml",
                 "-i", str(inventory_file), "-e", "gpu_demo_parallel=true", "--forks", str(min(nodes, 10))],
                cwd=CHECKOUT, env=ansible_env(), capture_output=True, text=True, check=False)
            wall = time.monotonic() - started
        finally:
            subprocess.run([*fleet.SIMCTL, "topology", "default"], check=True, stdout=subprocess.DEVNULL)
        if completed.returncode != 0:
            raise RuntimeError("the profiled fleet failed:\n" + fleet.failures(completed.stdout) + completed.stderr[-2000:])
        busy, templating, api_tasks = collections.Counter(), 0, 0
        for line in raw.read_text().splitlines():
            stack, _space, count = line.rpartition(" ")
            frames = stack.split(";")
            kind = classify([frame for frame in frames if frame.startswith("process ")])
            if any(word in frames[-1] for word in IDLE_LEAVES):
                continue
            busy[kind] += int(count)
            if kind == "ansible-playbook task workers" and any(frame.startswith("Task.post_validate") for frame in frames):
                templating += int(count)
            # py-spy names a frame "function (file.py:line)", with the file's path shortened: the task functions run
            # under the in-process action plugins' base.
            if kind == "ansible-playbook task workers" and any(frame.startswith("InProcessModule._run_here ") for frame in frames):
                api_tasks += int(count)
    return {"nodes": nodes, "wall_s": wall, "sampled_per_node_s": {kind: samples / SAMPLE_HZ / nodes for kind, samples in busy.items()},
            "worker_templating_per_node_s": templating / SAMPLE_HZ / nodes, "worker_api_tasks_per_node_s": api_tasks / SAMPLE_HZ / nodes,
            "total_per_node_s": controller_cpu / nodes, "main_per_node_s": main_cpu / nodes}


def run_watching_main(command: list) -> tuple:
    """(the finished process, the CPU seconds of ansible-playbook's main process alone).

    Read from /proc while it runs, last just before it exits (its own utime and stime, without the task workers and
    module processes it waited for): py-spy's samples of the main process count its polling loop too, and read several
    times what it really costs.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    with subprocess.Popen(command, cwd=CHECKOUT, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as process:
        main_cpu = 0.0
        stat = Path(f"/proc/{process.pid}/stat")
        output = []
        # The output is read on a thread of its own so that a full pipe never stops the playbook.
        reader = threading.Thread(target=lambda: output.append(process.stdout.read()), daemon=True)
        reader.start()
        while process.poll() is None:
            try:
                fields = stat.read_text().rpartition(")")[2].split()
                main_cpu = (int(fields[11]) + int(fields[12])) / ticks
            except (OSError, IndexError, ValueError):
                pass
            time.sleep(0.2)
        reader.join()
    return subprocess.CompletedProcess(command, process.returncode, "".join(output), ""), main_cpu


def escape(cell: str) -> str:
    """A task name in a Markdown table cell (the role's names contain "Phase | what")."""
    return cell.replace("|", "\\|")


def report(single: dict, fleet_profile: dict) -> str:
    lines = [f"# Profile ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs)", "",
             "## One run, `ansible.posix.profile_tasks`", "",
             f"Wall {single['wall_s']:.2f} s: {single['modules']} API tasks {single['module_s']:.2f} s, "
             f"{single['controller_tasks']} other tasks {single['controller_s']:.2f} s, "
             f"before the first task and after the last {single['outside_tasks_s']:.2f} s (interpreter, collections, "
             "inventory, role argument spec).", "",
             "| task | API task | seconds |", "| --- | --- | ---: |"]
    lines += [f"| {escape(task['task'])} | {task['module']} | {task['seconds']:.2f} |" for task in single["tasks"]]
    lines += ["", f"## Fleet of {fleet_profile['nodes']} nodes in parallel, py-spy --subprocesses at {SAMPLE_HZ} Hz", "",
              f"Wall {fleet_profile['wall_s']:.1f} s under py-spy. The controller's measured CPU (user + sys of the whole "
              f"process tree, in a run without py-spy): **{fleet_profile['total_per_node_s']:.2f} s per node**, of which "
              f"ansible-playbook's main process alone {fleet_profile['main_per_node_s']:.2f} s (read from /proc while it ran); "
              "the rest is its task workers and the module processes they start.", "",
              "Where py-spy saw it busy, seconds per node (bounds, not shares: py-spy counts the main process's polling",
              "loop as busy, and attaches to a module process only after it started, missing its imports; the",
              "collection's API tasks run inside the task workers):", "",
              "| process | sampled busy, s per node |", "| --- | ---: |"]
    for kind, seconds in sorted(fleet_profile["sampled_per_node_s"].items(), key=lambda item: -item[1]):
        lines.append(f"| {kind} | {seconds:.2f} |")
    lines += [f"| (of the task workers: templating task arguments) | {fleet_profile['worker_templating_per_node_s']:.2f} |",
              f"| (of the task workers: the collection's API tasks, in-process) | {fleet_profile['worker_api_tasks_per_node_s']:.2f} |", ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10)
    args = parser.parse_args()
    print("[profile] one run with profile_tasks", flush=True)
    single = profile_one_run()
    print(f"[profile] a fleet of {args.nodes} nodes, once plain and once under py-spy", flush=True)
    text = report(single, profile_fleet(args.nodes))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H%M%SZ}-profile.md"
    path.write_text(text)
    print(text + f"\n[profile] written to {path.relative_to(CHECKOUT)}")


if __name__ == "__main__":
    main()
