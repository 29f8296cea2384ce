# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The pre-flight's verdict on the Node: a condition, a label, two annotations, and (gate mode) a startup taint.

Plain data in, plain data out: ``verdict_of_row`` turns a node's summary row (rows.result_row, from the role's result)
into a compact verdict; ``node_writes`` into the bodies of the two patches that put it on the Node; ``read_verdict``
reads it back from a Node; ``result_of_verdict`` turns it into what rows.result_row reads, so that the fleet's summary
made from the Nodes is the same summary a run writes. ``taint_removal`` is the JSON patch that removes only our taint.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import datetime
import json
import random
import re
import time

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import follows_from
from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.rows import result_row
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.dra_ledger import published_devices
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.ledger import operator_component

CONDITION_TYPE = "gpuops.scheduling/GPUPreflightPassed"
LABEL = "gpuops.scheduling/gpu-preflight"
TIME_ANNOTATION = "gpuops.scheduling/gpu-preflight-time"
REPORT_ANNOTATION = "gpuops.scheduling/gpu-preflight-report"
# The node's latest report kept in the cluster, as <namespace>/<name> of its ConfigMap.
REPORT_CONFIGMAP_ANNOTATION = "gpuops.scheduling/gpu-preflight-report-configmap"
# kubectl get node --show-managed-fields shows who wrote what.
FIELD_MANAGER = "gpuops.scheduling"
GATE_TAINT_EFFECT = "NoSchedule"
# The condition's status for each state a verdict can be in.
CONDITION_STATUS = {"running": "Unknown", "passed": "True", "failed": "False"}
VERSION = 1

# One CamelCase reason per phase a run can fail in (the condition's reason, for people and for rules).
REASONS = {
    "input": "InvalidInput",
    "lock": "LockFailed",
    "preflight": "PreflightRefused",
    "prepare": "PrepareFailed",
    "probe": "BypassProbeFailed",
    "hold": "HoldCheckFailed",
    "queue": "QueueCheckFailed",
    "release": "ReleaseCheckFailed",
    "cleanup": "CleanupCheckFailed",
    "report": "PreflightError",
    "run": "PreflightError",
}
PASSED_REASON = "PreflightPassed"
RUNNING_REASON = "PreflightRunning"
# The condition's message and the Event's note are cut only where the API limits them: an Event's note holds 1 KiB (the
# condition's message is held to the same, so both say the same). The first cause is never cut: what follows from it
# goes first, then the detail's end.
MESSAGE_LIMIT = 1024
DETAIL_LIMIT = 900

# The Event each verdict leaves on the Node (events.k8s.io/v1), where kubectl describe node and kubectl events look.
EVENT_CONTROLLER = "gpuops.scheduling/preflight"
EVENT_ACTION = "Preflight"
# A Node is cluster-scoped: its Events live in "default", as the kubelet's do, which is where
# kubectl events --for node/NAME (in the default namespace) and kubectl describe node look for them.
EVENT_NAMESPACE = "default"
EVENT_REASONS = {"passed": "GPUPreflightPassed", "failed": "GPUPreflightFailed", "refused": "GPUPreflightRefused"}
EVENT_NOTE_LIMIT = 1024
# The labels GPU Feature Discovery puts on a node: the driver's version (newer and older keys) and the MIG layout.
DRIVER_LABELS = ("nvidia.com/cuda.driver-version.full",)
DRIVER_PART_LABELS = (("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"),
                      ("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver-version.minor",
                       "nvidia.com/cuda.driver-version.revision"))
MIG_CONFIG_LABEL = "nvidia.com/mig.config"


class VerdictError(ValueError):
    """Input that is no verdict."""


def utc_iso(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epoch)))


def parse_iso(text):
    """'2026-12-01T09:00:00Z' -> epoch seconds; None when unreadable."""
    try:
        return calendar.timegm(time.strptime(str(text)[:19], "%Y-%m-%dT%H:%M:%S"))
    except (TypeError, ValueError):
        return None


