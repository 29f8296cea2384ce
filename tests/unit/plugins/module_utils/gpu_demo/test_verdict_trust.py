# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A verdict is believed only as far as the API server's record of its write allows (verdict.distrust): written by the
collection's field manager, and dated no later than that write plus the clock-skew allowance. Fed the wrong worlds: a
report annotation rewritten with kubectl annotate, one re-dated 30 days ahead under our own manager's name, a label
rewritten by hand, a Node with no record at all."""

import copy
import json
from pathlib import Path

from api_server_writes import apply_writes, managed_fields, rewrite_annotation, stamp

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo import verdict
from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _gpu_demo_fleet as fleet
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import fleet_html, fleet_markdown

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "gpu_demo_results"
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
NOW = 1764580000   # 2025-12-01T09:06:40Z
DAY = 86400


def written(name="gpu-a2", at=NOW, result=PASSED):
    node = {"metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}, "annotations": {}},
            "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    found = verdict.verdict_of_result(result, at)
    return apply_writes(node, verdict.node_writes(found, node, now=at), at)


def annotated(node, when, manager, **changes):
    """The report annotation rewritten (a plausible JSON, its fields changed) by ``manager`` at ``when``."""
    report = dict(json.loads(node["metadata"]["annotations"][verdict.REPORT_ANNOTATION]), **changes)
    return rewrite_annotation(node, verdict.REPORT_ANNOTATION, verdict.compact_json(report), manager, when)


def test_a_verdict_the_collection_wrote_is_trusted():
    assert verdict.distrust(verdict.read_verdict(written()), written()) == []


def test_a_report_rewritten_with_kubectl_annotate_is_not_trusted_and_names_the_writer():
    node = annotated(written(at=NOW - 3600), NOW - 60, "kubectl-annotate", at=stamp(NOW - 60), run_id="forged")
    assert verdict.distrust(verdict.read_verdict(node), node) == [
        "its report annotation was written by kubectl-annotate at {0}, not by a pre-flight: not trusted".format(
            stamp(NOW - 60))]


def test_a_verdict_dated_30_days_ahead_of_its_write_is_not_trusted_even_under_our_managers_name():
    node = annotated(written(at=NOW), NOW, verdict.FIELD_MANAGER, at=stamp(NOW + 30 * DAY))
    assert verdict.distrust(verdict.read_verdict(node), node) == [
        "dated 30 days ahead of the API server's record of the write ({0}): not trusted".format(stamp(NOW))]


def test_a_clock_a_little_ahead_is_allowed_and_more_is_not():
    node = annotated(written(at=NOW), NOW, verdict.FIELD_MANAGER, at=stamp(NOW + verdict.CLOCK_SKEW))
    assert verdict.distrust(verdict.read_verdict(node), node) == []
    node = annotated(written(at=NOW), NOW, verdict.FIELD_MANAGER, at=stamp(NOW + verdict.CLOCK_SKEW + 60))
    assert verdict.distrust(verdict.read_verdict(node), node) == [
        "dated 6 minutes ahead of the API server's record of the write ({0}): not trusted".format(stamp(NOW))]


def test_a_label_written_by_hand_is_not_trusted():
    node = written()
    for entry in node["metadata"]["managedFields"]:
        entry["fieldsV1"]["f:metadata"].pop("f:labels", None) if "f:metadata" in entry["fieldsV1"] else None
    node["metadata"]["managedFields"] += managed_fields("kubectl-label", NOW + 5, labels=[verdict.LABEL])
    assert verdict.distrust(verdict.read_verdict(node), node) == [
        "its label was written by kubectl-label at {0}, not by a pre-flight: not trusted".format(stamp(NOW + 5))]


def test_a_node_with_no_record_of_its_writers_is_not_trusted():
    node = written()
    del node["metadata"]["managedFields"]
    assert verdict.distrust(verdict.read_verdict(node), node) == [
        "the API server has no record of who wrote its report annotation or its label or its condition: not trusted"]


def test_the_fleet_reads_an_untrusted_verdict_as_no_result_and_walks_it_again_like_a_stale_one():
    nodes = [written("fresh"), annotated(written("forged", at=NOW - 3600), NOW - 60, "kubectl-annotate", at=stamp(NOW - 60)),
             annotated(written("ahead"), NOW, verdict.FIELD_MANAGER, at=stamp(NOW + 30 * DAY))]
    names, results, reasons = verdict.fleet_inputs(nodes, now=NOW + 60, max_age=DAY)
    assert list(results) == ["fresh"]
    assert reasons["forged"].startswith("not trusted: passed at {0} (run ".format(stamp(NOW - 60)))
    assert reasons["forged"].endswith("its report annotation was written by kubectl-annotate at {0}, not by a "
                                      "pre-flight: not trusted".format(stamp(NOW - 60)))
    assert reasons["ahead"].endswith("dated 30 days ahead of the API server's record of the write ({0}): not trusted"
                                     .format(stamp(NOW)))
    assert verdict.freshness(names, results, reasons) == {"ahead": "untrusted", "forged": "untrusted", "fresh": "fresh"}

    # The same summary in JSON, Markdown and HTML: the row says not trusted, and why.
    summary = fleet.fleet_summary(names, results=results, not_run_reasons=reasons, run_id="read", mode="verdicts")
    rows = dict((row["host"], row) for row in summary["rows"])
    assert (rows["forged"]["status"], rows["forged"]["freshness"]) == ("not_run", "untrusted")
    assert summary["freshness"]["untrusted"] == 2 and not summary["passed"]
    assert "kubectl-annotate" in fleet.render_json(summary)
    markdown, html = fleet_markdown(summary), fleet_html(summary)
    for page in (markdown, html):
        assert "not trusted" in page and "written by kubectl-annotate at" in page and "dated 30 days ahead" in page
    zh = fleet.page(fleet.fleet_summary(names, results=results, not_run_reasons=reasons, run_id="read", mode="verdicts",
                                        lang="zh"))
    assert {"state": "untrusted", "count": 2, "text": "结论状态：不可信"} in zh["freshness"]


def test_a_verdict_handed_over_by_a_job_is_judged_by_age_only():
    handed = {"gpu-a2": verdict.verdict_of_result(PASSED, NOW)}
    _names, results, reasons = verdict.fleet_inputs(None, verdicts=handed, now=NOW + 60)
    assert list(results) == ["gpu-a2"] and reasons == {}


def test_a_failed_verdict_rewritten_as_passed_is_not_a_pass():
    failed = copy.deepcopy(PASSED)
    failed.update(passed=False, failure={"phase": "hold", "task": "Hold", "message": "no GPU seen"})
    node = written("gpu-a2", result=failed)
    node["metadata"]["labels"][verdict.LABEL] = "passed"
    node = annotated(node, NOW + 10, "kubectl-edit", state="passed")
    node["metadata"]["managedFields"] += managed_fields("kubectl-edit", NOW + 10, labels=[verdict.LABEL])
    _names, results, reasons = verdict.fleet_inputs([node], now=NOW + 60)
    # The condition still says False: unreadable, never a pass, whoever wrote it.
    assert results == {} and "gpu-a2" in reasons
