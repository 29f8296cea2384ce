"""The parallel test run's pure logic (tests/integration/parallel.py): ports, workers, units, the machine lock."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS / "sim"))
sys.path.insert(0, str(TESTS / "integration"))
import cluster  # noqa: E402  pylint: disable=wrong-import-position
import parallel  # noqa: E402  pylint: disable=wrong-import-position
import simctl  # noqa: E402  pylint: disable=wrong-import-position


def cluster_ports(offset: int) -> set:
    """Every port one simulated cluster may listen on (cluster.Ports, kubelets and their healthz per node)."""
    ports = cluster.Ports(offset)
    return ({ports.etcd_client, ports.etcd_peer, ports.apiserver, ports.vllm}
            | set(range(ports.kubelet, ports.kubelet + 2 * simctl.MAX_NODES)))


@pytest.mark.parametrize("base", [0, 2000])
def test_workers_clusters_never_share_a_port(base):
    clusters = [cluster_ports(parallel.worker_cluster(Path("/c/.sim"), base, number)[1]) for number in range(16)]
    for first in range(len(clusters)):
        for second in range(first + 1, len(clusters)):
            assert not clusters[first] & clusters[second], (first, second, sorted(clusters[first] & clusters[second])[:5])


def test_a_stride_that_lands_a_kubelet_on_another_clusters_etcd_is_caught():
    """The check above can fail: 1100 apart, a kubelet port of one cluster is the other's etcd port."""
    assert cluster_ports(0) & cluster_ports(1100)


def test_worker_zero_is_the_checkouts_own_cluster_the_others_have_their_own_folder_and_ports():
    assert parallel.worker_cluster(Path("/c/.sim"), 2000, 0) == (Path("/c/.sim"), 2000)
    assert parallel.worker_cluster(Path("/c/.sim"), 2000, 3) == (Path("/c/.sim-w3"), 2600)
    checkout = Path("/c")
    assert parallel.environment_for(None, {}, checkout) == {}
    assert parallel.environment_for("gw0", {"GPUOPS_SIM_PORT_OFFSET": "2000"}, checkout) == {}
    assert parallel.environment_for("gw2", {"GPUOPS_SIM_PORT_OFFSET": "2000"}, checkout) == {
        "GPUOPS_SIM_DIR": "/c/.sim-w2", "GPUOPS_SIM_PORT_OFFSET": "2400"}
    assert parallel.environment_for("gw1", {"GPUOPS_SIM_DIR": "/x/mine"}, checkout) == {
        "GPUOPS_SIM_DIR": "/x/mine-w1", "GPUOPS_SIM_PORT_OFFSET": "200"}


def test_worker_count_two_a_core_within_memory_and_the_override():
    gib = 2**30
    assert parallel.auto_workers(2, 20 * gib) == 4
    assert parallel.auto_workers(1, 20 * gib) == 2
    assert parallel.auto_workers(2, 4 * gib) == 2            # 1.5 GiB a cluster
    assert parallel.auto_workers(8, 1 * gib) == 1            # never none
    assert parallel.auto_workers(2, 20 * gib, "3") == 3
    for bad in ("0", "-1", "four"):
        with pytest.raises(ValueError, match="GPUOPS_TEST_WORKERS"):
            parallel.auto_workers(2, 20 * gib, bad)


def test_units_a_file_by_default_a_test_when_independent_a_group_when_named():
    assert parallel.unit_of("tests/integration/test_a.py::test_x", {}) == "tests/integration/test_a.py"
    assert parallel.unit_of("tests/integration/test_a.py::test_x[p]", {"independent": True}) == "tests/integration/test_a.py::test_x[p]"
    assert parallel.unit_of("tests/integration/test_a.py::test_x", {"xdist_group": "db", "independent": True}) == "group:db"


def test_longest_units_go_first_and_exclusive_ones_last():
    described = {
        "a.py::t1": {"unit": "a.py", "exclusive": False}, "a.py::t2": {"unit": "a.py", "exclusive": False},
        "b.py::t1": {"unit": "b.py", "exclusive": False},
        "c.py::t1": {"unit": "c.py", "exclusive": True}, "d.py::t1": {"unit": "d.py", "exclusive": True},
        "e.py::t1": {"unit": "e.py", "exclusive": False},
    }
    # a.py: unknown, 2 tests -> 40 s estimated; b.py measured 100 s; e.py measured 5 s; d.py longer than c.py
    order = parallel.order_units(described, {"b.py": 100.0, "e.py": 5.0, "d.py": 50.0, "c.py": 10.0})
    assert order == ["b.py", "a.py", "e.py", "d.py", "c.py"]


