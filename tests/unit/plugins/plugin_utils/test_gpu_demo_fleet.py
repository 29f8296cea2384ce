# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's summary (plugin_utils/_gpu_demo_fleet.py, rows from module_utils/_gpu_demo/rows.py): rows from real per-node
results, failures first, pages escaped.

The two fixtures are per-node JSON reports of a parallel run over the sim's fleet topology: gpu-a2 passed (two H20s),
gpu-a4 was refused before anything was created (NotReady).
"""

import copy
import html
import json
import re
from pathlib import Path

import pytest
from chinese_prose import english_prose

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.rows import result_row
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo_fleet import CHECKS_URL
from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _gpu_demo_fleet as fleet
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import fleet_html, fleet_markdown

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_demo_results"
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
NOT_READY = json.loads((FIXTURES / "gpu-a4-not-ready.json").read_text())
REPORTS = "/runner/project/reports"
ARG_SPEC_FAILURE = {"phase": "input", "task": "Validating arguments against arg spec 'main' - The GPU scheduling walkthrough",
                    "message": "Validation of arguments failed:\nValue 'fr' for gpu_demo_report_lang is not one of en, zh"}


def lock_refused():
    """A node whose lock another run holds: the role's rescue records the lock task, no check failed."""
    result = copy.deepcopy(NOT_READY)
    result.update(node="gpu-a5", checks=[], failed_checks=[], passed=False,
                  failure={"phase": "lock", "task": "Lock | Take the node's pre-flight lock",
                           "message": "node gpu-a5 is locked by run 20261130t2150-aaaaaa until 2026-11-30T22:00:00Z"})
    return result


def check_mode():
    result = copy.deepcopy(NOT_READY)
    result.update(node="gpu-a6", check_mode=True, passed=True, failed_checks=[], failure=None, report_files={},
                  checks=[dict(check, passed=True) for check in result["checks"]], plan={"units": 2, "mode": "per_unit"})
    return result


def summary(mode="parallel", lang="en", **extra):
    hosts = ["gpu-a2", "gpu-a4", "gpu-a5", "gpu-a6", "bad-input", "gone"]
    results = {"gpu-a2": PASSED, "gpu-a4": NOT_READY, "gpu-a5": lock_refused(), "gpu-a6": check_mode(), "gone": None}
    results.update(extra.pop("results", {}))
    return fleet.fleet_summary(extra.pop("hosts", hosts), results, {"bad-input": ARG_SPEC_FAILURE, **extra.pop("failures", {})},
                               run_id="t1", mode=mode, report_dir=REPORTS, generated_at="2026-11-30T22:00:00Z", lang=lang,
                               **extra)


def rows(result):
    return dict((row["host"], row) for row in result["rows"])


def test_every_node_has_a_row_failures_first_in_the_run_order_of_phases():
    result = summary()
    order = [row["host"] for row in result["rows"]]
    # input before lock before preflight; then not run, check mode, passed.
    assert order == ["bad-input", "gpu-a5", "gpu-a4", "gone", "gpu-a6", "gpu-a2"]
    assert [row["status"] for row in result["rows"]] == ["failed", "failed", "failed", "not_run", "checked", "passed"]
    assert result["counts"] == {"nodes": 6, "failed": 3, "not_run": 1, "checked": 1, "passed": 1}
    assert result["passed"] is False


def test_a_refused_node_names_its_phase_check_and_reason():
    row = rows(summary())["gpu-a4"]
    assert (row["phase"], row["check"], row["failed_checks"]) == ("preflight", "node_ready", ["node_ready"])
    assert row["reason"].startswith("node gpu-a4 is not Ready: ") and "kubectl describe node gpu-a4" in row["reason"]
    assert row["task"] == "Preflight | Refuse a node the demo must not touch"
    assert row["units"] is None and row["gpus"] == [] and row["window"] is None
    assert [step["state"] for step in row["steps"]] == ["failed", "skipped", "skipped", "skipped", "skipped"]