def _one_line(text, limit):
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def verdict_of_row(row, at, job=None, basis=None):
    """A node's summary row (rows.result_row) -> the compact verdict written on the Node and handed to AWX.

    Only what a fleet summary needs: the state, the failed phase, check and why, units, GPUs seen, the occupied
    window, the run id and when. ``job`` is the AWX job (or run) that made it.
    """
    if row["status"] not in ("passed", "failed"):
        raise VerdictError("a verdict is passed or failed, not {0!r} (check-mode and not-run nodes get none)".format(row["status"]))
    window = row.get("window") or None
    return {
        "v": VERSION, "state": row["status"], "node": row["node"], "run_id": row.get("run_id"), "job": job,
        "at": utc_iso(at), "started_at": row.get("started_at"), "resource": row.get("resource"),
        "phase": row.get("phase"), "reason": REASONS.get(row.get("phase"), REASONS["run"]) if row["status"] == "failed" else PASSED_REASON,
        "check": row.get("check"), "failed_checks": list(row.get("failed_checks") or []),
        "detail": _one_line(row.get("reason"), DETAIL_LIMIT) if row["status"] == "failed" else None,
        "task": row.get("task"),
        "units": row.get("units"),
        "gpus": [{"uuid": gpu.get("uuid"), "name": gpu.get("name"), "kind": gpu.get("kind")} for gpu in row.get("gpus") or []],
        "window": {"seconds": window.get("seconds"), "start": window.get("start"), "end": window.get("end")} if window else None,
        "total_seconds": row.get("total_seconds"),
        # Gate mode: the startup taint and whether the node carried it (a gate on a node without it lifted nothing).
        "gate": row.get("gate"),
        "basis": basis,
    }


def verdict_of_result(result, at, job=None, basis=None):
    """The role's result for a node (``_gpu_demo_result``) -> its verdict; ``basis``: what it was proven against."""
    if not isinstance(result, dict) or not result.get("node"):
        raise VerdictError("expects the role's result for a node (a dict with 'node'), got {0!r}".format(type(result).__name__))
    return verdict_of_row(result_row(result["node"], result), at, job=job, basis=basis)


def driver_version(labels):
    """The NVIDIA driver's version from GPU Feature Discovery's labels ('550.54.15'), or None where it put none."""
    for key in DRIVER_LABELS:
        if labels.get(key):
            return str(labels[key])
    for keys in DRIVER_PART_LABELS:
        parts = [str(labels[key]) for key in keys if labels.get(key)]
        if parts and labels.get(keys[0]):
            return ".".join(parts)
    return None


def device_plugin_pod(pods, node):
    """The UID of the device plugin's pod on ``node`` (a GPU Operator DaemonSet's pod), or None when it runs none."""
    for pod in pods or []:
        metadata = pod.get("metadata") or {}
        if ((pod.get("spec") or {}).get("nodeName") == node and not metadata.get("deletionTimestamp")
                and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and operator_component(pod) == "device_plugin"):
            return metadata.get("uid")
    return None


def verdict_basis(node, resource, pods=None, slices=None):
    """What a verdict is proven against, read from the Node (API dict), the pods on it and the ResourceSlices: the boot
    (bootID), the kubelet's version, the allocatable units of ``resource`` (None on a node that hands out no such units:
    DRA), the DRA devices published for the node (``driver/pool/device``; on a DRA node only), the device plugin's pod,
    the driver's version and the MIG layout from the node's labels. Keys absent where unknown."""
    status = (node or {}).get("status") or {}
    info = status.get("nodeInfo") or {}
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    name = ((node or {}).get("metadata") or {}).get("name")
    basis = {"boot": info.get("bootID"), "kubelet": info.get("kubeletVersion"),
             "allocatable": (status.get("allocatable") or {}).get(resource) if resource else None,
             # A node no slice names is no DRA node: nothing is recorded, so nothing is compared later.
             "dra_devices": (published_devices(slices, name) or None) if slices is not None else None,
             "plugin_pod": device_plugin_pod(pods, name), "driver": driver_version(labels),
             "mig": labels.get(MIG_CONFIG_LABEL)}
    return dict((key, value) for key, value in basis.items() if value is not None)


