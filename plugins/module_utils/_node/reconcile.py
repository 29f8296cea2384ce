# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.
"""The scheduler's ledger against the GPUs' real use, per GPU. Pure: data in, data out.

Inputs: ``node_facts``, what ``gpuops.scheduling.gpu_process_facts`` found on the node (``gpus``,
``processes`` with their ``kubernetes`` identity, ``allocations``), and optionally ``ledger_node``, the
node's entry of ``gpuops.scheduling.gpu_ledger_facts``, of which only the ``nvidia.com/*`` resources'
``requested`` and ``holders`` are read (``ledger_holders``).

Each process on a GPU is one of:

* ``in_ledger``: a process of a pod the kubelet gave this GPU (or one of its MIG devices / shared
  replicas) to;
* ``out_of_ledger_pod``: a process of a pod that holds no unit of this GPU (an image with
  ``NVIDIA_VISIBLE_DEVICES=all``, a vLLM pod that requested no GPU);
* ``host``: not in any pod (host Python, ``docker run``);
* ``unidentified``: its identity could not be read, or it is a pod we cannot compare with the GPU's
  allocations (the allocation names pods by name and the process only by UID). Never guessed.

A GPU is ``allocated`` when an allocation of a current pod names it, ``free`` when the allocations
are known and none does (or, with no allocation source, when the node's ledger requests no GPU
unit at all), else ``unknown``. A free GPU with processes on it, or with more memory in use than
its processes account for, gets a warning.
"""

from __future__ import annotations

import re

CLASSES = ("in_ledger", "out_of_ledger_pod", "host", "unidentified")
STATE_ALLOCATED, STATE_FREE, STATE_UNKNOWN = "allocated", "free", "unknown"
GPU_RESOURCE_PREFIX = "nvidia.com/"
# Driver and context overhead below this is not worth a warning on an otherwise idle GPU.
DEFAULT_MIN_UNATTRIBUTED_BYTES = 256 * 1024 * 1024


def ledger_holders(ledger_node):
    """The pods holding GPU units in a node's ledger: ``[{namespace, name, uid, resource, units}]``; a holder
    may say ``pod_name`` for ``name``, and leave ``uid`` out."""
    return [
        {
            "namespace": holder.get("namespace"),
            "name": holder.get("name") or holder.get("pod_name"),
            "uid": holder.get("uid"),
            "resource": resource,
            "units": holder.get("units"),
        }
        for resource, entry in sorted(((ledger_node or {}).get("resources") or {}).items())
        if resource.startswith(GPU_RESOURCE_PREFIX)
        for holder in (entry or {}).get("holders") or []
    ]


def _pod_key(entry):
    """``(uid, namespace, name)`` of an allocation or of a process's ``kubernetes`` identity."""
    return entry.get("pod_uid"), entry.get("namespace"), entry.get("pod_name")


def _ledger_requested(ledger_node):
    resources = (ledger_node or {}).get("resources") or {}
    gpu_entries = [entry or {} for name, entry in resources.items() if name.startswith(GPU_RESOURCE_PREFIX)]
    return sum(int(entry.get("requested") or 0) for entry in gpu_entries)


class _Pods:
    """Pod identities seen in any input, joined by UID and by namespace/name where a source had both."""

    def __init__(self):
        self._name_by_uid = {}
        self._uid_by_name = {}

    def learn(self, uid, namespace, name):
        if uid and namespace and name:
            self._name_by_uid[uid] = (namespace, name)
            self._uid_by_name[(namespace, name)] = uid

    def complete(self, uid, namespace, name):
        """``(uid, (namespace, name))`` with whatever another source supplied filled in."""
        named = (namespace, name) if namespace and name else None
        uid = uid or (self._uid_by_name.get(named) if named else None)
        named = named or self._name_by_uid.get(uid)
        return uid, named

    def same(self, left, right):
        """True/False when the two (uid, namespace, name) name the same pod or not; None when we cannot tell."""
        left_uid, left_name = self.complete(*left)
        right_uid, right_name = self.complete(*right)
        if left_uid and right_uid:
            return left_uid == right_uid
        if left_name and right_name:
            return left_name == right_name
        return None

    def among(self, key, others):
        """True when the pod is one of ``others`` (each a (uid, namespace, name)), False when it is none of them,
        None when we cannot tell."""
        verdicts = [self.same(key, other) for other in others]
        if True in verdicts:
            return True
        if all(verdict is False for verdict in verdicts):
            return False
        return None