def test_failures_before_the_report_still_say_why():
    by_host = rows(summary())
    bad = by_host["bad-input"]
    assert (bad["status"], bad["phase"], bad["check"]) == ("failed", "input", None)
    assert "gpu_demo_report_lang" in bad["reason"] and bad["reports"] == {}
    lock = by_host["gpu-a5"]
    assert (lock["status"], lock["phase"], lock["check"]) == ("failed", "lock", None)
    assert lock["reason"].startswith("node gpu-a5 is locked by run")
    assert lock["steps"][0] == {"phase": "lock", "state": "failed", "seconds": None}


def test_a_passed_node_shows_what_it_held_and_saw():
    row = rows(summary())["gpu-a2"]
    assert row["units"] == 2
    assert [gpu["uuid"] for gpu in row["gpus"]] == PASSED["hold"]["distinct_uuids"]
    assert {gpu["name"] for gpu in row["gpus"]} == {"NVIDIA H20"}
    assert row["window"]["seconds"] == PASSED["timeline"]["window"]["seconds"]
    assert row["vllm"]["before"] == 200 and row["vllm"]["after"] == 200
    # Read in the hold pods (nvidia-smi's memory.used on the GPUs the demo held): nothing outside the ledger here.
    assert row["memory_outside_ledger"] == {"bytes": 0, "mib": 0, "source": "hold"}
    assert [step["state"] for step in row["steps"]] == ["ok"] * 5
    # The per-node reports, relative to the summary's directory.
    assert row["reports"]["markdown"] == PASSED["report_files"]["markdown"].rsplit("/", 1)[1]


def test_memory_read_on_the_node_counts_everything_outside_the_ledger():
    result = copy.deepcopy(PASSED)
    result["node_processes"] = {"gpus": [
        {"uuid": "GPU-1", "memory_bytes": {"in_ledger": 5 << 20, "out_of_ledger_pod": 80 << 20, "host": 3 << 20, "unidentified": 1 << 20}},
        {"uuid": "GPU-2", "memory_bytes": {"in_ledger": 0, "out_of_ledger_pod": 0, "host": 0, "unidentified": 0}}]}
    row = fleet.node_row("gpu-a2", result)
    assert row["memory_outside_ledger"] == {"bytes": 84 << 20, "mib": 84, "source": "node"}


def test_check_mode_and_nodes_without_a_result_say_so():
    by_host = rows(summary())
    assert by_host["gpu-a6"]["reason"] == "check mode: read-only checks passed, nothing was created"
    assert by_host["gpu-a6"]["units"] == 2
    assert by_host["gone"]["reason"].startswith("no result: the node's play ended before the pre-flight")


def test_one_node_at_a_time_names_the_node_the_run_stopped_at():
    result = summary(mode="serial", hosts=["gpu-a2", "gpu-a4", "late-1", "late-2"])
    by_host = rows(result)
    assert by_host["late-1"]["status"] == by_host["late-2"]["status"] == "not_run"
    assert by_host["late-1"]["reason"] == "not run: one node at a time, the run stopped after gpu-a4 failed"
    assert result["counts"] == {"nodes": 4, "failed": 1, "not_run": 2, "checked": 0, "passed": 1}


def test_failures_are_grouped_by_check_most_frequent_first():
    extra = dict(("gpu-b%d" % index, dict(NOT_READY, node="gpu-b%d" % index)) for index in range(3))
    result = summary(hosts=["gpu-a4", "gpu-a5", "bad-input"] + sorted(extra), results=extra)
    assert [(group["phase"], group["check"], group["count"]) for group in result["by_check"]] == [
        ("preflight", "node_ready", 4), ("input", None, 1), ("lock", None, 1)]
    assert result["by_check"][0]["nodes"] == ["gpu-a4", "gpu-b0", "gpu-b1", "gpu-b2"]


def test_a_failure_belongs_to_the_phase_it_recorded_whatever_its_task_is_called():
    renamed = dict(lock_refused(), failure={"phase": "lock", "task": "Anything at all", "message": "locked"})
    row = result_row("gpu-a5", renamed)
    assert row["phase"] == "lock" and row["task"] == "Anything at all"
    assert result_row("x", failure={"task": "Lock | Take the node's pre-flight lock", "message": "?"})["phase"] == "run"


