# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.
"""Which pod the kubelet gave which device to, and which devices it can give.

Sources, tried in this order by ``read_allocations``:

1. ``pod-resources-grpc``: the kubelet's PodResources v1 API on its unix socket
   (``<kubelet root-dir>/pod-resources/kubelet.sock``, as NVIDIA's DCGM exporter reads it), through
   ``grpcio`` when the node has it: ``List`` for the allocations, ``GetAllocatableResources`` for the
   devices the kubelet can hand out;
2. ``checkpoint``: the device manager's checkpoint file
   (``/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint``), JSON the kubelet rewrites on
   every allocation and device change. It names pods by UID only, and may still list a pod that
   ended until the kubelet next writes it.

The API names pods by namespace and name but not UID; the checkpoint the other way round. Each
allocation carries what its source knows and ``None`` for the rest; the reconciliation joins them.

No generated protobuf code, so nothing needs protoc or the protobuf package: grpcio's generic API
(``channel.unary_unary(path)``) carries bytes. Both requests are empty messages (zero bytes); the small
wire-format decoder below reads the answers (the kubelet's half, for tests, is tests/unit/kubelet_pod_resources.py).
Field numbers (k8s.io/kubelet/pkg/apis/podresources/v1/api.proto)::

    ListPodResourcesRequest      {}
    ListPodResourcesResponse     { repeated PodResources pod_resources = 1; }
    AllocatableResourcesRequest  {}
    AllocatableResourcesResponse { repeated ContainerDevices devices = 1; repeated int64 cpu_ids = 2; ... }
    PodResources                 { string name = 1; string namespace = 2; repeated ContainerResources containers = 3; }
    ContainerResources           { string name = 1; repeated ContainerDevices devices = 2; ... }
    ContainerDevices             { string resource_name = 1; repeated string device_ids = 2; TopologyInfo topology = 3; }

Fields the codec does not read (CPU IDs, memory, topology, DRA claims) are skipped, so newer kubelets decode too.
"""

from __future__ import annotations

import json
import os

SOURCE_GRPC = "pod-resources-grpc"
SOURCE_CHECKPOINT = "checkpoint"
SOURCE_NONE = "none"

SERVICE = "v1.PodResourcesLister"
LIST = "List"
ALLOCATABLE = "GetAllocatableResources"

# Why a kubelet answers UNIMPLEMENTED (or "disabled") for a method: it predates it or a feature gate is off.
_MISSING_METHOD = {
    LIST: "the v1 API came in Kubernetes 1.20",
    ALLOCATABLE: "it came in Kubernetes 1.21 behind the KubeletPodResourcesGetAllocatable feature gate, on by default since 1.23",
}


class PodResourcesError(Exception):
    """A source could not answer; the message says why."""


# ---------------------------------------------------------------------------------------------
# Protobuf wire format
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
            yield number, value
            continue
        if wire_type == _WIRE_LENGTH:
            size, offset = _read_varint(data, offset)
        elif wire_type in (_WIRE_FIXED64, _WIRE_FIXED32):
            size = 8 if wire_type == _WIRE_FIXED64 else 4
        else:
            raise PodResourcesError("unsupported protobuf wire type %d" % wire_type)
        if offset + size > len(data):
            raise PodResourcesError("truncated protobuf field %d" % number)
        value, offset = bytes(data[offset:offset + size]), offset + size
        yield number, value if wire_type == _WIRE_LENGTH else int.from_bytes(value, "little")


def _text(value):
    if not isinstance(value, bytes):
        raise PodResourcesError("a protobuf string field has wire type varint")
    return value.decode("utf-8")


def _decode_devices(data):
    """ContainerDevices -> ``{resource_name, device_ids}``; nothing reads the topology (NUMA nodes)."""
    devices = {"resource_name": None, "device_ids": []}
    for number, value in _fields(data):
        if number == 1:
            devices["resource_name"] = _text(value)
        elif number == 2:
            devices["device_ids"].append(_text(value))
    return devices


