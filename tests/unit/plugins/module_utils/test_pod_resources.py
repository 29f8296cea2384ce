# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kubelet allocations: protobuf decoding of recorded bytes, checkpoint JSON, the HTTP/2 client
against a scripted server on a unix socket, the grpcio path, and the order of the sources."""

from __future__ import annotations

import shutil
import socket
import struct
import tempfile
import threading
from concurrent import futures
from pathlib import Path

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils import _pod_resources as pr

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "pod-resources"
LIST_BYTES = bytes.fromhex((FIXTURES / "list-v1.hex").read_text().strip())
SHARED = "GPU-9b1e7c3d-2f4a-4b6c-8d0e-1a2b3c4d5e6f"
H20 = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
EXPECTED = [
    {
        "pod_uid": None,
        "namespace": "gpu-operator",
        "pod_name": "gpu-demo-hold",
        "container_name": "hold",
        "resource_name": "nvidia.com/gpu",
        "device_ids": [H20],
    },
    {
        "pod_uid": None,
        "namespace": "ml",
        "pod_name": "trainer-0",
        "container_name": "trainer",
        "resource_name": "nvidia.com/gpu",
        "device_ids": [SHARED + "::0", SHARED + "::3"],
    },
    {
        "pod_uid": None,
        "namespace": "ml",
        "pod_name": "trainer-0",
        "container_name": "trainer",
        "resource_name": "nvidia.com/mig-1g.10gb",
        "device_ids": ["MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"],
    },
    {
        "pod_uid": None,
        "namespace": "ml",
        "pod_name": "trainer-0",
        "container_name": "trainer",
        "resource_name": "example.com/nic",
        "device_ids": ["0000:3b:00.2"],
    },
]


# --- protobuf and gRPC framing --------------------------------------------------------------------------
def test_decode_recorded_list_response():
    # CPU IDs, memory, topology and DRA claims are in the bytes and skipped; pods without devices give nothing.
    assert pr.decode_list_response(LIST_BYTES) == EXPECTED


def test_decode_empty_response():
    assert pr.decode_list_response(b"") == []


@pytest.mark.parametrize("data", [LIST_BYTES[:-3], b"\x0a\xff", b"\x0a", b"\x0b\x00"])
def test_decode_broken_bytes(data):
    with pytest.raises(pr.PodResourcesError):
        pr.decode_list_response(data)


def test_grpc_message_framing():
    assert pr.grpc_message(b"\x00" + struct.pack(">I", 3) + b"abcXYZ") == b"abc"
    with pytest.raises(pr.PodResourcesError, match="compressed"):
        pr.grpc_message(b"\x01\x00\x00\x00\x01a")
    with pytest.raises(pr.PodResourcesError, match="truncated"):
        pr.grpc_message(b"\x00\x00\x00\x00\x09abc")
    with pytest.raises(pr.PodResourcesError, match="without a gRPC message"):
        pr.grpc_message(b"")


# --- checkpoint ---------------------------------------------------------------------------------------------
def test_checkpoint_with_numa_nodes():
    allocations = pr.parse_checkpoint((FIXTURES / "checkpoint-numa.json").read_text())
    assert allocations == [
        {
            "pod_uid": "7d3c1f7a-5a8e-4d8e-9a51-0c1b2e3f4a5b",
            "namespace": None,
            "pod_name": None,
            "container_name": "hold",
            "resource_name": "nvidia.com/gpu",
            "device_ids": [H20],
        },
        # NUMA nodes in order, whatever the JSON's order.
        {
            "pod_uid": "c2b7e0f4-9d3a-4f6b-8e1c-2a3b4c5d6e7f",
            "namespace": None,
            "pod_name": None,
            "container_name": "trainer",
            "resource_name": "nvidia.com/gpu",
            "device_ids": [SHARED + "::0", SHARED + "::1"],
        },
    ]


def test_checkpoint_of_older_kubelets():
    assert pr.parse_checkpoint((FIXTURES / "checkpoint-list.json").read_text())[0]["device_ids"] == [H20]


@pytest.mark.parametrize("text", ["{}", '{"Data": {}}', '{"Data": {"PodDeviceEntries": null}}', "null"])
def test_checkpoint_without_entries(text):
    assert pr.parse_checkpoint(text) == []


def test_checkpoint_not_json():
    with pytest.raises(pr.PodResourcesError, match="not JSON"):
        pr.parse_checkpoint("{truncated")


# --- the HTTP/2 client ----------------------------------------------------------------------------------------
def frame(frame_type, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", frame_type, flags, stream) + payload


def grpc_body(message):
    return b"\x00" + struct.pack(">I", len(message)) + message


RESPONSE_HEADERS = b"\x88"  # :status 200, indexed; the client does not decode headers
TRAILERS = b"\x40\x0bgrpc-status\x010"


class ScriptedServer:
    """Accepts one connection on a unix socket, reads the client's request, answers with scripted frames."""

    def __init__(self, answer):
        self.directory = tempfile.mkdtemp(prefix="pr")  # short: unix socket paths are limited to 108 bytes
        self.path = self.directory + "/kubelet.sock"
        self.answer = answer
        self.received = b""
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        connection = self.listener.accept()[0]
        with connection:
            connection.settimeout(5)
            # Read up to the request's DATA frame (END_STREAM on stream 1).
            while b"\x00\x00\x05\x00\x01\x00\x00\x00\x01" not in self.received:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                self.received += chunk
            for part in self.answer:
                if part is None:
                    return  # close the connection
                connection.sendall(part)
            try:
                while True:  # collect what the client sends back (SETTINGS ACK, PING ACK)
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    self.received += chunk
            except OSError:
                pass

    def close(self):
        self.thread.join(5)
        self.listener.close()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