def test_a_bad_mode_is_refused():
    with pytest.raises(ValueError, match="serial, parallel, verdicts"):
        fleet.fleet_summary([], mode="rolling")


def test_the_json_carries_every_row_but_not_the_drawings():
    data = json.loads(fleet.render_json(summary()))
    assert [row["host"] for row in data["rows"]] == ["bad-input", "gpu-a5", "gpu-a4", "gone", "gpu-a6", "gpu-a2"]
    assert all("timeline" not in row for row in data["rows"])
    assert data["counts"]["failed"] == 3 and data["run_id"] == "t1"


def test_markdown_in_english_and_chinese():
    english = fleet_markdown(summary())
    assert english.startswith("# GPU scheduling pre-flight: 6 node(s)\n")
    assert "**3 of 6 node(s) failed.**" in english
    # The row links the page its run's report linked (the collection installed where that run ran); the groups by
    # check, this controller's.
    assert "| [gpu-a4](%s) | **failed** | preflight | [node_ready](%s#node_ready) | node gpu-a4 is not Ready: " % (
        NOT_READY["report_files"]["markdown"].rsplit("/", 1)[1], NOT_READY["checks_url"]) in english
    chinese = fleet_markdown(summary(lang="zh"))
    assert chinese.startswith("# GPU 调度预检：6 个节点\n") and "## 按检查项汇总的失败" in chinese
    assert "| 预检 | [node_ready](%s#node_ready) | 1 | gpu-a4 |" % CHECKS_URL in chinese


def test_in_chinese_every_column_and_every_story_is_chinese():
    """The reasons of failed and not-run nodes, the phases, the statuses and the failed checks of each story: no English
    sentence outside what is quoted (the checks' English originals, what the cluster wrote)."""
    reasons = {"gone": "stale: passed at 2026-11-30T22:00:00Z (run r1): the node rebooted (boot 1234abcd -> 5678efgh)"}
    chinese = summary(lang="zh", not_run_reasons=reasons)
    assert english_prose(fleet_markdown(chinese)) == []
    by_host = rows(chinese)
    page = fleet.page(chinese)
    views = dict((view["host"], view) for view in page["rows"])
    assert views["gpu-a4"]["reason"].startswith("节点 `gpu-a4` 不是 Ready：")
    assert views["gpu-a4"]["checks"][0]["text"] == views["gpu-a4"]["reason"]
    assert views["gone"]["reason"].startswith("已过时：") and views["gpu-a5"]["reason"].startswith("任务 `Lock | ")
    # The HTML page quotes a task's name in italics.
    body = fleet_html(chinese).split("<body", 1)[1].split("<script", 1)[0]
    html_text = re.sub(r"<[^>]+>", " ", re.sub(r"<i>.*?</i>", " ", body))
    assert english_prose(html.unescape(html_text)) == []
    # The summary's data stays the checks' own words, as the Nodes and the JSON carry them.
    assert by_host["gpu-a4"]["reason"].startswith("node gpu-a4 is not Ready: ")
    # Control: the same summary in English says it in English.
    assert english_prose(fleet_markdown(summary(not_run_reasons=reasons)))


def test_markdown_cells_stay_one_line():
    hostile = dict(NOT_READY, checks=[dict(NOT_READY["checks"][0], passed=False, detail="a | b\nc")])
    text = fleet_markdown(summary(hosts=["gpu-a4"], results={"gpu-a4": hostile}))
    assert "a \\| b c" in text


HOSTILE_NAME = '<script>alert("node")</script>'
HOSTILE_MESSAGE = '<img src=x onerror=alert(1)> & "quotes" <script>alert(2)</script>'


def test_html_escapes_everything_from_the_cluster():
    result = copy.deepcopy(NOT_READY)
    next(check for check in result["checks"] if not check["passed"])["detail"] = HOSTILE_MESSAGE
    result["report_files"]["markdown"] = REPORTS + '/x"><script>alert(3)</script>.md'
    page = fleet_html(summary(hosts=[HOSTILE_NAME, "gpu-a2"], results={HOSTILE_NAME: result}))
    # The only script is the page's own, at its end.
    assert page.count("<script>") == 1 and page.rindex("<script>") > page.index("</table>")
    assert "<img" not in page and "onerror=alert(1)>" not in page
    # Jinja2's autoescape (markupsafe) writes a double quote as &#34;.
    assert "&lt;script&gt;alert(&#34;node&#34;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; &#34;quotes&#34;" in page
    assert 'href="x%22%3E%3Cscript%3Ealert%283%29%3C/script%3E.md"' in page


