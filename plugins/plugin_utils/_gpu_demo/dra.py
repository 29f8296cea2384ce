# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The walk through Dynamic Resource Allocation: a node's devices of one DeviceClass, read as the walk reads a device
plugin's resource, and the evidence that each hold pod got the device its claim was allocated.

On a DRA node the walk's unit is a device of the DeviceClass (``gpu.nvidia.com``) in the node's ResourceSlices:
capacity and allocatable are the devices in the class, requested the allocated ones, and the holders the pods the
claims are reserved for, one unit per device. The judges of preflight.py, walk.py and cleanup.py then read it as
they read ``nvidia.com/gpu``; what only DRA has (the claims, devices and pool) comes along under ``dra``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import check

ALLOCATIONS = ("auto", "device_plugin", "dra")


def class_entry(node_entry, device_class):
    """The ledger entry of ``device_class`` on a node (gpu_ledger_facts' ``nodes.<node>``) in the shape of a device
    plugin resource, or {} when no driver of the node has devices in that class.

    Counted as the scheduler counts: per device. ``claims`` lists each claim that holds devices of the class once, with
    every pod it is reserved for (several pods may share a claim; an allocated claim reserved for none still holds its
    devices), and ``holders`` each pod with the devices of its claims. Where the class's selector cannot be evaluated
    here (``dra.evaluated`` false), the devices are those the class may select: the scheduler decides which it does.
    """
    drivers = ((node_entry or {}).get("dra") or {}).get("drivers") or {}
    devices, pools, names, extended = [], [], [], []
    evaluated = True
    for driver, entry in sorted(drivers.items()):
        if device_class not in (entry.get("classes") or {}):
            continue
        names.append(driver)
        served = entry["classes"][device_class].get("extended_resource_name")
        if served and served not in extended:
            extended.append(served)
        if entry["classes"][device_class].get("evaluated") is False:
            evaluated = False
        pools.extend(pool for pool in entry.get("pools") or [] if pool not in pools)
        devices.extend(dict(device, driver=driver) for device in entry.get("devices") or []
                       if device_class in (device.get("classes") or []) + (device.get("maybe_classes") or []))
    if not names:
        return {}
    holders, claims = {}, {}
    for device in devices:
        if not device.get("allocated"):
            continue
        identity = device.get("claim") or {}
        claim = claims.setdefault((identity.get("namespace"), identity.get("name")), {
            "namespace": identity.get("namespace"), "name": identity.get("name"),
            "extended_resource": bool(identity.get("extended_resource")), "devices": [],
            "pods": [{"namespace": pod.get("namespace"), "name": pod.get("name"), "uid": pod.get("uid")}
                     for pod in device.get("holders") or []]})
        claim["devices"].append(device["name"])
        for pod in device.get("holders") or []:
            key = (pod.get("namespace"), pod.get("name"))
            holder = holders.setdefault(key, {"namespace": pod.get("namespace"), "name": pod.get("name"), "uid": pod.get("uid"),
                                              "units": 0, "claims": [], "devices": []})
            holder["units"] += 1
            holder["devices"].append(device["name"])
            if identity.get("name") and identity["name"] not in holder["claims"]:
                holder["claims"].append(identity["name"])
    allocated = sum(1 for device in devices if device.get("allocated"))
    # A tainted device (NoSchedule, NoExecute) is not handed out, as a device plugin's unhealthy device is not
    # allocatable; one already allocated stays its claim's.
    allocatable = sum(1 for device in devices if device.get("allocated") or not device.get("tainted"))
    return {
        "capacity": len(devices), "allocatable": allocatable, "requested": allocated, "limits": allocated,
        "free": allocatable - allocated,
        "holders": sorted(holders.values(), key=lambda holder: (holder["namespace"] or "", holder["name"] or "")),
        "claims": sorted(claims.values(), key=lambda claim: (claim["namespace"] or "", claim["name"] or "")),
        "dra": {"device_class": device_class, "drivers": names, "pools": pools, "devices": devices,
                "extended_resource_name": extended[0] if extended else None, "evaluated": evaluated},
    }


