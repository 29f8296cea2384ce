# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Parse the kube-scheduler's FailedScheduling messages into data.

The message is ``FitError.Error()`` (pkg/scheduler/framework/types.go), optionally followed by the
PostFilter plugins' messages, for example::

    0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available:
    1 No preemption victims found for incoming pod.

With Dynamic Resource Allocation (resource.k8s.io/v1) the DynamicResources plugin gives the reasons and its
PostFilter part joins preemption's, as kube-scheduler 1.36 writes it for a pod whose claim finds no free device::

    0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, preemption: 0/1 nodes are
    available: 1 Preemption is not helpful for scheduling.

``dra`` says what such a message means (``DRA_SHORTAGE_REASONS``, ``DRA_PREFILTER_MESSAGES``).

Its shape since Kubernetes 1.19: ``0/<total> nodes are available: [<PreFilter message>.]
[<count> <reason>, <count> <reason>.] [<PostFilter messages, comma separated>]`` where the
default preemption plugin's message starts with ``preemption: `` and is either another node
summary or a sentence (``not eligible due to preemptionPolicy=Never.``). Events often carry a
trailing extra period. Older schedulers wrote ``No nodes are available that match all of the
following predicates:: Insufficient cpu (1), ...`` (1.6 - 1.9) and ``pod (x) failed to fit in any
node\\nfit failure summary on nodes : Insufficient cpu (1)`` (1.5); both are understood.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.pod_wait import iso, parse_time

_SUMMARY = re.compile(r"^\s*(?P<available>\d+)/(?P<total>\d+) nodes are available(?::\s*(?P<rest>.*))?$", re.S)
_PREDICATES = re.compile(
    r"^\s*(?:No nodes are available that match all of the following predicates:?|"
    r"pod \(.*?\) failed to fit in any node\s*fit failure summary on nodes\s*)\s*:\s*(?P<rest>.*)$", re.S)
# "<count> <reason>": the form of every item of a reason list since 1.10.
_COUNTED = re.compile(r"^(?P<count>\d+) (?P<reason>\S.*)$", re.S)
# "<reason> (<count>)": the form of the 1.5 - 1.9 predicate summaries.
_COUNT_AFTER = re.compile(r"^(?P<reason>\S.*?) \((?P<count>\d+)\)$", re.S)
_INSUFFICIENT = re.compile(r"^Insufficient (?P<resource>\S+)$")
# The DynamicResources plugin's Filter reasons for a node whose devices cannot serve the pod's claims
# (pkg/scheduler/framework/plugins/dynamicresources): no free or matching device, the allocation timed out, an
# extended resource served through DRA that fits nowhere.
DRA_SHORTAGE_REASONS = ("cannot allocate all claims", "timed out trying to allocate devices",
                        "cannot schedule extended resource claim", "cannot fit resource")
# Its PreFilter / PreEnqueue messages: the claim itself is wrong or not there yet.
DRA_PREFILTER_MESSAGES = (
    ("device_class_missing", re.compile(r"^request (?P<request>\S+): device class (?P<device_class>\S+) does not exist$")),
    ("claim_not_created", re.compile(r"ResourceClaim not created yet$")),
    ("claim_pinned_elsewhere", re.compile(r"^resourceclaim not available on the node$")),
)
# Start of the default preemption plugin's part; other PostFilter plugins' messages precede it.
_PREEMPTION = re.compile(r"(?:^|(?<=[\s,.]))preemption:\s*")


def _split_outside_braces(text, separator):
    """Split ``text`` on ``separator`` except inside ``{...}`` (taints print as ``{key: value}``)."""
    parts, depth, start = [], 0, 0
    for match in re.finditer(r"[{}]|" + re.escape(separator), text):
        if match.group() == "{":
            depth += 1
        elif match.group() == "}":
            depth = max(depth - 1, 0)
        elif depth == 0:
            parts.append(text[start:match.start()])
            start = match.end()
    parts.append(text[start:])
    return parts


def _sentences(text):
    """Split on a period that ends a sentence (followed by space or the end), not ``nvidia.com``."""
    chunks = (chunk.strip().rstrip(".").strip() for chunk in _split_outside_braces(text.strip(), ". "))
    return [chunk for chunk in chunks if chunk]


def _counted_items(sentence):
    """``1 Insufficient cpu, 2 node(s) had taint {a: b}, that the pod didn't tolerate`` -> pairs.

    A comma followed by something that is not a count continues the previous reason (the 1.10 -
    1.17 taint wording contains a comma). Returns None when the sentence is not a reason list.
    """
    items = []
    for part in _split_outside_braces(sentence, ", "):
        match = _COUNTED.match(part.strip())
        if match:
            items.append([match.group("reason").strip(), int(match.group("count"))])
        elif items:
            items[-1][0] += ", " + part.strip()
        else:
            return None
    return items


