# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The gpu_demo pre-flight's judgement of a node, before anything is created.

From the ledger (gpu_ledger_facts' result) and the inference server's health (vllm_health's), returns
the node's before-state, the plan of the hold and the pre-flight checks with their reasons. Python
rather than Jinja: the role's Jinja re-evaluated every nested variable at each use, which made this
the costliest controller-side task of a run (~0.3 s per node).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import check, not_judged
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.dra import (
    ALLOCATIONS, choose_dra_request, devices_held, extended_resource_check)
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.judging import (
    joined, pod_ids, resource_entry, unique)

# A node name that also fits in a label value (the pods carry it in gpuops.scheduling/node).
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")
REPLICAS_LABEL = "nvidia.com/gpu.replicas"


def _ours(names):
    """Pods named like this run's (hold, hold-N, queue, probe): an interrupted earlier run's leftovers."""
    hold, queue, probe = (re.escape(name) for name in names)
    return re.compile(r"^({0}(-[0-9]+)?|{1}|{2})$".format(hold, queue, probe))


def _vllm_state(url, vllm):
    return {
        "checked": bool(url),
        "url": url,
        "healthy": vllm.get("healthy"),
        "status": vllm.get("status"),
        "latency_ms": vllm.get("latency_ms"),
        "error": vllm.get("error"),
    }


def _vllm_detail(url, vllm, require_healthy):
    if vllm.get("status") is not None:
        answer = "answered {0} in {1} ms".format(vllm["status"], vllm.get("latency_ms"))
    elif vllm:
        answer = "did not answer: {0}".format(vllm.get("error") or vllm.get("msg", "no answer"))
    else:
        answer = ""
    if not vllm or vllm.get("healthy"):
        verdict = ""
    elif require_healthy:
        verdict = "; refusing the node (gpu_demo_vllm_require_healthy=true)"
    else:
        verdict = "; proceeding (gpu_demo_vllm_require_healthy=false)"
    return "inference server {0} {1}{2}".format(url or "(not checked)", answer, verdict)


def _plugin_pods_hint(node_name, operator_namespace):
    return ("kubectl -n {0} get pods -o wide --field-selector spec.nodeName={1} (the device-plugin pod, then its logs: "
            "kubectl -n {0} logs <that pod>)").format(operator_namespace or "<operator namespace>", node_name)


def _gpu_labels_say(labels):
    """The node's labels that say it has GPUs (NFD's PCI label, the operator's gpu.present, GFD's count), as text."""
    keys = ("nvidia.com/gpu.present", "nvidia.com/gpu.count", "feature.node.kubernetes.io/pci-10de.present")
    said = ["{0}={1}".format(key, labels[key]) for key in keys if key in labels and labels[key] not in ("false", "0", "")]
    return ", ".join(said)


def not_advertised_detail(node_name, resource_name, labels, operator_namespace):
    """Why a node found in the ledger does not advertise the resource at all, and where to look."""
    gpus = _gpu_labels_say(labels)
    if gpus and resource_name.startswith("nvidia.com/"):
        return ("node {0} does not advertise {1}, although its labels say it has GPUs ({2}): the NVIDIA device plugin "
                "has not registered {1} with the kubelet (not running on the node, or failing at start). Look at {3}, "
                "then at the node's Capacity: kubectl describe node {0}").format(
            node_name, resource_name, gpus, _plugin_pods_hint(node_name, operator_namespace))
    return ("node {0} does not advertise {1}: no device plugin on it offers that resource. Check the resource name "
            "(gpu_demo_resource) against what the node offers: kubectl get node {0} -o jsonpath='{{.status.allocatable}}'"
            ).format(node_name, resource_name)


def allocatable_detail(node_name, resource_name, capacity, allocatable, labels, operator_namespace):
    """The allocatable check's reason: the count, and when it is 0, the likely cause and where to look."""
    text = "allocatable {0} = {1}".format(resource_name, allocatable)
    if allocatable > 0:
        return text
    if int(capacity or 0) > 0:
        return ("{0} while its capacity is {1}: the kubelet counts none of the node's devices as healthy. Either the "
                "device plugin stopped (the kubelet then marks its devices unhealthy) or it reports every device "
                "Unhealthy (an XID error, a GPU fallen off the bus). Look at {2}, and at nvidia-smi on the node; "
                "kubectl describe node {3} shows Capacity against Allocatable").format(
            text, capacity, _plugin_pods_hint(node_name, operator_namespace), node_name)
    if labels.get("nvidia.com/mig.strategy") == "mixed":
        return ("{0}: the node's GPUs are split into MIG devices (nvidia.com/mig.strategy=mixed), which it advertises as "
                "nvidia.com/mig-* resources: set gpu_demo_resource to one of them (kubectl get node {1} -o "
                "jsonpath='{{.status.allocatable}}')").format(text, node_name)
    gpus = _gpu_labels_say(labels)
    if gpus:
        return ("{0} (capacity 0) although its labels say it has GPUs ({1}): the device plugin has not registered its "
                "devices with the kubelet. Look at {2}").format(text, gpus, _plugin_pods_hint(node_name, operator_namespace))
    return "{0} (capacity 0): the node offers no unit of it (kubectl describe node {1})".format(text, node_name)


def judge_node(ledger_result, vllm_result, settings):
    """{before, plan, checks} of the pre-flight.

    ledger_result: gpu_ledger_facts' registered result (C(ledger) absent when it failed, then C(msg)).
    vllm_result: vllm_health's registered result, or {} when no URL is checked.
    settings: node, resource, namespace, pod_names (hold, queue, probe), hold_mode, hold_seconds, timeout,
    allow_busy_node, vllm_url, vllm_require_healthy; through DRA also allocation ("dra"; ``resource`` is then the
    DeviceClass), allocation_wanted, dra_request (gpu_demo_dra_request) and extended_resource (gpu_demo_resource).
    """
    node_name, resource_name = settings["node"], settings["resource"]
    vllm = vllm_result or {}
    found = "ledger" in ledger_result
    ledger = ledger_result.get("ledger") or {}
    node = (ledger.get("nodes") or {}).get(node_name) or {} if found else {}
    resource = resource_entry(ledger, node_name, resource_name) if found else {}
    dra = settings.get("allocation") == "dra"
    holders = resource.get("holders") or []
    ours = _ours(settings["pod_names"])
    leftovers = [pod for pod in holders if pod.get("namespace") == settings["namespace"] and ours.match(pod.get("name") or "")]
    others = [pod for pod in holders if pod not in leftovers]
    allocatable = int(resource.get("allocatable") or 0)
    held_by_others = sum(int(pod.get("units") or 0) for pod in others)
    held_phrases = None
    if dra and "claims" in resource:
        # Through DRA the scheduler counts devices: a claim shared by several pods holds its devices once, and an
        # allocated claim reserved for no pod holds them too.
        held_by_others, held_phrases = devices_held(resource["claims"], lambda pod: pod.get("namespace") == settings[
            "namespace"] and bool(ours.match(pod.get("name") or "")))
    free_for_demo = max(allocatable - held_by_others, 0)
    labels = node.get("labels") or {}
    replicas = int(labels.get(REPLICAS_LABEL, 1)) if resource_name.startswith("nvidia.com/gpu") and not dra else 1
    hold_seconds, timeout = int(settings["hold_seconds"]), int(settings["timeout"])
    allow_busy = bool(settings["allow_busy_node"])
    url = settings.get("vllm_url") or ""

    before = {
        "node": node_name,
        "resource": resource_name,
        "found": found,
        "error": "" if found else ledger_result.get("msg", ""),
        "ready": node.get("ready", False),
        "unschedulable": node.get("unschedulable", False),
        "labels": labels,
        "taints": node.get("taints") or [],
        "operator_running": node.get("operator_running") or {},
        "capacity": resource.get("capacity", 0),
        "allocatable": allocatable,
        "requested": resource.get("requested", 0),
        "limits": resource.get("limits", 0),
        "free": resource.get("free", 0),
        "holders": holders,
        "held_by_others": held_by_others,
        "others": others,
        "leftovers": leftovers,
        "pending": ledger.get("pending") or [],
        "vllm": _vllm_state(url, vllm),
        "allocation": "dra" if dra else "device_plugin",
        "node_allocation": node.get("allocation"),
        "dra": resource.get("dra") if dra else None,
        # The DRA reads these credentials may not make (gpu_ledger_facts' dra_refused): the walk is the device plugin's.
        "dra_refused": ledger.get("dra_refused"),
        "dra_served": ledger.get("dra_served"),
    }
    # Through DRA: the pods' own claims, or plain requests of the extended resource the class serves (dra_request).
    dra_request = choose_dra_request(settings.get("dra_request", "claim"), resource,
                                     settings.get("extended_resource") or "nvidia.com/gpu") if dra else None
    plan = {"units": free_for_demo, "replicas": replicas, "mode": settings["hold_mode"]}
    if dra:
        plan["dra_request"] = dra_request
        if (resource.get("dra") or {}).get("evaluated") is False:
            plan["selector_evaluated"] = False

    name_valid = bool(NODE_NAME.match(node_name))
    advertised = found and bool(resource)
    operator_namespace = (ledger.get("operator") or {}).get("namespace")
    found_detail = ("node {0} advertises {1}".format(node_name, resource_name) if advertised
                    else not_advertised_detail(node_name, resource_name, labels, operator_namespace))
    if dra and found:
        found_detail = _dra_found_detail(node_name, resource_name, resource, ledger, node)
        advertised = advertised and ledger.get("dra_served") is not False and not ledger.get("dra_refused")
    elif advertised and ledger.get("dra_refused"):
        found_detail += " (walked through the device plugin; {0})".format(ledger["dra_refused"])
    elif advertised and ledger.get("dra_served") is False:
        found_detail += (" (walked through the device plugin; the API server does not serve resource.k8s.io/v1, so no GPU "
                         "is allocated through Dynamic Resource Allocation here)")
    checks = [
        check("node_name_valid", name_valid,
              "node name '{0}' {1} a valid node name that fits in a label value (at most 63 characters: a-z, 0-9, "
              "'-', '.'){2}".format(node_name, "is" if name_valid else "is not",
                                    "" if name_valid else ": set gpu_demo_node to the name kubectl get nodes shows")),
        check("hold_outlives_waits", hold_seconds > 2 * timeout,
              "gpu_demo_hold_seconds ({0}) {1} twice gpu_demo_timeout ({2}): the hold must outlive the hold and "
              "queue waits{3}".format(settings["hold_seconds"], "exceeds" if hold_seconds > 2 * timeout else "must exceed",
                                      settings["timeout"], "" if hold_seconds > 2 * timeout else
                                      " (leave gpu_demo_hold_seconds unset: by default it follows from the timeouts)")),
        check("timeout_usable", timeout >= 1,
              "gpu_demo_timeout ({0}) {1} at least 1 second: with 0 no wait, not even the cleanup's, could see the "
              "pods go".format(settings["timeout"], "is" if timeout >= 1 else "must be")),
        # Before/after health only proves the demo did not disturb a server that was healthy to begin with.
        check("vllm_healthy_before", not settings["vllm_require_healthy"] or not vllm or bool(vllm.get("healthy")),
              _vllm_detail(url, vllm, settings["vllm_require_healthy"])),
        check("node_found", advertised, found_detail if found else ledger_result.get("msg") or "the ledger could not be read"),
    ]
    wanted = settings.get("allocation_wanted", "auto")
    if wanted not in ALLOCATIONS:
        checks.append(check("allocation_valid", False,
                            "gpu_demo_allocation is {0!r}: it must be one of {1}".format(wanted, ", ".join(ALLOCATIONS))))
    unit = "device" if held_phrases is not None else "unit"
    # A node that cannot be read gets one clear reason, not every check failing after it.
    if advertised:
        ready, cordoned = bool(node.get("ready", False)), bool(node.get("unschedulable", False))
        if held_by_others == 0:
            busy = "no other pod holds " + resource_name
        else:
            busy = ("; ".join(held_phrases) if held_phrases is not None else "{0} unit(s) held by {1}".format(
                held_by_others, ", ".join(pod_ids(others)))) + (
                "; allowed by gpu_demo_allow_busy_node, the hold takes the {0} free {1}(s)".format(free_for_demo, unit)
                if allow_busy else "; refusing a busy node (gpu_demo_allow_busy_node=false): wait for them to end, or set "
                "gpu_demo_allow_busy_node=true to hold only the free {0}s (kubectl get pods -A --field-selector "
                "spec.nodeName={1})".format(unit, node_name))
        allocatable_text = allocatable_detail(node_name, resource_name, resource.get("capacity", 0), allocatable, labels,
                                              operator_namespace)
        if dra:
            allocatable_text = _dra_allocatable_detail(node_name, resource_name, resource, held_by_others)
        checks += [
            check("node_ready", ready,
                  "node {0} is {1}".format(node_name, "Ready" if ready else (
                      "not Ready: the scheduler places nothing there until its kubelet reports Ready. Look at its conditions "
                      "(kubectl describe node {0}) and at the kubelet's log on the node").format(node_name))),
            check("node_schedulable", not cordoned,
                  "node {0} is {1}".format(node_name, (
                      "cordoned (spec.unschedulable): the scheduler places no new pod there. Uncordon it when it may take "
                      "work (kubectl uncordon {0})").format(node_name) if cordoned else "schedulable")),
        ]
        if settings.get("tolerations") is not None:
            checks.append(taints_check(node_name, node.get("taints") or [], settings["tolerations"], ready, cordoned))
        checks += [
            check("resource_allocatable", allocatable > 0, allocatable_text),
            check("node_not_busy", held_by_others == 0 or allow_busy, busy),
        ]
        if dra_request == "extended_resource":
            checks.append(extended_resource_check(resource, resource_name, settings.get("extended_resource") or "nvidia.com/gpu",
                                                  settings.get("dra_request", "claim")))
    if allow_busy:
        checks.append(check("free_units", free_for_demo > 0,
                            "{0} free {1}(s) of {2} to hold{3}".format(
                                free_for_demo, unit, resource_name, "" if free_for_demo > 0 else
                                ": other pods hold every {0}; run again when one ends (kubectl get pods -A --field-selector "
                                "spec.nodeName={1})".format(unit, node_name))))
    return {"before": before, "plan": plan, "checks": checks}


def _dra_allocatable_detail(node_name, device_class, entry, held_by_others):
    """The allocatable devices of the class, and the tainted ones the scheduler does not hand out, with their taints."""
    text = "{0} device(s) of DeviceClass {1} on {2} ({3} allocated to other claims)".format(
        entry.get("allocatable", 0), device_class, node_name, held_by_others)
    if (entry.get("dra") or {}).get("evaluated") is False:
        # Not established here: how many of the node's devices the class selects is the scheduler's to say.
        text = ("up to {0} device(s) of DeviceClass {1} on {2} ({3} allocated to other claims): {4}").format(
            entry.get("allocatable", 0), device_class, node_name, held_by_others, NOT_EVALUATED.format(device_class))
    tainted = [device for device in (entry.get("dra") or {}).get("devices") or []
               if device.get("tainted") and not device.get("allocated")]
    if tainted:
        text += "; {0} more not allocatable, tainted by the driver: {1}{2}".format(
            len(tainted), "; ".join("{0} {1} ({2})".format(device["name"], device.get("uuid"), ", ".join(device.get("taints") or []))
                                    for device in tainted),
            "" if entry.get("allocatable") else ". The driver taints a device it finds failing (an XID error, a GPU "
            "lost): look at the driver's log and nvidia-smi on the node (kubectl get resourceslices --field-selector "
            "spec.nodeName={0} -o yaml shows the taints)".format(node_name))
    return text


def _dra_found_detail(node_name, device_class, entry, ledger, node):
    """Why a node can or cannot be walked through DRA with ``device_class``: the credentials, the API, the class, the
    node's devices."""
    if ledger.get("dra_refused"):
        return "node {0} cannot be walked through DRA: {1}".format(node_name, ledger["dra_refused"])
    if ledger.get("dra_served") is False:
        return ("the API server does not serve resource.k8s.io/v1 (Dynamic Resource Allocation): node {0} cannot be walked "
                "through DRA".format(node_name))
    classes = ledger.get("device_classes")
    if classes is not None and device_class not in classes:
        return "DeviceClass {0} does not exist; the cluster has: {1}".format(device_class, joined(classes, "no DeviceClass"))
    if not entry:
        drivers = sorted(((node.get("dra") or {}).get("drivers") or {}))
        return "node {0} publishes no device of DeviceClass {1} in its ResourceSlices ({2})".format(
            node_name, device_class, "drivers: " + ", ".join(drivers) if drivers else "no ResourceSlice names it")
    info = entry["dra"]
    if info.get("evaluated") is False:
        return ("node {0} publishes {1} device(s) through DRA that DeviceClass {2} may select (driver {3}, pool {4}): {5}; "
                "{6}").format(node_name, entry["capacity"], device_class, joined(info["drivers"], "?"),
                              joined(info["pools"], "?"),
                              joined(["{0} {1}".format(device["name"], device.get("uuid")) for device in info["devices"]], "none"),
                              NOT_EVALUATED.format(device_class))
    return "node {0} publishes {1} device(s) of DeviceClass {2} through DRA (driver {3}, pool {4}): {5}".format(
        node_name, entry["capacity"], device_class, joined(info["drivers"], "?"), joined(info["pools"], "?"),
        joined(["{0} {1}".format(device["name"], device.get("uuid")) for device in info["devices"]], "none"))


NOT_EVALUATED = ("the selector of DeviceClass {0} could not be evaluated here (CEL beyond the driver and attribute "
                 "equalities this collection reads), so which of these devices it selects is left to the scheduler: the hold "
                 "asks for each of them, and its outcome judges the node")

# Taint effects the scheduler's TaintToleration filter honours: PreferNoSchedule only scores.
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
# Taints that the node_ready and node_schedulable checks already name the cause of.
_FOLLOWS_NOT_READY = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_FOLLOWS_CORDON = ("node.kubernetes.io/unschedulable",)


def tolerates(toleration, taint):
    """Whether a pod's toleration tolerates a node's taint, as Kubernetes decides (core/v1 Toleration.ToleratesTaint):
    an empty effect matches every effect, an empty key (operator Exists) every key, operator Exists any value, Equal
    (or none) the same value."""
    toleration = toleration or {}
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    same_value = (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists" or (operator == "Equal" and same_value)


def untolerated_taints(taints, tolerations):
    """The node's NoSchedule and NoExecute taints that none of ``tolerations`` tolerates, in the node's order."""
    return [taint for taint in taints or [] if taint.get("effect") in BLOCKING_EFFECTS
            and not any(tolerates(toleration, taint) for toleration in tolerations or [])]


def _taint_text(taint):
    return "{0}{1}:{2}".format(taint.get("key"), "=" + taint["value"] if taint.get("value") else "", taint.get("effect"))


def taints_check(node_name, taints, tolerations, ready=True, cordoned=False):
    """The pre-flight's check of the node's taints against the demo pods' tolerations (gpu_demo_tolerations and, in gate
    mode, the startup taint's): each taint they do not tolerate is named, with the toleration that would."""
    follows = (_FOLLOWS_NOT_READY if not ready else ()) + (_FOLLOWS_CORDON if cordoned else ())
    blocking = [taint for taint in untolerated_taints(taints, tolerations) if taint.get("key") not in follows]
    if not blocking:
        tolerated = [_taint_text(taint) for taint in taints or [] if taint.get("effect") in BLOCKING_EFFECTS]
        return check("node_taints_tolerated", True,
                     "the demo pods tolerate every NoSchedule and NoExecute taint of node {0}{1}".format(
                         node_name, ": " + ", ".join(tolerated) if tolerated else " (it has none)"))
    return check("node_taints_tolerated", False, (
        "node {0} has {1} taint(s) the demo pods do not tolerate, so the scheduler would place none of them there: {2}. "
        "If the demo may run beside what the taint keeps away, add a toleration to gpu_demo_tolerations (for example "
        "{3}); otherwise remove the taint when the node may take work (kubectl taint node {0} {4}-)").format(
        node_name, len(blocking),
        "; ".join("key {0}, value {1}, effect {2}".format(taint.get("key"), taint.get("value") or "(none)", taint.get("effect"))
                  for taint in blocking),
        ", ".join(_example_toleration(taint) for taint in blocking), _taint_text(blocking[0])))


def _example_toleration(taint):
    if taint.get("value"):
        return "{{key: {0}, operator: Equal, value: {1}, effect: {2}}}".format(taint.get("key"), taint["value"], taint.get("effect"))
    return "{{key: {0}, operator: Exists, effect: {1}}}".format(taint.get("key"), taint.get("effect"))


def judge_admission(admission, priority_class, create_priority_class, leftovers=()):
    """{priority_class_missing, checks} from the pre-flight's dry run (the pod_admission module's result).

    The API server's dry run of the demo pods says whether it admits them and with which preemption policy (the
    PriorityClass's). A missing PriorityClass that the run will create is no refusal. A dry run refused for another
    reason says nothing about preemption: one reason, not two. A name taken by a pod an interrupted earlier run left
    (``leftovers``: their names) is no refusal either: those pods are removed under the run's lock, and the demo pods
    asked about again then. Nothing asked (a node refused before the dry run): no check.
    """
    if admission.get("failed"):
        return {"priority_class_missing": False, "checks": [check("demo_pods_admitted", False, (
            "the server-side dry run of the demo pods could not be made: {0}").format(admission.get("msg") or "no answer"))]}
    objects = admission.get("objects") or []
    if not objects:
        return {"priority_class_missing": False, "checks": []}
    in_the_way = [item for item in objects if not item.get("admitted") and item.get("reason") == "AlreadyExists"
                  and item.get("name") in leftovers]
    refused = [item for item in objects if not item.get("admitted") and item not in in_the_way]
    messages = unique(item.get("message") or item.get("reason") or "refused" for item in refused)
    error = "; ".join(messages)
    missing_class = bool(refused) and all("no PriorityClass with name" in message for message in messages)
    will_create = missing_class and bool(create_priority_class)
    # Through DRA the claim templates are admitted too: preemption is the pods' alone.
    admitted = [item for item in objects if item.get("admitted")]
    pods = [item for item in admitted if item.get("kind", "Pod") == "Pod"]
    templates = len(admitted) - len(pods)
    policies = [item.get("preemption_policy") for item in pods]
    never = bool(policies) and all(policy == "Never" for policy in policies)
    missing_namespace = re.search(r'namespaces "([^"]+)" not found', error)
    if not refused:
        admitted_detail = "the API server admits the {0} demo pod(s){1} (dry run)".format(
            len(pods), " and {0} ResourceClaimTemplate(s)".format(templates) if templates else "")
        if in_the_way:
            admitted_detail += "; {0} is taken by a pod an earlier run left, removed before the walk".format(
                joined([item.get("name") for item in in_the_way], "?"))
    elif missing_namespace:
        admitted_detail = ("namespace {0} does not exist: the demo creates its pods there. Create it (kubectl create "
                           "namespace {0}) or set gpu_demo_namespace to an existing one").format(missing_namespace.group(1))
    elif will_create:
        admitted_detail = ("PriorityClass {0} does not exist yet: the run creates it (value 0, preemptionPolicy Never)"
                           .format(priority_class))
    elif missing_class:
        admitted_detail = ("{0}: create PriorityClass {1} (value 0, preemptionPolicy Never), or let the run create it "
                           "(gpu_demo_create_priority_class=true; needs create on priorityclasses)").format(error, priority_class)
    else:
        admitted_detail = ("the server-side dry run of the demo pods failed: {0} (kubectl apply --dry-run=server -f "
                           "<the pods> shows the same)").format(error)
    if will_create:
        never_detail = "the run creates PriorityClass {0} with preemptionPolicy Never".format(priority_class)
    else:
        never_detail = "PriorityClass {0} gives the demo pods preemptionPolicy {1}{2}".format(
            priority_class, joined(unique(policies), "unknown"),
            "" if never else ": it must be Never, so that a demo pod never evicts anything")
    checks = [check("demo_pods_admitted", not refused or will_create, admitted_detail)]
    if not pods and in_the_way and not refused:
        checks.append(not_judged("demo_pods_never_preempt", "every demo pod's name is taken by a pod an earlier run left; "
                                 "they are asked about again once those are removed"))
    elif not refused or will_create:   # a refusal for another reason says nothing about preemption
        checks.append(check("demo_pods_never_preempt", will_create or never, never_detail))
    return {"priority_class_missing": missing_class, "checks": checks}


def verdict_access_check(node_name, access):
    """Whether this identity may write the verdict on the node, from node_verdict's access answer (a
    SelfSubjectAccessReview per write); None when it was not asked or could not answer (an API that cannot be reached
    is already the ledger's failure, node_found: one reason, not two)."""
    if not isinstance(access, dict) or "allowed" not in access:
        return None
    if access["allowed"]:
        return check("verdict_permitted", True, "this identity may write the verdict on node {0}".format(node_name))
    return check("verdict_permitted", False, (
        "this identity may not write the verdict on node {0}: it lacks {1} (grant them with playbooks/preflight_rbac.yml, "
        "or set gpu_demo_verdict: false)").format(node_name, "; ".join(access.get("missing") or [])))