def ledger_words(entry, node):
    """A DRA node's ledger in DRA's words, for a check's detail: the devices of the class its ResourceSlices publish,
    how many are allocated to claims, and which claim holds each for which pod. A DRA node advertises no allocatable
    count for its GPUs and ``kubectl describe node`` shows no row for them, so the device plugin's words would send
    the reader to look for what is not there."""
    devices = (entry.get("dra") or {}).get("devices") or []
    held = ["{0} (claim {1}/{2} for {3})".format(
        device.get("name"), (device.get("claim") or {}).get("namespace"), (device.get("claim") or {}).get("name"),
        ", ".join(pod.get("name") or "?" for pod in device.get("holders") or []) or "no pod")
        for device in devices if device.get("allocated")]
    return "{0} device(s) of DeviceClass {1} in the ResourceSlices of {2}, {3} allocated to claims{4}".format(
        entry.get("allocatable", "?"), (entry.get("dra") or {}).get("device_class", "?"), node,
        entry.get("requested", "?"), (": " + "; ".join(held)) if held else "")


def devices_held(claims, ours):
    """How many devices ``claims`` (class_entry's) hold for others than the pods ``ours`` accepts (this run's leftovers,
    which the run deletes first), and one phrase per claim: "1 device held by ns/a, ns/b (claim ns/c)"."""
    held, phrases = 0, []
    for claim in claims or []:
        pods = claim.get("pods") or []
        if pods and all(ours(pod) for pod in pods):
            continue
        count = len(claim.get("devices") or [])
        held += count
        who = ", ".join("{0}/{1}".format(pod.get("namespace"), pod.get("name")) for pod in pods) or (
            "no pod (allocated, reserved for none: the scheduler keeps its device(s) until the claim is deallocated)")
        phrases.append("{0} device{1} held by {2} (claim {3}/{4}{5})".format(
            count, "" if count == 1 else "s", who, claim.get("namespace"), claim.get("name"),
            ", made by the scheduler for an extended resource request" if claim.get("extended_resource") else ""))
    return held, phrases


def choose_dra_request(wanted, entry, resource):
    """How the demo pods ask for their devices (``wanted``: gpu_demo_dra_request): as told, or (auto) with plain
    ``resource`` requests where the node's devices of the class serve that extended resource - the path a workload
    written for a device plugin takes on this node - and with claims of their own otherwise."""
    if wanted in ("claim", "extended_resource"):
        return wanted
    served = ((entry or {}).get("dra") or {}).get("extended_resource_name")
    return "extended_resource" if served and served == resource else "claim"


def extended_resource_check(entry, device_class, resource, wanted):
    """The check of the extended-resource path: the DeviceClass must serve ``resource`` (extendedResourceName), or the
    scheduler would answer the demo pods' plain requests with Insufficient, as if the node had no GPU."""
    served = ((entry or {}).get("dra") or {}).get("extended_resource_name")
    how = "chosen because the class serves it" if wanted == "auto" else "gpu_demo_dra_request=extended_resource"
    if served == resource:
        detail = ("DeviceClass {0} serves {1} (extendedResourceName): the demo pods request plain {1}, as a workload written "
                  "for a device plugin does, and the scheduler allocates the devices through claims it makes ({2})").format(
            device_class, resource, how)
    else:
        detail = ("DeviceClass {0} {1}, not {2}: the scheduler cannot serve plain {2} requests through DRA here. Set "
                  "gpu_demo_dra_request=claim, or gpu_demo_device_class to the class whose extendedResourceName is {2} "
                  "(kubectl get deviceclasses -o yaml)").format(
            device_class, "serves {0} (extendedResourceName)".format(served) if served else "has no extendedResourceName",
            resource)
    return check("extended_resource_served", served == resource, detail)


def node_allocation(node_entry, resource):
    """How the node hands out its GPUs, as gpu_ledger_facts says (``device_plugin``, ``dra``, ``both``, ``none``);
    ``device_plugin`` when the ledger was read without DRA but the node advertises ``resource``."""
    if (node_entry or {}).get("allocation"):
        return node_entry["allocation"]
    return "device_plugin" if ((node_entry or {}).get("resources") or {}).get(resource) else "none"