def _counts(nodes_total, nodes_available, counted, messages):
    """The keys every parsed part has, from its (reason, node count) pairs; ``insufficient``: the resources of
    ``Insufficient <resource>`` reasons."""
    reasons = {}
    for reason, count in counted:
        reasons[reason] = reasons.get(reason, 0) + count
    matches = (_INSUFFICIENT.match(reason) for reason in reasons)
    return {
        "nodes_total": nodes_total,
        "nodes_available": nodes_available,
        "reasons": reasons,
        "insufficient": list(dict.fromkeys(match.group("resource") for match in matches if match)),
        "messages": messages,
    }


def _parse_summary(text):
    """``0/N nodes are available: ...`` (without the preemption part) -> dict, or None."""
    match = _SUMMARY.match(text)
    if not match:
        return None
    counted, messages = [], []
    for sentence in _sentences(match.group("rest") or ""):
        items = _counted_items(sentence)
        if items is None:
            # A PreFilter message (``persistentvolumeclaim "x" not found``) or another PostFilter
            # plugin's message (``no new claims to deallocate``).
            messages.extend(part.strip() for part in _split_outside_braces(sentence, ", ") if part.strip())
        else:
            counted.extend(items)
    return _counts(int(match.group("total")), int(match.group("available")), counted, messages)


def _parse_predicates(text):
    """The 1.5 - 1.9 forms: ``... predicates:: Insufficient cpu (1), PodToleratesNodeTaints (2).``"""
    match = _PREDICATES.match(text)
    if not match:
        return None
    items = _split_outside_braces(match.group("rest").strip().rstrip("."), ", ")
    counted = (_COUNT_AFTER.match(item.strip()) for item in items)
    return _counts(None, 0, [(part.group("reason"), int(part.group("count"))) for part in counted if part], [])


def _parse_preemption(text):
    text = text.strip()
    summary = _parse_summary(text)
    if summary is not None:
        summary["message"] = text
        summary["eligible"] = True
        return summary
    sentence = text.rstrip(".").strip()
    return {
        "message": text,
        **_counts(None, None, [], [sentence] if sentence else []),
        # DefaultPreemption.PodEligibleToPreemptOthers: "not eligible due to preemptionPolicy=Never."
        "eligible": "not eligible" not in sentence.lower(),
    }


def parse_failed_scheduling(message):
    """A FailedScheduling message -> dict.

    Keys: ``message`` (as given), ``format`` (``framework`` for ``0/N nodes are available``,
    ``predicates`` for 1.5 - 1.9, ``unknown``), ``nodes_total``, ``nodes_available``, ``reasons``
    ({reason: node count}), ``insufficient`` (resource names of ``Insufficient <resource>``
    reasons), ``messages`` (sentences that are not counted reasons) and ``preemption`` (the same
    keys for the ``preemption:`` part plus ``message`` and ``eligible``, or None when absent) and ``dra`` (what it
    says about DRA claims, see ``_dra``).
    """
    if message is None:
        message = ""
    if not isinstance(message, str):
        raise TypeError("a FailedScheduling message must be a string, not {0}".format(type(message).__name__))
    main, preemption = message.strip(), None
    split = _PREEMPTION.search(main)
    if split:
        main, preemption = main[:split.start()].rstrip(" ,"), _parse_preemption(main[split.end():])
    fmt, result = "framework", _parse_summary(main)
    if result is None:
        fmt, result = "predicates", _parse_predicates(main)
    if result is None:
        fmt, result = "unknown", _counts(None, None, [], _sentences(main))
    result["message"] = message
    result["format"] = fmt
    result["preemption"] = preemption
    result["dra"] = _dra(result)
    return result


def _dra(result):
    """What the message says about DRA claims: ``shortage`` (the DRA reasons with their node counts: no device
    could be allocated), ``cannot_allocate`` (any such reason), and ``problems`` ({kind, text, ...}: a missing
    DeviceClass, a claim not created yet, a claim pinned to another node)."""
    shortage = {reason: count for reason, count in result["reasons"].items() if reason.startswith(DRA_SHORTAGE_REASONS)}
    problems = []
    for text in list(result["messages"]) + list(result["reasons"]):
        for kind, pattern in DRA_PREFILTER_MESSAGES:
            match = pattern.search(text)
            if match:
                problems.append(dict(match.groupdict(), kind=kind, text=text))
    return {"shortage": shortage, "cannot_allocate": bool(shortage), "problems": problems}