def serve():
    servers = []

    def start(*answer):
        server = ScriptedServer(answer)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def test_http2_client_request_bytes():
    request = pr.request_frames()
    assert request.startswith(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    assert b"/v1.PodResourcesLister/List" in request and b"application/grpc" in request and b"trailers" in request
    assert request.endswith(frame(0x0, 0x1, 1, b"\x00\x00\x00\x00\x00"))  # the empty request message, END_STREAM


def test_http2_client_reads_a_split_padded_answer_and_acks(serve):
    body = grpc_body(LIST_BYTES)
    padded = bytes([4]) + body[:100] + b"\x00" * 4
    server = serve(
        frame(0x4, 0, 0, struct.pack(">HI", 0x3, 100)),  # SETTINGS
        frame(0x8, 0, 0, struct.pack(">I", 1000)),  # WINDOW_UPDATE, ignored
        frame(0x1, 0x4, 1, RESPONSE_HEADERS),
        frame(0x6, 0, 0, b"12345678"),  # PING
        frame(0x0, 0x8, 1, padded),  # DATA, PADDED
        frame(0x0, 0, 1, body[100:]),
        frame(0x1, 0x5, 1, TRAILERS),  # END_STREAM | END_HEADERS
    )
    assert pr.decode_list_response(pr.list_with_http2(server.path, 5)) == EXPECTED
    server.close()
    assert frame(0x4, 0x1, 0) in server.received  # SETTINGS ACK
    assert frame(0x6, 0x1, 0, b"12345678") in server.received  # PING ACK


def test_http2_client_trailers_only_answer_is_an_error(serve):
    server = serve(frame(0x4, 0, 0), frame(0x1, 0x5, 1, b"\x88" + TRAILERS))
    with pytest.raises(pr.PodResourcesError, match="gRPC error and no data"):
        pr.list_with_http2(server.path, 5)


def test_http2_client_goaway(serve):
    server = serve(frame(0x7, 0, 0, struct.pack(">II", 0, 1) + b"client preface wrong"))
    with pytest.raises(pr.PodResourcesError, match="GOAWAY 1: client preface wrong"):
        pr.list_with_http2(server.path, 5)


def test_http2_client_stream_reset(serve):
    server = serve(frame(0x3, 0, 1, struct.pack(">I", 8)))
    with pytest.raises(pr.PodResourcesError, match="reset the call"):
        pr.list_with_http2(server.path, 5)


def test_http2_client_connection_closed(serve):
    server = serve(frame(0x4, 0, 0), None)
    # Depending on timing the client sees the end of the stream or a broken pipe while acknowledging.
    with pytest.raises(pr.PodResourcesError, match="closed the connection|cannot talk to the kubelet"):
        pr.list_with_http2(server.path, 5)


def test_http2_client_timeout(serve):
    server = serve(frame(0x4, 0, 0))
    with pytest.raises(pr.PodResourcesError, match="did not answer"):
        pr.list_with_http2(server.path, 0.2)


# --- the grpcio path -------------------------------------------------------------------------------------------
class FakeRpcError(Exception):
    def code(self):
        return "StatusCode.UNAVAILABLE"

    def details(self):
        return "connection refused"


class FakeGrpc:
    RpcError = FakeRpcError

    def __init__(self, answer):
        self.answer = answer
        self.calls = []
        self.closed = False

    def insecure_channel(self, target):
        self.calls.append(target)
        return self

    def unary_unary(self, method):
        self.calls.append(method)
        return self._call

    def _call(self, request, timeout):
        self.calls.append((request, timeout))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def close(self):
        self.closed = True


def test_grpc_path_sends_raw_bytes():
    fake = FakeGrpc(LIST_BYTES)
    assert pr.list_with_grpc(fake, "/run/kubelet.sock", 3) == LIST_BYTES
    assert fake.calls == ["unix:///run/kubelet.sock", "/v1.PodResourcesLister/List", (b"", 3)] and fake.closed


def test_grpc_path_error():
    with pytest.raises(pr.PodResourcesError, match="UNAVAILABLE connection refused"):
        pr.list_with_grpc(FakeGrpc(FakeRpcError()), "/run/kubelet.sock", 3)


def test_real_grpcio_server_with_both_clients():
    grpc = pytest.importorskip("grpc")
    directory = tempfile.mkdtemp(prefix="pr")
    path = directory + "/kubelet.sock"
    handlers = {"List": grpc.unary_unary_rpc_method_handler(lambda request, context: LIST_BYTES)}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1.PodResourcesLister", handlers),))
    server.add_insecure_port("unix://" + path)
    server.start()
    try:
        assert pr.decode_list_response(pr.list_with_grpc(grpc, path, 5)) == EXPECTED
        assert pr.decode_list_response(pr.list_with_http2(path, 5)) == EXPECTED
    finally:
        server.stop(0)
        shutil.rmtree(directory, ignore_errors=True)


# --- which source answers ------------------------------------------------------------------------------------------
def files(existing):
    return (lambda path: path in existing), (lambda path: existing[path])


def test_sources_grpc_first():
    exists, read_text = files({"/sock": None, "/ckpt": "{}"})
    result = pr.read_allocations("/sock", "/ckpt", grpc=FakeGrpc(LIST_BYTES), exists=exists, read_text=read_text)
    assert result == {"source": "pod-resources-grpc", "allocations": EXPECTED, "errors": []}


def test_sources_http2_when_grpc_fails(serve):
    server = serve(frame(0x1, 0x4, 1, RESPONSE_HEADERS), frame(0x0, 0, 1, grpc_body(LIST_BYTES)), frame(0x1, 0x5, 1, TRAILERS))
    result = pr.read_allocations(server.path, "/nonexistent", grpc=FakeGrpc(FakeRpcError()))
    assert result["source"] == "pod-resources-http2" and result["allocations"] == EXPECTED
    assert result["errors"] == ["pod-resources-grpc: PodResources List through grpcio failed: StatusCode.UNAVAILABLE connection refused"]


def test_sources_checkpoint_without_socket():
    exists, read_text = files({"/ckpt": (FIXTURES / "checkpoint-list.json").read_text()})
    result = pr.read_allocations("/sock", "/ckpt", exists=exists, read_text=read_text)
    assert result["source"] == "checkpoint" and result["allocations"][0]["device_ids"] == [H20]
    assert result["errors"] == ["no kubelet PodResources socket at /sock"]


def test_sources_checkpoint_when_the_socket_refuses(tmp_path):
    stale = tmp_path / "kubelet.sock"
    stale.write_text("")  # a socket file nobody listens on: connect fails
    checkpoint = tmp_path / "checkpoint"
    checkpoint.write_text((FIXTURES / "checkpoint-numa.json").read_text())
    result = pr.read_allocations(str(stale), str(checkpoint))
    assert result["source"] == "checkpoint" and len(result["allocations"]) == 2
    assert result["errors"][0].startswith("pod-resources-http2: cannot talk to the kubelet on ")


def test_sources_none_is_not_an_exception(tmp_path):
    unreadable = tmp_path / "checkpoint"
    unreadable.write_text("{broken")
    result = pr.read_allocations(str(tmp_path / "missing.sock"), str(unreadable))
    assert result["source"] == "none" and result["allocations"] == []
    assert result["errors"][0] == "no kubelet PodResources socket at %s" % (tmp_path / "missing.sock")
    assert result["errors"][1].startswith("checkpoint: the checkpoint is not JSON")