def choose_allocation(wanted, node_entry, resource):
    """The path the walk takes: ``wanted`` (gpu_demo_allocation) when it is device_plugin or dra, else (auto) the
    node's own: DRA on a node whose GPUs only DRA publishes, the device plugin otherwise."""
    if wanted in ("device_plugin", "dra"):
        return wanted
    return "dra" if node_allocation(node_entry, resource) == "dra" else "device_plugin"


def run_objects(objects, run_id, node, pod_uids):
    """Names (``Kind/name``) of the DRA objects that belong to a run: labelled with its run and node (the run's claim
    templates and the claims made from them), or owned by one of its pods (the claims the scheduler made for a plain
    extended resource request). ``objects``: ResourceClaims and ResourceClaimTemplates as the API returns them."""
    uids = set(pod_uids or [])
    names = []
    for item in objects or []:
        metadata = item.get("metadata") or {}
        labels = metadata.get("labels") or {}
        labelled = labels.get("gpuops.scheduling/run-id") == run_id and labels.get("gpuops.scheduling/node") == node
        owned = any(owner.get("uid") in uids for owner in metadata.get("ownerReferences") or [])
        if labelled or owned:
            names.append("{0}/{1}".format(item.get("kind") or "ResourceClaim", metadata.get("name")))
    return sorted(names)


def judge_claims_gone(list_results, run_id, node, pod_uids, namespace):
    """The cleanup's check that no DRA object of the run is left, from the registered list of each kind (a loop's
    results). A list that failed establishes nothing: the check fails with the API's answer, never says none is left."""
    unread = [result.get("msg") or "failed" for result in list_results if result.get("failed")]
    if unread:
        return check("claims_gone", False, "could not list the claims and templates of {0}: {1}".format(
            namespace, "; ".join(unread)))
    left = run_objects([item for result in list_results for item in result.get("resources") or []], run_id, node, pod_uids)
    if left:
        return check("claims_gone", False, "left in {0}: {1}".format(namespace, ", ".join(left)))
    return check("claims_gone", True, "no ResourceClaim or ResourceClaimTemplate of the run is left in {0}".format(namespace))


def judge_prepared_devices(summary, entry, hold_names):
    """Each hold pod saw exactly the GPUs of the devices its claims were allocated (``entry``: class_entry read
    while the hold runs; ``summary``: report.hold_summary). A driver that prepares another device than the
    scheduler allocated fails here, naming the pod, its claim, the allocated device and what the pod saw."""
    by_pod = {}
    for device in ((entry or {}).get("dra") or {}).get("devices") or []:
        for pod in device.get("holders") or []:
            by_pod.setdefault(pod.get("name"), []).append(device)
    wrong, seen_right = [], []
    for pod in summary.get("pods") or []:
        if pod["name"] not in hold_names:
            continue
        devices = by_pod.get(pod["name"], [])
        allocated = sorted(device.get("uuid") or "?" for device in devices)
        saw = sorted(pod.get("unit_uuids") or [])
        described = ", ".join("{0} ({1}, claim {2}{3})".format(
            device["name"], device.get("uuid"), (device.get("claim") or {}).get("name"),
            ", made by the scheduler for an extended resource" if (device.get("claim") or {}).get("extended_resource") else "")
            for device in devices)
        if not devices or saw != allocated:
            wrong.append("{0} was allocated {1} but nvidia-smi in it shows {2}".format(
                pod["name"], described or "no device", ", ".join(saw) or "no GPU"))
        else:
            seen_right.append("{0}: {1}".format(pod["name"], described))
    passed = bool(seen_right) and not wrong and len(seen_right) == len(hold_names)
    detail = "; ".join(wrong) if wrong else "each hold pod sees the device its claim was allocated: {0}".format(
        "; ".join(seen_right) or "no hold pod seen")
    return check("hold_devices_prepared", passed, detail)
