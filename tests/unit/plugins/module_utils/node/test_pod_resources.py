# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kubelet allocations: the protobuf codec against bytes the official runtime wrote, a real grpcio
server on a unix socket answering List and GetAllocatableResources with the codec's bytes, the
errors a node can give (no socket, a kubelet without a method, permission denied), the checkpoint,
and the order of the sources."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path

import grpc
import kubelet_pod_resources as kubelet_side
import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._node import pod_resources as pr

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "pod-resources"
LIST_BYTES = bytes.fromhex((FIXTURES / "list-v1.hex").read_text().strip())
CODEC = json.loads((FIXTURES / "codec-v1.json").read_text())
CODEC_BYTES = {name: bytes.fromhex(value) for name, value in CODEC["protobuf_hex"].items()}
COLLECTIONS = Path(__file__).resolve().parents[5] / ".collections"
SHARED = "GPU-9b1e7c3d-2f4a-4b6c-8d0e-1a2b3c4d5e6f"
H20 = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
A100 = "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"
MIG_HOLD = "MIG-c9b4f6ea-0e9c-5d5f-9a4b-2b7f0f1e3c11"
MIG_A = "MIG-0f3a9b21-7c4e-5a8d-b1e2-6d9c8f7a5b43"
MIG_B = "MIG-7e2d4c19-3b5a-5f6e-8d1c-9a0b2c3d4e5f"


def allocation(namespace, pod_name, container_name, resource_name, *device_ids, pod_uid=None):
    return {
        "pod_uid": pod_uid,
        "namespace": namespace,
        "pod_name": pod_name,
        "container_name": container_name,
        "resource_name": resource_name,
        "device_ids": list(device_ids),
    }


# The recorded List answer of tests/unit/fixtures/pod-resources/list-v1.hex.
RECORDED = [
    allocation("gpu-operator", "gpu-demo-hold", "hold", "nvidia.com/gpu", H20),
    allocation("ml", "trainer-0", "trainer", "nvidia.com/gpu", SHARED + "::0", SHARED + "::3"),
    allocation("ml", "trainer-0", "trainer", "nvidia.com/mig-1g.10gb", "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"),
    allocation("ml", "trainer-0", "trainer", "example.com/nic", "0000:3b:00.2"),
]
# The MIG-mixed node of codec-v1.json.
MIG_NODE = [
    allocation("gpu-operator", "gpu-demo-hold-0", "hold", "nvidia.com/mig-1g.10gb", MIG_HOLD),
    allocation("ml", "trainer-0", "trainer", "nvidia.com/gpu", A100),
    allocation("ml", "trainer-0", "trainer", "nvidia.com/mig-1g.10gb", MIG_A, MIG_B),
]
MIG_NODE_ALLOCATABLE = {"nvidia.com/mig-1g.10gb": [MIG_HOLD, MIG_A, MIG_B], "nvidia.com/gpu": [A100]}


# --- the protobuf codec ----------------------------------------------------------------------------------
def test_decode_recorded_list_response():
    # CPU IDs, memory, topology and DRA claims are in the bytes and skipped; pods without devices give nothing.
    assert pr.decode_list_response(LIST_BYTES) == RECORDED


def test_encoder_writes_what_the_official_runtime_writes():
    pods = CODEC["input"]["list"]
    assert kubelet_side.encode_list_response(pods) == CODEC_BYTES["list"]
    assert kubelet_side.encode_allocatable_response(CODEC["input"]["allocatable"]) == CODEC_BYTES["allocatable_devices_only"]


def test_decoder_reads_what_the_official_runtime_writes():
    assert pr.decode_list_response(CODEC_BYTES["list"]) == MIG_NODE
    # One ContainerDevices per device, joined per resource; the CPU IDs and memory are skipped.
    assert pr.decode_allocatable_response(CODEC_BYTES["allocatable"]) == MIG_NODE_ALLOCATABLE
    assert pr.decode_allocatable_response(CODEC_BYTES["allocatable_devices_only"]) == MIG_NODE_ALLOCATABLE


def test_topology_is_skipped_and_large_values_read():
    devices = {"resource_name": "nvidia.com/gpu", "device_ids": [A100], "numa_nodes": [0, 1, 300, -1]}
    encoded = kubelet_side.encode_allocatable_response([devices])
    assert pr._decode_devices(next(pr._fields(encoded))[1]) == {"resource_name": "nvidia.com/gpu", "device_ids": [A100]}
    assert pr._read_varint(kubelet_side._varint(-1), 0) == (2**64 - 1, 10)
    assert len(kubelet_side._varint(-1)) == 10 and pr._read_varint(kubelet_side._varint(2**63 - 1), 0) == (2**63 - 1, 9)


