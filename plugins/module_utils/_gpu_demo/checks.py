# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Every check the gpu_demo role can report: its id, its phase and what it proves, in one line.

A check's id is what users see (the report's check table, ``failed_checks`` in AWX, the verdict on the Node, the fleet
summary) and what docs/checks.md explains, one heading per id. The judges build their checks through ``check()``, which
refuses an id that is not listed here, so that no id can be reported that the page does not explain; the two checks the
role's tasks build in YAML (``verdict_permitted``, ``claims_gone``) are held to this list by a unit test that reads
the task files, as is the page.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# (id, phase, title), in the order a run reports them.
CHECKS = (
    ("node_name_valid", "preflight", "The node name is a valid Kubernetes node name that fits in a label value."),
    ("hold_outlives_waits", "preflight", "The hold pods sleep longer than the hold and queue waits together."),
    ("timeout_usable", "preflight", "The wait timeout is at least one second."),
    ("vllm_healthy_before", "preflight", "The inference server is healthy before anything is created."),
    ("node_found", "preflight", "The node exists and offers the GPU resource (device plugin) or devices of the DeviceClass (DRA)."),
    ("allocation_valid", "preflight", "The allocation path asked for is auto, device_plugin or dra."),
    ("node_ready", "preflight", "The node is Ready."),
    ("node_schedulable", "preflight", "The node is not cordoned."),
    ("node_taints_tolerated", "preflight", "The demo pods tolerate every NoSchedule and NoExecute taint of the node."),
    ("resource_allocatable", "preflight", "The node has at least one allocatable unit of the resource."),
    ("node_not_busy", "preflight", "No other pod holds a unit of the resource on the node (unless a busy node is allowed)."),
    ("extended_resource_served", "preflight", "Through DRA with plain requests, the DeviceClass serves the resource the pods ask for."),
    ("free_units", "preflight", "On a busy node that is allowed, at least one unit is free to hold."),
    ("verdict_permitted", "preflight", "The run's identity may write the verdict on the Node."),
    ("demo_pods_admitted", "preflight", "The API server admits the demo pods (a server-side dry run)."),
    ("demo_pods_never_preempt", "preflight", "The demo pods get preemptionPolicy Never from their PriorityClass."),
    ("hold_running", "hold", "The hold pods, which request every free unit, are Running on the node."),
    ("hold_never_preempts", "hold", "The running hold pods have preemptionPolicy Never."),
    ("hold_one_gpu_per_unit", "hold", "Each hold pod sees exactly as many devices as it holds units, each unit its own."),
    ("hold_env_corroborates", "hold", "What the device plugin handed over names the devices nvidia-smi shows in the pod."),
    ("hold_devices_prepared", "hold", "Through DRA, each hold pod sees the device its claim was allocated."),
    ("queue_pending", "queue", "One more pod asking for a unit stays Pending, with no node and no IP."),
    ("queue_insufficient", "queue", "The scheduler refuses it for want of the resource (Insufficient, or cannot allocate all claims)."),
    ("ledger_full", "queue", "The node's ledger reads free 0, held by the hold pods, with the queue pod pending on it."),
    ("hold_not_preempted", "queue", "The hold pods are still Running while the queue pod waits."),
    ("hold_devices_healthy", "queue", "The kubelet reports no device the hold pods were given Unhealthy."),
    ("hold_released", "release", "The hold pods are deleted."),
    ("queue_ran_on_node", "release", "The queue pod is then scheduled on the node and Succeeds."),
    ("queue_got_held_gpu", "release", "The queue pod saw a GPU the hold had."),
    ("run_pods_gone", "cleanup", "No pod of the run is left."),
    ("ledger_restored", "cleanup", "The node's ledger is what it was before the run."),
    ("vllm_unchanged", "cleanup", "The inference server answers as it did before the run."),
    ("claims_gone", "cleanup", "Through DRA, no ResourceClaim or ResourceClaimTemplate of the run is left."),
)

PHASE_OF = dict((check_id, phase) for check_id, phase, _title in CHECKS)

# Causes before their symptoms: a check whose failure makes others fail leads, whatever its place in the walk, and the
# checks it explains are said to follow from it. A device the kubelet reports Unhealthy leaves the node's allocatable
# (the ledger) short and the queue's and release's waits different; a taint the demo pods do not tolerate keeps them
# off the node.
CAUSES = (
    ("hold_devices_healthy", ("ledger_full", "ledger_restored", "queue_pending", "queue_insufficient",
                              "hold_not_preempted", "queue_ran_on_node", "queue_got_held_gpu")),
    ("hold_devices_prepared", ("hold_one_gpu_per_unit", "hold_env_corroborates", "queue_got_held_gpu")),
    ("node_taints_tolerated", ("free_units", "demo_pods_admitted", "hold_running", "queue_ran_on_node")),
)
_CAUSE_RANK = dict((check_id, rank) for rank, (check_id, _follows) in enumerate(CAUSES))
FOLLOWS = dict(CAUSES)


def cause_order(checks):
    """The failed ``checks`` with the causes first (in CAUSES' order), then the others in the walk's order."""
    return sorted(checks, key=lambda found: _CAUSE_RANK.get(found.get("id"), len(CAUSES)))


def follows_from(cause, check_ids):
    """Of ``check_ids``, those that ``cause`` (a check id) explains, in their order."""
    explained = FOLLOWS.get(cause, ())
    return [check_id for check_id in check_ids if check_id in explained]


class UnknownCheck(ValueError):
    """A check id that is not in CHECKS: a programming error, never the cluster's."""


def check(check_id, passed, detail):
    """One check as the role reports it: {id, phase, passed, detail}; its phase is the registry's."""
    if check_id not in PHASE_OF:
        raise UnknownCheck("check id {0!r} is not in plugins/module_utils/_gpu_demo/checks.py".format(check_id))
    return {"id": check_id, "phase": PHASE_OF[check_id], "passed": bool(passed), "detail": detail}


def not_judged(check_id, cause):
    """A check that could not be judged: it merely follows from an earlier failure, or what it reads is not there (no
    device health reported on this request path). Neither passed nor failed (``passed`` None), its detail naming why,
    so that it is never counted as a pass, nor as a failure of its own."""
    if check_id not in PHASE_OF:
        raise UnknownCheck("check id {0!r} is not in plugins/module_utils/_gpu_demo/checks.py".format(check_id))
    return {"id": check_id, "phase": PHASE_OF[check_id], "passed": None, "detail": "not judged: {0}".format(cause)}


# The links a report may carry: the checks page of a team's site, or the collection's own page on the controller.
LINK_SCHEMES = ("https://", "http://", "file://")


def check_url(base, check_id):
    """The link to a check's entry on the checks page: ``<base>#<check_id>`` (None without a base or an id, and for
    a base that is not an http(s) or file URL: a report never carries a javascript: or data: link)."""
    if not base or not check_id or not str(base).lower().startswith(LINK_SCHEMES):
        return None
    return "{0}#{1}".format(base, check_id)


def link_failed_checks(checks, base):
    """The checks, each failed one with ``url``, its entry on the checks page (reports live on a controller, not in
    the collection: the link is absolute, the installed collection's page by default)."""
    linked = []
    for check in checks or []:
        url = None if check.get("passed") is not False else check_url(base, check.get("id"))
        linked.append(dict(check, url=url) if url else dict(check))
    return linked
