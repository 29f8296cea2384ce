# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The pure part of ``pod_wait``: is a set of pods in the wanted state, still on its way, or never going to be?

Everything here takes pods as the plain dicts the API sends (``kubectl get pod -o json``) and a
clock value, and returns data; the module feeds it from a list and a watch.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

CONDITIONS = ("running", "scheduled", "unschedulable", "succeeded", "finished", "deleted")

# Container waiting reasons after which a pod will not start without someone changing something.
# ErrImagePull is retried by the kubelet, but with imagePullPolicy IfNotPresent it means the image
# is not on the node and the registry refused it: waiting longer only holds the GPU of the others.
DEFAULT_FATAL_REASONS = (
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
)

# Transition names, in the order a pod lives them; used for the report's timeline.
TRANSITIONS = ("created", "unschedulable", "scheduled", "running", "succeeded", "failed", "deleting", "deleted")


def parse_time(value):
    """An RFC 3339 API timestamp (``2026-10-12T08:01:02Z``, optionally with fraction) -> epoch seconds."""
    if not value:
        return None
    text = str(value).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    # Python's fromisoformat (before 3.11) takes exactly microseconds: the fraction cut or padded to six digits.
    text = re.sub(r"\.(\d*)", lambda match: "." + match.group(1)[:6].ljust(6, "0"), text, count=1)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def iso(epoch):
    """Epoch seconds -> ISO 8601 UTC with milliseconds (``2026-10-12T08:01:02.345Z``)."""
    if epoch is None:
        return None
    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + "{0:03d}Z".format(moment.microsecond // 1000)


def pod_condition(pod, kind):
    """The pod's condition of type ``kind`` (PodScheduled, Ready...) as the API sends it, or None."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return None


def _container_state(status):
    """One container status -> its state (running, terminated, waiting) and the facts a wait and a report need."""
    state = status.get("state") or {}
    name = next((name for name in ("running", "terminated", "waiting") if state.get(name) is not None), None)
    detail = (state[name] or {}) if name else {}
    return {
        "name": status.get("name"),
        "state": name or "unknown",
        "reason": detail.get("reason"),
        "message": detail.get("message"),
        "exit_code": detail.get("exitCode"),
        "started_at": detail.get("startedAt"),
        "finished_at": detail.get("finishedAt"),
        "ready": bool(status.get("ready")),
        "restart_count": status.get("restartCount", 0),
        "image": status.get("image"),
        # The kubelet's word on the devices the container was given (absent before Kubernetes 1.36 or with its
        # ResourceHealthStatus gate off): [{name, resources: [{resourceID, health, message}]}].
        "allocated_resources_status": status.get("allocatedResourcesStatus"),
    }


def summarize(pod):
    """A Pod dict -> the facts a wait and a report need, with short keys."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    scheduled = pod_condition(pod, "PodScheduled")
    containers = [_container_state(item) for item in
                  (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])]
    return {
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace"),
        "uid": metadata.get("uid"),
        "phase": status.get("phase") or "Pending",
        "reason": status.get("reason"),
        "message": status.get("message"),
        "node_name": spec.get("nodeName"),
        "priority": spec.get("priority"),
        "priority_class_name": spec.get("priorityClassName"),
        "preemption_policy": spec.get("preemptionPolicy"),
        "nominated_node_name": status.get("nominatedNodeName"),
        "pod_ip": status.get("podIP"),
        "host_ip": status.get("hostIP"),
        "created_at": metadata.get("creationTimestamp"),
        "start_time": status.get("startTime"),
        "deletion_timestamp": metadata.get("deletionTimestamp"),
        "scheduled": bool(scheduled and scheduled.get("status") == "True") or bool(spec.get("nodeName")),
        "unschedulable": bool(scheduled and scheduled.get("status") == "False"
                              and scheduled.get("reason") == "Unschedulable"),
        "conditions": [
            {
                "type": item.get("type"),
                "status": item.get("status"),
                "reason": item.get("reason"),
                "message": item.get("message"),
                "last_transition_time": item.get("lastTransitionTime"),
            }
            for item in status.get("conditions") or []
        ],
        "containers": containers,
    }


def blocking_reason(summary, fatal_reasons=DEFAULT_FATAL_REASONS):
    """The reason a pod will not start, from its containers (``ImagePullBackOff``...), or None."""
    return next((container["reason"] for container in summary["containers"]
                 if container["state"] == "waiting" and container["reason"] in fatal_reasons), None)