def test_empty_messages():
    assert pr.decode_list_response(b"") == [] and pr.decode_allocatable_response(b"") == {}


@pytest.mark.parametrize("data", [LIST_BYTES[:-3], b"\x0a\xff", b"\x0a", b"\x0b\x00", b"\x0a\x02\x08\x01", b"\x09\x00"])
def test_decode_broken_bytes(data):
    with pytest.raises(pr.PodResourcesError):
        pr.decode_list_response(data)


# --- a real grpcio server on a unix socket ------------------------------------------------------------------
class Kubelet:
    """The kubelet's PodResources service as grpcio generic handlers; each answer is the codec's bytes.

    ``methods`` says which methods it serves (older kubelets lack some); ``aborts`` maps a method to
    the (status, details) it fails with.
    """

    def __init__(self, pods, allocatable, methods=(pr.LIST, pr.ALLOCATABLE), aborts=None):
        self.directory = tempfile.mkdtemp(prefix="pr")  # short: unix socket paths are limited to 108 bytes
        self.path = self.directory + "/kubelet.sock"
        self.pods = pods
        self.allocatable = allocatable
        self.aborts = aborts or {}
        self.requests = []
        answers = {pr.LIST: self._list, pr.ALLOCATABLE: self._allocatable}
        handlers = {name: grpc.unary_unary_rpc_method_handler(answers[name]) for name in methods}
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(pr.SERVICE, handlers),))
        self.server.add_insecure_port("unix:" + self.path)
        self.server.start()

    def _answer(self, name, request, context):
        self.requests.append((name, request))
        if name in self.aborts:
            context.abort(*self.aborts[name])

    def _list(self, request, context):
        self._answer(pr.LIST, request, context)
        return kubelet_side.encode_list_response(self.pods)

    def _allocatable(self, request, context):
        self._answer(pr.ALLOCATABLE, request, context)
        return kubelet_side.encode_allocatable_response(self.allocatable)

    def stop(self):
        self.server.stop(0)
        for name in os.listdir(self.directory):
            os.unlink(os.path.join(self.directory, name))
        os.rmdir(self.directory)


@pytest.fixture
def kubelet():
    servers = []

    def start(**options):
        server = Kubelet(CODEC["input"]["list"], CODEC["input"]["allocatable"], **options)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def test_client_lists_and_reads_allocatable(kubelet):
    server = kubelet()
    with pr.PodResourcesClient(grpc, server.path, 5) as client:
        assert client.list() == MIG_NODE
        assert client.allocatable() == MIG_NODE_ALLOCATABLE
    # The requests on the wire: the two empty messages.
    assert [name for name, _request in server.requests] == [pr.LIST, pr.ALLOCATABLE]
    assert server.requests[0][1] == server.requests[1][1] == b""


def test_read_allocations_through_grpcio(kubelet):
    server = kubelet()
    result = pr.read_allocations(server.path, "/nonexistent/checkpoint", 5, grpc=grpc)
    assert result == {"source": "pod-resources-grpc", "allocations": MIG_NODE, "allocatable": MIG_NODE_ALLOCATABLE, "errors": []}


def test_missing_socket_names_it(tmp_path):
    missing = str(tmp_path / "pod-resources" / "kubelet.sock")
    with pytest.raises(pr.PodResourcesError, match="^no kubelet PodResources socket at %s: is the kubelet running" % missing):
        with pr.PodResourcesClient(grpc, missing, 5):
            pass


def test_socket_nobody_listens_on(tmp_path):
    stale = tmp_path / "kubelet.sock"
    stale.write_text("")  # left by a kubelet that stopped: connect is refused
    with pytest.raises(pr.PodResourcesError) as raised:
        with pr.PodResourcesClient(grpc, str(stale), 5) as client:
            client.list()
    assert str(raised.value).startswith("cannot connect to the kubelet's PodResources socket %s (" % stale)
    assert str(raised.value).endswith("Connection refused): is the kubelet running?")


def test_kubelet_without_allocatable(kubelet):
    # Kubernetes < 1.21 has no GetAllocatableResources: grpc-go answers UNIMPLEMENTED.
    server = kubelet(methods=(pr.LIST,))
    with pr.PodResourcesClient(grpc, server.path, 5) as client:
        with pytest.raises(pr.PodResourcesError) as raised:
            client.allocatable()
        assert client.list() == MIG_NODE  # the channel still serves the other methods
    assert str(raised.value) == (
        "the kubelet's PodResources socket %s does not serve GetAllocatableResources (UNIMPLEMENTED: Method not found!): "
        "it came in Kubernetes 1.21 behind the KubeletPodResourcesGetAllocatable feature gate, on by default since 1.23" % server.path
    )


