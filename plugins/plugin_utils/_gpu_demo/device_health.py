# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The health of the devices the demo pods were handed, as the kubelet writes it into their status.

Since Kubernetes 1.36 (KEP-4680, feature gate ResourceHealthStatus, beta and on by default) the kubelet writes
``status.containerStatuses[].allocatedResourcesStatus``: per resource a container was given, the health of each of its
devices. A device plugin's resource is named as in the pod's requests (``nvidia.com/gpu``) and its devices by the IDs
the plugin registered (``GPU-<uuid>``); their health is what the plugin last said in ListAndWatch. A DRA claim is named
``claim:<pod claim>/<request>`` and its devices by the CDI device ID the driver answered
(``k8s.gpu.nvidia.com/claim=<claim uid>-gpu-0``), or ``<driver>/<pool>/<device>`` without one; their health is what the
driver's DRAResourceHealth service last said, and Unknown when it says nothing (no such service, or silent for longer
than the health check timeout). Older kubelets, or the gate off, write nothing at all, nor does the v1.36 kubelet for
a claim the scheduler made for a plain extended-resource request: that is said, not failed.

Plain dicts in, data out: a pod as pod_wait returns it (``containers[].allocated_resources_status``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import check, not_judged

HEALTHY, UNHEALTHY, UNKNOWN = "Healthy", "Unhealthy", "Unknown"

# A DRA claim's CDI device ID ends in "<claim uid>-<device>" (NVIDIA's driver and the simulated one name it so).
_CLAIM_DEVICE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-(.+)$")

# The v1.36 kubelet reports a DRA claim's devices only for the claims a container names in resources.claims: not for
# the claim the scheduler makes for a plain extended-resource request (pkg/kubelet/cm/dra UpdateAllocatedResourcesStatus).
ABSENT_WORDS = ("the kubelet writes no device health into the status of {0} (Kubernetes before 1.36, its "
                "ResourceHealthStatus feature gate off, or GPUs that DRA serves for a plain extended-resource request, "
                "whose health the kubelet does not report)")


def device_name(resource, resource_id):
    """The device a health entry is about, as a person names it: the device plugin's ID (``GPU-<uuid>``), or a DRA
    claim's device (``gpu-0``) out of its CDI device ID or ``<driver>/<pool>/<device>``."""
    resource_id = resource_id or ""
    if not (resource or "").startswith("claim:"):
        return resource_id
    if "=" in resource_id:
        name = resource_id.split("=", 1)[1]
        match = _CLAIM_DEVICE.match(name)
        return match.group(1) if match else name
    return resource_id.rsplit("/", 1)[-1]


def pod_device_health(pod):
    """One pod -> {pod, reported, devices: [{container, resource, device, resource_id, health, message}]}.

    ``reported`` is false when no container of the pod has the field at all (the kubelet does not write it)."""
    reported, devices = False, []
    for container in pod.get("containers") or []:
        statuses = container.get("allocated_resources_status")
        if statuses is None:
            continue
        reported = True
        for status in statuses:
            resource = status.get("name")
            for entry in status.get("resources") or []:
                devices.append({
                    "container": container.get("name"), "resource": resource,
                    "device": device_name(resource, entry.get("resourceID")), "resource_id": entry.get("resourceID"),
                    # An empty health is Unknown, as the API documents it.
                    "health": entry.get("health") or UNKNOWN, "message": entry.get("message"),
                })
    return {"pod": pod.get("name"), "reported": reported, "devices": devices}


def pods_device_health(snapshots, names):
    """The pods named, each from every snapshot that saw it (oldest first) -> [pod_device_health], in ``names`` order.

    A device keeps the latest health reported for it, except that Unhealthy, once reported, stays: a device that
    failed while it was held failed the hand-over, even if it reads Healthy again later."""
    merged = {}
    for pods in snapshots:
        for pod in pods or []:
            name = pod.get("name")
            if name not in names or pod.get("exists") is False:
                continue
            seen = pod_device_health(pod)
            entry = merged.setdefault(name, {"pod": name, "reported": False, "devices": []})
            entry["reported"] = entry["reported"] or seen["reported"]
            known = dict(((device["container"], device["resource"], device["resource_id"]), device)
                         for device in entry["devices"])
            for device in seen["devices"]:
                key = (device["container"], device["resource"], device["resource_id"])
                if known.get(key, {}).get("health") != UNHEALTHY:
                    known[key] = device
            entry["devices"] = list(known.values())
    return [merged.get(name, {"pod": name, "reported": False, "devices": []}) for name in names]


def _named(device, pod):
    words = "{0} in pod {1}".format(device["device"], pod)
    if device["resource"] and device["resource"].startswith("claim:"):
        words += " ({0})".format(device["resource"])
    if device.get("message"):
        words += ": {0}".format(device["message"])
    return words


def health_detail(health, who):
    """(unhealthy devices, a sentence) of pods_device_health's answer; ``who`` names the pods ("the hold pods")."""
    by_health = {HEALTHY: [], UNHEALTHY: [], UNKNOWN: []}
    for pod in health:
        for device in pod["devices"]:
            by_health.get(device["health"], by_health[UNKNOWN]).append(_named(device, pod["pod"]))
    silent = [pod["pod"] for pod in health if not pod["reported"]]
    parts = []
    if by_health[UNHEALTHY]:
        parts.append("the kubelet reports Unhealthy: {0}".format("; ".join(by_health[UNHEALTHY])))
    if by_health[UNKNOWN]:
        parts.append("Unknown (reported, not failed): {0}".format("; ".join(by_health[UNKNOWN])))
    if by_health[HEALTHY]:
        parts.append("Healthy: {0}".format(", ".join(by_health[HEALTHY])))
    if silent:
        parts.append(ABSENT_WORDS.format(", ".join(silent)))
    elif health and not any(pod["devices"] for pod in health):
        parts.append("the kubelet reports no device of {0}".format(who))
    return by_health[UNHEALTHY], "; ".join(parts) or "no pod of {0} was seen".format(who)


def judge_hold_health(snapshots, hold_names):
    """The hold pods' devices, from the waits that saw them (the hold's, the queue's): one Unhealthy fails the
    hand-over, naming the device and the pod; a Healthy one passes it. Where the kubelet reports no health at all (an
    absent report, none but Unknown: a request path without device health) the check is not judged, saying why: never
    a pass of something nobody read."""
    health = pods_device_health(snapshots, hold_names)
    unhealthy, detail = health_detail(health, "the hold pods")
    judged = unhealthy or any(device["health"] == HEALTHY for pod in health for device in pod["devices"])
    if not judged:
        return health, not_judged("hold_devices_healthy", detail)
    return health, check("hold_devices_healthy", not unhealthy, detail)


def add_queue_pod_health(checks, release, queue_name):
    """The queue pod's devices, as the release's wait last saw them: an Unhealthy device fails the hand-over check
    (queue_got_held_gpu), naming it; otherwise the health is only returned (the report's queue evidence). The pod has
    Succeeded by then: a device plugin's devices are still reported, a DRA claim's not (the kubelet has un-prepared it).
    Returns the queue pod's pod_device_health."""
    health = pods_device_health([release.get("pods") or []], [queue_name])
    unhealthy, detail = health_detail(health, "the queue pod")
    for item in checks:
        if item["id"] == "queue_got_held_gpu" and unhealthy:
            item["detail"] += "; device health: {0}".format(detail)
            item["passed"] = False
    return health[0]
