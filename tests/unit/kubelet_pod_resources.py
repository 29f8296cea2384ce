"""The kubelet's half of the PodResources v1 wire format, for tests that play the kubelet.

The collection only asks (plugins/module_utils/_node/pod_resources.py sends empty requests and reads answers); a
test's fake kubelet writes the answers with these, and test_pod_resources.py checks them against bytes the real
protobuf library wrote (fixtures/pod-resources).
"""
from __future__ import annotations

from ansible_collections.gpuops.scheduling.plugins.module_utils._node.pod_resources import _WIRE_LENGTH, _WIRE_VARINT


def _varint(value):
    if value < 0:
        value += 1 << 64  # a negative int64 is its 64-bit two's complement, ten bytes long
    encoded = bytearray()
    while value > 0x7F:
        encoded.append((value & 0x7F) | 0x80)
        value >>= 7
    encoded.append(value)
    return bytes(encoded)


def _bytes_field(number, payload):
    return _varint(number << 3 | _WIRE_LENGTH) + _varint(len(payload)) + payload


def _string_field(number, text):
    # proto3 leaves out a string equal to its default ("").
    return _bytes_field(number, text.encode("utf-8")) if text else b""


def _varint_field(number, value):
    # proto3 leaves out a scalar equal to its default (0).
    return _varint(number << 3 | _WIRE_VARINT) + _varint(value) if value else b""


def _encode_devices(devices):
    """``{resource_name, device_ids, numa_nodes}`` -> ContainerDevices; no ``numa_nodes``, no topology."""
    payload = _string_field(1, devices.get("resource_name"))
    payload += b"".join(_bytes_field(2, device.encode("utf-8")) for device in devices.get("device_ids") or [])
    numa_nodes = devices.get("numa_nodes")
    if numa_nodes:
        payload += _bytes_field(3, b"".join(_bytes_field(1, _varint_field(1, node)) for node in numa_nodes))
    return payload


def _encode_pod(pod):
    """``{name, namespace, containers: [{name, devices: [...]}]}`` -> PodResources."""
    payload = _string_field(1, pod.get("name")) + _string_field(2, pod.get("namespace"))
    for container in pod.get("containers") or []:
        container_payload = _string_field(1, container.get("name"))
        container_payload += b"".join(_bytes_field(2, _encode_devices(devices)) for devices in container.get("devices") or [])
        payload += _bytes_field(3, container_payload)
    return payload


def encode_list_response(pods):
    """Pods (see ``_encode_pod``) -> ListPodResourcesResponse: what a kubelet answers ``List`` with."""
    return b"".join(_bytes_field(1, _encode_pod(pod)) for pod in pods)


def encode_allocatable_response(devices):
    """ContainerDevices entries -> AllocatableResourcesResponse (devices only, no CPUs or memory)."""
    return b"".join(_bytes_field(1, _encode_devices(entry)) for entry in devices)
