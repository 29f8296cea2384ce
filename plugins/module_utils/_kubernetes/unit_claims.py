# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Who took a released unit: pure, from the node's pods and its allocatable count.

When a pre-flight deletes its hold, the scheduler gives the freed unit to whichever Pending pod it picks: ours,
or someone else's (a training job of higher priority, pinned to the node). Then our queue pod stays Pending and
only a timeout would end the wait, naming nobody. The unit is someone else's when, while our pod still waits
unscheduled, a pod that is not ours was bound to the node at or after the moment the unit was freed, asks for the
resource, and the node's ledger is full again: nothing is left for our pod until that pod ends.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.ledger import (
    ResourceFilter,
    as_number,
    is_terminated,
    parse_quantity,
    pod_requests,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.pod_wait import (
    iso,
    parse_time,
    pod_condition,
)


def _bound_at(pod):
    """When the scheduler bound the pod (its PodScheduled condition turned True), in epoch seconds."""
    scheduled = pod_condition(pod, "PodScheduled") or {}
    return parse_time(scheduled.get("lastTransitionTime")) if scheduled.get("status") == "True" else None


def node_allocatable(node, resource):
    return parse_quantity(((node or {}).get("status") or {}).get("allocatable", {}).get(resource, 0))


def foreign_claim(node_pods, allocatable, resource, since, is_ours):
    """The pod that took the freed unit, as {namespace, name, priority, priority_class, bound_at, units}, or None.

    ``node_pods``: the pods bound to the node (any namespace, plain API dicts); ``allocatable``: the node's count of
    ``resource``; ``since``: epoch seconds when the unit was freed (API times have whole seconds: a pod bound in that
    second counts); ``is_ours``: whether a pod is the run's own. The caller asks only while its pod waits unscheduled.
    """
    wanted = ResourceFilter((resource,))
    requests = ((pod, pod_requests(pod, wanted).get(resource) or 0) for pod in node_pods if not is_terminated(pod))
    holders = [(pod, units) for pod, units in requests if units]
    if sum(units for _pod, units in holders) < allocatable:
        # A unit is still free: the scheduler may yet give it to our pod.
        return None
    floor = int(since)
    taken = [(bound, pod, units) for pod, units in holders if not is_ours(pod)
             for bound in [_bound_at(pod)] if bound is not None and bound >= floor]
    if not taken:
        return None
    bound, pod, units = min(taken, key=lambda item: item[0])
    metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    return {"namespace": metadata.get("namespace"), "name": metadata.get("name"), "priority": spec.get("priority"),
            "priority_class": spec.get("priorityClassName"), "bound_at": iso(bound), "units": as_number(units)}


def foreign_claim_message(claim, node, resource, waiting):
    """The wait's failure: who took the unit, and that the run leaves it alone."""
    return ("pod {0}/{1} (priority {2}{3}) was bound to node {4} at {5}, after the hold released {6}, and took the unit: "
            "{7} stays Pending with the node's {6} full again. That pod is not the pre-flight's and is left alone; run "
            "again when it has ended").format(
        claim["namespace"], claim["name"], claim["priority"] if claim["priority"] is not None else "unset",
        ", PriorityClass {0}".format(claim["priority_class"]) if claim["priority_class"] else "", node, claim["bound_at"],
        resource, waiting)