class _Devices:
    """Resolves device-plugin IDs to the physical GPU they are on."""

    def __init__(self, gpus):
        self.by_uuid = {gpu["uuid"]: gpu for gpu in gpus}
        self._by_index = {str(gpu["index"]): gpu["uuid"] for gpu in gpus}
        self._mig_parent = {mig["uuid"]: gpu["uuid"] for gpu in gpus for mig in gpu.get("mig_devices") or []}

    def resolve(self, device_id):
        """GPU UUID for a device ID, or None. Handles ``GPU-..``, ``GPU-..::<replica>`` (time-slicing/MPS),
        ``MIG-..``, the R450 ``MIG-GPU-<uuid>/<gi>/<ci>`` form, and indexes ``0`` / ``0:1``."""
        device_id = str(device_id).split("::", 1)[0]
        if device_id in self.by_uuid:
            return device_id
        if device_id in self._mig_parent:
            return self._mig_parent[device_id]
        old_mig = re.match(r"^MIG-(GPU-[^/]+)/", device_id)
        if old_mig and old_mig.group(1) in self.by_uuid:
            return old_mig.group(1)
        index = re.match(r"^(\d+)(?::\d+)?$", device_id)
        if index:
            return self._by_index.get(index.group(1))
        return None


def reconcile(node_facts, ledger_node=None, min_unattributed_bytes=DEFAULT_MIN_UNATTRIBUTED_BYTES):
    """Per GPU: the pods the ledger gives it to, its users by class, memory by class, and warnings."""
    gpus = node_facts.get("gpus") or []
    allocation_facts = node_facts.get("allocations") or {}
    allocation_source = allocation_facts.get("source") or "none"
    devices = _Devices(gpus)
    pods = _Pods()
    holders = ledger_holders(ledger_node) if ledger_node is not None else None
    warnings = []

    for holder in holders or []:
        pods.learn(holder["uid"], holder["namespace"], holder["name"])
    identities = [process.get("kubernetes") or {} for process in node_facts.get("processes") or []]
    for pod in (allocation_facts.get("allocations") or []) + identities:
        pods.learn(*_pod_key(pod))

    grants = _grants_by_gpu(allocation_facts.get("allocations") or [], devices, pods, holders, warnings)
    if allocation_source == "none":
        warnings.append(
            "no allocation source answered on the node (%s): which pod holds which GPU is unknown"
            % "; ".join(allocation_facts.get("errors") or ["no details"])
        )
    no_units_requested = ledger_node is not None and _ledger_requested(ledger_node) == 0

    processes_by_gpu = {}
    for process in node_facts.get("processes") or []:
        processes_by_gpu.setdefault(process.get("gpu_uuid"), []).append(process)

    report = []
    for gpu in gpus:
        gpu_grants = grants.get(gpu["uuid"], [])
        current = [grant for grant in gpu_grants if grant["in_ledger_holders"] is not False]
        if current:
            state = STATE_ALLOCATED
        elif allocation_source != "none" or no_units_requested:
            state = STATE_FREE
        else:
            state = STATE_UNKNOWN
        users = {name: [] for name in CLASSES}
        for process in processes_by_gpu.get(gpu["uuid"], []):
            klass, reason = _classify(process, current, allocation_source, holders, pods)
            users[klass].append(_user(process, pods, reason))
        memory = {name: sum(user["used_memory_bytes"] or 0 for user in users[name]) for name in CLASSES}
        attributed = sum(memory.values())
        used = gpu.get("memory_used_bytes")
        memory["unattributed"] = max(used - attributed, 0) if used is not None else None
        entry = {
            "index": gpu.get("index"),
            "uuid": gpu["uuid"],
            "name": gpu.get("name"),
            "memory_total_bytes": gpu.get("memory_total_bytes"),
            "memory_used_bytes": used,
            "ledger_state": state,
            "ledger_pods": gpu_grants,
            "users": users,
            "memory_bytes": memory,
        }
        warning = _free_but_used_warning(entry, min_unattributed_bytes)
        if warning:
            warnings.append(warning)
            entry["warning"] = warning
        report.append(entry)

    for gpu_uuid in sorted(uuid for uuid in processes_by_gpu if uuid not in devices.by_uuid):
        warnings.append("processes on %s, a GPU the node did not list: %s" % (gpu_uuid, _describe(processes_by_gpu[gpu_uuid])))

    return {
        "allocations_source": allocation_source,
        "ledger_known": ledger_node is not None,
        "gpus": report,
        "warnings": warnings,
        "summary": _summary(report),
    }


def _grants_by_gpu(allocations, devices, pods, holders, warnings):
    """Allocations per GPU UUID, each marked with whether the ledger still counts its pod."""
    grants = {}
    by_pod = {}  # (GPU UUID, pod UID, (namespace, name) or None) -> its grant in grants
    for allocation in allocations:
        resource = allocation.get("resource_name") or ""
        key = _pod_key(allocation)
        uid, named = pods.complete(*key)
        in_holders = _among_holders(key, holders, pods)
        for device_id in allocation.get("device_ids") or []:
            gpu_uuid = devices.resolve(device_id)
            if gpu_uuid is None:
                if resource.startswith(GPU_RESOURCE_PREFIX):
                    warnings.append("device %s of %s (pod %s) is not a GPU of this node" % (device_id, resource, _pod_label(uid, named)))
                continue
            grant = by_pod.get((gpu_uuid, uid, named))
            if grant is None:
                grant = by_pod[(gpu_uuid, uid, named)] = {
                    "namespace": named[0] if named else None,
                    "name": named[1] if named else None,
                    "pod_uid": uid,
                    "resource_name": resource,
                    "container_names": [],
                    "device_ids": [],
                    "in_ledger_holders": in_holders,
                }
                grants.setdefault(gpu_uuid, []).append(grant)
            if allocation.get("container_name") and allocation["container_name"] not in grant["container_names"]:
                grant["container_names"].append(allocation["container_name"])
            grant["device_ids"].append(device_id)
    for gpu_grants in grants.values():
        for grant in gpu_grants:
            if grant["in_ledger_holders"] is False:
                warnings.append(
                    "the kubelet still lists %s on GPU device(s) %s but the ledger does not count that pod (ended?)"
                    % (_pod_label(grant["pod_uid"], (grant["namespace"], grant["name"]) if grant["name"] else None), ", ".join(grant["device_ids"]))
                )
    return grants


