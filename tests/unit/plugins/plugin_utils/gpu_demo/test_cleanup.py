# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_demo cleanup's judgement (plugin_utils/_gpu_demo/cleanup.py): is the node as the demo found it?"""

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.scheduling.plugins.filter.gpu_demo import gpu_demo_cleanup
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.cleanup import judge_cleanup

# removal: kubernetes.core.k8s state=absent's result for the one pod it deleted.
SETTINGS = {"node": "prod102", "resource": "nvidia.com/gpu", "run_id": "20261130t021500-1a2b3c",
            "vllm_url": "http://127.0.0.1:18000/health",
            "removal": {"changed": True, "result": {"metadata": {"name": "gpu-demo-queue"}}}}
VLLM = {"healthy": True, "status": 200, "latency_ms": 3.1, "error": None}
BEFORE = {"allocatable": 1, "held_by_others": 0, "others": [], "vllm": dict(VLLM)}


def deleted(holders=(), left=(), met=True):
    ledger = {"nodes": {"prod102": {"resources": {"nvidia.com/gpu": {
        "allocatable": 1, "requested": sum(holder["units"] for holder in holders), "limits": 0, "free": 1,
        "holders": list(holders)}}}}}
    return {"met": met, "ledger": ledger,
            "pods": [{"name": name, "exists": True} for name in left] + [{"name": "gpu-demo-queue", "exists": False}]}


def checks(judged):
    return dict((check["id"], (check["passed"], check["detail"])) for check in judged["checks"])


def test_a_node_left_as_found():
    judged = judge_cleanup(deleted(), BEFORE, VLLM, SETTINGS)
    assert checks(judged) == {
        "run_pods_gone": (True, "deleted gpu-demo-queue; no pod of run 20261130t021500-1a2b3c remains"),
        "ledger_restored": (True, "after: allocatable 1, requested 0, holders none; before: allocatable 1, requested 0 "
                                  "(other pods), holders none"),
        "vllm_unchanged": (True, "/health 200 before, 200 after"),
    }
    assert judged["after"]["error"] == "" and judged["after"]["free"] == 1
    assert judged["after"]["vllm"] == {"checked": True, "healthy": True, "status": 200, "latency_ms": 3.1, "error": None}


def test_a_pod_left_behind_and_a_new_holder_fail_the_cleanup():
    holder = {"namespace": "team-a", "name": "train-0", "units": 1}
    final = dict(deleted(holders=[holder], left=["gpu-demo-hold"], met=False), error="timed out after 5s")
    judged = judge_cleanup(final, BEFORE, dict(VLLM, status=503, healthy=False), SETTINGS)
    assert checks(judged) == {
        "run_pods_gone": (False, "timed out after 5s"),
        "ledger_restored": (False, "after: allocatable 1, requested 1, holders team-a/train-0; before: allocatable 1, "
                                   "requested 0 (other pods), holders none"),
        "vllm_unchanged": (False, "/health 200 before, 503 after"),
    }
    assert checks(judge_cleanup(deleted(left=["gpu-demo-hold"]), BEFORE, VLLM, SETTINGS))["run_pods_gone"] == (
        False, "pods remain: gpu-demo-hold")


def test_other_holders_found_before_are_expected_after():
    holder = {"namespace": "prod", "name": "vllm-0", "units": 1}
    before = dict(BEFORE, held_by_others=1, others=[holder])
    assert checks(judge_cleanup(deleted(holders=[holder]), before, VLLM, SETTINGS))["ledger_restored"][0] is True


def test_a_ledger_that_was_not_read_and_no_inference_server():
    final = {"met": False, "error": "could not reach https://127.0.0.1:16443", "pods": []}
    judged = judge_cleanup(final, BEFORE, {"skipped": True}, dict(SETTINGS, vllm_url=""))
    assert judged["after"]["error"] == "could not reach https://127.0.0.1:16443"
    assert checks(judged)["ledger_restored"] == (False, "after: allocatable ?, requested ?, holders none; before: "
                                                        "allocatable 1, requested 0 (other pods), holders none")
    assert checks(judged)["vllm_unchanged"] == (True, "no inference server URL given (gpu_demo_vllm_health_url)")
    assert judged["after"]["vllm"]["checked"] is False and judged["after"]["vllm"]["status"] is None
    assert judge_cleanup({"met": False}, BEFORE, {}, SETTINGS)["after"]["error"] == "the ledger was not read"


def test_the_filter_names_what_is_missing_or_wrong():
    with pytest.raises(AnsibleFilterError, match=r"missing setting\(s\) run_id, vllm_url"):
        gpu_demo_cleanup(deleted(), BEFORE, VLLM, node="n", resource="r")
    with pytest.raises(AnsibleFilterError, match="expects the last delete's registered pod_wait result"):
        gpu_demo_cleanup(deleted(), None, VLLM, **SETTINGS)
