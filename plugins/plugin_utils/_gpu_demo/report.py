# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Pure helpers of the gpu_demo role's report: a demo pod's evidence, the event table, the timeline.

Everything takes API dicts, log text or epoch seconds and returns data the templates print.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import Counter

from ansible_collections.gpuops.scheduling.plugins.module_utils._node.nvidia_smi import (
    DEVICE_LIST_ROOT,
    classify_device_names,
    device_list_from_text,
    parse_gpu_list,
    parse_query_csv,
    visible_devices_from_env,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.pod_wait import in_life_order, iso, parse_time

MIB = 1024 * 1024
# `nvidia-smi --query-gpu=uuid,memory.used,memory.total --format=csv,noheader`:
# "GPU-0a9c..., 86016 MiB, 97871 MiB"
_MEMORY_ROW = re.compile(r"^\s*(?:GPU|MIG)-[^,\s]+\s*,\s*[^,]+,\s*[^,]+$")
MEMORY_FIELDS = ("uuid", "memory.used", "memory.total")


def hold_evidence(log):
    """What a demo pod's log proves: the devices it saw, NVIDIA_VISIBLE_DEVICES, memory per GPU.

    ``gpus``/``uuids`` come from ``nvidia-smi -L`` (every GPU and MIG UUID printed). The units the
    pod holds (``units``, ``unit_uuids``) are its MIG devices where ``nvidia-smi -L`` lists any
    under a GPU (the GPU line is then the parent, context rather than an allocated unit: NVIDIA's
    device plugin hands out MIG devices), else the GPU itself. ``unit_kind`` says which: ``gpu``,
    ``mig``, ``mixed`` (whole GPUs and MIG devices, e.g. two resources of the mixed strategy) or
    None (no device).

    ``visible_devices`` is the variable as the toolkit reads it (``mode`` list, mounts, unset, void,
    none or all); ``device_list`` the entries of /var/run/nvidia-container-devices the pod printed;
    ``handover`` how the device plugin handed the devices over, as the pod can tell (see handover_way);
    ``named`` the device names that hand-over gives (the variable's list, or the folder's entries);
    ``memory`` has one row per GPU from the ``--query-gpu`` CSV (bytes and MiB); ``corroborated`` is
    True when ``named`` is exactly the units' UUIDs (MIG UUIDs for MIG devices), or as many
    ``<gpu>:<mig>`` indexes as MIG units and plain indexes as whole GPUs (DEVICE_ID_STRATEGY=index),
    False when it names others, None when nothing names the devices (CDI, all, none).
    """
    text = log or ""
    if not isinstance(text, str):
        raise TypeError("a pod log must be a string, not {0}".format(type(text).__name__))
    gpus = parse_gpu_list(text)
    uuids = [gpu["uuid"] for gpu in gpus] + [mig["uuid"] for gpu in gpus for mig in gpu["mig_devices"]]
    visible = visible_devices_from_env(text)
    memory_lines = "\n".join(line for line in text.splitlines() if _MEMORY_ROW.match(line))
    memory = []
    for row in parse_query_csv(memory_lines, fields=MEMORY_FIELDS) if memory_lines else []:
        used, total = row["memory.used"], row["memory.total"]
        memory.append({
            "uuid": row["uuid"],
            "used_bytes": used,
            "total_bytes": total,
            "used_mib": used // MIB if isinstance(used, int) else None,
            "total_mib": total // MIB if isinstance(total, int) else None,
        })
    units = []
    for gpu in gpus:
        if gpu["mig_devices"]:
            units.extend({"uuid": mig["uuid"], "kind": "mig", "profile": mig["profile"], "gpu_uuid": gpu["uuid"], "gpu_name": gpu["name"]}
                         for mig in gpu["mig_devices"])
        else:
            units.append({"uuid": gpu["uuid"], "kind": "gpu", "profile": None, "gpu_uuid": gpu["uuid"], "gpu_name": gpu["name"]})
    unit_uuids = [unit["uuid"] for unit in units]
    device_list = device_list_from_text(text)
    named = classify_device_names(device_list if visible["mode"] == "mounts" else visible["devices"])
    handover = handover_way(visible, named, bool(units))
    corroborated = None
    if named["devices"]:
        if len(named["uuids"]) == len(named["devices"]):
            corroborated = sorted(named["uuids"]) == sorted(unit_uuids)
        elif len(named["indexes"]) == len(named["devices"]):
            # Indexes inside a container are renumbered: only their number and form can be compared.
            mig_indexes = [index for index in named["indexes"] if ":" in index]
            corroborated = (len(mig_indexes), len(named["indexes"]) - len(mig_indexes)) == (
                sum(1 for unit in units if unit["kind"] == "mig"), sum(1 for unit in units if unit["kind"] == "gpu"))
        else:
            corroborated = False
    return {
        "gpus": gpus,
        "uuids": uuids,
        "units": units,
        "unit_uuids": unit_uuids,
        "unit_kind": unit_kind(units),
        "gpu_names": [gpu["name"] for gpu in gpus],
        "visible_devices": visible,
        "device_list": device_list,
        "handover": handover,
        "named": named["devices"],
        "corroborated": corroborated,
        "memory": memory,
    }


# How NVIDIA's device plugin hands devices to the container runtime (its DEVICE_LIST_STRATEGY and
# DEVICE_ID_STRATEGY), as a pod can tell from inside: k8s-device-plugin v0.20.0 internal/plugin/server.go
# getAllocateResponse. envvar: NVIDIA_VISIBLE_DEVICES lists UUIDs (``uuids``) or indexes (``indexes``);
# volume-mounts: the variable is /var/run/nvidia-container-devices and the folder's entries name the devices
# (``mounts``); cdi-cri and cdi-annotations: CDI device names the runtime resolves against the plugin's CDI spec,
# which sets the variable to void (``cdi``; the two are alike from inside a pod). ``all``: the image's variable
# gives every GPU; ``none``: no device; ``other``: names that are neither UUIDs nor indexes.
HANDOVER_WORDS = {
    "en": {
        "uuids": "the device plugin passes UUIDs in NVIDIA_VISIBLE_DEVICES",
        "indexes": "the device plugin passes GPU indexes in NVIDIA_VISIBLE_DEVICES",
        "mounts": "the device plugin mounts one file per GPU under " + DEVICE_LIST_ROOT,
        "cdi": "the device plugin hands the GPUs over through CDI (in the CRI request or in CDI annotations; "
               "the container runtime injects the devices the CDI spec names)",
        "all": "NVIDIA_VISIBLE_DEVICES=all gives the container every GPU, whatever the device plugin allocated",
        "none": "no device was handed over",
        "other": "NVIDIA_VISIBLE_DEVICES names devices that are neither GPU UUIDs nor indexes",
    },
    "zh": {
        "uuids": "设备插件通过 NVIDIA_VISIBLE_DEVICES 传递 GPU UUID",
        "indexes": "设备插件通过 NVIDIA_VISIBLE_DEVICES 传递 GPU 序号",
        "mounts": "设备插件在 " + DEVICE_LIST_ROOT + " 下为每张卡挂载一个文件",
        "cdi": "设备插件通过 CDI 交付 GPU（写在 CRI 请求或 CDI 注解里；容器运行时按 CDI 规格注入设备）",
        "all": "NVIDIA_VISIBLE_DEVICES=all 让容器看到所有 GPU，与设备插件分配了哪张无关",
        "none": "没有交付任何设备",
        "other": "NVIDIA_VISIBLE_DEVICES 写的既不是 GPU UUID 也不是序号",
    },
}


def handover_way(visible, named, has_devices):
    """``uuids`` | ``indexes`` | ``mounts`` | ``cdi`` | ``all`` | ``none`` | ``other`` (see HANDOVER_WORDS) from
    the variable as parsed, the device names it leads to and whether nvidia-smi showed any device."""
    mode = visible["mode"]
    if mode == "mounts":
        return "mounts"
    if mode in ("all", "none"):
        return mode
    if mode in ("unset", "void"):
        return "cdi" if has_devices else "none"
    if named["devices"] and len(named["uuids"]) == len(named["devices"]):
        return "uuids"
    if named["devices"] and len(named["indexes"]) == len(named["devices"]):
        return "indexes"
    return "other"


def handover_text(ways, lang="en"):
    """The hand-over ways of a run's pods in words, joined ("; "); "" for none."""
    words = HANDOVER_WORDS.get(lang, HANDOVER_WORDS["en"])
    return "; ".join(words[way] for way in ways if way in words)


def unit_kind(units):
    """``gpu``, ``mig`` or ``mixed`` for a list of units (see hold_evidence); None for none."""
    kinds = {unit["kind"] for unit in units or []}
    if not kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else "mixed"


def unit_noun(kind):
    """How to call units of a ``unit_kind`` in a sentence: GPUs, MIG devices, devices."""
    return {"gpu": "GPUs", "mig": "MIG devices"}.get(kind, "devices")


# What hold_summary keeps of each hold pod's evidence, in this order.
POD_EVIDENCE = ("gpus", "gpu_names", "unit_uuids", "unit_kind", "visible_devices", "device_list", "handover", "named",
                "corroborated", "memory")


def hold_summary(pods, units_by_pod, replicas=1):
    """What the hold pods' logs prove, against the units each one requested.

    ``pods``: pod_wait's pods (with ``log``); ``units_by_pod``: {name: units requested};
    ``replicas``: how many units share one GPU (time-slicing / MPS; 1 for whole GPUs).
    ``one_gpu_per_unit`` is True when every pod saw as many devices (GPUs, or MIG devices) as it
    has units and no device is shared by more than ``replicas`` units. ``units`` lists each device
    once (see hold_evidence), ``unit_kind`` their kind.
    """
    replicas = max(1, int(replicas or 1))
    entries, every_unit, memory, distinct_units = [], [], {}, {}
    for pod in pods or []:
        if pod.get("name") not in (units_by_pod or {}):
            continue
        evidence = hold_evidence(pod.get("log") or "")
        units = evidence["unit_uuids"]
        every_unit.extend(units)
        for unit in evidence["units"]:
            distinct_units.setdefault(unit["uuid"], unit)
        for row in evidence["memory"]:
            memory.setdefault(row["uuid"], row)
        entry = {"name": pod["name"], "node": pod.get("node_name"), "phase": pod.get("phase"),
                 "requested": int(units_by_pod[pod["name"]])}
        entry.update((key, evidence[key]) for key in POD_EVIDENCE)
        entry["sees_its_units"] = len(units) == entry["requested"]
        entries.append(entry)
    shares = Counter(every_unit)
    expected = sum(int(value) for value in (units_by_pod or {}).values())
    return {
        "pods": entries,
        "unit_uuids": every_unit,
        "distinct_uuids": sorted(shares),
        "units": list(distinct_units.values()),
        "unit_kind": unit_kind(distinct_units.values()),
        "units_expected": expected,
        "units_seen": len(every_unit),
        "replicas": replicas,
        "one_gpu_per_unit": bool(entries) and len(entries) == len(units_by_pod or {})
        and all(entry["sees_its_units"] for entry in entries)
        and len(every_unit) == expected and all(count <= replicas for count in shares.values()),
        "visible_devices_modes": sorted({entry["visible_devices"]["mode"] for entry in entries}),
        "handovers": sorted({entry["handover"] for entry in entries}),
        "handover_text": {lang: handover_text(sorted({entry["handover"] for entry in entries}), lang) for lang in HANDOVER_WORDS},
        "shared": sorted(uuid for uuid, count in shares.items() if count > replicas),
        "corroborated": all(entry["corroborated"] is not False for entry in entries),
        "memory": list(memory.values()),
    }


def held_intervals(transitions, units_by_pod):
    """{pod: {transition: epoch}} -> [(start, end or None, units, pod)]: when each pod held units.

    A pod holds its units in the scheduler's ledger from being bound until it ends (Succeeded or
    Failed) or is gone; a terminating pod still holds them.
    """
    intervals = []
    for pod, times in sorted((transitions or {}).items()):
        units = int((units_by_pod or {}).get(pod, 0))
        if not units or times.get("scheduled") is None:
            continue
        ends = [times[key] for key in ("succeeded", "failed", "deleted") if times.get(key) is not None]
        intervals.append((times["scheduled"], min(ends) if ends else None, units, pod))
    return intervals


def free_units_timeline(transitions, allocatable, units_by_pod, held_before=0):
    """The node's free units after each change: [{at, at_iso, free, holders}], oldest first."""
    intervals = held_intervals(transitions, units_by_pod)
    moments = sorted({start for start, _end, _units, _pod in intervals}
                     | {end for _start, end, _units, _pod in intervals if end is not None})
    steps = []
    for moment in moments:
        held = [(units, pod) for start, end, units, pod in intervals
                if start <= moment and (end is None or end > moment)]
        steps.append({"at": moment, "at_iso": iso(moment),
                      "free": int(allocatable) - int(held_before) - sum(units for units, _pod in held),
                      "holders": sorted(pod for _units, pod in held)})
    return steps


# The states a demo pod shows in the timeline, and which transition starts each.
_LANE_STATES = (
    ("created", "pending"),
    ("unschedulable", "unschedulable"),
    ("scheduled", "starting"),
    ("running", "running"),
    ("succeeded", "succeeded"),
    ("failed", "failed"),
    ("deleting", "terminating"),
)


def pod_lanes(transitions, start, end, order=None):
    """{pod: {transition: epoch}} -> [{pod, segments: [{state, start, end}]}] in seconds since ``start``.

    A lane ends when the pod is gone (or at ``end``). Ordered by ``order`` (pod names), then by
    creation time.
    """
    lanes = []
    names = list(order or [])
    names += sorted((pod for pod in transitions or {} if pod not in names),
                    key=lambda pod: transitions[pod].get("created") or 0)
    for pod in names:
        times = (transitions or {}).get(pod)
        if not times:
            continue
        # Equal times (whole-second API timestamps) keep the order a pod lives its states.
        marks = sorted((times[key], rank, state) for rank, (key, state) in enumerate(_LANE_STATES)
                       if times.get(key) is not None)
        marks = [(moment, state) for moment, _rank, state in marks]
        finish = times.get("deleted", end)
        segments = []
        for index, (moment, state) in enumerate(marks):
            stop = marks[index + 1][0] if index + 1 < len(marks) else finish
            stop = max(moment, min(stop, finish))
            segments.append({"state": state, "start": round(moment - start, 3), "end": round(stop - start, 3)})
        lanes.append({"pod": pod, "segments": [item for item in segments if item["end"] >= item["start"]],
                      "gone_at": round(times["deleted"] - start, 3) if times.get("deleted") else None})
    return lanes


def merge_transitions(wait_results):
    """Several pod_wait results -> {pod: {transition: epoch}}.

    A transition one wait saw live (``exact``) beats the others; otherwise the earliest known
    time wins (API timestamps are truncated to the second, list observations come late).
    """
    merged, exact = {}, {}
    for result in wait_results or []:
        if not isinstance(result, dict):
            continue
        live = result.get("exact") or {}
        for pod, times in (result.get("transitions") or {}).items():
            for transition, moment in times.items():
                if moment is None:
                    continue
                is_exact = transition in live.get(pod, [])
                known = merged.setdefault(pod, {})
                known_exact = transition in exact.get(pod, set())
                if transition not in known or (is_exact and not known_exact) or (
                        is_exact == known_exact and moment < known[transition]):
                    known[transition] = moment
                    if is_exact:
                        exact.setdefault(pod, set()).add(transition)
                    elif known_exact:
                        exact[pod].discard(transition)
    for pod, moment in gone_by(wait_results).items():
        merged[pod].setdefault("deleted", moment)
    # A later step's list shows earlier transitions with whole-second API times: keep them after
    # what was seen exactly.
    return {pod: in_life_order(times, exact.get(pod, set())) for pod, times in merged.items()}


def gone_by(wait_results):
    """{pod: epoch}: a pod one wait reported that a later wait no longer found was gone by that wait's start.

    The walk's waits each follow every pod of the run (by label), and kubernetes.core.k8s deletes the pods between
    them: a pod that went before the next wait listed is seen by no watch. Its wait's start is when it was known to be
    gone (an upper bound, later than the truth by about the deleting task's own time).
    """
    seen, gone = set(), {}
    for result in wait_results or []:
        if not isinstance(result, dict):
            continue
        present = set(result.get("transitions") or {})
        started = parse_time(result.get("started_at"))
        if started is not None:
            for pod in seen - present:
                gone.setdefault(pod, started)
        seen |= present
    return gone


def held_a_gpu(transitions, holders):
    """Whether any of ``holders`` ran on the node, and so had its GPUs. A pod never bound (refused by the scheduler)
    had none; nor had one bound that never ran: through DRA, a claim allocated to it whose devices the driver never
    prepared (FailedPrepareDynamicResources) reached no container, however long the pod waited to start."""
    return any(times.get("running") is not None or times.get("succeeded") is not None
               for pod, times in (transitions or {}).items() if pod in holders)


def occupied_window(transitions, holders):
    """From the first creation among ``holders`` to the last pod gone: the time the GPUs were taken.

    Returns {start, end, seconds} (epoch seconds), or None when either end is unknown or no holder ever ran on the
    node (then no GPU was taken, however long the pods existed).
    """
    if not held_a_gpu(transitions, holders):
        return None
    created = [times["created"] for pod, times in transitions.items() if pod in holders and "created" in times]
    gone = [times["deleted"] for times in transitions.values() if "deleted" in times]
    if not created or not gone:
        return None
    return {"start": min(created), "end": max(gone), "seconds": round(max(gone) - min(created), 3)}


def demo_timeline(wait_results, allocatable, units_by_pod, held_before=0, start=None, end=None, order=None):
    """What the report's SVG draws: pod lanes and the node's free units, in seconds since ``start``.

    ``window`` is the occupied window (first pod of ``order`` created .. last pod gone), None when ``held`` is false:
    no pod asking for units ever ran on the node.
    """
    transitions = merge_transitions(wait_results)
    moments = [moment for times in transitions.values() for moment in times.values()]
    if start is None:
        start = min(moments) if moments else 0.0
    if end is None:
        end = max(moments) if moments else start
    end = max(end, start)
    steps = free_units_timeline(transitions, allocatable, units_by_pod, held_before=held_before)
    free = [{"at": 0.0, "free": int(allocatable) - int(held_before)}]
    free += [{"at": round(step["at"] - start, 3), "free": step["free"]} for step in steps]
    holders = [pod for pod, units in (units_by_pod or {}).items() if units]
    return {
        "start": start,
        "start_iso": iso(start),
        "span": round(end - start, 3),
        "transitions": {pod: {key: iso(value) for key, value in sorted(times.items(), key=lambda item: item[1])}
                        for pod, times in transitions.items()},
        "offsets": {pod: {key: round(value - start, 3) for key, value in times.items()}
                    for pod, times in transitions.items()},
        "lanes": pod_lanes(transitions, start, end, order=order),
        "free": free,
        "allocatable": int(allocatable),
        "held": held_a_gpu(transitions, holders),
        "window": _window_report(occupied_window(transitions, holders), start),
    }


def _window_report(window, start):
    if window is None:
        return None
    return {"start": iso(window["start"]), "end": iso(window["end"]), "seconds": window["seconds"],
            "start_offset": round(window["start"] - start, 3), "end_offset": round(window["end"] - start, 3)}