def test_html_loads_nothing_from_anywhere():
    page = fleet_html(summary())
    assert not re.search(r"""src\s*=\s*["']?(https?:|//|javascript:)""", page, re.I)
    # The only absolute links are to the checks page, which a click opens: nothing is loaded from there.
    absolute = re.findall(r"""href\s*=\s*["']?((?:https?:|file:|//|javascript:)[^"' >]*)""", page, re.I)
    assert absolute and all(link.startswith((CHECKS_URL + "#", NOT_READY["checks_url"] + "#")) for link in absolute), absolute
    assert "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page
    # Every row links its story below the table, and the node's own reports beside it.
    for index, row in enumerate(summary()["rows"]):
        assert 'href="#node-%d"' % index in page and 'id="node-%d"' % index in page
    assert 'href="%s"' % PASSED["report_files"]["svg"].rsplit("/", 1)[1] in page


def test_html_rows_come_failures_first():
    page = fleet_html(summary())
    hosts = re.findall(r'<tr class="(\w+)" data-node="([^"]+)"', page)
    assert hosts == [("failed", "bad-input"), ("failed", "gpu-a5"), ("failed", "gpu-a4"), ("not_run", "gone"),
                     ("checked", "gpu-a6"), ("passed", "gpu-a2")]
    assert 'id="count-failed"><b>3</b>' in page


def test_html_of_five_hundred_nodes_stays_small_enough_to_open():
    hosts = ["node-%03d" % index for index in range(500)]
    results = dict((host, dict(PASSED if index % 10 else NOT_READY, node=host)) for index, host in enumerate(hosts))
    page = fleet_html(fleet.fleet_summary(hosts, results, run_id="big", report_dir=REPORTS))
    assert page.count('<tr class="failed"') == 50 and page.count('<tr class="passed"') == 450
    assert len(page) < 4 * 1024 * 1024


def without_links(result):
    """A report of a run that gave its checks no link (gpu_demo_checks_url empty, or a release before the links)."""
    result = copy.deepcopy(result)
    for check in result["checks"]:
        check.pop("url", None)
    return result


def test_failed_checks_link_to_their_entry_on_the_checks_page():
    result = summary(checks_url="https://docs.example.invalid/checks.md", results={"gpu-a4": without_links(NOT_READY)})
    by_host = rows(result)
    assert by_host["gpu-a4"]["check_url"] == "https://docs.example.invalid/checks.md#node_ready"
    assert by_host["gpu-a4"]["checks"][0]["url"] == "https://docs.example.invalid/checks.md#node_ready"
    assert by_host["gpu-a5"]["check_url"] is None and by_host["gpu-a2"]["checks"] == []
    group = next(group for group in result["by_check"] if group["check"] == "node_ready")
    assert group["url"] == "https://docs.example.invalid/checks.md#node_ready"
    assert next(group for group in result["by_check"] if group["check"] is None)["url"] is None
    # A URL the run's own report gave the check wins (the node's run knew its page).
    linked = copy.deepcopy(NOT_READY)
    for check in linked["checks"]:
        if not check["passed"]:
            check["url"] = "https://mirror.example.invalid/checks.md#" + check["id"]
    assert fleet.node_row("gpu-a4", linked)["check_url"] == "https://mirror.example.invalid/checks.md#node_ready"
    page = fleet_html(result)
    assert page.count('href="https://docs.example.invalid/checks.md#node_ready"') == 3  # by check, the row, its story
    assert "[node_ready](https://docs.example.invalid/checks.md#node_ready)" in fleet_markdown(result)


def test_no_links_without_a_checks_page_or_with_one_that_is_not_http():
    for base in (None, "", "javascript:alert(1)", "data:text/html,x"):
        result = summary(checks_url=base, results={"gpu-a4": without_links(NOT_READY)})
        assert rows(result)["gpu-a4"]["check_url"] is None
        assert all(group["url"] is None for group in result["by_check"])
        assert "javascript:" not in fleet_html(result) and "](" not in fleet_markdown(result).split("## Nodes")[0]