def _decode_pod(data):
    """PodResources -> one allocation per (container, resource); containers without devices give none."""
    name = namespace = None
    containers = []
    for number, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 2:
            namespace = _text(value)
        elif number == 3 and isinstance(value, bytes):
            containers.append(value)
    allocations = []
    for container_bytes in containers:
        container_name, devices = None, []
        for number, value in _fields(container_bytes):
            if number == 1:
                container_name = _text(value)
            elif number == 2 and isinstance(value, bytes):
                devices.append(_decode_devices(value))
        for entry in devices:
            allocations.append(_allocation(None, namespace, name, container_name, entry["resource_name"], entry["device_ids"]))
    return allocations


def decode_list_response(data):
    """ListPodResourcesResponse -> allocations (see ``_allocation``)."""
    return [allocation for number, pod in _fields(data) if number == 1 for allocation in _decode_pod(pod)]


def decode_allocatable_response(data):
    """AllocatableResourcesResponse -> ``{resource_name: [device IDs]}``.

    The kubelet sends one ContainerDevices per device (each with its own NUMA node); they are
    joined per resource, in the kubelet's order.
    """
    allocatable = {}
    for number, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            entry = _decode_devices(value)
            allocatable.setdefault(entry["resource_name"], []).extend(entry["device_ids"])
    return allocatable


def _allocation(pod_uid, namespace, pod_name, container_name, resource_name, device_ids):
    return {
        "pod_uid": pod_uid,
        "namespace": namespace,
        "pod_name": pod_name,
        "container_name": container_name,
        "resource_name": resource_name,
        "device_ids": list(device_ids),
    }


# ---------------------------------------------------------------------------------------------
# The API through grpcio
# ---------------------------------------------------------------------------------------------
class PodResourcesClient:
    """The kubelet's PodResources v1 API on ``socket_path``, through ``grpc`` (the imported grpcio).

    Use as a context manager (one channel for the calls inside). Every failure is a
    PodResourcesError whose message names the socket and, where there is one, the fix.
    """

    def __init__(self, grpc, socket_path, timeout=5):
        self._grpc = grpc
        self.socket_path = socket_path
        self.timeout = timeout
        self._channel = None

    def __enter__(self):
        # grpcio would only say "failed to connect to all addresses" for a missing socket.
        if not os.path.exists(self.socket_path):
            raise PodResourcesError(
                "no kubelet PodResources socket at %s: is the kubelet running, with this root-dir? (pod_resources_socket)" % self.socket_path
            )
        self._channel = self._grpc.insecure_channel("unix:" + self.socket_path)
        return self

    def __exit__(self, *_exc_info):
        self._channel.close()
        self._channel = None

    def list(self):
        """Every pod's device allocations (``List``)."""
        return self._call(LIST, decode_list_response)

    def allocatable(self):
        """``{resource_name: [device IDs]}`` the kubelet can allocate (``GetAllocatableResources``)."""
        return self._call(ALLOCATABLE, decode_allocatable_response)

    def _call(self, method, decode):
        # No serializers: both requests are empty messages, zero bytes sent as they are, and the answer is
        # decoded after the call, so a malformed one is reported as such rather than as grpcio's
        # "Exception deserializing response!".
        call = self._channel.unary_unary("/%s/%s" % (SERVICE, method))
        try:
            answer = call(b"", timeout=self.timeout)
        except self._grpc.RpcError as exc:
            raise self._error(method, exc)
        try:
            return decode(answer)
        except PodResourcesError as exc:
            raise PodResourcesError("cannot decode the kubelet's answer to %s on %s: %s" % (method, self.socket_path, exc))

    def _error(self, method, exc):
        status = self._grpc.StatusCode
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
        where = "the kubelet's PodResources socket %s" % self.socket_path
        code_name = getattr(code, "name", code)
        # A kubelet whose feature gate for the method is off answers UNKNOWN "PodResources API
        # GetAllocatableResources disabled" (pkg/kubelet/apis/podresources/server_v1.go).
        if code == status.UNIMPLEMENTED or (details or "").startswith("PodResources API") and (details or "").endswith("disabled"):
            return PodResourcesError(
                "%s does not serve %s (%s: %s): %s" % (where, method, code_name, details, _MISSING_METHOD[method])
            )
        if "permission denied" in (details or "").lower():
            return PodResourcesError("permission denied on %s: run as root (become: true)" % where)
        if code == status.DEADLINE_EXCEEDED:
            return PodResourcesError("no answer to %s on %s within %s s (pod_resources_timeout)" % (method, where, self.timeout))
        if code == status.UNAVAILABLE:
            return PodResourcesError("cannot connect to %s (%s): is the kubelet running?" % (where, details))
        return PodResourcesError("%s on %s failed: %s %s" % (method, where, code_name, details))