def test_kubelet_with_the_feature_gate_off(kubelet):
    # What pkg/kubelet/apis/podresources/server_v1.go answers with KubeletPodResourcesGetAllocatable off.
    server = kubelet(aborts={pr.ALLOCATABLE: (grpc.StatusCode.UNKNOWN, "PodResources API GetAllocatableResources disabled")})
    with pr.PodResourcesClient(grpc, server.path, 5) as client:
        with pytest.raises(
            pr.PodResourcesError, match="does not serve GetAllocatableResources \\(UNKNOWN: PodResources API GetAllocatableResources disabled\\): it came in"
        ):
            client.allocatable()


def test_kubelet_without_allocatable_still_gives_allocations(kubelet):
    server = kubelet(methods=(pr.LIST,))
    result = pr.read_allocations(server.path, "/nonexistent/checkpoint", 5, grpc=grpc)
    assert result["source"] == "pod-resources-grpc" and result["allocations"] == MIG_NODE and result["allocatable"] is None
    assert result["errors"] == [
        "pod-resources-grpc: the kubelet's PodResources socket %s does not serve GetAllocatableResources (UNIMPLEMENTED: Method not found!): "
        "it came in Kubernetes 1.21 behind the KubeletPodResourcesGetAllocatable feature gate, on by default since 1.23" % server.path
    ]


def test_other_errors_name_the_method_and_socket(kubelet):
    server = kubelet(aborts={pr.ALLOCATABLE: (grpc.StatusCode.INTERNAL, "device manager not ready")})
    with pr.PodResourcesClient(grpc, server.path, 5) as client:
        with pytest.raises(pr.PodResourcesError) as raised:
            client.allocatable()
    assert str(raised.value) == (
        "GetAllocatableResources on the kubelet's PodResources socket %s failed: INTERNAL device manager not ready" % server.path
    )


def test_a_kubelet_that_does_not_answer_in_time(kubelet):
    server = kubelet()
    slow = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    handlers = {pr.LIST: grpc.unary_unary_rpc_method_handler(lambda request, context: time.sleep(1) or b"")}
    slow.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(pr.SERVICE, handlers),))
    path = server.directory + "/slow.sock"
    slow.add_insecure_port("unix:" + path)
    slow.start()
    try:
        with pr.PodResourcesClient(grpc, path, 0.2) as client:
            with pytest.raises(pr.PodResourcesError) as raised:
                client.list()
    finally:
        slow.stop(0)
    assert str(raised.value) == "no answer to List on the kubelet's PodResources socket %s within 0.2 s (pod_resources_timeout)" % path


def test_malformed_answer_is_reported_as_such(kubelet):
    server = kubelet()
    broken = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    handlers = {pr.LIST: grpc.unary_unary_rpc_method_handler(lambda request, context: b"\x0a\x05ab")}
    broken.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(pr.SERVICE, handlers),))
    path = server.directory + "/broken.sock"
    broken.add_insecure_port("unix:" + path)
    broken.start()
    try:
        result = pr.read_allocations(path, "/nonexistent/checkpoint", 5, grpc=grpc)
    finally:
        broken.stop(0)
    assert result["source"] == "none"
    assert result["errors"][0] == "pod-resources-grpc: cannot decode the kubelet's answer to List on %s: truncated protobuf field 1" % path


PERMISSION_PROBE = """
import os, socket, sys
import grpc
from ansible_collections.gpuops.scheduling.plugins.module_utils._node import pod_resources as pr
socket_path, warm_up_path, checkpoint_path = sys.argv[1:4]
if os.geteuid() == 0:
    # Root ignores file modes: become nobody. grpcio imports modules on first use and the
    # interpreter may be readable by root alone, so one call (and one refused connection) come
    # first, on another socket: grpcio would reuse a connection made as root to the same one.
    pr.read_allocations(warm_up_path, checkpoint_path, 5, grpc=grpc)
    stale = warm_up_path + ".stale"
    socket.socket(socket.AF_UNIX).bind(stale)
    pr.read_allocations(stale, checkpoint_path, 5, grpc=grpc)
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
print(pr.read_allocations(socket_path, checkpoint_path, 5, grpc=grpc)["errors"][0])
"""


