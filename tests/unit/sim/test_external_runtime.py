"""A real container runtime in place of ours (tests/device/walkthrough.sh --real-runtime): with GPUOPS_SIM_CRI_SOCKET
set, the node's kubelet talks CRI to that socket and the node starts no runtime of its own (tests/sim/nodes.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim"))
import cluster  # noqa: E402  pylint: disable=wrong-import-position
import nodes  # noqa: E402  pylint: disable=wrong-import-position
import topology  # noqa: E402  pylint: disable=wrong-import-position


def _node(tmp_path):
    return nodes.Node(cluster.SimDir(tmp_path, port_offset=0), topology.load("default")["nodes"][0], 0)


def test_the_kubelet_talks_to_the_real_runtime_and_ours_is_not_started(tmp_path, monkeypatch):
    monkeypatch.setenv(nodes.CRI_SOCKET_ENV, "/tmp/gpuops-device/rr/containerd.sock")
    node = _node(tmp_path)
    config = node.kubelet_config()
    assert config["containerRuntimeEndpoint"] == config["imageServiceEndpoint"] == "unix:///tmp/gpuops-device/rr/containerd.sock"
    assert node.runtime_process not in node.processes() and node.kubelet_process in node.processes()


def test_without_it_the_node_runs_our_runtime(tmp_path, monkeypatch):
    monkeypatch.delenv(nodes.CRI_SOCKET_ENV, raising=False)
    node = _node(tmp_path)
    assert node.kubelet_config()["containerRuntimeEndpoint"] == f"unix://{node.dir / 'runtime.sock'}"
    assert node.runtime_process in node.processes()
    json.dumps(node.kubelet_config())
