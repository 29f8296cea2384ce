# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which pod the kubelet gave which device to.

Sources, tried in this order by ``read_allocations``:

1. ``pod-resources-grpc``: the kubelet's PodResources v1 ``List`` call on its unix socket
   (``/var/lib/kubelet/pod-resources/kubelet.sock``, as DCGM exporter reads it), through ``grpcio``
   when the node has it;
2. ``pod-resources-http2``: the same call without grpcio. gRPC is HTTP/2 with a 5-byte frame per
   message, and the kubelet serves it in clear text on the socket, so one unary call needs only a
   small HTTP/2 client (prior knowledge, no TLS, HPACK literals, no Huffman) written below;
3. ``checkpoint``: the device manager's checkpoint file
   (``/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint``), JSON the kubelet rewrites on
   every allocation. It names pods by UID only, and may still list a pod that ended until the
   kubelet next allocates.

The API names pods by namespace and name but not UID; the checkpoint the other way round. Each
allocation carries what its source knows and ``None`` for the rest; the reconciliation joins them.

No generated protobuf code: the v1 ``ListPodResourcesResponse`` is decoded by the small wire-format
reader below. Field numbers (k8s.io/kubelet/pkg/apis/podresources/v1/api.proto)::

    ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
    PodResources             { string name = 1; string namespace = 2; repeated ContainerResources containers = 3; }
    ContainerResources       { string name = 1; repeated ContainerDevices devices = 2; ... }
    ContainerDevices         { string resource_name = 1; repeated string device_ids = 2; ... }