# ---------------------------------------------------------------------------------------------
# Checkpoint file
# ---------------------------------------------------------------------------------------------
def parse_checkpoint(text):
    """``(allocations, registered)`` from the device manager's checkpoint JSON.

    ``DeviceIDs`` is ``{"<numa node>": [ids]}`` since Kubernetes 1.20 and a plain list before;
    ``registered`` is ``RegisteredDevices``, the healthy devices per resource when it was written.
    """
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise PodResourcesError("the checkpoint is not JSON: %s" % exc)
    data = (document or {}).get("Data") or {}
    allocations = []
    for entry in data.get("PodDeviceEntries") or []:
        device_ids = entry.get("DeviceIDs") or []
        if isinstance(device_ids, dict):
            # Keep a stable order: NUMA nodes by number, then the plugin's order within each.
            device_ids = [device for numa in sorted(device_ids, key=_numa_key) for device in device_ids[numa] or []]
        allocations.append(_allocation(entry.get("PodUID"), None, None, entry.get("ContainerName"), entry.get("ResourceName"), device_ids))
    registered = {resource: list(devices or []) for resource, devices in (data.get("RegisteredDevices") or {}).items()}
    return allocations, registered


def _numa_key(numa):
    try:
        return int(numa)
    except ValueError:
        return numa


# ---------------------------------------------------------------------------------------------
# The sources in order
# ---------------------------------------------------------------------------------------------
def read_allocations(socket_path, checkpoint_path, timeout=5, grpc=None):
    """Device allocations of the node's pods, from the first source that answers.

    ``grpc`` is the imported grpcio module, or None when it is not installed. Returns
    ``{source, allocations, allocatable, errors}``: ``source`` is one of the SOURCE_* names
    (``none`` when nothing answered; that is not fatal to the caller); ``allocatable`` is
    ``{resource: [device IDs]}`` (the checkpoint's registered devices), or None when not read;
    ``errors`` says, in order, what each source that was tried could not answer.
    """
    errors = []
    if grpc is None:
        errors.append("%s: grpcio is not installed, so the kubelet's PodResources API on %s was not asked" % (SOURCE_GRPC, socket_path))
    else:
        try:
            with PodResourcesClient(grpc, socket_path, timeout) as client:
                allocations = client.list()
                try:
                    allocatable = client.allocatable()
                except PodResourcesError as exc:
                    allocatable = None  # the allocations still stand
                    errors.append("%s: %s" % (SOURCE_GRPC, exc))
            return {"source": SOURCE_GRPC, "allocations": allocations, "allocatable": allocatable, "errors": errors}
        except PodResourcesError as exc:
            errors.append("%s: %s" % (SOURCE_GRPC, exc))
    if not os.path.exists(checkpoint_path):
        errors.append("%s: no device-plugin checkpoint at %s" % (SOURCE_CHECKPOINT, checkpoint_path))
    else:
        try:
            with open(checkpoint_path, encoding="utf-8") as handle:
                allocations, registered = parse_checkpoint(handle.read())
            return {"source": SOURCE_CHECKPOINT, "allocations": allocations, "allocatable": registered, "errors": errors}
        except (PodResourcesError, OSError) as exc:
            errors.append("%s: %s" % (SOURCE_CHECKPOINT, exc))
    return {"source": SOURCE_NONE, "allocations": [], "allocatable": None, "errors": errors}