def test_an_exclusive_test_waits_for_the_running_ones_and_holds_off_new_ones(tmp_path):
    events = []
    running = threading.Event()
    release = threading.Event()

    def shared(name, hold=None):
        with parallel.machine_lock(tmp_path, exclusive=False):
            events.append(f"{name} start")
            if hold:
                running.set()
                release.wait(5)
            events.append(f"{name} end")

    def exclusive():
        with parallel.machine_lock(tmp_path, exclusive=True):
            events.append("exclusive start")
            time.sleep(0.3)
            events.append("exclusive end")

    first = threading.Thread(target=shared, args=("first", True))
    first.start()
    running.wait(5)
    alone = threading.Thread(target=exclusive)
    alone.start()
    time.sleep(0.3)            # the exclusive one now holds the gate, waiting for "first"
    late = threading.Thread(target=shared, args=("late",))
    late.start()
    time.sleep(0.3)
    assert events == ["first start"]
    release.set()
    for thread in (first, alone, late):
        thread.join(5)
    assert events == ["first start", "first end", "exclusive start", "exclusive end", "late start", "late end"]


def test_without_xdist_there_is_no_lock():
    with parallel.machine_lock(None, exclusive=True):
        with parallel.machine_lock(None, exclusive=True):
            pass


class FakeWorker:
    """What the scheduler sees of an xdist worker: the tests it was sent, in order."""

    def __init__(self, name):
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent = []
        self.shutting_down = False

    def send_runtest_some(self, indices):
        self.sent += indices

    def shutdown(self):
        self.shutting_down = True


def scheduler_over(tmp_path, described, workers=2, durations=None):
    """The scheduler, its collection from every worker, after its first distribution."""
    xdist = pytest.importorskip("xdist")
    assert xdist
    config = type("Config", (), {})()
    config.getvalue = lambda name: {"tx": ["popen"] * workers}[name]
    config.option = type("Option", (), {"loadscopereorder": False})()
    config._tmp_path_factory = type("Factory", (), {"getbasetemp": staticmethod(lambda: tmp_path)})()
    config.cache = type("Cache", (), {"get": staticmethod(lambda key, default: durations or default)})()
    (tmp_path / "units-gw0.json").write_text(__import__("json").dumps(described))
    scheduler = parallel.make_scheduler(config, None)
    nodes = [FakeWorker(f"gw{index}") for index in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, list(described))
    scheduler.schedule()
    return scheduler, nodes


def test_the_scheduler_sends_the_longest_unit_first_and_one_unit_ahead(tmp_path):
    tests = ["long.py::a", "long.py::b", "mid.py::a", "mid.py::b", "short.py::a", "short.py::b", "alone.py::x"]
    described = {nodeid: {"unit": nodeid.split("::", maxsplit=1)[0], "exclusive": nodeid.startswith("alone")} for nodeid in tests}
    scheduler, (first, second) = scheduler_over(tmp_path, described, durations={"long.py": 300, "mid.py": 200, "short.py": 10})
    index = {nodeid: position for position, nodeid in enumerate(tests)}
    assert first.sent == [index["long.py::a"], index["long.py::b"]]     # two tests: nothing more until b starts
    assert second.sent == [index["mid.py::a"], index["mid.py::b"]]
    scheduler.mark_test_complete(second, index["mid.py::a"], 150.0)     # mid.py::b starts: the next unit goes
    assert second.sent[2:] == [index["short.py::a"], index["short.py::b"]]
    scheduler.mark_test_complete(first, index["long.py::a"], 100.0)
    assert first.sent[2:] == [] and first.shutting_down                 # only the exclusive unit is left: not while
    scheduler.mark_test_complete(second, index["mid.py::b"], 10.0)      # another worker runs, but to the last one
    scheduler.mark_test_complete(second, index["short.py::a"], 5.0)
    assert second.sent[4:] == [index["alone.py::x"]] and not scheduler.workqueue
    assert scheduler.durations == {"mid.py": 160.0, "long.py": 100.0, "short.py": 5.0}


def test_only_units_that_ran_to_the_end_and_passed_update_the_estimates(tmp_path):
    tests = ["ok.py::a", "failed.py::a", "cut.py::a", "cut.py::b"]
    described = {nodeid: {"unit": nodeid.split("::", maxsplit=1)[0], "exclusive": False} for nodeid in tests}
    stored = {}
    scheduler, (worker,) = scheduler_over(tmp_path, described, workers=1)
    scheduler.config.cache = type("Cache", (), {"get": staticmethod(lambda key, default: {"cut.py": 77.0, "failed.py": 55.0}),
                                                "set": staticmethod(lambda key, value: stored.update(value))})()
    index = {nodeid: position for position, nodeid in enumerate(tests)}
    for nodeid, seconds in (("cut.py::a", 3.0), ("failed.py::a", 1.0), ("ok.py::a", 10.0)):   # the order they went out
        scheduler.mark_test_complete(worker, index[nodeid], seconds)
    parallel.note_report(type("Report", (), {"failed": True, "nodeid": "failed.py::a"})())
    parallel.save_durations(scheduler.config)   # cut.py::b never ran: an interrupted run
    assert stored == {"ok.py": 10.0, "failed.py": 55.0, "cut.py": 77.0}
