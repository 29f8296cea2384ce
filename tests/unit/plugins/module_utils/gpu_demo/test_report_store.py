# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's report kept in the cluster (module_utils/_gpu_demo/report_store.py), from a real per-node result: the
ConfigMap holds the report's texts unchanged, under the 1 MiB limit it says what it cut, and a run deletes only the
oldest of its own reports."""

import copy
import json
from pathlib import Path

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo import report_store

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "gpu_demo_results"
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())


def texts(result):
    return json.dumps(result, indent=2), "# Report\n\n节点 {0}\n".format(result["node"])


def test_the_configmap_holds_both_texts_unchanged_and_is_labelled_by_node_and_run():
    json_text, markdown = texts(PASSED)
    made = report_store.configmap(PASSED, "gpu-preflight-report-x", json_text, markdown, lang="zh",
                                  written_at="2026-12-02T10:00:00.000001Z")
    assert made["data"] == {"report.json": json_text, "report.zh.md": markdown}
    assert json.loads(made["data"]["report.json"]) == PASSED
    assert made["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpuops.scheduling", "gpuops.scheduling/report": "gpu-preflight",
        "gpuops.scheduling/node": PASSED["node"], "gpuops.scheduling/run-id": PASSED["run_id"]}
    assert made["metadata"]["namespace"] == PASSED["namespace"]
    assert report_store.CUT_ANNOTATION not in made["metadata"]["annotations"]


def test_over_the_limit_the_markdown_goes_first_then_the_raw_records_and_the_annotation_says_so():
    json_text, markdown = texts(PASSED)
    limit = len(json_text.encode()) + len("report.json") + 10
    made = report_store.configmap(PASSED, "n", json_text, markdown * 50, limit=limit)
    assert list(made["data"]) == ["report.json"] and made["data"]["report.json"] == json_text
    assert "report.en.md" in made["metadata"]["annotations"][report_store.CUT_ANNOTATION]

    big = copy.deepcopy(PASSED)
    big["events"] = [{"message": "x" * 1000}] * 200
    json_text, markdown = texts(big)
    made = report_store.configmap(big, "n", json_text, markdown, limit=len(json_text) // 2)
    kept = json.loads(made["data"]["report.json"])
    assert "events" not in kept and kept["checks"] == PASSED["checks"]
    assert sum(len(k) + len(v.encode()) for k, v in made["data"].items()) <= len(json_text) // 2
    assert "report.json.events" in made["metadata"]["annotations"][report_store.CUT_ANNOTATION]

    with pytest.raises(report_store.ReportStoreError, match="over 100 bytes"):
        report_store.configmap(big, "n", json_text, markdown, limit=100)


def item(name, written, labels=None):
    return {"metadata": {"name": name, "creationTimestamp": "2026-12-02T10:00:00Z",
                         "annotations": {report_store.WRITTEN_ANNOTATION: written},
                         "labels": report_store.labels("n1", name) if labels is None else labels}}


def test_the_oldest_beyond_kept_are_pruned_never_the_current_one_nor_another_tools():
    items = [item("r3", "2026-12-02T10:00:03.000000Z"), item("r1", "2026-12-02T10:00:01.000000Z"),
             item("r4", "2026-12-02T10:00:04.000000Z"), item("r2", "2026-12-02T10:00:01.500000Z"),
             item("foreign", "2026-01-01T00:00:00.000000Z", labels={"gpuops.scheduling/node": "n1"})]
    assert report_store.to_prune(items, 3, current="r4") == ["r1"]
    assert report_store.to_prune(items, 1, current="r4") == ["r1", "r2", "r3"]
    assert report_store.to_prune(items, 5, current="r4") == []
    # The current run's report, even if its clock ran behind, stays.
    assert report_store.to_prune(items, 1, current="r1") == ["r2", "r3", "r4"]
    with pytest.raises(report_store.ReportStoreError):
        report_store.to_prune(items, 0, current="r4")
