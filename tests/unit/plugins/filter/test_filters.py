# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The filters of plugins/filter/scheduling.py (general) and gpu_demo.py (the role's own): names, errors as AnsibleFilterError."""

import json
import re
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.scheduling.plugins.filter import gpu_demo, scheduling

FILTERS = dict(scheduling.FilterModule().filters(), **gpu_demo.FilterModule().filters())
PASSED = json.loads((Path(__file__).resolve().parents[3] / "unit" / "fixtures" / "gpu_demo_results" / "gpu-a2-passed.json")
                    .read_text())
SEED = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.")


def test_filter_names():
    # The general filters and the role's private ones live in separate files, so a reader sees which is which.
    assert sorted(scheduling.FilterModule().filters()) == ["failed_scheduling", "scheduling_event_timeline"]
    assert sorted(gpu_demo.FilterModule().filters()) == [
        "gpu_demo_admission", "gpu_demo_check_links", "gpu_demo_claims_gone", "gpu_demo_cleanup", "gpu_demo_evidence", "gpu_demo_fleet_verdicts",
        "gpu_demo_manifests", "gpu_demo_phase", "gpu_demo_preflight", "gpu_demo_report_configmap", "gpu_demo_report_files", "gpu_demo_result",
        "gpu_demo_run_claims", "gpu_demo_run_id", "gpu_demo_timeline", "gpu_demo_walk"]


def test_fleet_verdicts_refuses_what_is_no_node_list():
    with pytest.raises(AnsibleFilterError, match="gpu_demo_fleet_verdicts: expects the Nodes as read"):
        FILTERS["gpu_demo_fleet_verdicts"]({"items": []})
    with pytest.raises(AnsibleFilterError, match="verdicts must be a dict by node"):
        FILTERS["gpu_demo_fleet_verdicts"]([], ["gpu-a1"])
    assert FILTERS["gpu_demo_fleet_verdicts"](None, {}, ["gpu-a1"])["not_run_reasons"] == {
        "gpu-a1": "never pre-flighted: node gpu-a1 has no verdict"}


def test_failed_scheduling_filter():
    assert FILTERS["failed_scheduling"](SEED)["insufficient"] == ["nvidia.com/gpu"]
    with pytest.raises(AnsibleFilterError, match="failed_scheduling: a FailedScheduling message must be a string"):
        FILTERS["failed_scheduling"](["not", "a", "message"])


def test_evidence_filter_rejects_non_text():
    with pytest.raises(AnsibleFilterError, match="gpu_demo_evidence"):
        FILTERS["gpu_demo_evidence"](42)


def test_timeline_filters():
    assert FILTERS["scheduling_event_timeline"]([]) == []
    timeline = FILTERS["gpu_demo_timeline"]([{"transitions": {"h": {"created": 1.0, "scheduled": 1.1, "deleted": 2.0}},
                                              "exact": {"h": ["created", "scheduled", "deleted"]}}], 1, {"h": 1})
    assert [step["free"] for step in timeline["free"]] == [1, 0, 1]


def test_run_id_is_the_given_one_else_a_new_one():
    assert FILTERS["gpu_demo_run_id"]("nightly-7") == "nightly-7"
    made = [FILTERS["gpu_demo_run_id"](given) for given in ("", None, "  ")]
    assert all(re.fullmatch(r"\d{8}t\d{6}-[0-9a-f]{6}", run_id) for run_id in made), made
    assert len(set(made)) == 3


def test_a_failure_belongs_to_the_last_phase_that_began():
    phase = gpu_demo.FilterModule().filters()["gpu_demo_phase"]
    ran, skipped = {"changed": False}, {"skipped": True, "changed": False}
    assert phase([["preflight", ran], ["lock", skipped], ["prepare", {}], ["hold", {}]]) == "preflight"
    assert phase([["preflight", ran], ["lock", ran], ["prepare", skipped], ["prepare", ran], ["hold", {}]]) == "prepare"
    assert phase([["preflight", ran], ["hold", {"failed": True, "msg": "forbidden"}], ["queue", {}]]) == "hold"
    assert phase([]) == "run"
    with pytest.raises(AnsibleFilterError, match="gpu_demo_phase: expects"):
        phase({"hold": ran})


def test_report_files_are_the_three_reports_named_as_the_result_says():
    result = dict(PASSED, report_files={"json": "/r/gpu-demo-gpu-a2-r1.json", "markdown": "/r/gpu-demo-gpu-a2-r1.md",
                                        "svg": "/r/gpu-demo-gpu-a2-r1.svg"})
    files = FILTERS["gpu_demo_report_files"](result, "zh")
    assert [item["name"] for item in files] == ["gpu-demo-gpu-a2-r1.json", "gpu-demo-gpu-a2-r1.md", "gpu-demo-gpu-a2-r1.svg"]
    assert json.loads(files[0]["content"])["node"] == PASSED["node"]
    assert files[1]["content"].startswith("# 走一遍 nvidia.com/gpu：gpu-a2 上的调度演示")
    assert files[2]["content"].lstrip().startswith("<svg")
    # The ConfigMap keeps the same texts as the files.
    configmap = FILTERS["gpu_demo_report_configmap"](result, "gpu-preflight-report-gpu-a2-r1", lang="zh", written_at="t")
    assert configmap["data"] == {"report.json": files[0]["content"], "report.zh.md": files[1]["content"]}
    # No file named, no file (the role writes none in check mode or when told not to).
    assert FILTERS["gpu_demo_report_files"](dict(PASSED, report_files={}), "en") == []


@pytest.mark.parametrize("name", ["gpu_demo_report_files", "gpu_demo_report_configmap"])
def test_report_filters_refuse_what_is_no_result(name):
    with pytest.raises(AnsibleFilterError, match=name + ": expects the run's result"):
        FILTERS[name](["not", "a", "result"], "x")


def test_a_report_that_cannot_be_rendered_names_its_template():
    with pytest.raises(AnsibleFilterError, match=r"gpu_demo_report_files: cannot render report\.fr\.md\.j2"):
        FILTERS["gpu_demo_report_files"](dict(PASSED, report_files={"markdown": "/r/x.md"}), "fr")