def describe(summary):
    """``gpu-demo-hold: Pending (ImagePullBackOff: Back-off pulling image "x")`` for messages."""
    if summary is None:
        return "not found"
    detail = summary["phase"]
    reasons = []
    if summary["reason"]:
        reasons.append(summary["reason"] + (": " + summary["message"] if summary["message"] else ""))
    for container in summary["containers"]:
        if container["state"] in ("waiting", "terminated") and container["reason"]:
            text = container["reason"]
            if container["state"] == "terminated" and container["exit_code"] is not None:
                text += " (exit code {0})".format(container["exit_code"])
            if container["message"]:
                text += ": " + container["message"]
            reasons.append(text)
    if summary["phase"] == "Pending" and not summary["scheduled"]:
        scheduled = [item for item in summary["conditions"] if item["type"] == "PodScheduled"]
        if scheduled and scheduled[0]["reason"]:
            reasons.append("{0}: {1}".format(scheduled[0]["reason"], scheduled[0]["message"] or ""))
        elif not scheduled:
            reasons.append("not scheduled yet")
    if summary["node_name"]:
        detail += " on " + summary["node_name"]
    if summary["deletion_timestamp"]:
        detail += ", being deleted"
    if reasons:
        detail += " (" + "; ".join(reasons) + ")"
    return detail


MET = "met"
WAITING = "waiting"
HOPELESS = "hopeless"


def evaluate(condition, summary, node=None, fail_on_unschedulable=False, fatal_reasons=DEFAULT_FATAL_REASONS):
    """One pod against the wanted condition -> (MET | WAITING | HOPELESS, why).

    ``summary`` is None when the pod does not exist (never created, or gone).
    """
    if condition == "deleted":
        return (MET, "gone") if summary is None else (WAITING, "still exists: " + describe(summary))
    if summary is None:
        return HOPELESS, "the pod does not exist (deleted, or never created)"
    phase = summary["phase"]
    if node and summary["node_name"] and summary["node_name"] != node:
        return HOPELESS, "scheduled on {0}, not on {1}".format(summary["node_name"], node)

    if condition == "unschedulable":
        if summary["scheduled"]:
            return HOPELESS, "it was scheduled: " + describe(summary)
        if phase in ("Succeeded", "Failed"):
            return HOPELESS, "it ended: " + describe(summary)
        if summary["unschedulable"]:
            return MET, "unschedulable"
        return WAITING, describe(summary)

    if phase == "Failed" and condition != "finished":
        return HOPELESS, "it failed: " + describe(summary)
    if blocking_reason(summary, fatal_reasons):
        return HOPELESS, "it cannot start: " + describe(summary)
    if summary["deletion_timestamp"] and condition in ("running", "scheduled"):
        return HOPELESS, "it is being deleted: " + describe(summary)
    if fail_on_unschedulable and summary["unschedulable"] and not summary["scheduled"]:
        return HOPELESS, "the scheduler cannot place it: " + describe(summary)

    reached = {"scheduled": summary["scheduled"], "running": phase == "Running" and bool(summary["node_name"]),
               "succeeded": phase == "Succeeded", "finished": phase in ("Succeeded", "Failed")}
    if condition not in reached:
        raise ValueError("unknown condition {0!r}; expected one of {1}".format(condition, ", ".join(CONDITIONS)))
    if reached[condition]:
        return MET, phase.lower() if condition == "finished" else condition
    if condition == "running" and phase == "Succeeded":
        return HOPELESS, "it ended before it was seen Running: " + describe(summary)
    return WAITING, describe(summary)


def _parsed_times(values):
    return [moment for moment in map(parse_time, values) if moment is not None]


def api_transitions(summary):
    """Transition times the API itself records on a pod (second resolution): {transition: epoch}."""
    times = {
        "created": parse_time(summary.get("created_at")),
        # deletionTimestamp is when the grace period ends; the deletion itself started earlier.
        "deleting": parse_time(summary.get("deletion_timestamp")),
    }
    for condition in summary["conditions"]:
        moment = parse_time(condition["last_transition_time"])
        if condition["type"] != "PodScheduled" or moment is None:
            continue
        if condition["status"] == "True":
            times["scheduled"] = moment
        elif condition["reason"] == "Unschedulable":
            times["unschedulable"] = moment
    started = _parsed_times(item["started_at"] for item in summary["containers"])
    if started:
        times["running"] = min(started)
    finished = _parsed_times(item["finished_at"] for item in summary["containers"])
    if finished and summary["phase"] in ("Succeeded", "Failed"):
        times[summary["phase"].lower()] = max(finished)
    return {transition: moment for transition, moment in times.items() if moment is not None}


def observed_transitions(summary):
    """The transitions a pod in this state has gone through, as names (for watch observations)."""
    phase = summary["phase"]
    started = any(item["started_at"] for item in summary["containers"])
    reached = ["created"]
    if summary["unschedulable"] and not summary["scheduled"]:
        reached.append("unschedulable")
    if summary["scheduled"]:
        reached.append("scheduled")
    if phase == "Running" or (phase in ("Succeeded", "Failed") and started):
        reached.append("running")
    if phase in ("Succeeded", "Failed"):
        reached.append(phase.lower())
    if summary["deletion_timestamp"]:
        reached.append("deleting")
    return reached


