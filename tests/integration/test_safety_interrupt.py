"""Interruption: SIGKILL the pre-flight at each step of the flow; the GPU frees itself, the next run takes over.

For each kill point in turn, ansible-playbook is started with the DEFAULT lock (a 15 s Lease, renewed while
ansible-playbook lives) and killed with SIGKILL together with every process it started, as when the controller
or the AWX job's container dies. (Its process group is not enough: ansible-core's workers call setsid(), so a
module survives a SIGKILL of ansible-playbook or of its group. The whole tree is stopped with SIGSTOP first, so
that nothing forks while it is killed. The lock's renewer has left the tree on purpose: it must notice by
itself that ansible-playbook is gone.) Then:
1. the killed run's Lease is no longer renewed: it expires within its duration of the kill;
2. as soon as that Lease has expired (as an operator's retry that comes once the lock is free: read from the
   Lease, not from a clock; at least SETTLE_SECONDS after the kill) the playbook runs again, with the default
   settings: it must pass, warn that it took over the dead run's lock, and remove (with a warning naming them)
   every pod of the killed run still there; the report says so;
3. at one kill point (the hold running) no rerun comes until the node's units are free by themselves: the
   seconds are measured, and must be within the bound the role documents: a hold pod sleeps
   gpu_demo_hold_seconds, and activeDeadlineSeconds (gpu_demo_hold_seconds + gpu_demo_lock_seconds) ends it at
   the latest.

Kill points:
- task banners, from --list-tasks at runtime: the first task of each phase (`Walk |`, `Hold |`, ...) from
  the first one that creates the hold (the first task of a `Walk` or `Hold` phase), and the first
  `Cleanup |` task, seen at runtime (--list-tasks does not list a block's always section);
- the moments the API server shows: hold created, hold running, queue created, queue pending
  (Unschedulable), release (hold being deleted), cleanup (queue being deleted).
The numbers are printed (pytest -s, or -rP) as a table and kept as the test's user properties.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from safety_helpers import (CHECKOUT, NAMESPACE, NODE, RESOURCE, ansible_module, core_api, ledger, new_run_id,
                            playbook_command, read_report, run_env, run_playbook, tail, write_inventory)

TIMEOUT = 4                # each wait (short: the kill points come sooner); the lock keeps its default
LOCK_SECONDS = 15          # the role's default gpu_demo_lock_seconds, which no variable here changes
HOLD_SECONDS = 2 * TIMEOUT + 2 * LOCK_SECONDS   # the role's default gpu_demo_hold_seconds for this timeout
DEADLINE_BOUND = HOLD_SECONDS + LOCK_SECONDS    # activeDeadlineSeconds: how long a GPU may stay taken with no rerun
SETTLE_SECONDS = 2        # the least time from the kill to the next run (see kill_and_recover)
FREE_BY_ITSELF_AT = "hold running"   # the kill point where no rerun comes until the units are free by themselves
RUN_VARS = {"gpu_demo_timeout": TIMEOUT, "gpu_demo_vllm_health_url": ""}

LIST_PLAYBOOK = """
- name: List the tasks of the role gpu_demo
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Imported statically, so that --list-tasks shows the role's own tasks
      ansible.builtin.import_role:
        name: gpuops.scheduling.gpu_demo
