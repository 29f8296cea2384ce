# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Node names the first cause (verdict.message, the condition and the Event): a GPU that turned Unhealthy once
handed over leads, before the ledger it emptied, in the first sentence; what follows from it is said to; the message is
cut only at the Event's 1 KiB and never before the cause."""

import copy
import json
from pathlib import Path

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo import verdict
from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.rows import result_row

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "gpu_demo_results"
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
NOW = 1764580000
UUID = "GPU-0a9c1f3e-7b21-4d5e-9c8a-5f2e1d0c9b8a"
# The ledger's words as the queue phase wrote them when the Unhealthy GPU left allocatable 0.
LEDGER = ("ledger nvidia.com/gpu on prod102: allocatable 0, requested 1, free -1; held by gpu-demo-hold (1); "
          "pending on it: gpu-demo-queue") + " (more of the ledger's words)" * 8


def unhealthy_once_allocated():
    """A run whose hold got a GPU that the kubelet then reported Unhealthy: in the walk's order, the ledger's check
    comes first."""
    result = copy.deepcopy(PASSED)
    failed = [{"id": "ledger_full", "phase": "queue", "passed": False, "detail": LEDGER},
              {"id": "hold_devices_healthy", "phase": "queue", "passed": False,
               "detail": "the kubelet reports Unhealthy: {0} in pod gpu-demo-hold".format(UUID)},
              {"id": "ledger_restored", "phase": "cleanup", "passed": False, "detail": "allocatable 0, before 1"}]
    result.update(passed=False, failed_checks=[check["id"] for check in failed], checks=result["checks"] + failed,
                  failure={"phase": "queue", "task": "Queue | Stop unless", "message": LEDGER})
    return result


def test_the_unhealthy_device_leads_the_row_the_condition_and_the_event():
    result = unhealthy_once_allocated()
    row = result_row("prod102", result)
    assert (row["check"], row["failed_checks"]) == ("hold_devices_healthy", ["hold_devices_healthy", "ledger_full", "ledger_restored"])
    found = verdict.verdict_of_result(result, NOW)
    first_sentence = "GPU pre-flight failed at queue (hold_devices_healthy): the kubelet reports Unhealthy: {0} in pod " \
                     "gpu-demo-hold; ledger_full, ledger_restored follow from it; run p1".format(UUID)
    assert verdict.condition(found, now=NOW)["message"] == first_sentence
    note = verdict.event(found, {"metadata": {"name": "prod102", "uid": "u1"}}, NOW, "controller")["note"]
    assert note == first_sentence and note.split(";")[0].count("Unhealthy") == 1 and UUID in note.split(";")[0]


def test_checks_that_do_not_follow_from_the_cause_are_said_as_such():
    result = unhealthy_once_allocated()
    result["checks"].append({"id": "vllm_unchanged", "phase": "cleanup", "passed": False, "detail": "503 after, 200 before"})
    message = verdict.message(verdict.verdict_of_result(result, NOW))
    assert message.endswith("; ledger_full, ledger_restored follow from it; also failed: vllm_unchanged; run p1"), message


def test_the_message_is_cut_at_the_events_limit_and_never_before_the_cause():
    result = unhealthy_once_allocated()
    result["checks"][-2]["detail"] = "the kubelet reports Unhealthy: " + "; ".join(
        "GPU-{0:04d} in pod gpu-demo-hold-{0}".format(index) for index in range(60))
    found = verdict.verdict_of_result(result, NOW)
    note = verdict.event(found, {"metadata": {"name": "prod102"}}, NOW, "controller")["note"]
    assert len(note) <= verdict.EVENT_NOTE_LIMIT == 1024 and note.endswith("…; ledger_full, ledger_restored follow from it; run p1"), note
    assert note.startswith("GPU pre-flight failed at queue (hold_devices_healthy): the kubelet reports Unhealthy: GPU-0000")
    # Within a tighter limit, what follows from the cause gives way first, then the detail's end; the cause stays.
    tight = verdict.message(found, 200)
    assert len(tight) <= 200 and "follow from it" not in tight and tight.endswith("…; run p1"), tight
    assert tight.startswith("GPU pre-flight failed at queue (hold_devices_healthy): the kubelet reports Unhealthy: GPU-0000")


def test_a_cause_that_comes_first_in_the_walk_still_leads_alone():
    result = copy.deepcopy(PASSED)
    check = {"id": "hold_one_gpu_per_unit", "phase": "hold", "passed": False, "detail": "2 unit(s), 1 GPU"}
    result.update(passed=False, checks=result["checks"] + [check])
    assert verdict.message(verdict.verdict_of_result(result, NOW)) == \
        "GPU pre-flight failed at hold (hold_one_gpu_per_unit): 2 unit(s), 1 GPU; run p1"
