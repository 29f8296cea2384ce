# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The gpu_demo cleanup's judgement: is the node as the demo found it?

From the last pod_wait that deleted the run's pods and read the node (the walk's delete step, or the cleanup's
own call after a failed step), the node's before-state (preflight.py) and the inference server's health after
the demo, returns the after-state and the cleanup checks: no pod of the run left, the ledger as it was, the
inference server as healthy as it was. Python rather than Jinja for the reason preflight.py gives.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import check
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.dra import ledger_words
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.judging import k8s_deleted, pod_ids, reason, resource_entry


def judge_cleanup(final, before, vllm_after, settings):
    """``final``: the pod_wait result that saw the run's pods gone and read the ledger; ``settings``: node,
    resource, run_id, vllm_url, and removal (the kubernetes.core.k8s task that deleted them). Returns ``after`` and
    ``checks``."""
    node, resource, url = settings["node"], settings["resource"], settings["vllm_url"]
    ledger = final.get("ledger") or {}
    entry = resource_entry(ledger, node, resource)
    holders = entry.get("holders") or []
    holder_ids, before_ids = sorted(pod_ids(holders)), sorted(pod_ids(before.get("others") or []))
    left = [pod.get("name") for pod in final.get("pods") or [] if pod.get("exists")]
    vllm = vllm_after if url else {}
    before_vllm = before.get("vllm") or {}
    met = bool(final.get("met", False))
    after = {
        "allocatable": entry.get("allocatable"), "requested": entry.get("requested"), "limits": entry.get("limits"),
        "free": entry.get("free"), "holders": holders,
        "error": "" if ledger else final.get("error") or "the ledger was not read",
        "vllm": {"checked": bool(url), "healthy": vllm.get("healthy"), "status": vllm.get("status"),
                 "latency_ms": vllm.get("latency_ms"), "error": vllm.get("error")},
    }
    if met and not left:
        gone = "deleted {0}; no pod of run {1} remains".format(", ".join(k8s_deleted(settings.get("removal"))) or "nothing left to delete",
                                                               settings["run_id"])
    else:
        gone = reason(final) or "pods remain: {0}".format(", ".join(left))
    checks = [
        check("run_pods_gone", met and not left, gone),
        check("ledger_restored", entry.get("allocatable", -1) == before.get("allocatable") and entry.get("requested", -1) == before.get("held_by_others")
              and holder_ids == before_ids,
              _restored_detail(entry, before, node, holder_ids, before_ids)),
        check("vllm_unchanged", not url or (vllm.get("healthy") == before_vllm.get("healthy") and vllm.get("status") == before_vllm.get("status")),
              "/health {0} before, {1} after".format(before_vllm.get("status") or "no answer", vllm.get("status") or "no answer")
              if url else "no inference server URL given (gpu_demo_vllm_health_url)"),
    ]
    return {"after": after, "checks": checks}


def _restored_detail(entry, before, node, holder_ids, before_ids):
    """The ledger after the run beside the one before it: a device plugin's allocatable and requested units, or (DRA)
    the devices of the class and the claims that hold them, which is all a DRA node's ledger is."""
    if entry.get("dra") or before.get("dra"):
        return "after: {0}, holders {1}; before: {2} device(s), {3} allocated to other pods' claims, holders {4}".format(
            ledger_words(entry, node) if entry else "the ledger was not read", ", ".join(holder_ids) or "none",
            before.get("allocatable"), before.get("held_by_others"), ", ".join(before_ids) or "none")
    return "after: allocatable {0}, requested {1}, holders {2}; before: allocatable {3}, requested {4} (other pods), " \
        "holders {5}".format(entry.get("allocatable", "?"), entry.get("requested", "?"), ", ".join(holder_ids) or "none",
                             before.get("allocatable"), before.get("held_by_others"), ", ".join(before_ids) or "none")