"""

from __future__ import annotations

import json
import os
import socket
import struct

SOURCE_GRPC = "pod-resources-grpc"
SOURCE_HTTP2 = "pod-resources-http2"
SOURCE_CHECKPOINT = "checkpoint"
SOURCE_NONE = "none"

LIST_METHOD = "/v1.PodResourcesLister/List"


class PodResourcesError(Exception):
    """A source could not answer; the message says why."""


# ---------------------------------------------------------------------------------------------
# Protobuf wire format (only what the v1 List response uses)
# ---------------------------------------------------------------------------------------------
_WIRE_VARINT, _WIRE_FIXED64, _WIRE_LENGTH, _WIRE_FIXED32 = 0, 1, 2, 5


def _read_varint(data, offset):
    result = shift = 0
    while True:
        if offset >= len(data):
            raise PodResourcesError("truncated protobuf varint")
        byte = data[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, offset
        shift += 7
        if shift > 63:
            raise PodResourcesError("protobuf varint longer than 64 bits")


def _fields(data):
    """Yield ``(field_number, value)``; length-delimited values as bytes, others as ints."""
    offset = 0
    while offset < len(data):
        key, offset = _read_varint(data, offset)
        number, wire_type = key >> 3, key & 0x7
        if wire_type == _WIRE_VARINT:
            value, offset = _read_varint(data, offset)
        elif wire_type == _WIRE_LENGTH:
            length, offset = _read_varint(data, offset)
            if offset + length > len(data):
                raise PodResourcesError("truncated protobuf field %d" % number)
            value, offset = bytes(data[offset:offset + length]), offset + length
        elif wire_type in (_WIRE_FIXED64, _WIRE_FIXED32):
            size = 8 if wire_type == _WIRE_FIXED64 else 4
            value, offset = int.from_bytes(data[offset:offset + size], "little"), offset + size
        else:
            raise PodResourcesError("unsupported protobuf wire type %d" % wire_type)
        yield number, value


def decode_list_response(data):
    """Decode a v1 ``ListPodResourcesResponse`` into allocations (see ``_allocation``).

    One allocation per (container, resource); containers without devices give none. Fields this
    decoder does not know (CPU IDs, memory, DRA claims, topology) are skipped, so newer kubelets
    decode too.
    """
    allocations = []
    for number, pod_bytes in _fields(data):
        if number != 1:
            continue
        pod = {"name": None, "namespace": None, "containers": []}
        for pod_field, value in _fields(pod_bytes):
            if pod_field == 1:
                pod["name"] = value.decode("utf-8")
            elif pod_field == 2:
                pod["namespace"] = value.decode("utf-8")
            elif pod_field == 3:
                pod["containers"].append(value)
        for container_bytes in pod["containers"]:
            container_name, devices = None, []
            for container_field, value in _fields(container_bytes):
                if container_field == 1:
                    container_name = value.decode("utf-8")
                elif container_field == 2:
                    devices.append(_decode_container_devices(value))
            for resource_name, device_ids in devices:
                allocations.append(_allocation(None, pod["namespace"], pod["name"], container_name, resource_name, device_ids))
    return allocations


def _decode_container_devices(data):
    resource_name, device_ids = None, []
    for number, value in _fields(data):
        if number == 1:
            resource_name = value.decode("utf-8")
        elif number == 2:
            device_ids.append(value.decode("utf-8"))
    return resource_name, device_ids


def _allocation(pod_uid, namespace, pod_name, container_name, resource_name, device_ids):
    return {
        "pod_uid": pod_uid,
        "namespace": namespace,
        "pod_name": pod_name,
        "container_name": container_name,
        "resource_name": resource_name,
        "device_ids": list(device_ids),
    }


def grpc_message(data):
    """The protobuf message inside a gRPC length-prefixed frame (1 byte flag, 4 bytes length)."""
    if len(data) < 5:
        raise PodResourcesError("the kubelet answered without a gRPC message")
    compressed, length = struct.unpack(">BI", data[:5])
    if compressed:
        raise PodResourcesError("the kubelet compressed its answer, which was not asked for")
    if len(data) < 5 + length:
        raise PodResourcesError("truncated gRPC message: %d of %d bytes" % (len(data) - 5, length))
    return data[5:5 + length]


# ---------------------------------------------------------------------------------------------
# Checkpoint file
# ---------------------------------------------------------------------------------------------
def parse_checkpoint(text):
    """Allocations from the device manager's checkpoint JSON.

    ``DeviceIDs`` is ``{"<numa node>": [ids]}`` since Kubernetes 1.20 and a plain list before.
    """
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise PodResourcesError("the checkpoint is not JSON: %s" % exc)
    entries = ((document or {}).get("Data") or {}).get("PodDeviceEntries") or []
    allocations = []
    for entry in entries:
        device_ids = entry.get("DeviceIDs") or []
        if isinstance(device_ids, dict):
            # Keep a stable order: NUMA nodes by number, then the plugin's order within each.
            device_ids = [device for numa in sorted(device_ids, key=_numa_key) for device in device_ids[numa] or []]
        allocations.append(_allocation(entry.get("PodUID"), None, None, entry.get("ContainerName"), entry.get("ResourceName"), device_ids))
    return allocations


def _numa_key(numa):
    try:
        return int(numa)
    except ValueError:
        return numa


# ---------------------------------------------------------------------------------------------
# The List call
# ---------------------------------------------------------------------------------------------
def list_with_grpc(grpc, socket_path, timeout):
    """Call List through grpcio (``grpc`` is the imported module) and return the raw response bytes."""
    channel = grpc.insecure_channel("unix://" + socket_path)
    try:
        # No serializers: grpcio then sends and returns bytes, so no generated stubs are needed.
        call = channel.unary_unary(LIST_METHOD)
        return call(b"", timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        details = exc.details() if hasattr(exc, "details") else str(exc)
        raise PodResourcesError("PodResources List through grpcio failed: %s %s" % (code, details))
    finally:
        channel.close()


# HTTP/2 frame types and flags (RFC 9113 section 6).
_DATA, _HEADERS, _RST_STREAM, _SETTINGS, _PING, _GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
_END_STREAM, _ACK, _PADDED = 0x1, 0x1, 0x8
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_MAX_WINDOW = 2 ** 31 - 1
_STREAM = 1


def _frame(frame_type, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", frame_type, flags, stream) + payload


def _hpack_integer(value, prefix_bits, first_byte_flags):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    encoded = [first_byte_flags | limit]
    value -= limit
    while value >= 128:
        encoded.append((value & 0x7F) | 0x80)
        value >>= 7
    encoded.append(value)
    return bytes(encoded)


def _hpack_string(text):
    raw = text.encode("ascii")
    return _hpack_integer(len(raw), 7, 0) + raw  # H bit 0: no Huffman coding


def _hpack_header(name_index, name, value):
    """A "literal header field without indexing" (RFC 7541 6.2.2), by static-table name or literal name."""
    if name_index:
        return _hpack_integer(name_index, 4, 0) + _hpack_string(value)
    return b"\x00" + _hpack_string(name) + _hpack_string(value)


def request_frames(path=LIST_METHOD, authority="localhost"):
    """Everything the client sends: preface, settings, window, one request on stream 1."""
    settings = struct.pack(">HI", 0x2, 0) + struct.pack(">HI", 0x4, _MAX_WINDOW)  # no push; large stream window
    headers = (
        b"\x83"  # :method POST (static table 3)
        + b"\x86"  # :scheme http (static table 6)
        + _hpack_header(4, None, path)  # :path
        + _hpack_header(1, None, authority)  # :authority
        + _hpack_header(31, None, "application/grpc")  # content-type
        + _hpack_header(0, "te", "trailers")
    )
    return (
        _PREFACE
        + _frame(_SETTINGS, 0, 0, settings)
        + _frame(0x8, 0, 0, struct.pack(">I", _MAX_WINDOW - 65535))  # connection window to the maximum
        + _frame(_HEADERS, 0x4, _STREAM, headers)  # END_HEADERS
        + _frame(_DATA, _END_STREAM, _STREAM, b"\x00\x00\x00\x00\x00")  # the empty ListPodResourcesRequest
    )


def list_with_http2(socket_path, timeout):
    """Call List with the built-in HTTP/2 client and return the raw response bytes (the gRPC frame removed)."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(timeout)
    try:
        connection.connect(socket_path)
        connection.sendall(request_frames())
        return grpc_message(_read_response(connection))
    except socket.timeout:
        raise PodResourcesError("the kubelet did not answer on %s within %ss" % (socket_path, timeout))
    except OSError as exc:  # refused, permission denied, broken pipe
        raise PodResourcesError("cannot talk to the kubelet on %s: %s" % (socket_path, exc))
    finally:
        connection.close()