def in_life_order(times, exact):
    """Make a pod's transitions follow each other in the order a pod lives them.

    An API timestamp is truncated to the second, so it can fall before a transition seen exactly
    (a pod created at .7 s, bound at .71 s, reads as bound at .0 s): such a time is moved up to the
    transition before it.
    """
    ordered = {}
    previous = None
    for transition in TRANSITIONS:
        if transition not in times:
            continue
        moment = times[transition]
        if previous is not None and moment < previous and transition not in exact:
            moment = previous
        ordered[transition] = moment
        previous = moment if previous is None else max(previous, moment)
    return ordered


class PodSetWatch:
    """The state of a set of pods as a list and a watch report it, judged against one condition.

    ``names``: the pods that must reach the condition (an absent one counts as not existing);
    without names, every pod fed counts, and at least ``count`` (default 1) of them must exist
    for any condition other than ``deleted``. ``record_all``: also follow (and report) the other
    pods fed, which the caller has already filtered by label selector; otherwise they are ignored.
    """

    def __init__(self, condition, names=None, count=None, node=None, fail_on_unschedulable=False,
                 fatal_reasons=DEFAULT_FATAL_REASONS, record_all=False):
        if condition not in CONDITIONS:
            raise ValueError("unknown condition {0!r}; expected one of {1}".format(condition, ", ".join(CONDITIONS)))
        self.condition = condition
        self.names = list(names or [])
        self.count = count
        self.node = node
        self.fail_on_unschedulable = fail_on_unschedulable
        self.fatal_reasons = tuple(fatal_reasons)
        self.record_all = record_all
        self.pods = {}
        self.known = {}
        self.seen = {}

    def _wanted(self, name):
        return self.record_all or not self.names or name in self.names

    def _record(self, name, transition, now, live=True):
        self.seen.setdefault(name, {}).setdefault(transition, (now, live))

    def load(self, pods, now):
        """A list (the first, or again after the watch expired): replaces the current pods."""
        self.pods = {}
        for pod in pods:
            self.apply("ADDED", pod, now, live=False)
        # A pod known before (an earlier list, or the watch since) that the list no longer has is gone: say so at
        # once, it will not come as a watch event.
        for name in self.known:
            if name not in self.pods and self._wanted(name):
                self._record(name, "deleted", now)

    def apply(self, event_type, pod, now, live=True):
        """One watch event (``ADDED`` / ``MODIFIED`` / ``DELETED``) received at time ``now``.

        ``live`` is False for the initial list: what it shows happened at some time before ``now``.
        """
        summary = summarize(pod)
        name = summary["name"]
        if not self._wanted(name):
            return
        self.known[name] = summary
        if event_type == "DELETED":
            self.pods.pop(name, None)
            self._record(name, "deleted", now)
            return
        self.pods[name] = summary
        for transition in observed_transitions(summary):
            self._record(name, transition, now, live)

    def verdict(self):
        """(MET | WAITING | HOPELESS, message) for the whole set."""
        waiting = []
        if self.names:
            targets = [(name, self.pods.get(name)) for name in self.names]
        else:
            targets = sorted(self.pods.items())
            expected = 1 if self.count is None else self.count
            if self.condition != "deleted" and len(targets) < expected:
                waiting.append("{0} pod(s) found, {1} expected".format(len(targets), expected))
        for name, summary in targets:
            state, why = evaluate(self.condition, summary, node=self.node,
                                  fail_on_unschedulable=self.fail_on_unschedulable,
                                  fatal_reasons=self.fatal_reasons)
            if state == HOPELESS:
                return HOPELESS, "pod {0} will not become {1}: {2}".format(name, self.condition, why)
            if state == WAITING:
                waiting.append("{0}: {1}".format(name, why))
        if waiting:
            return WAITING, "; ".join(waiting)
        return MET, "all {0} pod(s) {1}".format(len(targets), self.condition)

    def transitions(self):
        """{pod: {transition: epoch}}: what the API recorded, refined by what this watch saw live.

        API timestamps have second resolution; a transition seen by the watch is exact to a few
        milliseconds. One already true in the first list only happened at some time before it,
        so there the API's timestamp is kept when it has one.
        """
        exact = self.exact()
        result = {}
        for name in sorted(self.known):
            times = api_transitions(self.known[name])
            for transition, (moment, live) in self.seen[name].items():
                if live or transition not in times:
                    times[transition] = moment
            result[name] = in_life_order(times, exact[name])
        return result

    def exact(self):
        """{pod: [transitions]} that this watch saw happen (exact to a few milliseconds)."""
        return {name: sorted(transition for transition, (_moment, live) in seen.items() if live)
                for name, seen in self.seen.items()}

    def report(self):
        """The known pods (current or last seen state): the condition's targets first, then the others."""
        order = list(self.names) or sorted(self.known)
        order += sorted(name for name in self.known if name not in order)
        return [dict(self.known[name], exists=name in self.pods) if name in self.known
                else {"name": name, "exists": False} for name in order]