# How each change of the basis reads, in the order people look for causes.
_CHANGES = (
    ("boot", "the node rebooted (boot {0:.8} -> {1:.8})"),
    ("kubelet", "the kubelet changed {0} -> {1}"),
    ("driver", "the driver changed {0} -> {1}"),
    ("mig", "the MIG layout changed {0} -> {1}"),
    ("plugin_pod", "the device plugin pod was replaced"),
    ("allocatable", "allocatable changed {0} -> {1}"),
)
# Devices a stale reason names, at most, of those gone and of those new.
NAMED_DEVICES = 3
MAX_AGE_VARIABLE = "gpu_demo_verdict_max_age"


def _named(devices):
    shown = ", ".join(devices[:NAMED_DEVICES])
    return shown + (" and {0} more".format(len(devices) - NAMED_DEVICES) if len(devices) > NAMED_DEVICES else "")


def dra_change(recorded, current):
    """Why a DRA node's verdict no longer holds of its devices (recorded and current ``driver/pool/device`` names), or
    None when they are the same devices."""
    gone = sorted(set(recorded) - set(current))
    new = sorted(set(current) - set(recorded))
    if not gone and not new:
        return None
    parts = (["gone: " + _named(gone)] if gone else []) + (["new: " + _named(new)] if new else [])
    return "the node's DRA devices changed {0} -> {1} ({2})".format(len(recorded), len(current), "; ".join(parts))


def _age_reason(max_age):
    limit = "{0:g} h".format(max_age / 3600.0) if max_age >= 3600 else "{0:g} s".format(max_age)
    return "older than {0} ({1})".format(limit, MAX_AGE_VARIABLE)


def staleness(verdict, node, pods=None, now=None, max_age=None, slices=None):
    """Why a passed or failed ``verdict`` no longer holds of ``node`` as it is now (the pods on it, the ResourceSlices): a
    list of sentences, empty when it is fresh. A value the verdict recorded that is gone now, or changed, makes it stale;
    one it did not record (an older verdict, a label that was not there, a node that is no DRA node) is not compared, nor
    the device plugin's pod when ``pods`` is None, nor the DRA devices when ``slices`` is None (not read). ``max_age``:
    seconds a verdict holds (gpu_demo_verdict_max_age)."""
    reasons = []
    recorded = verdict.get("basis") or {}
    if recorded:
        current = verdict_basis(node, verdict.get("resource"), pods, slices)
        for key, sentence in _CHANGES:
            # Without the pods (not read), the device plugin's pod is not compared.
            if key == "plugin_pod" and pods is None:
                continue
            if key in recorded and current.get(key) != recorded[key]:
                if key == "plugin_pod" and key not in current:
                    reasons.append("the device plugin pod is gone")
                else:
                    reasons.append(sentence.format(str(recorded[key]), str(current.get(key, "none"))))
        if "dra_devices" in recorded and slices is not None:
            changed = dra_change(recorded["dra_devices"], current.get("dra_devices") or [])
            if changed:
                reasons.append(changed)
    at = parse_iso(verdict.get("at"))
    now = time.time() if now is None else now
    if max_age and at is not None and now - at > max_age:
        reasons.append(_age_reason(max_age))
    return reasons


# How far a verdict's own time may run ahead of the API server's record of its write: the controller's clock and the
# API server's may disagree a little, never by days.
CLOCK_SKEW = 300
# The verdict's keys, as the API server's managedFields name them, and how a sentence names each.
_TRACKED = (
    ("its report annotation", ("f:metadata", "f:annotations", "f:" + REPORT_ANNOTATION)),
    ("its label", ("f:metadata", "f:labels", "f:" + LABEL)),
    ("its condition", ("f:status", "f:conditions", None)),
)


def _owns(fields, path):
    """Whether a managedFields entry's fieldsV1 holds ``path`` (or a part of it). A None step is our condition's
    list key, k:{"type":"gpuops.scheduling/GPUPreflightPassed"}, read as JSON rather than matched as text."""
    for step in path:
        if not isinstance(fields, dict):
            return False
        if step is None:
            fields = next((value for key, value in fields.items() if key.startswith("k:") and _condition_key(key)), None)
        else:
            fields = fields.get(step)
        if fields is None:
            return False
    return True


def _condition_key(key):
    try:
        return (json.loads(key[2:]) or {}).get("type") == CONDITION_TYPE
    except (ValueError, AttributeError):
        return False


