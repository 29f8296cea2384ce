"""The integration tests on several simulated clusters at once (pytest-xdist): one cluster per worker.

Worker N runs its tests on a cluster of its own: worker 0 on the checkout's own (GPUOPS_SIM_DIR, default .sim/, on
GPUOPS_SIM_PORT_OFFSET, default 0: the one `make sim-up` starts), worker N > 0 on <that folder>-w<N> (.sim-w1/ ...)
on GPUOPS_SIM_PORT_OFFSET + N * STRIDE. A second checkout running its tests at the same time sets another
GPUOPS_SIM_PORT_OFFSET, at least (workers) * STRIDE away.

What a worker runs, and when (the scheduler below; conftest.py's docstring says how a test declares it):
- a unit of work is a test file (its tests in order, on one cluster: module fixtures and tests that build on the one
  before them work as in a serial run), or one test of a file marked `independent`, or an xdist_group;
- units go out one at a time, the longest first (durations of the last run, from pytest's cache, else
  tests/integration/durations.json), each to the first worker that has nothing else left to start;
- units holding an `exclusive` test go last, to the last worker still running (the others stop once only those are
  left); such a test starts only once no other test runs on the machine, and no other starts until it ends
  (machine_lock).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
from pathlib import Path

STRIDE = 200
DURATIONS = Path(__file__).with_name("durations.json")
CACHE_KEY = "gpuops/unit-durations"
DEFAULT_TEST_SECONDS = 20.0
# A cluster (control plane, kubelets, ansible runs beside them) takes ~0.7-1 GiB.
CLUSTER_BYTES = 1.5 * 2**30


def worker_number(worker_id: str | None) -> int | None:
    """xdist's "gw3" -> 3; None (no xdist) -> None."""
    if not worker_id or not worker_id.startswith("gw"):
        return None
    return int(worker_id[2:])


def worker_cluster(base_dir: Path, base_offset: int, number: int) -> tuple[Path, int]:
    """The state folder and port offset of worker ``number``'s cluster."""
    if number == 0:
        return base_dir, base_offset
    return base_dir.with_name(f"{base_dir.name}-w{number}"), base_offset + number * STRIDE