def test_the_allocation_path_of_each_node_is_in_the_table_and_its_drawing():
    dra = copy.deepcopy(PASSED)
    dra["allocation"] = "dra_extended_resource"
    plain = copy.deepcopy(PASSED)
    plain["allocation"] = "device_plugin"
    claims = copy.deepcopy(PASSED)
    del claims["allocation"]
    claims["before"]["allocation"] = "dra"   # a report of a release before the extended-resource path was told apart
    result = summary(hosts=["gpu-a2", "dra-a", "dra-b"], results={"gpu-a2": plain, "dra-a": dra, "dra-b": claims})
    assert [rows(result)[host]["allocation"] for host in ("gpu-a2", "dra-a", "dra-b")] == [
        "device_plugin", "dra_extended_resource", "dra"]
    page = fleet_html(result)
    table = dict(re.findall(r'<tr class="\w+" data-node="([^"]+)">(.*?)</tr>', page, re.S))
    assert '<td class="nowrap" data-v="device_plugin">device plugin</td>' in table["gpu-a2"]
    assert '<td class="nowrap" data-v="dra_extended_resource">DRA (extended resource)</td>' in table["dra-a"]
    assert '<td class="nowrap" data-v="dra">DRA</td>' in table["dra-b"]
    assert "<title>GPUs through: DRA (extended resource)</title>" in page
    assert "| DRA（扩展资源） |" in fleet_markdown(summary(lang="zh", hosts=["dra-a"], results={"dra-a": dra}))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_summary_of_no_node_never_passes_and_says_why(lang):
    why = "the host pattern 'prod999' (gpu_demo_hosts) matches no host of the inventory."
    empty = fleet.fleet_summary([], run_id="r1", lang=lang, nothing_tested=why)
    assert empty["passed"] is False and empty["counts"]["nodes"] == 0 and empty["rows"] == []
    assert empty["nothing_tested"] == why
    assert json.loads(fleet.render_json(empty))["nothing_tested"] == why
    verdict = fleet.page(empty)["verdict"]
    assert verdict == fleet.TEXT[lang]["verdict_none"].format(reason=why)
    assert why in fleet_markdown(empty) and "prod999" in fleet_html(empty)
    # Without a reason given, still not a pass, and still said.
    bare = fleet.fleet_summary([], run_id="r2", mode="verdicts", lang=lang)
    assert bare["passed"] is False and bare["nothing_tested"] == fleet.TEXT[lang]["nothing_matched"]
    assert fleet.page(bare)["verdict"].startswith(fleet.TEXT[lang]["verdict_none"].split("{")[0])
    # A summary with nodes carries no such reason.
    assert summary()["nothing_tested"] is None


def status_bar(page):
    """The status bar's svg element and its segments' (x, width) from the page."""
    drawing = re.search(r'<svg[^>]*aria-label="[^"]*"[^>]*>(.*?)</svg>', page, re.S)
    segments = re.findall(r'<rect x="([^"]+)" y="0" width="([^"]+)"', drawing.group(1))
    return drawing.group(0), segments


def test_the_status_bar_spans_the_page_so_that_all_passed_reads_as_full():
    """1 of 1 passed was drawn as a fixed 600-pixel bar: half a wide page, which reads as half done."""
    svg, segments = status_bar(fleet_html(fleet.fleet_summary(["gpu-a2"], {"gpu-a2": PASSED}, run_id="one")))
    assert 'width="100%"' in svg.split(">", 1)[0], svg
    assert segments == [("0.00%", "100.00%")]


def test_the_status_bar_shares_the_whole_width_between_the_statuses():
    _svg, segments = status_bar(fleet_html(fleet.fleet_summary(["gpu-a2", "gpu-a4"], {"gpu-a2": PASSED, "gpu-a4": NOT_READY},
                                                               run_id="two")))
    assert sorted(segments) == [("0.00%", "50.00%"), ("50.00%", "50.00%")]