def _event_times(event):
    """(first, last, precise): when the event was first and last seen, and whether the first is the API's microsecond
    eventTime. Otherwise it is a whole second (firstTimestamp, creationTimestamp): the event happened within it."""
    metadata = event.get("metadata") or {}
    series = event.get("series") or {}
    precise = parse_time(event.get("eventTime"))
    first = precise or parse_time(event.get("firstTimestamp")) or parse_time(metadata.get("creationTimestamp"))
    last = (parse_time(series.get("lastObservedTime")) or parse_time(event.get("lastTimestamp")) or first)
    return first, last, precise is not None


def _pod_filter(pods):
    """pods: names, or dicts with name and/or uid -> (names, uids) to keep; None keeps everything."""
    if pods is None:
        return None, None
    names, uids = set(), set()
    for pod in pods:
        if isinstance(pod, dict):
            if pod.get("uid"):
                uids.add(pod["uid"])
            elif pod.get("name"):
                names.add(pod["name"])
        else:
            names.add(str(pod))
    return names, uids


def event_timeline(events, pods=None, since=None):
    """core/v1 Events -> rows like the Events table of ``kubectl describe pod``, oldest first.

    ``pods`` keeps the events of these pods (names, or dicts with ``uid``: a uid is exact, a name
    also matches earlier pods of the same name); ``since`` (epoch seconds) drops older events.
    Each row: ``at`` (ISO), ``at_epoch``, ``last_at``, ``count``, ``type``, ``reason``, ``source``
    (``default-scheduler``, ``kubelet``), ``object`` (``pod/gpu-demo-hold``), ``pod``, ``message``.
    """
    names, uids = _pod_filter(pods)
    rows = []
    for event in events or []:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if involved.get("kind", "Pod") != "Pod":
            continue
        if names is not None and involved.get("uid") not in uids and involved.get("name") not in names:
            continue
        first, last, precise = _event_times(event)
        if since is not None and (last or 0) < since - 1:
            continue
        source = event.get("source") or {}
        series = event.get("series") or {}
        rows.append({
            "at": iso(first),
            "at_epoch": first,
            "precise": precise,
            "last_at": iso(last),
            "count": event.get("count") or series.get("count") or 1,
            "type": event.get("type") or "Normal",
            "reason": event.get("reason") or "",
            "source": (source.get("component") or event.get("reportingComponent")
                       or event.get("reportingController") or ""),
            "object": "pod/{0}".format(involved.get("name")),
            "pod": involved.get("name"),
            "message": (event.get("message") or event.get("note") or "").strip(),
        })
    _place_causally(rows)
    rows.sort(key=lambda row: (row["placed_epoch"], LIFE_ORDER.get(row["reason"], 9), row["at_epoch"] or 0))
    return rows


# The order a pod's events follow one another in its life.
LIFE_ORDER = {"FailedScheduling": 0, "Scheduled": 1, "Pulling": 2, "Pulled": 3, "Created": 4, "Started": 5, "Killing": 6}


def _place_causally(rows):
    """Each row's ``placed_epoch``: where it goes in the table, never before an event of its pod that it follows.

    The kubelet can record its first events a few milliseconds before the scheduler's Scheduled event of the same pod
    is written: nothing happens on a node before the pod is bound to it. And a whole-second event (``precise`` false)
    happened somewhere within its second: one that follows an event of its pod later in that second goes after it.
    """
    by_pod = {}
    for row in rows:
        row["placed_epoch"] = row["at_epoch"] or 0
        by_pod.setdefault(row["pod"], []).append(row)
    for pod_rows in by_pod.values():
        bound = min((row["placed_epoch"] for row in pod_rows if row["reason"] == "Scheduled"), default=None)
        latest = None
        for row in sorted(pod_rows, key=lambda row: (LIFE_ORDER.get(row["reason"], 9), row["placed_epoch"])):
            step = LIFE_ORDER.get(row["reason"])
            if bound is not None and (step is None or step > 1):
                row["placed_epoch"] = max(row["placed_epoch"], bound)
            if step is None:
                # Not a step of a pod's life (a warning, say): placed by its own time only.
                continue
            if not row["precise"] and latest is not None and row["placed_epoch"] <= latest < row["placed_epoch"] + 1:
                row["placed_epoch"] = latest
            latest = row["placed_epoch"] if latest is None else max(latest, row["placed_epoch"])
