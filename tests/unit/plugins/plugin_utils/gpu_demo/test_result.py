# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's run put into its result (plugin_utils/_gpu_demo/result.py): what passed, what failed and why, the times
and the reports' places, judged by nothing but the pieces it is given."""

import copy

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.scheduling.plugins.filter.gpu_demo import gpu_demo_result
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.result import assemble

CHECKS_URL = "https://docs.example.invalid/checks.md"
HOLD = {"metadata": {"name": "gpu-demo-hold"}}
SETTINGS = {"node": "prod102", "run_id": "20261204t101500-abcdef", "namespace": "gpu-operator", "resource": "nvidia.com/gpu",
            "image": "vllm/vllm-openai:latest", "check_mode": False, "checks_url": CHECKS_URL, "queue_name": "gpu-demo-queue",
            "gate": None, "report_base": "/srv/reports/gpu-demo-prod102-20261204t101500-abcdef", "write_report": True,
            "report_configmap": {"namespace": "gpu-operator", "name": "gpu-preflight-report-prod102-20261204t101500-abcdef"},
            "started": 1796292900.0, "finished": 1796292914.25}
BEFORE = {"capacity": 1, "allocatable": 1, "requested": 0, "held_by_others": 0, "allocation": "device_plugin",
          "taints": [{"key": "gpuops.io/preflight", "effect": "NoSchedule"}]}
PASSED_CHECKS = [{"id": "node_found", "phase": "preflight", "passed": True, "detail": "node prod102 found"},
                 {"id": "queue_insufficient", "phase": "queue", "passed": True, "detail": "Insufficient nvidia.com/gpu"}]


def wait(elapsed, pod, created, running=None, gone=None):
    transitions = {pod: {state: moment for state, moment in (("created", created), ("running", running), ("deleted", gone))
                         if moment is not None}}
    return {"met": True, "elapsed": elapsed, "transitions": transitions, "pods": []}


WAITS = {"hold": wait(1.5, "gpu-demo-hold", 1796292901.0, 1796292902.5),
         "queue": wait(1.0, "gpu-demo-queue", 1796292903.0),
         "release": wait(2.0, "gpu-demo-hold", 1796292903.0, 1796292902.5, 1796292905.0),
         "cleanup": {"met": True, "elapsed": 0.75, "events": [{"reason": "Scheduled"}], "transitions": {}},
         "probe": {"skipped": True}}
JUDGED = {"before": BEFORE, "plan": {"units": 1}, "manifests": {"hold": [HOLD], "queue": [], "probe": []},
          "walk": {"during": {"free": 0}, "hold_summary": {"distinct_uuids": ["GPU-1"]}, "queue_scheduling": {"reason": "x"},
                   "queue_evidence": {"uuids": ["GPU-1"]}},
          "walked": True, "dra": False, "dra_claims": False, "checks": PASSED_CHECKS, "failure": None,
          "after": {"allocatable": 1}, "probe": {}, "node_processes": {}, "leftovers": [],
          "lock": {"lease": {"holder": "run-1"}, "previous": None}}


def test_a_walk_that_went_through_passes_with_its_times_and_its_reports_places():
    result = assemble(JUDGED, WAITS, SETTINGS)
    assert (result["passed"], result["failed_checks"], result["failure"]) == (True, [], None)
    assert result["allocation"] == "device_plugin" and result["check_mode"] is False
    assert [check.get("url") for check in result["checks"]] == [None, None]
    assert result["durations"] == {"total": 14.25, "hold_running": 1.5, "queue_refused": 1.0,
                                   "release_to_queue_succeeded": 2.0, "delete": 0.75, "walk": 5.25, "cleanup": None,
                                   "occupied_window": result["timeline"]["window"]["seconds"]}
    assert result["started_at"] == "2026-12-03T10:15:00Z"
    assert result["report_files"] == {"json": SETTINGS["report_base"] + ".json", "markdown": SETTINGS["report_base"] + ".md",
                                      "svg": SETTINGS["report_base"] + ".svg"}
    assert result["report_configmap"] == SETTINGS["report_configmap"]
    assert result["queue"] == {"name": "gpu-demo-queue", "failed_scheduling": {"reason": "x"}, "evidence": {"uuids": ["GPU-1"]}}
    assert result["lock"] == {"holder": "run-1", "took_over": None}
    assert result["events"] == [{"reason": "Scheduled"}] and result["gate"] is None
    assert result["timeline"]["window"]["seconds"] == 4.0 and result["timeline"]["held"] is True


