# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""A node's row: what the role's result for a node says, as plain data (no words, no page).

The run's summary (plugins/plugin_utils/_gpu_demo_fleet.py) shows one row per node; a node's verdict (verdict.py, which
node_verdict writes on the Node) is made from the same row, so both say the same about a node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import cause_order, check_url

STATUSES = ("failed", "not_run", "checked", "passed")
# The order a run goes through; a failure's phase sorts by it.
PHASES = ("input", "lock", "preflight", "prepare", "probe", "hold", "queue", "release", "cleanup", "report", "run")
STORY = (("preflight", None), ("hold", "hold_running"), ("queue", "queue_refused"),
         ("release", "release_to_queue_succeeded"), ("cleanup", "delete"))
MIB = 1024 * 1024


def _phase(failure):
    """The phase a failure belongs to, as the role (or the play's rescue) recorded it: "run" when it did not say."""
    phase = failure.get("phase")
    return phase if phase in PHASES else "run"


def _relative(path, report_dir):
    """A per-node report's path as the summary links it: relative to the summary's directory."""
    if not path:
        return None
    if report_dir and posixpath.isabs(path) and posixpath.isabs(report_dir):
        return posixpath.relpath(path, report_dir)
    return path


def _seconds(value):
    try:
        return None if value is None else round(float(value), 3)
    except (TypeError, ValueError):
        return None


def _vllm(result):
    before = (result.get("before") or {}).get("vllm") or {}
    after = (result.get("after") or {}).get("vllm") or {}
    return {"checked": bool(before.get("checked")),
            "before": before.get("status"), "after": after.get("status") if after.get("checked") else None,
            "healthy_before": before.get("healthy"), "healthy_after": after.get("healthy") if after.get("checked") else None}


