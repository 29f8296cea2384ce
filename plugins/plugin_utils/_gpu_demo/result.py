# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""A node's run, judged, as one result: what AWX's set_stats, the run's summary, the reports and the Node's verdict
read (roles/gpu_demo/tasks/outcome.yml).

Every judgement is made elsewhere (the pre-flight, the walk, the cleanup: vars/main.yml's run state); this only puts
the judged pieces and the run's waits into the result's shape, once. Assembled in Jinja2, field by field, it was one
template per field, each evaluating the run's state again: about a second of the controller's CPU for each node.

Plain dicts in, a plain dict out.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import link_failed_checks
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.report import demo_timeline

# The walk's waits, in the order the run makes them; the cleanup's last.
WAITS = ("probe", "hold", "queue", "release", "cleanup")
SETTINGS = ("node", "run_id", "namespace", "resource", "image", "check_mode", "checks_url", "queue_name", "gate",
            "report_base", "write_report", "report_configmap", "started", "finished")


def ran(step):
    """A registered step that ran (neither absent nor skipped)."""
    return bool(step) and not step.get("skipped")


def allocation(before, dra, dra_claims):
    """How the node's GPUs reach the pods: device_plugin, dra (the run's claims), dra_extended_resource (plain
    extended-resource requests the scheduler serves through DRA); None when the node was not read or has no GPU."""
    if int(before.get("capacity") or 0) == 0:
        return None
    if dra and not dra_claims:
        return "dra_extended_resource"
    return before.get("allocation")


def gate(settings, before):
    """Gate mode: the startup taint, and whether the node carried it before the run (else the gate had nothing to lift)."""
    if not settings:
        return None
    present = [taint for taint in before.get("taints") or []
               if taint.get("key") == settings["taint"] and taint.get("effect") == "NoSchedule"]
    return {"taint": settings["taint"], "remove": bool(settings["remove"]), "present": bool(present)}


def timeline(waits, before, manifests, plan, queue_name):
    """What the SVG draws (report.demo_timeline): each hold pod's units (one each when there are several, else the
    plan's), the queue's one, the pods that held the node's units before the run."""
    hold_names = [pod["metadata"]["name"] for pod in manifests.get("hold") or []]
    units = [1] * len(hold_names) if len(hold_names) > 1 else [int(plan.get("units") or 0)]
    units_by_pod = dict(zip(hold_names, units))
    units_by_pod[queue_name] = 1
    transitions = [wait for wait in waits if "transitions" in wait]
    return demo_timeline(transitions, before.get("allocatable", 0), units_by_pod,
                         held_before=before.get("held_by_others", 0), order=hold_names + [queue_name])


def durations(waits, walked, started, finished, drawn):
    """The run's times: the whole run, each wait of the walk, the walk's waits together, the occupied window."""
    hold, queue, release, cleanup = (waits.get(name) or {} for name in ("hold", "queue", "release", "cleanup"))
    # The cleanup's wait is the walk's last step (the demo pods removed) when the walk went through, else a safety net.
    removed = cleanup.get("elapsed")
    walk = None
    if ran(hold):
        walk = round(sum(step.get("elapsed") or 0 for step in (hold, queue, release))
                     + (float(removed or 0) if walked else 0), 3)
    return {
        "total": round(float(finished) - float(started), 3),
        "hold_running": hold.get("elapsed"),
        "queue_refused": queue.get("elapsed"),
        "release_to_queue_succeeded": release.get("elapsed"),
        "delete": removed if walked else None,
        "walk": walk,
        "cleanup": None if walked else removed,
        "occupied_window": drawn["window"]["seconds"] if drawn.get("window") else None,
    }


def assemble(judged, waits, settings):
    """The run's judged pieces and its registered waits -> the result.

    ``judged``: before, plan, manifests, walk (the walk's judgement), walked, dra, dra_claims, checks, failure, after
    (the cleanup's after-state), probe, node_processes, leftovers, lock (node_lock's registered result).
    ``waits``: pod_wait's registered results by step (WAITS). ``settings``: SETTINGS."""
    missing = sorted(set(SETTINGS) - set(settings))
    if missing:
        raise ValueError("missing setting(s) {0}".format(", ".join(missing)))
    before, plan = judged.get("before") or {}, judged.get("plan") or {}
    manifests = judged.get("manifests") or {"hold": [], "queue": [], "probe": []}
    walk, checks = judged.get("walk") or {}, judged.get("checks") or []
    # A check not judged (passed None: it follows from an earlier failure) is not a failure of its own.
    failed_checks = [check["id"] for check in checks if check.get("passed") is False]
    drawn = timeline([waits.get(name) or {} for name in WAITS], before, manifests, plan, settings["queue_name"])
    lock = judged.get("lock") or {}
    base = settings["report_base"]
    checks_url = settings["checks_url"] or None
    return {
        "node": settings["node"],
        "run_id": settings["run_id"],
        "namespace": settings["namespace"],
        "resource": settings["resource"],
        "allocation": allocation(before, judged.get("dra"), judged.get("dra_claims")),
        "image": settings["image"],
        "check_mode": bool(settings["check_mode"]),
        "passed": judged.get("failure") is None and not failed_checks,
        "failed_checks": failed_checks,
        "failure": judged.get("failure"),
        # Each failed check links to its entry on the checks page (an absolute URL: the reports live on the controller).
        "checks": link_failed_checks(checks, checks_url),
        "checks_url": checks_url,
        "gate": gate(settings["gate"], before),
        "plan": plan,
        "pods": manifests,
        "before": before,
        "during": walk.get("during"),
        "after": judged.get("after") or {},
        "hold": walk.get("hold_summary"),
        "queue": {"name": settings["queue_name"], "failed_scheduling": walk.get("queue_scheduling"),
                  "evidence": walk.get("queue_evidence")},
        "probe": judged.get("probe") or {},
        "node_processes": judged.get("node_processes") or {},
        "leftovers": judged.get("leftovers") or [],
        # The expired lock of a run that died, when this run took it over (its pods are the leftovers above).
        "lock": {"holder": (lock.get("lease") or {}).get("holder"), "took_over": lock.get("previous")},
        "events": (waits.get("cleanup") or {}).get("events", []),
        "timeline": drawn,
        "durations": durations(waits, bool(judged.get("walked")), settings["started"], settings["finished"], drawn),
        "started_at": datetime.datetime.fromtimestamp(float(settings["started"]), datetime.timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%SZ"),
        "report_files": ({"json": base + ".json", "markdown": base + ".md", "svg": base + ".svg"}
                         if settings["write_report"] else {}),
        # The report kept in the cluster (report_store), which the Node's verdict names.
        "report_configmap": settings["report_configmap"],
    }