def auto_workers(cpus: int, memory_available: int, override: str | None = None) -> int:
    """How many workers: GPUOPS_TEST_WORKERS when set, else two a core (the tests mostly wait on the clusters: kubelet
    syncs, grace periods, the scheduler's backoff), as many as the memory holds clusters, at least one. Measured on 2
    cores, 173 tests: 3 workers 14 min 21 s with the CPU 17-47% idle, 4 workers 12 min 34 s with it 0-8% idle (before
    the pods were created in-process, 4 workers saturated the CPU and 3 were faster).
    """
    if override:
        try:
            value = int(override)
        except ValueError:
            raise ValueError(f"GPUOPS_TEST_WORKERS must be a whole number of workers, got {override!r}") from None
        if value < 1:
            raise ValueError(f"GPUOPS_TEST_WORKERS must be at least 1, got {value}")
        return value
    return max(1, min(2 * cpus, int(memory_available // CLUSTER_BYTES)))


def memory_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


# --- units of work ---------------------------------------------------------------------------------------

def unit_of(nodeid: str, markers: dict) -> str:
    """``markers``: name -> first argument (or True) of the test's markers that bear on scheduling."""
    if "xdist_group" in markers:
        return f"group:{markers['xdist_group']}"
    path = nodeid.split("::", 1)[0]
    return nodeid if "independent" in markers else path


def describe_items(items) -> dict:
    """nodeid -> {"unit", "exclusive"} for the collected items (what the workers hand the scheduler)."""
    described = {}
    for item in items:
        markers = {}
        for name in ("xdist_group", "independent", "exclusive"):
            mark = item.get_closest_marker(name)
            if mark is not None:
                markers[name] = mark.args[0] if mark.args else mark.kwargs.get("name", True)
        described[item.nodeid] = {"unit": unit_of(item.nodeid, markers), "exclusive": "exclusive" in markers}
    return described


def order_units(described: dict, durations: dict) -> list:
    """Units in the order they go out: the longest first (estimated from ``durations``: unit -> seconds, else
    DEFAULT_TEST_SECONDS a test), those with an exclusive test last (longest of them first too)."""
    units = {}
    for nodeid, entry in described.items():
        unit = units.setdefault(entry["unit"], {"tests": [], "exclusive": False})
        unit["tests"].append(nodeid)
        unit["exclusive"] = unit["exclusive"] or entry["exclusive"]

    def estimate(name):
        return durations.get(name, DEFAULT_TEST_SECONDS * len(units[name]["tests"]))

    return sorted(units, key=lambda name: (units[name]["exclusive"], -estimate(name), name))


def known_durations(cache) -> dict:
    durations = {}
    if DURATIONS.exists():
        durations.update(json.loads(DURATIONS.read_text()))
    if cache is not None:
        durations.update(cache.get(CACHE_KEY, {}))
    return durations


# --- the machine lock ----------------------------------------------------------------------------------

@contextlib.contextmanager
def machine_lock(directory: Path | None, exclusive: bool):
    """Shared by every test, exclusive for an `exclusive` one. Two flocks make it fair to the exclusive side: a
    test about to start passes the gate (shared) first, so once an exclusive test holds the gate no new test
    starts, and it waits only for those running to end. ``directory``: None when nothing runs in parallel."""
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "gate.lock", "a", encoding="ascii") as gate, open(directory / "run.lock", "a", encoding="ascii") as run:
        if exclusive:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(run, fcntl.LOCK_EX)
        else:
            fcntl.flock(gate, fcntl.LOCK_SH)
            fcntl.flock(run, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(run, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


def shared_directory(config) -> Path | None:
    """A folder all workers of this run share (the parent of each worker's basetemp); None without xdist."""
    if not hasattr(config, "workerinput") or not config.option.basetemp:
        return None
    return Path(config.option.basetemp).parent


def write_description(config, items) -> None:
    directory = shared_directory(config)
    if directory is not None:
        path = directory / f"units-{config.workerinput['workerid']}.json"
        path.write_text(json.dumps(describe_items(items)))


def make_scheduler(config, log):
    """The scheduler for the controller (pytest_xdist_make_scheduler)."""
    from xdist.scheduler import LoadScopeScheduling  # pylint: disable=import-outside-toplevel  # xdist runs only

    class SimClusterScheduling(LoadScopeScheduling):
        """xdist's load-scope scheduling with our units, the longest first, one unit ahead per worker."""

        def __init__(self, pytest_config, scheduler_log=None):
            super().__init__(pytest_config, scheduler_log)
            self.described = {}
            self.durations = {}
            self.failed_units = set()
            self.exclusive_units = set()

        def _split_scope(self, nodeid: str) -> str:
            return self.described[nodeid]["unit"]

        def schedule(self) -> None:
            assert self.collection_is_completed
            if self.collection is not None:
                for node in self.nodes:
                    self._reschedule(node)
                return
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = list(next(iter(self.registered_collections.values())))
            if not self.collection:
                return
            basetemp = self.config._tmp_path_factory.getbasetemp()  # pylint: disable=protected-access
            self.described = json.loads((basetemp / f"units-{self.nodes[0].gateway.id}.json").read_text())
            units = {}
            for nodeid in self.collection:
                units.setdefault(self._split_scope(nodeid), {})[nodeid] = False
            for unit in order_units({nodeid: self.described[nodeid] for nodeid in self.collection},
                                    known_durations(getattr(self.config, "cache", None))):
                self.workqueue[unit] = units[unit]
            self.exclusive_units = {self.described[nodeid]["unit"] for nodeid in self.collection
                                    if self.described[nodeid]["exclusive"]}
            for _extra in range(len(self.nodes) - len(self.workqueue)):
                unused, _assigned = self.assigned_work.popitem()
                unused.shutdown()
            # Twice: a worker whose first unit is one test needs the next one to start it.
            for _round in range(2):
                for node in self.nodes:
                    self._reschedule(node)

        def _reschedule(self, node) -> None:
            # One unit ahead at most: a worker gets its next unit when the last test of its current one starts
            # (it needs the next test to know what to tear down), so no worker queues work another could start.
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) > 1:
                return
            upcoming = next(iter(self.workqueue))
            if upcoming in self.exclusive_units and any(not other.shutting_down for other in self.nodes if other is not node):
                # Only exclusive units are left (they go last): they go to the last worker still running, so that
                # no test of theirs waits on the machine lock while another worker runs out a long one.
                node.shutdown()
                return
            self._assign_work_unit(node)

        def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
            unit = self._split_scope(self.registered_collections[node][item_index])
            self.durations[unit] = self.durations.get(unit, 0.0) + duration
            super().mark_test_complete(node, item_index, duration)

    scheduler = SimClusterScheduling(config, log)
    ACTIVE[:] = [scheduler]
    return scheduler


def note_report(report) -> None:
    """A failed test's unit ran short (or long) for its failure: its time is no estimate for the next run."""
    scheduler = ACTIVE[0] if ACTIVE else None
    if scheduler is not None and report.failed and report.nodeid in scheduler.described:
        scheduler.failed_units.add(scheduler.described[report.nodeid]["unit"])


def save_durations(config) -> None:
    """After a parallel run: the seconds of each unit whose every test ran and passed, for the next run's order (the
    others keep what the cache had)."""
    scheduler = ACTIVE[0] if ACTIVE else None
    cache = getattr(config, "cache", None)
    if scheduler is None or cache is None or not scheduler.durations:
        return
    complete = {}
    for entry in scheduler.described.values():
        complete.setdefault(entry["unit"], True)
    for work in scheduler.assigned_work.values():
        for unit, tests in work.items():
            complete[unit] = complete.get(unit, True) and all(tests.values())
    for unit in scheduler.workqueue:
        complete[unit] = False
    durations = dict(cache.get(CACHE_KEY, {}))
    durations.update({unit: round(seconds, 1) for unit, seconds in scheduler.durations.items()
                      if complete.get(unit) and unit not in scheduler.failed_units})
    cache.set(CACHE_KEY, dict(sorted(durations.items())))


ACTIVE = []   # the controller's scheduler, once xdist made it (one session a process)


def environment_for(worker_id: str | None, environ: dict, checkout: Path) -> dict:
    """The GPUOPS_SIM_* settings that point a worker's tests (and every process they start) at its own cluster."""
    number = worker_number(worker_id)
    if not number:
        return {}
    base_dir = Path(environ.get("GPUOPS_SIM_DIR") or checkout / ".sim").resolve()
    base_offset = int(environ.get("GPUOPS_SIM_PORT_OFFSET") or "0")
    directory, offset = worker_cluster(base_dir, base_offset, number)
    return {"GPUOPS_SIM_DIR": str(directory), "GPUOPS_SIM_PORT_OFFSET": str(offset)}


def keep_clusters(environ: dict) -> bool:
    return environ.get("GPUOPS_SIM_KEEP", "") not in ("", "0", "false", "no")