def test_only_a_failed_check_fails_the_run_and_links_to_its_entry():
    not_judged = {"id": "hold_devices_healthy", "phase": "hold", "passed": None, "detail": "not judged"}
    failed = {"id": "vllm_unchanged", "phase": "cleanup", "passed": False, "detail": "vLLM lost its GPU"}
    judged = dict(JUDGED, checks=PASSED_CHECKS + [not_judged, failed])
    result = assemble(judged, WAITS, SETTINGS)
    assert (result["passed"], result["failed_checks"]) == (False, ["vllm_unchanged"])
    assert result["checks"][-1]["url"].startswith(CHECKS_URL) and result["checks"][-2].get("url") is None
    # What ended the run fails it even when every check it made passed.
    stopped = assemble(dict(JUDGED, failure={"phase": "hold", "task": "t", "message": "m"}), WAITS, SETTINGS)
    assert stopped["passed"] is False and stopped["failure"]["phase"] == "hold"


def test_a_walk_that_stopped_counts_the_removal_as_cleanup_and_a_run_that_held_nothing_has_no_walk_time():
    stopped = assemble(dict(JUDGED, walked=False), WAITS, SETTINGS)["durations"]
    assert (stopped["delete"], stopped["cleanup"], stopped["walk"]) == (None, 0.75, 4.5)
    refused = assemble(dict(JUDGED, walked=False), {"cleanup": {"skipped": True}, "hold": {"skipped": True}}, SETTINGS)
    assert refused["durations"]["walk"] is None and refused["durations"]["cleanup"] is None
    assert refused["timeline"]["window"] is None and refused["durations"]["occupied_window"] is None


@pytest.mark.parametrize("before, dra, claims, allocation", [
    (dict(BEFORE, capacity=0), False, False, None),
    (dict(BEFORE, allocation="dra"), True, True, "dra"),
    (dict(BEFORE, allocation="dra"), True, False, "dra_extended_resource"),
])
def test_the_allocation_path_is_the_nodes_or_none_without_gpus(before, dra, claims, allocation):
    assert assemble(dict(JUDGED, before=before, dra=dra, dra_claims=claims), WAITS, SETTINGS)["allocation"] == allocation


def test_gate_mode_says_whether_the_node_carried_the_startup_taint():
    gate = {"taint": "gpuops.io/preflight", "remove": True}
    assert assemble(JUDGED, WAITS, dict(SETTINGS, gate=gate))["gate"] == dict(gate, present=True)
    untainted = dict(JUDGED, before=dict(BEFORE, taints=[]))
    assert assemble(untainted, WAITS, dict(SETTINGS, gate=gate))["gate"]["present"] is False


def test_check_mode_writes_no_report_and_keeps_none_in_the_cluster():
    result = assemble(JUDGED, WAITS, dict(SETTINGS, check_mode=True, write_report=False, report_configmap=None))
    assert (result["check_mode"], result["report_files"], result["report_configmap"]) == (True, {}, None)


def test_the_pieces_are_not_changed():
    judged, waits = copy.deepcopy(JUDGED), copy.deepcopy(WAITS)
    assemble(judged, waits, SETTINGS)
    assert (judged, waits) == (JUDGED, WAITS)


def test_a_missing_setting_or_a_wrong_input_is_refused_by_name():
    with pytest.raises(AnsibleFilterError, match="gpu_demo_result: missing setting.*report_base"):
        gpu_demo_result(JUDGED, WAITS, {key: value for key, value in SETTINGS.items() if key != "report_base"})
    with pytest.raises(AnsibleFilterError, match="gpu_demo_result: expects"):
        gpu_demo_result([], WAITS, SETTINGS)