"""


def _phase(name: str) -> str:
    return name.split(" | ", 1)[0] if " | " in name else name


def banner_kill_points(inventory, env, directory) -> list:
    """The first task of each phase from the first task that creates pods on, in the order they run."""
    listing = directory / "list-tasks.yml"
    listing.write_text(LIST_PLAYBOOK)
    listed = subprocess.run(playbook_command(inventory, args=("--list-tasks",), playbook=str(listing)), capture_output=True,
                            text=True, cwd=CHECKOUT, env=env, timeout=120, check=True).stdout
    names = [match.group(1).strip() for match in re.finditer(r"gpuops\.scheduling\.gpu_demo : (.+?)\tTAGS", listed)]
    start = next(index for index, name in enumerate(names) if re.match(r"(Walk|Hold) \| ", name))
    points, phases = [], set()
    for name in names[start:]:
        if " | " in name and _phase(name) not in phases:
            phases.add(_phase(name))
            points.append(("banner", name))
    # The always section (cleanup) is not listed: its tasks are recognised by their prefix when they start.
    points.append(("banner-prefix", "Cleanup | "))
    return points


API_KILL_POINTS = [
    ("api", "hold created"), ("api", "hold running"), ("api", "queue created"), ("api", "queue pending"),
    ("api", "release (hold deleting)"), ("api", "cleanup (queue deleting)"),
]


def api_moment(point: str, pod) -> bool:
    role = (pod.metadata.labels or {}).get("gpuops.scheduling/role")
    deleting = bool(pod.metadata.deletion_timestamp)
    pending = any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable" for c in pod.status.conditions or [])
    return {"hold created": role == "hold",
            "hold running": role == "hold" and pod.status.phase == "Running",
            "queue created": role == "queue",
            "queue pending": role == "queue" and pending,
            "release (hold deleting)": role == "hold" and deleting,
            "cleanup (queue deleting)": role == "queue" and deleting}[point]


def _children() -> dict:
    """pid -> parent pid of every process on the machine."""
    parents = {}
    for stat in os.listdir("/proc"):
        if stat.isdigit():
            try:
                with open(f"/proc/{stat}/stat", encoding="ascii", errors="replace") as handle:
                    parents[int(stat)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def _tree(root: int) -> list:
    parents = _children()
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier and pid not in tree]
        tree += frontier
    return tree


def kill_tree(root: int) -> int:
    """SIGSTOP the process and all its descendants (until no new one appears), then SIGKILL them all."""
    stopped = []
    while True:
        new = [pid for pid in _tree(root) if pid not in stopped]
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        stopped += new
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(stopped)


class KilledRun:
    """ansible-playbook in its own process group, SIGKILLed at a banner or at a moment the API server shows."""

    def __init__(self, sim, inventory, env, run_id: str, kind: str, point: str):
        self.admin = core_api(sim.kubeconfig)
        self.kind, self.point, self.run_id = kind, point, run_id
        self.killed_at = None
        self.killed_by = ""
        self.killed_processes = 0
        self.lock = threading.Lock()
        listing = self.admin.list_namespaced_pod(NAMESPACE, label_selector=f"gpuops.scheduling/run-id={run_id}")
        self.process = subprocess.Popen(playbook_command(inventory, {"gpu_demo_run_id": run_id, **RUN_VARS}), cwd=CHECKOUT,
                                        env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, start_new_session=True)
        self.output = []
        if kind == "api":
            self.watcher = threading.Thread(target=self._watch, args=(listing.metadata.resource_version,), daemon=True)
            self.watcher.start()

    def kill(self, why: str) -> None:
        with self.lock:
            if self.killed_at is None and self.process.poll() is None:
                self.killed_processes = kill_tree(self.process.pid)
                self.killed_at, self.killed_by = time.monotonic(), why

    def _watch(self, resource_version: str) -> None:
        from kubernetes import watch  # pylint: disable=import-outside-toplevel
        stream = watch.Watch()
        for change in stream.stream(self.admin.list_namespaced_pod, NAMESPACE, label_selector=f"gpuops.scheduling/run-id={self.run_id}",
                                    resource_version=resource_version, timeout_seconds=120):
            if self.process.poll() is not None:
                break
            if api_moment(self.point, change["object"]):
                self.kill(f"{change['type']} {change['object'].metadata.name}")
                break
        stream.stop()

    def wait(self) -> str:
        for line in self.process.stdout:
            self.output.append(line)
            if self.kind.startswith("banner") and line.startswith("TASK ["):
                task = line[len("TASK ["):].split("] ", 1)[0].split(" : ", 1)[-1]
                if (self.kind == "banner" and task == self.point) or (self.kind == "banner-prefix" and task.startswith(self.point)):
                    self.kill(line.strip().rstrip("*").strip())
        self.process.wait(timeout=60)
        # The watcher kills under the lock and notes the moment after the kill: the output ends (SIGKILL) before
        # it has, so a loaded machine would read "never killed" here without waiting for the lock.
        with self.lock:
            return "".join(self.output)


def lease_expiry(admin_coordination, node: str):
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    try:
        lease = admin_coordination.read_namespaced_lease(f"gpuops-preflight-{node}", NAMESPACE)
    except ApiException as error:
        if error.status == 404:
            return None, None
        raise
    spec = lease.spec
    if not spec.renew_time and not spec.acquire_time:
        return spec.holder_identity, None
    renewed = spec.renew_time or spec.acquire_time
    return spec.holder_identity, renewed + datetime.timedelta(seconds=spec.lease_duration_seconds or 0)


def wait_until_lock_expired(coordination, killed_wall, killed_at: float) -> list:
    """Sleep until the node's Lease has expired by a second (or is gone), and SETTLE_SECONDS after the kill at least;
    -> problems: a renewal after the kill."""
    problems = []
    while True:
        _holder, expiry = lease_expiry(coordination, NODE)
        now = datetime.datetime.now(datetime.timezone.utc)
        if expiry is not None and expiry - killed_wall > datetime.timedelta(seconds=LOCK_SECONDS + 1) and not problems:
            after = round((expiry - killed_wall).total_seconds(), 1)
            problems.append(f"the lock was renewed after the kill (read before the rerun): it expires {after}s after it")
        left = (expiry - now).total_seconds() + 1 if expiry is not None else 0
        settle = SETTLE_SECONDS - (time.monotonic() - killed_at)
        if left <= 0 and settle <= 0:
            return problems
        if time.monotonic() - killed_at > 3 * LOCK_SECONDS + 60:
            return problems + [f"the lock had not expired {round(time.monotonic() - killed_at)}s after the kill"]
        time.sleep(min(max(left, settle, 0.1), 1.0))


def kill_and_recover(sim, inventory, env, kind: str, point: str, before: dict, directory) -> dict:
    """One kill point: kill, see the lock expire, run again once it has (at one point: first wait until free). Problems in
    two lists: "free" (the lock and the GPU came back within their bounds) and "rerun" (the next run passed, took the
    lock over and removed the leftovers)."""
    from kubernetes import client, config  # pylint: disable=import-outside-toplevel
    admin = core_api(sim.kubeconfig)
    coordination = client.CoordinationV1Api(config.new_client_from_config(config_file=sim.kubeconfig))
    selector = f"app.kubernetes.io/managed-by=gpuops.scheduling,gpuops.scheduling/node={NODE}"
    run_id = new_run_id("kill")
    started = time.monotonic()
    run = KilledRun(sim, inventory, env, run_id, kind, point)
    output = run.wait()
    row = {"kill point": f"{kind}: {point}", "killed": run.killed_at is not None, "killed by": run.killed_by,
           "processes killed": run.killed_processes,
           "killed after s": round(run.killed_at - started, 1) if run.killed_at else None, "free": [], "rerun": []}
    if run.killed_at is None:
        row["free"].append(f"never reached (rc {run.process.returncode}): {output[-1500:]}")
        return row
    killed_wall = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=time.monotonic() - run.killed_at)
    pods = admin.list_namespaced_pod(NAMESPACE, label_selector=f"gpuops.scheduling/run-id={run_id}").items
    row["pods at kill"] = [f"{pod.metadata.name}:{pod.status.phase}{'/deleting' if pod.metadata.deletion_timestamp else ''}"
                           for pod in pods]
    deadlines = {pod.spec.active_deadline_seconds for pod in pods}
    if pods and deadlines != {DEADLINE_BOUND}:
        row["free"].append(f"activeDeadlineSeconds {deadlines}, documented {DEADLINE_BOUND}")
    # 1. The dead run's lock: held by it, with the default duration, and no longer renewed once the renewer saw the end.
    holder, expiry = lease_expiry(coordination, NODE)
    lease = coordination.read_namespaced_lease(f"gpuops-preflight-{NODE}", NAMESPACE) if holder else None
    if not holder or run_id not in holder:
        row["free"].append(f"the killed run did not hold the node's lock: holder {holder!r}")
    elif lease.spec.lease_duration_seconds != LOCK_SECONDS:
        row["free"].append(f"the lock lasts {lease.spec.lease_duration_seconds}s, not the default {LOCK_SECONDS}s")
    else:
        row["lock expired s after kill"] = round((expiry - killed_wall).total_seconds(), 1)
        if expiry - killed_wall > datetime.timedelta(seconds=LOCK_SECONDS + 1):
            row["free"].append(f"the lock was renewed after the kill: it expires {row['lock expired s after kill']}s after it")
    # 2. At one point, nothing is deleted by anyone until the units are back by themselves.
    if point == FREE_BY_ITSELF_AT:
        while ledger(admin)["requested"] != before["requested"]:
            if time.monotonic() - run.killed_at > DEADLINE_BOUND + 30:
                break
            time.sleep(0.2)
        row["seconds until free"] = round(time.monotonic() - run.killed_at, 1)
        if row["seconds until free"] > DEADLINE_BOUND:
            row["free"].append(f"GPU not free within the documented bound ({DEADLINE_BOUND}s)")
        facts = ansible_module(sim, "gpuops.scheduling.gpu_ledger_facts", {"node": NODE, "kubeconfig": sim.kubeconfig}, env)
        requested = facts["ledger"]["nodes"][NODE]["resources"][RESOURCE]["requested"]
        if requested != before["requested"]:
            row["free"].append(f"gpu_ledger_facts says requested {requested}")
    # The next run comes once the dead run's lock has expired, as the Lease says now (a renewal after the kill would
    # move it: that is a failure, and the wait follows it, so that the rerun still proves the takeover). A create the
    # killed run had already sent may still land after the kill (its module process died, the API server finishes
    # the request): what the run left is what is there once that has settled, SETTLE_SECONDS at least.
    row["free"] += wait_until_lock_expired(coordination, killed_wall, run.killed_at)
    left = admin.list_namespaced_pod(NAMESPACE, label_selector=f"gpuops.scheduling/run-id={run_id}").items
    row["ended as"] = sorted({f"{pod.status.phase}{'(' + pod.status.reason + ')' if pod.status.reason else ''}" for pod in left})
    left = sorted(pod.metadata.name for pod in left)
    # 3. The next run, once the lock expired, with the default lock: passes, takes over, removes the leftovers, says so.
    rerun_id = new_run_id("rerun")
    row["rerun after s"] = round(time.monotonic() - run.killed_at, 1)
    rerun = run_playbook(inventory, env, {"gpu_demo_run_id": rerun_id, **RUN_VARS})
    report = read_report(directory / "reports", rerun_id)
    removed = sorted((report or {}).get("leftovers", []))
    row["leftovers left"], row["leftovers removed"] = len(left), len(removed)
    row["next run"] = "passed" if rerun.returncode == 0 and report and report["passed"] else "FAILED"
    if row["next run"] != "passed":
        message = (report or {}).get("failure") or tail(rerun, 1500)
        row["rerun"].append(f"the next run failed: {message}")
    if removed != left:
        row["rerun"].append(f"the next run removed {removed}, the killed run had left {left}")
    warned = " ".join(" ".join(line.split()) for line in rerun.stderr.splitlines() + rerun.stdout.splitlines() if "WARN" in line)
    warnings = " ".join(" ".join((rerun.stderr + rerun.stdout).split()).split("[WARNING]")[1:])
    if left and not all(name in warnings for name in left):
        row["rerun"].append(f"no warning naming the leftovers: {warned[:300]!r}")
    if f"took over the lock of node {NODE} from '{run_id}" not in warnings:
        row["rerun"].append(f"no warning that the dead run's lock was taken over: {warned[:300]!r}")
    took_over = ((report or {}).get("lock") or {}).get("took_over") or {}
    if run_id not in (took_over.get("holder") or ""):
        row["rerun"].append(f"the report does not say whose lock was taken over: {took_over!r}")
    # So that the next kill point starts from a clean node whatever the role did: remove what is left.
    remaining = admin.list_namespaced_pod(NAMESPACE, label_selector=selector).items
    row["removed by the test"] = len(remaining)
    if remaining:
        row["rerun"].append(f"still there after the next run: {sorted(pod.metadata.name for pod in remaining)}")
        sim.kubectl("-n", NAMESPACE, "delete", "pods", "-l", selector, "--wait=true", "--timeout=60s")
    holder, expiry = lease_expiry(coordination, NODE)
    if holder:
        row["rerun"].append(f"the next run did not release the lock: {holder!r}")
        sim.kubectl("-n", NAMESPACE, "delete", "lease", f"gpuops-preflight-{NODE}", "--ignore-not-found")
    if ledger(admin) != before:
        row["rerun"].append(f"node not as it began: {ledger(admin)}")
    return row


COLUMNS = ["kill point", "killed after s", "processes killed", "pods at kill", "lock expired s after kill", "seconds until free",
           "ended as", "rerun after s", "leftovers left", "leftovers removed", "next run", "removed by the test"]


# The kill points are dealt round-robin to this many tests, which run on different workers' clusters at once (each
# point is independent: its own run, kill, wait and rerun on a node that starts clean); one after another they took
# ~14 minutes, mostly the 30 s each rerun then waited.
SHARDS = 4


def kill_points_of(shard: int, points: list) -> list:
    return points[shard::SHARDS]


def run_kills(sim, directory, shard: int) -> tuple:
    """This shard's kill points in turn (the numbers are printed: pytest -s, or -rP); -> (all points, this shard's rows)."""
    sim.use_topology("default")
    admin = core_api(sim.kubeconfig)
    inventory = write_inventory(directory, sim, gpu_demo_kubeconfig=sim.kubeconfig)
    env = run_env(sim)
    points = banner_kill_points(inventory, env, directory) + API_KILL_POINTS
    before = ledger(admin)
    rows = [kill_and_recover(sim, inventory, env, kind, point, before, directory)
            for kind, point in kill_points_of(shard, points)]
    print(f"\nSIGKILL of ansible-playbook and every process it started; default gpu_demo_lock_seconds={LOCK_SECONDS}, "
          f"gpu_demo_timeout={TIMEOUT}, so gpu_demo_hold_seconds={HOLD_SECONDS}, activeDeadlineSeconds={DEADLINE_BOUND}; "
          f"rerun once the Lease expired (at least {SETTLE_SECONDS}s after the kill); kill points {shard + 1} of every {SHARDS}")
    print(" | ".join(COLUMNS))
    for row in rows:
        print(" | ".join(str(row.get(column, "-")) for column in COLUMNS))
    landed = [row for row in rows if row["killed"]]
    print(f"kills tried: {len(rows)}, landed: {len(landed)}, leftovers found: {sum(row.get('leftovers left', 0) for row in landed)}, "
          f"removed by the next run: {sum(row.get('leftovers removed', 0) for row in landed)}, until free with no rerun: "
          f"{[row['seconds until free'] for row in landed if 'seconds until free' in row]}s (bound {DEADLINE_BOUND}s), "
          f"lock expired after the kill: {[row.get('lock expired s after kill') for row in landed]}s (Lease {LOCK_SECONDS}s)")
    return points, rows


@pytest.mark.independent
@pytest.mark.parametrize("shard", range(SHARDS))
def test_sigkill_at_every_step_frees_the_gpu_and_the_next_run_takes_over(sim, tmp_path, record_property, shard):
    points, rows = run_kills(sim, tmp_path, shard)
    record_property("kills", json.dumps(rows, default=str))
    assert len(points) >= 2 * SHARDS and FREE_BY_ITSELF_AT in [point for _kind, point in points], points
    # The GPU and the lock come back within their bounds.
    problems = {row["kill point"]: row["free"] for row in rows if row["free"]}
    assert not problems, json.dumps(problems, indent=1)
    assert any(row.get("leftovers left") for row in rows), "no kill point left a pod behind: the test proves nothing"
    if FREE_BY_ITSELF_AT in [point for _kind, point in kill_points_of(shard, points)]:
        assert any("seconds until free" in row for row in rows), "the GPU was never left to free itself"
    # The next run, once the dead lock expired, passes, takes the lock over and removes the leftovers, and says so.
    problems = {row["kill point"]: row["rerun"] for row in rows if row["rerun"]}
    assert not problems, json.dumps(problems, indent=1)