def writers(node):
    """{what: [(manager, time)]}: who the API server records as the last writer of each of the verdict's keys (its
    report annotation, label and condition), from the Node's metadata.managedFields."""
    entries = ((node or {}).get("metadata") or {}).get("managedFields") or []
    return dict((what, [(entry.get("manager") or "an unnamed writer", entry.get("time")) for entry in entries
                        if isinstance(entry, dict) and _owns(entry.get("fieldsV1"), path)])
                for what, path in _TRACKED)


def _span(seconds):
    """A time span as people say it: '30 days', '5 hours', '12 minutes'."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(round(seconds / float(size)))
            return "{0} {1}{2}".format(count, unit, "" if count == 1 else "s")
    return "{0} seconds".format(int(seconds))


def distrust(verdict, node, skew=CLOCK_SKEW):
    """Why the verdict read from ``node`` cannot be believed: a list of sentences, empty when the collection wrote it.

    Believed only when the API server records the field manager gpuops.scheduling as the last writer of its report
    annotation, label and condition (anyone with patch on nodes can write the same JSON: kubectl annotate, kubectl
    edit, another controller), and when its time is not later than the API server's time of that write plus ``skew``
    (a verdict re-dated into the future would otherwise stay fresh for as long as it is dated ahead)."""
    found = writers(node)
    reasons = []
    for what, _path in _TRACKED:
        for manager, at in found[what]:
            if manager != FIELD_MANAGER:
                reasons.append("{0} was written by {1} at {2}, not by a pre-flight: not trusted".format(
                    what, manager, at or "an unknown time"))
    unrecorded = [what for what, _path in _TRACKED if not found[what]]
    if unrecorded:
        reasons.append("the API server has no record of who wrote {0}: not trusted".format(" or ".join(unrecorded)))
    ours = [parse_iso(at) for manager, at in found[_TRACKED[0][0]] if manager == FIELD_MANAGER]
    written = max([at for at in ours if at is not None] or [None]) if ours else None
    dated = parse_iso(verdict.get("at"))
    if written is not None and dated is not None and dated > written + skew:
        reasons.append("dated {0} ahead of the API server's record of the write ({1}): not trusted".format(
            _span(dated - written), utc_iso(written)))
    return reasons


def event_reason(verdict):
    """GPUPreflightPassed, GPUPreflightRefused (the pre-flight refused the node before testing), GPUPreflightFailed."""
    if verdict["state"] == "passed":
        return EVENT_REASONS["passed"]
    return EVENT_REASONS["refused" if verdict.get("phase") in ("preflight", "input", "lock") else "failed"]


def event(verdict, node, now, instance):
    """The events.k8s.io/v1 Event of a verdict on ``node`` (the Node as read: its uid ties the Event to this Node).

    Normal for a pass, Warning otherwise; the note is the condition's message (the failed phase, check and why, the run
    id). ``instance``: who reported it (the controller's host name), as reportingInstance."""
    metadata = (node or {}).get("metadata") or {}
    moment = datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        # Unique per verdict, as the kubelet names its Node events: <node>.<hex time>.
        "metadata": {"name": "{0}.{1:x}".format(metadata.get("name"), int(now * 1e9)), "namespace": EVENT_NAMESPACE,
                     "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
        "regarding": {"apiVersion": "v1", "kind": "Node", "name": metadata.get("name"), "uid": metadata.get("uid")},
        "eventTime": moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": EVENT_CONTROLLER, "reportingInstance": _one_line(instance, 128) or "unknown",
        "action": EVENT_ACTION, "reason": event_reason(verdict),
        "type": "Normal" if verdict["state"] == "passed" else "Warning",
        "note": message(verdict, EVENT_NOTE_LIMIT),
    }


def running_verdict(node, run_id, at, resource=None, job=None):
    """What the Node says while a run is on it."""
    return {"v": VERSION, "state": "running", "node": node, "run_id": run_id, "job": job, "at": utc_iso(at),
            "started_at": utc_iso(at), "resource": resource, "phase": None, "reason": RUNNING_REASON, "check": None,
            "failed_checks": [], "detail": None, "task": None, "units": None, "gpus": [], "window": None,
            "total_seconds": None}


def _fit(head, detail, extras, tail, limit):
    """``head`` + ``detail`` + ``extras`` + ``tail`` in one line of at most ``limit`` characters: the extras go first, then
    the detail's end; the head (the first cause) and the tail (the run id) stay."""
    extras = [" ".join(str(extra).split()) for extra in extras]
    detail = " ".join(str(detail or "").split())
    while extras and len(head + detail + "".join(extras) + tail) > limit:
        extras.pop()
    room = limit - len(head + "".join(extras) + tail)
    if len(detail) > room:
        detail = detail[:max(room - 1, 0)] + "…"
    return head + detail + "".join(extras) + tail


def message(verdict, limit=MESSAGE_LIMIT):
    """The condition's message (and the Event's note): one line with the run id. A failure leads with its first cause,
    the check and what it names (the device, the pod, the taint), then what follows from it."""
    run = "run {0}".format(verdict.get("run_id") or "?")
    if verdict["state"] == "running":
        return _one_line("GPU pre-flight running since {0}; {1}".format(verdict["at"], run), limit)
    gpus = len(verdict.get("gpus") or [])
    if verdict["state"] == "passed":
        window = (verdict.get("window") or {}).get("seconds")
        gate = verdict.get("gate") or {}
        text = "GPU pre-flight passed: {0} unit(s) of {1} held, {2} GPU(s) seen{3}{4}; {5}".format(
            verdict.get("units") or 0, verdict.get("resource") or "the GPU resource", gpus,
            ", occupied {0:.1f} s".format(window) if isinstance(window, (int, float)) else "",
            "; no startup taint to remove ({0}:NoSchedule was not on the node)".format(gate.get("taint"))
            if gate and not gate.get("present") else "", run)
        return _one_line(text, limit)
    cause = verdict.get("check")
    what = cause or verdict.get("phase") or "error"
    others = [check for check in verdict.get("failed_checks") or [] if check != cause]
    follows = follows_from(cause, others)
    unexplained = [check for check in others if check not in follows]
    extras = (["; {0} follow{1} from it".format(", ".join(follows), "s" if len(follows) == 1 else "")] if follows else []) + (
        ["; also failed: {0}".format(", ".join(unexplained))] if unexplained else [])
    head = "GPU pre-flight failed at {0} ({1}): ".format(verdict.get("phase") or "run", what)
    return _fit(head, verdict.get("detail") or "error", extras, "; " + run, limit)


def condition(verdict, previous=None, now=None):
    """The Node condition for a verdict. lastTransitionTime moves only when the status changes (API conventions)."""
    status = CONDITION_STATUS[verdict["state"]]
    stamp = utc_iso(now if now is not None else time.time())
    transition = stamp
    if isinstance(previous, dict) and previous.get("status") == status and previous.get("lastTransitionTime"):
        transition = previous["lastTransitionTime"]
    return {"type": CONDITION_TYPE, "status": status, "reason": verdict["reason"], "message": message(verdict),
            "lastHeartbeatTime": stamp, "lastTransitionTime": transition}


def compact_json(verdict):
    return json.dumps(verdict, sort_keys=True, separators=(",", ":"))


def node_writes(verdict, node, now=None):
    """{status, metadata}: the bodies of the two patches that write ``verdict`` on ``node`` (the Node as read).

    ``status`` is a strategic merge patch of nodes/<name>/status: conditions merge by type, so the kubelet's and
    other writers' conditions stay. ``metadata`` is a JSON merge patch of the Node: labels and annotations merge by
    key, so only ours change.
    """
    previous = find_condition(node)
    return {
        "status": {"status": {"conditions": [condition(verdict, previous, now)]}},
        "metadata": {"metadata": {"labels": {LABEL: verdict["state"]},
                                  "annotations": {TIME_ANNOTATION: verdict["at"], REPORT_ANNOTATION: compact_json(verdict)}}},
    }


def find_condition(node):
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return next((entry for entry in conditions if entry.get("type") == CONDITION_TYPE), None)


def read_verdict(node):
    """A Node (API dict) -> its verdict (with the condition's status), or None when no run wrote one.

    The annotation holds the details; the label and the condition must agree with it, else the Node was edited by
    hand (or half written) and the verdict is reported as unreadable rather than guessed.
    """
    metadata = (node or {}).get("metadata") or {}
    text = (metadata.get("annotations") or {}).get(REPORT_ANNOTATION)
    label = (metadata.get("labels") or {}).get(LABEL)
    found = find_condition(node)
    if text is None and label is None and found is None:
        return None
    try:
        verdict = json.loads(text) if text is not None else None
    except ValueError:
        verdict = None
    if (not isinstance(verdict, dict) or verdict.get("state") not in CONDITION_STATUS or label != verdict["state"]
            or found is None or found.get("status") != CONDITION_STATUS[verdict["state"]]):
        return {"state": "unreadable", "node": metadata.get("name"), "label": label,
                "condition": {key: (found or {}).get(key) for key in ("status", "reason", "message")}}
    verdict = dict(verdict, node=metadata.get("name") or verdict.get("node"))
    verdict["condition"] = {key: found.get(key) for key in ("status", "reason", "message", "lastTransitionTime")}
    return verdict


def result_of_verdict(verdict):
    """A verdict -> the role-result shape rows.result_row reads, so the summary of Nodes is the summary of a run."""
    failed = verdict["state"] == "failed"
    window = verdict.get("window") or None
    checks = []
    if failed and verdict.get("check"):
        checks.append({"id": verdict["check"], "phase": verdict.get("phase"), "passed": False, "detail": verdict.get("detail")})
        checks += [{"id": check, "phase": verdict.get("phase"), "passed": False, "detail": None}
                   for check in verdict.get("failed_checks") or [] if check != verdict["check"]]
    return {
        "node": verdict.get("node"), "run_id": verdict.get("run_id"), "resource": verdict.get("resource"),
        "check_mode": False, "passed": not failed, "checks": checks,
        "failure": {"phase": verdict.get("phase") or "run", "task": verdict.get("task"),
                    "message": verdict.get("detail") or "failed"} if failed and not checks else None,
        "hold": {"units_seen": verdict.get("units"),
                 "units": [{"uuid": gpu.get("uuid"), "gpu_name": gpu.get("name"), "kind": gpu.get("kind")}
                           for gpu in verdict.get("gpus") or [] if isinstance(gpu, dict)]},
        "timeline": {"window": window} if window else {}, "started_at": verdict.get("started_at"),
        "durations": {"total": verdict.get("total_seconds")},
    }


def fleet_inputs(nodes, verdicts=None, hosts=None, now=None, max_age=86400, max_running=900, pods=None, slices=None):
    """The fleet's state -> (hosts, results, not_run_reasons) for fleet.fleet_summary.

    ``nodes``: Node objects (API dicts) as read from the cluster, or None when it could not be read; ``verdicts``:
    {node: verdict} handed over by jobs (AWX artifacts), used for nodes the cluster did not give; ``hosts``: names that
    must have a row (the inventory); ``pods``: the pods on those nodes (the device plugins' among them), ``slices``: the
    cluster's ResourceSlices (the DRA nodes' devices), each None when not read. A verdict that no longer holds of its
    Node (``staleness``: a reboot, a new driver, fewer units or DRA devices, older than ``max_age`` seconds) is stale,
    a run that started more than ``max_running`` seconds ago and never finished was interrupted, a verdict on a Node
    that the collection did not write, or dated ahead of its write (``distrust``), is not trusted: none counts as a
    result.
    """
    now = time.time() if now is None else now
    objects = {node["metadata"]["name"]: node for node in nodes or [] if (node.get("metadata") or {}).get("name")}
    found = {name: read_verdict(node) for name, node in objects.items()}
    handed = verdicts or {}
    names = sorted(set(found) | set(handed) | set(hosts or []))
    results, reasons = {}, {}
    for name in names:
        verdict = found.get(name)
        if verdict is None and isinstance(handed.get(name), dict):
            verdict = handed[name]
        if verdict is None:
            absent = nodes is not None and name not in found
            reasons[name] = ("no node {0} in the cluster" if absent
                             else "never pre-flighted: node {0} has no verdict").format(name)
            continue
        state = verdict.get("state")
        at = parse_iso(verdict.get("at"))
        # Only a verdict read from its Node can be traced to its writer; one a job handed over is its own record.
        untrusted = distrust(verdict, objects[name]) if name in objects and state != "unreadable" else []
        if untrusted:
            reasons[name] = "not trusted: {0} at {1} (run {2}): {3}".format(
                state, verdict.get("at"), verdict.get("run_id"), "; ".join(untrusted))
        elif state == "unreadable":
            reasons[name] = "unreadable verdict on node {0} (label {1}, condition {2}): written by hand or half written".format(
                name, verdict.get("label"), (verdict.get("condition") or {}).get("status"))
        elif state == "running":
            if at is not None and now - at > max_running:
                reasons[name] = "interrupted: run {0} started at {1} and never wrote its verdict".format(
                    verdict.get("run_id"), verdict.get("at"))
            else:
                reasons[name] = "running: run {0} since {1}".format(verdict.get("run_id"), verdict.get("at"))
        elif state in ("passed", "failed"):
            # A job's verdict is compared by age only: the node as it is now is what the cluster did not give.
            why = staleness(verdict if name in objects else dict(verdict, basis=None), objects.get(name), pods,
                            now=now, max_age=max_age, slices=slices)
            if why:
                reasons[name] = "stale: {0} at {1} (run {2}): {3}".format(state, verdict.get("at"), verdict.get("run_id"),
                                                                          "; ".join(why))
            else:
                results[name] = result_of_verdict(dict(verdict, node=name))
        else:
            reasons[name] = "unreadable verdict on node {0}".format(name)
    return names, results, reasons


# <namespace>/<name>: a DNS label, then a DNS subdomain (what the API server accepts for a ConfigMap).
CONFIGMAP_REF = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def report_configmaps(nodes):
    """{node: '<namespace>/<name>'} of each Node's latest report kept in the cluster, as its annotation names it. An
    annotation that names no ConfigMap (edited by hand) is left out rather than shown as a command to run."""
    found = {}
    for node in nodes or []:
        metadata = node.get("metadata") or {}
        reference = (metadata.get("annotations") or {}).get(REPORT_CONFIGMAP_ANNOTATION)
        if metadata.get("name") and isinstance(reference, str) and CONFIGMAP_REF.match(reference):
            found[metadata["name"]] = reference
    return found


def freshness(names, results, reasons):
    """fleet_inputs' answer -> {node: fresh|failed|stale|untrusted|never|running|unreadable}: which nodes a revalidation
    walks (an untrusted verdict as a stale one)."""
    states = {}
    for name in names:
        if name in results:
            states[name] = "fresh" if results[name]["passed"] else "failed"
        else:
            head = reasons.get(name, "").split(":")[0]
            states[name] = {"stale": "stale", "not trusted": "untrusted", "running": "running", "interrupted": "stale",
                            "never pre-flighted": "never", "no node {0} in the cluster".format(name): "absent"}.get(
                                head, "unreadable")
    return states


def taint_removal(node, key, effect=GATE_TAINT_EFFECT):
    """The JSON patch that removes exactly our taint (``key``, ``effect``) from ``node`` as read, or None when it has none.

    ``test`` first: if the taint list changed since the read (another tool added or removed one), the API server refuses
    the patch instead of removing someone else's taint; read again and retry.
    """
    taints = ((node or {}).get("spec") or {}).get("taints") or []
    for index, taint in enumerate(taints):
        if taint.get("key") == key and taint.get("effect") == effect:
            path = "/spec/taints/{0}".format(index)
            return [{"op": "test", "path": path, "value": taint}, {"op": "remove", "path": path}]
    return None


KEY_PART = re.compile(r"[^A-Za-z0-9_]")


def job_stat_key(job_id, prefix="gpu_demo_j"):
    """The set_stats key of one job's verdicts: one per job, so AWX's shallow merge of sliced jobs keeps every slice."""
    text = str(job_id if job_id is not None else "").strip()
    if not text:
        raise VerdictError("a job id is needed to name the job's statistics (awx_job_id, or gpu_demo_run_id)")
    return prefix + KEY_PART.sub("_", text)


def run_id(given=None, now=None):
    """The run's id: ``given`` (gpu_demo_run_id), else the run's UTC start to the second and six random hex digits, so
    that two runs started in the same second differ. Labels, report files, the lock's holder and the summary carry it."""
    text = str(given if given is not None else "").strip()
    if text:
        return text
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return "{0}-{1:06x}".format(now.strftime("%Y%m%dt%H%M%S"), random.randrange(16 ** 6))