def _among_holders(key, holders, pods):
    """Whether the pod (uid, namespace, name) holds GPU units in the ledger; None when unknown or not comparable."""
    if holders is None:
        return None
    return pods.among(key, [(holder["uid"], holder["namespace"], holder["name"]) for holder in holders])


def _classify(process, grants, allocation_source, holders, pods):
    """The class of one process on one GPU and, for unidentified ones, why."""
    identity = process.get("kubernetes") or {}
    kind = identity.get("kind")
    if kind == "host":
        return "host", None
    if kind != "pod":
        return "unidentified", identity.get("reason") or "identity not read"
    key = _pod_key(identity)
    if allocation_source == "none":
        # Without allocations, holding any GPU unit on the node is the best the ledger can say.
        if holders is None:
            return "unidentified", "no allocation source and no ledger to compare the pod with"
        among = _among_holders(key, holders, pods)
        if among is None:
            return "unidentified", "pod known by UID only; the ledger names its holders without UID"
        return ("in_ledger" if among else "out_of_ledger_pod"), None
    among = pods.among(key, [(grant["pod_uid"], grant["namespace"], grant["name"]) for grant in grants])
    if among is None:
        return "unidentified", "pod known by UID only; this GPU's allocation names its pod without UID"
    return ("in_ledger" if among else "out_of_ledger_pod"), None


def _user(process, pods, reason):
    identity = process.get("kubernetes") or {}
    uid, named = pods.complete(*_pod_key(identity))
    user = {
        "pid": process.get("pid"),
        "name": process.get("name"),
        "used_memory_bytes": process.get("used_memory_bytes"),
        "mig_uuid": process.get("mig_uuid"),
        "namespace": named[0] if named else None,
        "pod_name": named[1] if named else None,
        "pod_uid": uid,
        "container_name": identity.get("container_name"),
        "container_id": identity.get("container_id"),
    }
    if reason:
        user["reason"] = reason
    return user


def _free_but_used_warning(entry, min_unattributed_bytes):
    if entry["ledger_state"] != STATE_FREE:
        return None
    unattributed = entry["memory_bytes"]["unattributed"] or 0
    if not any(entry["users"].values()) and unattributed < min_unattributed_bytes:
        return None
    parts = [
        "%s %s (%s)" % (name.replace("_", " "), _gib(entry["memory_bytes"][name]), _describe(entry["users"][name]))
        for name in CLASSES
        if entry["users"][name]
    ]
    if unattributed >= min_unattributed_bytes:
        parts.append("%s not attributed to any listed process" % _gib(unattributed))
    in_use = sum(entry["memory_bytes"][name] for name in CLASSES) + unattributed
    return "GPU %s %s (%s) is free in the ledger but %s of its memory is in use: %s" % (
        entry["index"],
        entry["uuid"],
        entry["name"],
        _gib(in_use),
        "; ".join(parts),
    )


def _describe(users):
    """``pid 418 python3 in pod ai/vllm-0, ...``; a process without ``pod_name``/``pod_uid`` names no pod."""
    return ", ".join(_describe_user(user) for user in users)


def _describe_user(user):
    who = "pid %s %s" % (user.get("pid"), user.get("name") or "?")
    if user.get("pod_name"):
        return who + " in pod %s/%s" % (user["namespace"], user["pod_name"])
    if user.get("pod_uid"):
        return who + " in pod uid %s" % user["pod_uid"]
    return who


def _pod_label(uid, named):
    return "%s/%s" % named if named else "uid %s" % uid


def _gib(size):
    return "%.1f GiB" % (size / float(1024 ** 3))


def _summary(report):
    totals = {name: sum(gpu["memory_bytes"][name] for gpu in report) for name in CLASSES}
    states = [gpu["ledger_state"] for gpu in report]
    return {
        "gpus": len(report),
        **{state: states.count(state) for state in (STATE_ALLOCATED, STATE_FREE, STATE_UNKNOWN)},
        "free_but_in_use": sum(1 for gpu in report if "warning" in gpu),
        "memory_bytes": totals,
        "out_of_ledger_bytes": totals["out_of_ledger_pod"] + totals["host"],
    }