def test_permission_denied_names_the_socket(kubelet):
    # The kubelet's socket is root's (srwxr-xr-x): another user may not connect to it.
    server, warm_up = kubelet(), kubelet()
    os.chmod(server.directory, 0o755)
    if os.geteuid() != 0:
        os.chmod(server.path, 0o000)
    probe = subprocess.run(
        [sys.executable, "-c", PERMISSION_PROBE, server.path, warm_up.path, "/nonexistent/checkpoint"],
        env=dict(os.environ, PYTHONPATH=str(COLLECTIONS)), cwd="/", capture_output=True, text=True, timeout=60, check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "pod-resources-grpc: permission denied on the kubelet's PodResources socket %s: run as root (become: true)" % server.path


# --- checkpoint -------------------------------------------------------------------------------------------------
def test_checkpoint_with_numa_nodes():
    allocations, registered = pr.parse_checkpoint((FIXTURES / "checkpoint-numa.json").read_text())
    assert allocations == [
        allocation(None, None, "hold", "nvidia.com/gpu", H20, pod_uid="7d3c1f7a-5a8e-4d8e-9a51-0c1b2e3f4a5b"),
        # NUMA nodes in order, whatever the JSON's order.
        allocation(None, None, "trainer", "nvidia.com/gpu", SHARED + "::0", SHARED + "::1", pod_uid="c2b7e0f4-9d3a-4f6b-8e1c-2a3b4c5d6e7f"),
    ]
    assert registered == {"nvidia.com/gpu": [H20, SHARED + "::0", SHARED + "::1"]}


def test_checkpoint_of_older_kubelets():
    allocations, _registered = pr.parse_checkpoint((FIXTURES / "checkpoint-list.json").read_text())
    assert allocations[0]["device_ids"] == [H20]


@pytest.mark.parametrize("text", ["{}", '{"Data": {}}', '{"Data": {"PodDeviceEntries": null}}', "null"])
def test_checkpoint_without_entries(text):
    assert pr.parse_checkpoint(text) == ([], {})


def test_checkpoint_not_json():
    with pytest.raises(pr.PodResourcesError, match="not JSON"):
        pr.parse_checkpoint("{truncated")


# --- which source answers ------------------------------------------------------------------------------------------
@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "kubelet_internal_checkpoint"
    path.write_text((FIXTURES / "checkpoint-numa.json").read_text())
    return str(path)


def test_without_grpcio_the_checkpoint_answers(kubelet, checkpoint):
    server = kubelet()
    result = pr.read_allocations(server.path, checkpoint, 5, grpc=None)
    assert result["source"] == "checkpoint" and len(result["allocations"]) == 2
    assert result["allocatable"] == {"nvidia.com/gpu": [H20, SHARED + "::0", SHARED + "::1"]}
    assert result["errors"] == ["pod-resources-grpc: grpcio is not installed, so the kubelet's PodResources API on %s was not asked" % server.path]
    assert server.requests == []


def test_checkpoint_when_the_socket_is_missing(tmp_path, checkpoint):
    result = pr.read_allocations(str(tmp_path / "kubelet.sock"), checkpoint, 5, grpc=grpc)
    assert result["source"] == "checkpoint"
    assert result["errors"] == [
        "pod-resources-grpc: no kubelet PodResources socket at %s: is the kubelet running, with this root-dir? (pod_resources_socket)"
        % (tmp_path / "kubelet.sock")
    ]


def test_checkpoint_when_list_fails(kubelet, checkpoint):
    # The kubelet limits the API's rate (100 calls a second, bursts of 10).
    server = kubelet(aborts={pr.LIST: (grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by rate limit")})
    result = pr.read_allocations(server.path, checkpoint, 5, grpc=grpc)
    assert result["source"] == "checkpoint"
    assert result["errors"] == [
        "pod-resources-grpc: List on the kubelet's PodResources socket %s failed: RESOURCE_EXHAUSTED rejected by rate limit" % server.path
    ]


def test_none_is_not_an_exception(tmp_path):
    unreadable = tmp_path / "checkpoint"
    unreadable.write_text("{broken")
    result = pr.read_allocations(str(tmp_path / "missing.sock"), str(unreadable), grpc=None)
    assert result["source"] == "none" and result["allocations"] == [] and result["allocatable"] is None
    assert result["errors"][1].startswith("checkpoint: the checkpoint is not JSON")
    result = pr.read_allocations(str(tmp_path / "missing.sock"), str(tmp_path / "missing"), grpc=None)
    assert result["errors"][1] == "checkpoint: no device-plugin checkpoint at %s" % (tmp_path / "missing")
