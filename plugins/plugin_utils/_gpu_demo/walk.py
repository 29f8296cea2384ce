# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The gpu_demo walk's judgement: what the hold, the queue and the release steps saw, against the walkthrough.

From what each step of the walk registered (pod_wait's waits for the hold, the queue and the release;
kubernetes.core.k8s's deletion of the hold) returns each step's
result (a step that did not run says so), the hold's GPU evidence, the queue's FailedScheduling and ledger,
the queue pod's evidence, and the checks of each phase in order. Judging stops after the first
phase with a failed check, as the run does. Python rather than Jinja for the reason preflight.py gives:
three judges in Jinja were a fifth of the controller's time per node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import check, not_judged
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.dra import judge_prepared_devices, ledger_words
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.device_health import add_queue_pod_health, judge_hold_health
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.report import hold_evidence, hold_summary, unit_noun
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.judging import (
    as_int,
    joined,
    k8s_deleted,
    reason,
    resource_entry,
    unique,
)

PHASES = ("hold", "queue", "release")


def step_results(waits, hold_removal=None):
    """Each wait's result by name; a wait that did not run (never reached, or skipped) gets met false and why.

    ``waits``: pod_wait's registered results by step name; ``hold_removal``: the kubernetes.core.k8s deletion of
    the hold (the release's result gets its names as ``deleted``).
    """
    results = {}
    for name in PHASES:
        result = waits.get(name) or {}
        results[name] = result if "met" in result else {"met": False, "error": "not run", "pods": []}
    results["release"] = dict(results["release"], deleted=k8s_deleted(hold_removal))
    return results


def judge_hold(hold, hold_names, plan, node, resource):
    """The first task: pods that together request every free unit run on the node and print their GPUs."""
    # One pod per unit, or one pod with every unit (see pod.yaml.j2).
    units = [1] * len(hold_names) if len(hold_names) > 1 else [as_int(plan.get("units"))]
    pods = [pod for pod in hold.get("pods") or [] if pod.get("name") in hold_names]
    summary = hold_summary(pods, dict(zip(hold_names, units)), plan.get("replicas"))
    met = bool(hold.get("met", False))
    policies = [pod.get("preemption_policy") for pod in pods]
    # With MIG the units are MIG devices: the hand-over names them, not their parent GPUs.
    devices = unit_noun(summary["unit_kind"])
    checks_detail = hand_over_detail(summary, devices)
    # Where the pre-flight could not evaluate the DeviceClass's selector, the hold asked for every device it may select.
    unevaluated = "" if plan.get("selector_evaluated", True) else (
        "; the selector of DeviceClass {0} could not be evaluated before the run: the hold asked for the {1} device(s) "
        "it may select, and the scheduler may select fewer".format(resource, sum(units)))
    checks = [
        check("hold_running", met,
              "{0} hold pod(s) Running on {1} with {2} unit(s) of {3} after {4} s".format(
                  len(hold_names), node, sum(units), resource, hold.get("elapsed")) if met else
              (reason(hold) or "") + _warnings(hold, hold_names) + unevaluated),
        check("hold_never_preempts", bool(pods) and all(policy == "Never" for policy in policies),
              "hold pods have preemptionPolicy {0}".format(joined(unique(policies), "unknown"))),
        check("hold_one_gpu_per_unit", summary["one_gpu_per_unit"],
              "nvidia-smi -L in the hold pods shows {0} device(s) for {1} unit(s), {2} distinct ({3}){4}".format(
                  summary["units_seen"], summary["units_expected"], len(summary["distinct_uuids"]),
                  joined([describe_unit(unit) for unit in sorted(summary["units"], key=lambda unit: unit["uuid"])], "none"),
                  ", up to {0} units per GPU (time-slicing)".format(summary["replicas"]) if summary["replicas"] > 1 else "")
              + "".join("; {0} is shown in more than {1} hold pod{2}".format(uuid, summary["replicas"], "s" if summary["replicas"] > 1 else "")
                        for uuid in summary["shared"])),
        check("hold_env_corroborates", summary["corroborated"], checks_detail),
    ]
    # Through DRA the hold's wait also read the ledger: each pod's claim names the device it must have been given.
    entry = resource_entry(hold.get("ledger") or {}, node, resource)
    if entry.get("dra"):
        if summary["corroborated"]:
            words = ("the DRA driver {0} hands the GPUs over as the CDI devices of each claim (the container runtime "
                     "injects the device nodes their spec names, NVIDIA_VISIBLE_DEVICES is {1}); nvidia-smi -L is the evidence")
            checks[-1]["detail"] = words.format(joined(entry["dra"]["drivers"], "?"), joined(summary["visible_devices_modes"], "unset"))
        checks.append(judge_prepared_devices(summary, entry, hold_names))
    if not met:
        # Pods that never ran show no GPU: what they would have shown follows from the first cause, not judged.
        cause = "hold_running failed first ({0})".format(checks[0]["detail"])
        checks = [not_judged(item["id"], cause) if item["id"] in FOLLOW_THE_HOLD else item for item in checks]
    return summary, checks


# The hold checks that read what running hold pods printed.
FOLLOW_THE_HOLD = ("hold_one_gpu_per_unit", "hold_env_corroborates", "hold_devices_prepared")


def _warnings(wait, names):
    """The Warning events of these pods that the wait read (a kubelet that cannot prepare a pod's claims says
    FailedPrepareDynamicResources), as a sentence to add to a failure."""
    seen = unique("{0} {1}: {2}".format(row.get("pod"), row.get("reason"), row.get("message"))
                  for row in wait.get("events") or [] if row.get("type") == "Warning" and row.get("pod") in names)
    return "; pod events: " + "; ".join(seen) if seen else ""


def hand_over_detail(summary, devices):
    """The hand-over check's detail: how the device plugin handed the devices over, in words, and whether the names
    it gave are the devices nvidia-smi shows (naming both where they differ)."""
    words = summary["handover_text"]["en"] or "no hold pod printed its evidence"
    named = [entry for entry in summary["pods"] if entry["named"]]
    if not summary["corroborated"]:
        wrong = [entry for entry in summary["pods"] if entry["corroborated"] is False]
        return "{0}, but {1}".format(words, "; ".join(
            "{0} is given {1} and nvidia-smi shows {2}".format(
                entry["name"], joined(entry["named"], "none"), joined(entry["unit_uuids"], "no device")) for entry in wrong))
    if named and all(entry["named"] and entry["named"][0].startswith(("GPU-", "MIG-")) for entry in named):
        return "{0}: they name the {1} nvidia-smi shows".format(words, devices)
    if named:
        return "{0}: as many of them, and of the same kind, as the {1} nvidia-smi shows (indexes are renumbered inside a container)".format(
            words, devices)
    return "{0}; nvidia-smi -L is the evidence".format(words)


def describe_unit(unit):
    """A unit as a check's detail names it: the GPU's UUID, or the MIG device's with its profile and parent."""
    if unit["kind"] == "mig":
        return "{0} ({1} on {2})".format(unit["uuid"], unit["profile"], unit["gpu_uuid"])
    return unit["uuid"]


def judge_queue(queue, hold_names, plan, node, resource, namespace, queue_name):
    """The second task: one more pod has nowhere to go, the ledger reads free 0, nothing is preempted."""
    pods = queue.get("pods") or []
    pod = next((item for item in pods if item.get("name") == queue_name), {})
    holds = [item for item in pods if item.get("name") in hold_names]
    scheduling = (queue.get("failed_scheduling") or [None])[0] or {}
    ledger = queue.get("ledger") or {}
    entry = resource_entry(ledger, node, resource)
    holding = [item for item in entry.get("holders") or []
               if item.get("namespace") == namespace and item.get("name") in hold_names]
    pending = [item for item in ledger.get("pending") or []
               if item.get("namespace") == namespace and item.get("name") == queue_name]
    held_units = sum(as_int(item.get("units")) for item in holding)
    parsed = scheduling.get("parsed") or {}
    # A device plugin's shortage reads "Insufficient <resource>"; DRA's "cannot allocate all claims".
    refused = resource in (parsed.get("insufficient") or []) or bool(entry.get("dra")) and bool(
        (parsed.get("dra") or {}).get("cannot_allocate"))
    during = {"allocatable": entry.get("allocatable"), "requested": entry.get("requested"), "limits": entry.get("limits"),
              "free": entry.get("free"), "holders": entry.get("holders", []), "pending": ledger.get("pending", []),
              "dra": entry.get("dra")}
    met = bool(queue.get("met", False))
    checks = [
        check("queue_pending", met and pod.get("phase") == "Pending" and not pod.get("node_name") and not pod.get("pod_ip"),
              "{0}: {1}, node {2}, IP {3}{4}".format(
                  queue_name, pod.get("phase", "not found"), pod.get("node_name") or "<none>", pod.get("pod_ip") or "<none>",
                  "" if met else ": {0}".format(reason(queue)))),
        check("queue_insufficient", refused,
              "FailedScheduling{0}: {1}".format(
                  "" if scheduling.get("from_event", True) else " (PodScheduled condition)",
                  scheduling.get("message", "no FailedScheduling event"))),
        check("ledger_full", entry.get("free", -1) == 0 and held_units == as_int(plan.get("units")) and len(pending) == 1,
              _ledger_full_detail(entry, node, resource, held_units, queue_name, pending, ledger)),
        check("hold_not_preempted", len(holds) == len(hold_names) and all(item.get("phase") == "Running" for item in holds)
              and not any(item.get("deletion_timestamp") for item in holds),
              "hold pods while the queue pod waits: {0}".format(
                  joined(["{0} {1}".format(item.get("name"), item.get("phase")) for item in holds], "none found"))),
    ]
    if pod.get("node_name") and not checks[0]["passed"]:
        # A queue pod the scheduler placed has no refusal to read, and the ledger then has room by definition: both
        # follow from the first cause.
        cause = "queue_pending failed first ({0})".format(checks[0]["detail"])
        checks = [not_judged(item["id"], cause) if item["id"] in FOLLOW_THE_QUEUE else item for item in checks]
    return scheduling, during, checks


def _ledger_full_detail(entry, node, resource, held_units, queue_name, pending, ledger):
    """What the ledger read while the queue pod waited: the node's allocatable and requested units of a device plugin's
    resource, or (DRA) the devices of the class and the claims that hold them (kubectl get resourceclaims -A)."""
    waiting = "{0} is {1}{2}".format(queue_name, "pending on the resource" if pending else "not pending on it",
                                     "" if ledger else " (ledger not read)")
    if entry.get("dra"):
        return "{0}; free {1}; the hold pods' claims hold {2}; {3}".format(
            ledger_words(entry, node), entry.get("free", "?"), held_units, waiting)
    return "ledger {0} on {1}: allocatable {2}, requested {3}, free {4}; the hold pods account for {5}; {6}".format(
        resource, node, entry.get("allocatable", "?"), entry.get("requested", "?"), entry.get("free", "?"), held_units,
        waiting)


# The queue checks that only hold while the queue pod is refused.
FOLLOW_THE_QUEUE = ("queue_insufficient", "ledger_full")


def judge_release(release, hold_names, held_uuids, node, queue_name):
    """The hand-off: the hold is deleted, the queue pod runs on the node, on a GPU the hold had, and ends."""
    pods = release.get("pods") or []
    pod = next((item for item in pods if item.get("name") == queue_name), {})
    left = [item.get("name") for item in pods if item.get("name") in hold_names and item.get("exists")]
    deleted = release.get("deleted") or []
    evidence = hold_evidence(pod.get("log") or "")
    seen = evidence["unit_uuids"]
    met = bool(release.get("met", False))
    still = ", still terminating: {0}".format(", ".join(left)) if left else ", gone"
    checks = [
        check("hold_released", len(deleted) == len(hold_names),
              "deleted {0}{1}".format(joined(deleted, "nothing"), still)),
        check("queue_ran_on_node", met and pod.get("node_name") == node and pod.get("phase") == "Succeeded",
              "{0}: {1} on {2}{3}".format(
                  queue_name, pod.get("phase", "not found"), pod.get("node_name") or "<none>",
                  " after {0} s".format(release.get("elapsed")) if met else ": {0}".format(reason(release)))),
        check("queue_got_held_gpu", bool(seen) and not [uuid for uuid in seen if uuid not in held_uuids],
              "the queue pod saw {0}; the hold had {1}".format(
                  joined([describe_unit(unit) for unit in evidence["units"]], "no GPU"), joined(unique(held_uuids), "none"))),
    ]
    return evidence, checks


def judge_walk(waits, manifests, plan, settings, hold_removal=None, through="release"):
    """The walk's registered results -> steps, evidence and the checks of each phase up to the first that failed.

    ``waits``, ``hold_removal``: as step_results takes them; ``settings``: node, resource, namespace, queue_name.
    ``through``: the last phase the run reached (its first step ran), None when it reached none. Each phase up to it is
    judged, in order, from what its wait registered (a wait that did not run fails its phase: "not run"); a phase the
    run did not reach is not judged. Judging is a pure function of the registered results, so the role reads it the
    same way wherever it needs it: in a wait's failed_when (the phase that wait ends) and in the report.
    ``stop``: the failed checks' details of the phase judged last, empty when the walk goes on.
    """
    node, resource, queue_name = settings["node"], settings["resource"], settings["queue_name"]
    hold_names = [(manifest.get("metadata") or {}).get("name") for manifest in manifests.get("hold") or []]
    steps = step_results(waits, hold_removal)
    judged = {"steps": steps, "phases": [], "hold_summary": {}, "queue_scheduling": {}, "during": {}, "queue_evidence": {},
              "checks": [], "stop": ""}
    reached = PHASES[:PHASES.index(through) + 1] if through else ()
    for name in reached:
        if name == "hold":
            summary, checks = judge_hold(steps["hold"], hold_names, plan, node, resource)
            judged["hold_summary"] = summary
        elif name == "queue":
            scheduling, during, checks = judge_queue(steps["queue"], hold_names, plan, node, resource, settings["namespace"],
                                                     queue_name)
            # The hold's GPUs as the kubelet last reported them, from the hold's wait and the queue's (a GPU may fail
            # while the queue pod waits).
            device_health, health_check = judge_hold_health([steps["hold"].get("pods"), steps["queue"].get("pods")], hold_names)
            checks.append(health_check)
            judged.update(queue_scheduling=scheduling, during=during,
                          hold_summary=dict(judged["hold_summary"], device_health=device_health))
        else:
            evidence, checks = judge_release(steps["release"], hold_names, judged["hold_summary"].get("unit_uuids") or [],
                                             node, queue_name)
            evidence["device_health"] = add_queue_pod_health(checks, steps["release"], queue_name)
            judged["queue_evidence"] = evidence
        judged.update(checks=judged["checks"] + checks, phases=judged["phases"] + [name])
        # A check not judged (passed None) only follows from the failed one: the failed one says why the walk stops.
        judged["stop"] = "; ".join(check["detail"] for check in checks if check["passed"] is False)
        if judged["stop"]:
            break   # judging stops after the first phase with a failed check, as the run does
    return judged


def reached_phase(started, phases=PHASES):
    """The last of ``phases`` whose first step ran, from those steps' registered results in the same order (a step
    skipped, or never reached, registered nothing or ``skipped``); None when none ran. A phase may be named more than
    once, for each of its steps that may come first."""
    ran = [name for name, result in zip(phases, started) if isinstance(result, dict) and result and not result.get("skipped")]
    return ran[-1] if ran else None
