"""What the kubelets change on the machine is saved once and put back by the last cluster to go (tests/sim/nodes.py)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim"))
import cluster  # noqa: E402  pylint: disable=wrong-import-position
import nodes  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture()
def machine(tmp_path, monkeypatch):
    """A stand-in machine: its sysctls, its /var/lib/kubelet, the record folder, and which node processes run."""
    sysctls = tmp_path / "proc-sys"
    (sysctls / "vm").mkdir(parents=True)
    (sysctls / "vm" / "overcommit_memory").write_text("0\n")
    monkeypatch.setattr(nodes, "SYSCTL_ROOT", sysctls)
    monkeypatch.setattr(nodes, "SYSCTLS", ("vm/overcommit_memory",))
    monkeypatch.setattr(nodes, "DEVICE_PLUGIN_DIR", tmp_path / "var-lib-kubelet" / "device-plugins")
    monkeypatch.setattr(nodes, "DEVICE_LIST_DIR", tmp_path / "var-run" / "nvidia-container-devices")
    monkeypatch.setattr(nodes, "HOST_STATE_DIR", tmp_path / "run-gpuops-sim")
    state = {"running": []}
    monkeypatch.setattr(nodes, "_sim_node_processes", lambda: list(state["running"]))

    class Machine:
        running = state["running"]

        @staticmethod
        def sysctl() -> str:
            return (sysctls / "vm" / "overcommit_memory").read_text().strip()

        @staticmethod
        def kubelet_sets() -> None:
            (sysctls / "vm" / "overcommit_memory").write_text("1\n")

        @staticmethod
        def sim(name: str) -> cluster.SimDir:
            sim = cluster.SimDir(tmp_path / name, port_offset=0)
            sim.make()
            return sim

    return Machine


def test_one_cluster_saves_and_restores(machine):
    first = machine.sim(".sim")
    with nodes.host_in_use(first):
        pass
    assert nodes.DEVICE_PLUGIN_DIR.is_dir()
    machine.kubelet_sets()
    assert nodes.restore_host(first) == []
    assert machine.sysctl() == "0" and not nodes.DEVICE_PLUGIN_DIR.parent.exists()


def test_the_second_cluster_neither_overwrites_the_saved_values_nor_restores_while_the_first_runs(machine):
    first, second = machine.sim(".sim"), machine.sim(".sim-w1")
    with nodes.host_in_use(first):
        pass
    machine.kubelet_sets()
    machine.running.append(4242)              # the first cluster's kubelet
    with nodes.host_in_use(second):           # started after the kubelet changed the value: keeps the original
        pass
    assert json.loads((nodes.HOST_STATE_DIR / "host-sysctls.json").read_text())["sysctls"] == {"vm/overcommit_memory": "0"}
    assert nodes.restore_host(second) == []   # the first still runs: nothing put back, its mount point stays
    assert machine.sysctl() == "1" and nodes.DEVICE_PLUGIN_DIR.is_dir()
    machine.running.clear()
    assert nodes.restore_host(first) == []    # the last one goes: the values from before any kubelet
    assert machine.sysctl() == "0" and not nodes.DEVICE_PLUGIN_DIR.exists()


def test_a_cluster_started_before_the_machine_record_hands_over_its_own(machine):
    old = machine.sim(".sim")
    (old.root / "host-sysctls.json").write_text(json.dumps({"sysctls": {"vm/overcommit_memory": "0"},
                                                            "created_device_plugin_dir": True}))
    machine.kubelet_sets()
    with nodes.host_in_use(old):
        pass
    assert not (old.root / "host-sysctls.json").exists()
    assert nodes.restore_host(old) == []
    assert machine.sysctl() == "0" and not nodes.DEVICE_PLUGIN_DIR.exists()


def test_the_oldest_of_the_running_clusters_records_wins(machine, monkeypatch):
    mine, theirs = machine.sim(".sim-w1"), machine.sim("other-checkout/.sim")
    (theirs.root / "host-sysctls.json").write_text(json.dumps({"sysctls": {"vm/overcommit_memory": "0"}}))
    os.utime(theirs.root / "host-sysctls.json", (1, 1))
    (mine.root / "host-sysctls.json").write_text(json.dumps({"sysctls": {"vm/overcommit_memory": "1"}}))
    # A cluster that kept the record in its own folder predates the nodes' short run folder: its kubelets' root dirs
    # are under <sim dir>/run/.
    kubelet_of_theirs = str(theirs.root / "run" / "nodes" / "prod102" / "kubelet")
    machine.running.append(77)
    monkeypatch.setattr(nodes, "_argv", lambda pid: ["/bin/kubelet", f"--root-dir={kubelet_of_theirs}"] if pid == 77 else [])
    with nodes.host_in_use(mine):
        pass
    assert json.loads((nodes.HOST_STATE_DIR / "host-sysctls.json").read_text())["sysctls"] == {"vm/overcommit_memory": "0"}


def test_a_device_plugins_folder_that_was_there_stays(machine):
    nodes.DEVICE_PLUGIN_DIR.mkdir(parents=True)
    sim = machine.sim(".sim")
    with nodes.host_in_use(sim):
        pass
    assert nodes.restore_host(sim) == [] and nodes.DEVICE_PLUGIN_DIR.is_dir()


def test_node_processes_are_kubelets_with_a_root_dir_and_our_runtime_and_plugins(monkeypatch):
    argvs = {1: ["/usr/bin/kubelet", "--root-dir=/x/run/nodes/n/kubelet"], 2: ["/c/gpuops-simnode", "runtime"],
             3: ["/usr/bin/kubelet"], 4: ["python3", "kubelet"], 5: []}

    class Entry:
        def __init__(self, name):
            self.name = name

    monkeypatch.setattr(nodes.Path, "iterdir", lambda self: [Entry(str(pid)) for pid in argvs] + [Entry("self")])
    monkeypatch.setattr(nodes, "_argv", lambda pid: argvs.get(pid, []))
    assert nodes._sim_node_processes() == [1, 2]  # pylint: disable=protected-access


def test_the_inotify_limits_are_raised_while_clusters_run_and_put_back_by_the_last(machine, monkeypatch):
    inotify = nodes.SYSCTL_ROOT / "fs" / "inotify"
    inotify.mkdir(parents=True)
    (inotify / "max_user_instances").write_text("128\n")
    (inotify / "max_user_watches").write_text("999999999\n")      # already above: left as it is
    monkeypatch.setattr(nodes, "RAISED_SYSCTLS", {"fs/inotify/max_user_instances": 1024, "fs/inotify/max_user_watches": 524288})
    sim = machine.sim(".sim")
    with nodes.host_in_use(sim):
        pass
    assert (inotify / "max_user_instances").read_text().strip() == "1024"
    assert (inotify / "max_user_watches").read_text().strip() == "999999999"
    assert nodes.restore_host(sim) == []
    assert (inotify / "max_user_instances").read_text().strip() == "128"