def _memory_outside_ledger(result):
    """Memory on the node's GPUs that the ledger does not account for: read on the node (node_processes: pods
    outside the ledger, host processes, unidentified), else in the hold pods (memory already used on the GPUs the
    demo held). None when neither was read."""
    audit = result.get("node_processes") or {}
    if audit.get("gpus"):
        total = sum(int((gpu.get("memory_bytes") or {}).get(key) or 0)
                    for gpu in audit["gpus"] for key in ("out_of_ledger_pod", "host", "unidentified"))
        return {"bytes": total, "mib": total // MIB, "source": "node"}
    rows = (result.get("hold") or {}).get("memory") or []
    used = [row.get("used_bytes") for row in rows if isinstance(row.get("used_bytes"), int)]
    if used:
        return {"bytes": sum(used), "mib": sum(used) // MIB, "source": "hold"}
    return None


def _gpus(result):
    hold = result.get("hold") or {}
    units = hold.get("units") or []
    if units:
        return [{"uuid": unit.get("uuid"), "name": unit.get("gpu_name"), "kind": unit.get("kind")} for unit in units]
    return [{"uuid": uuid, "name": None, "kind": None} for uuid in hold.get("distinct_uuids") or []]


def _window(result):
    timeline = result.get("timeline") or {}
    window = timeline.get("window")
    if not window:
        return None
    return {"seconds": _seconds(window.get("seconds")), "start": window.get("start"), "end": window.get("end")}


def _steps(result, failed_phase):
    """The walk's phases as the node lived them: ok, failed, or not reached (no check of that phase ran)."""
    checks = result.get("checks") or []
    durations = result.get("durations") or {}
    steps = []
    for phase, duration_key in STORY:
        own = [check for check in checks if check.get("phase") == phase]
        if phase == failed_phase or any(check.get("passed") is False for check in own):
            state = "failed"
        else:
            state = "ok" if own else "skipped"
        steps.append({"phase": phase, "state": state,
                      "seconds": _seconds(durations.get(duration_key)) if duration_key else None})
    if failed_phase and failed_phase not in [phase for phase, _key in STORY]:
        # A failure outside the walk's phases (the lock, for one) comes first: it stopped the run before them.
        steps.insert(0, {"phase": failed_phase, "state": "failed", "seconds": None})
    return steps


def _lanes(result):
    """The per-node report's pod lanes, as the summary's small timeline draws them (seconds since the first pod)."""
    timeline = result.get("timeline") or {}
    lanes = [{"pod": lane.get("pod"), "segments": [[segment.get("state"), segment.get("start"), segment.get("end")]
                                                   for segment in lane.get("segments") or []]}
             for lane in timeline.get("lanes") or []]
    window = timeline.get("window") or {}
    return {"span": _seconds(timeline.get("span")) or 0.0, "lanes": lanes,
            "window": [window.get("start_offset"), window.get("end_offset")] if window else None}


def result_row(host, result=None, failure=None, report_dir=None, checks_url=None):
    """One node's row: its status, where and why it failed, what it held and saw.

    ``result`` is the role's result for the node (``_gpu_demo_result``: the per-node JSON report), ``failure`` the
    play's record {phase, task, message} of a failure that happened outside the role's own report (bad input, for one).
    Each failed check links to its entry on the checks page: the URL the run's report gave it, else
    ``checks_url#<id>`` (none: no link). A node checked in check mode, or without a result, gets its reason from the summary.
    """
    row = {"host": host, "node": host, "status": "not_run", "phase": None, "check": None, "failed_checks": [], "not_judged": [],
           "check_url": None, "reason": None, "message": None, "task": None, "resource": None, "allocation": None, "run_id": None,
           "units": None, "gpus": [], "window": None,
           "vllm": {"checked": False, "before": None, "after": None, "healthy_before": None, "healthy_after": None},
           "memory_outside_ledger": None, "started_at": None, "total_seconds": None, "reports": {}, "checks": [],
           "steps": [], "timeline": None, "gate": None, "report_configmap": None}
    if isinstance(result, dict) and result:
        # A check not judged (passed None) follows from the failed one: it is no failure of its own.
        # The first cause leads (a device Unhealthy before the ledger it emptied): the row, the verdict on the Node and
        # its Event name it first.
        failed = cause_order([check for check in result.get("checks") or [] if check.get("passed") is False])
        error = result.get("failure") or {}
        passed = bool(result.get("passed")) and not failed and not error
        if passed:
            row["status"] = "checked" if result.get("check_mode") else "passed"
        else:
            row["status"] = "failed"
            first = failed[0] if failed else None
            row["phase"] = first.get("phase") if first else _phase(error)
            row["check"] = first.get("id") if first else None
            row["reason"] = (first.get("detail") if first else None) or error.get("message") or "error"
            row["task"] = error.get("task")
            row["message"] = error.get("message")
        plan = result.get("plan") or {}
        hold = result.get("hold") or {}
        files = result.get("report_files") or {}
        row.update(
            node=result.get("node") or host, resource=result.get("resource"), run_id=result.get("run_id"),
            # device_plugin, dra (the run's ResourceClaims) or dra_extended_resource (claims the scheduler made for plain
            # extended resource requests), none on a node without GPUs; a report of an earlier release has only the
            # before-state's device_plugin or dra.
            allocation=result["allocation"] if "allocation" in result else (result.get("before") or {}).get("allocation"),
            failed_checks=[check.get("id") for check in failed],
            # Checks that could not be judged (passed None): never a pass, nor a failure of their own.
            not_judged=[check.get("id") for check in result.get("checks") or [] if check.get("passed") is None],
            units=hold.get("units_seen") if hold.get("units_seen") else (plan.get("units") if row["status"] == "checked" else None),
            gpus=_gpus(result), window=_window(result), vllm=_vllm(result),
            memory_outside_ledger=_memory_outside_ledger(result), started_at=result.get("started_at"),
            total_seconds=_seconds((result.get("durations") or {}).get("total")),
            reports={kind: _relative(path, report_dir) for kind, path in sorted(files.items()) if path},
            # The report kept in the cluster, as <namespace>/<name> (the Node's annotation names the same).
            report_configmap="{namespace}/{name}".format(**result["report_configmap"]) if result.get("report_configmap") else None,
            # The failed ones only: the per-node report has every check.
            checks=[{"id": check.get("id"), "phase": check.get("phase"), "detail": check.get("detail"),
                     "url": check.get("url") or check_url(checks_url, check.get("id"))} for check in failed],
            steps=_steps(result, row["phase"]), timeline=_lanes(result),
            gate={"taint": result["gate"].get("taint"), "present": bool(result["gate"].get("present"))} if result.get("gate") else None)
        row["check_url"] = row["checks"][0]["url"] if row["checks"] else None
    elif isinstance(failure, dict) and failure:
        row.update(status="failed", phase=_phase(failure), task=failure.get("task"),
                   reason=failure.get("message") or "error", message=failure.get("message"))
        row["steps"] = [{"phase": row["phase"], "state": "failed", "seconds": None}]
    return row


def failure_sentence(row):
    """What the play says when it fails a node: the role's own words (its failed checks, then its failure message)."""
    return "GPU scheduling demo on %s failed: %s: %s" % (
        row["node"], ", ".join(row["failed_checks"]) or "error", row["message"] or row["reason"] or "error")