def _read_response(connection):
    """Collect stream 1's DATA until the stream ends, answering the server's SETTINGS and PING."""
    reader = _FrameReader(connection)
    body = b""
    while True:
        frame_type, flags, stream, payload = reader.next_frame()
        if frame_type == _SETTINGS and not flags & _ACK:
            connection.sendall(_frame(_SETTINGS, _ACK, 0))
        elif frame_type == _PING and not flags & _ACK:
            connection.sendall(_frame(_PING, _ACK, 0, payload))
        elif frame_type == _GOAWAY:
            error_code = struct.unpack(">I", payload[4:8])[0] if len(payload) >= 8 else None
            raise PodResourcesError("the kubelet closed the connection (HTTP/2 GOAWAY %s: %s)" % (error_code, payload[8:].decode("utf-8", "replace")))
        elif stream == _STREAM and frame_type == _RST_STREAM:
            raise PodResourcesError("the kubelet reset the call (HTTP/2 error %s)" % struct.unpack(">I", payload[:4])[0])
        elif stream == _STREAM and frame_type == _DATA:
            body += _unpad(flags, payload)
        if stream == _STREAM and frame_type in (_DATA, _HEADERS) and flags & _END_STREAM:
            if not body:
                # A trailers-only answer is a gRPC error; its status is HPACK-coded, which this small
                # client does not decode.
                raise PodResourcesError("the kubelet answered List with a gRPC error and no data (is PodResources v1 served?)")
            return body


def _unpad(flags, payload):
    if flags & _PADDED and payload:
        return payload[1:len(payload) - payload[0]]
    return payload


class _FrameReader:
    def __init__(self, connection):
        self._connection = connection
        self._buffer = b""

    def _read(self, size):
        while len(self._buffer) < size:
            chunk = self._connection.recv(65536)
            if not chunk:
                raise PodResourcesError("the kubelet closed the connection before answering")
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def next_frame(self):
        header = self._read(9)
        length = struct.unpack(">I", b"\x00" + header[:3])[0]
        frame_type, flags, stream = struct.unpack(">BBI", header[3:])
        return frame_type, flags, stream & 0x7FFFFFFF, self._read(length)


def read_allocations(socket_path, checkpoint_path, timeout=5, grpc=None, exists=None, read_text=None):
    """Device allocations of the node's pods, from the first source that answers.

    ``grpc`` is the imported grpcio module or None; ``exists`` / ``read_text`` default to the
    filesystem (tests pass fakes). Returns ``{source, allocations, errors}``: ``source`` is one of
    the SOURCE_* names (``none`` when nothing answered; that is not fatal to the caller) and
    ``errors`` what each source that was tried and failed said, in order.
    """
    exists = exists or os.path.exists
    read_text = read_text or _read_file
    errors = []
    if not exists(socket_path):
        errors.append("no kubelet PodResources socket at %s" % socket_path)
    else:
        attempts = []
        if grpc is not None:
            attempts.append((SOURCE_GRPC, lambda: list_with_grpc(grpc, socket_path, timeout)))
        attempts.append((SOURCE_HTTP2, lambda: list_with_http2(socket_path, timeout)))
        for source, call in attempts:
            try:
                return {"source": source, "allocations": decode_list_response(call()), "errors": errors}
            except PodResourcesError as exc:
                errors.append("%s: %s" % (source, exc))
    if not exists(checkpoint_path):
        errors.append("no device-plugin checkpoint at %s" % checkpoint_path)
    else:
        try:
            return {"source": SOURCE_CHECKPOINT, "allocations": parse_checkpoint(read_text(checkpoint_path)), "errors": errors}
        except (PodResourcesError, OSError) as exc:
            errors.append("%s: %s" % (SOURCE_CHECKPOINT, exc))
    return {"source": SOURCE_NONE, "allocations": [], "errors": errors}


def _read_file(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()
