# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The verdict on the Node (module_utils/_gpu_demo/verdict.py), from real per-node results: what is written, what is
read back, and the fleet's summary made from Nodes equal to the summary of the run that wrote them."""

import copy
import json
from pathlib import Path

import pytest
from api_server_writes import apply_writes

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo import verdict
from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _gpu_demo_fleet as fleet
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import fleet_html, fleet_markdown

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "gpu_demo_results"
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
NOT_READY = json.loads((FIXTURES / "gpu-a4-not-ready.json").read_text())
NOW = 1764580000   # 2025-12-01T09:06:40Z
# The role's default startup taint (gpu_demo_gate_taint_key).
GATE_TAINT_KEY = "gpuops.scheduling/gpu-preflight-pending"


def wrong_gpu():
    """A hold that saw one GPU for two units (the device plugin's wrong-ID fault)."""
    result = copy.deepcopy(PASSED)
    check = {"id": "hold_one_gpu_per_unit", "phase": "hold", "passed": False,
             "detail": "2 unit(s) held but 1 distinct GPU(s) seen:\nGPU-x"}
    result.update(passed=False, failed_checks=["hold_one_gpu_per_unit"], checks=result["checks"] + [check],
                  failure={"task": "Hold | Stop unless the hold proved the allocation chain", "message": "2 unit(s)"})
    return result


def written_node(name, result=None, at=NOW, state=None, kubelet=True):
    """A Node as the API would return it after our two patches (and the kubelet's own conditions)."""
    found = verdict.running_verdict(name, "r1", at) if state == "running" else verdict.verdict_of_result(result, at)
    node = {"metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}, "annotations": {}},
            "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}] if kubelet else []}}
    return apply_writes(node, verdict.node_writes(found, node, now=at), at)


def test_a_pass_is_true_with_its_units_gpus_and_run():
    found = verdict.verdict_of_result(PASSED, NOW, job="4411")
    assert (found["state"], found["reason"], found["units"], found["job"]) == ("passed", "PreflightPassed", 2, "4411")
    window = PASSED["timeline"]["window"]["seconds"]
    assert [gpu["name"] for gpu in found["gpus"]] == ["NVIDIA H20"] * 2 and found["window"]["seconds"] == window
    condition = verdict.condition(found, now=NOW)
    assert condition["type"] == "gpuops.scheduling/GPUPreflightPassed" and condition["status"] == "True"
    assert condition["message"] == ("GPU pre-flight passed: 2 unit(s) of nvidia.com/gpu held, 2 GPU(s) seen, occupied %.1f s;"
                                    " run p1" % window)


def test_a_failure_is_false_with_its_phase_as_reason_and_one_line():
    found = verdict.verdict_of_result(wrong_gpu(), NOW)
    assert (found["state"], found["phase"], found["reason"]) == ("failed", "hold", "HoldCheckFailed")
    assert found["check"] == "hold_one_gpu_per_unit"
    condition = verdict.condition(found, now=NOW)
    assert condition["status"] == "False" and condition["reason"] == "HoldCheckFailed"
    assert "\n" not in condition["message"] and condition["message"].endswith("; run p1")
    assert "failed at hold (hold_one_gpu_per_unit): 2 unit(s) held but 1 distinct GPU(s) seen: GPU-x" in condition["message"]
    refused = verdict.verdict_of_result(NOT_READY, NOW)
    assert (refused["reason"], refused["check"]) == ("PreflightRefused", "node_ready")
    # The check's words whole: the Node names what to do, not the first 160 characters of it.
    assert refused["detail"].startswith("node gpu-a4 is not Ready: ") and refused["detail"].endswith("kubelet's log on the node")


def test_a_long_detail_keeps_the_run_id_in_the_message():
    result = wrong_gpu()
    result["checks"][-1]["detail"] = "x" * 2000
    message = verdict.condition(verdict.verdict_of_result(result, NOW), now=NOW)["message"]
    assert len(message) <= verdict.MESSAGE_LIMIT and message.endswith("; run p1")


def test_check_mode_and_not_a_result_get_no_verdict():
    checked = copy.deepcopy(PASSED)
    checked.update(check_mode=True)
    with pytest.raises(verdict.VerdictError, match="passed or failed"):
        verdict.verdict_of_result(checked, NOW)
    with pytest.raises(verdict.VerdictError, match="role's result"):
        verdict.verdict_of_result({"passed": True}, NOW)


def test_the_transition_time_moves_only_when_the_status_changes():
    found = verdict.verdict_of_result(PASSED, NOW)
    before = {"type": verdict.CONDITION_TYPE, "status": "True", "lastTransitionTime": "2025-11-01T00:00:00Z"}
    again = verdict.condition(found, previous=before, now=NOW)
    assert again["lastTransitionTime"] == "2025-11-01T00:00:00Z" and again["lastHeartbeatTime"] == "2025-12-01T09:06:40Z"
    flipped = verdict.condition(verdict.verdict_of_result(wrong_gpu(), NOW), previous=before, now=NOW)
    assert flipped["lastTransitionTime"] == "2025-12-01T09:06:40Z"


def test_the_patches_carry_only_our_keys():
    node = {"metadata": {"name": "gpu-a2", "labels": {"team": "a"}}, "status": {"conditions": [{"type": "Ready"}]}}
    writes = verdict.node_writes(verdict.verdict_of_result(PASSED, NOW), node, now=NOW)
    assert list(writes["status"]["status"]["conditions"][0])[0] == "type"
    assert [entry["type"] for entry in writes["status"]["status"]["conditions"]] == [verdict.CONDITION_TYPE]
    assert writes["metadata"] == {"metadata": {
        "labels": {verdict.LABEL: "passed"},
        "annotations": {verdict.TIME_ANNOTATION: "2025-12-01T09:06:40Z", verdict.REPORT_ANNOTATION: writes["metadata"]
                        ["metadata"]["annotations"][verdict.REPORT_ANNOTATION]}}}
    assert all(key.startswith("gpuops.scheduling/") for part in writes["metadata"]["metadata"].values() for key in part)


def test_a_verdict_reads_back_as_written():
    node = written_node("gpu-a2", PASSED)
    back = verdict.read_verdict(node)
    assert back["state"] == "passed" and back["condition"]["status"] == "True" and back["units"] == 2
    assert verdict.read_verdict({"metadata": {"name": "gpu-a9"}, "status": {"conditions": [{"type": "Ready"}]}}) is None


@pytest.mark.parametrize("tamper", ["label", "condition", "annotation", "no-condition"])
def test_a_verdict_that_does_not_agree_with_itself_is_unreadable(tamper):
    """Edited by hand or half written: the label, the condition and the annotation must agree, else nothing is guessed."""
    node = written_node("gpu-a2", PASSED)
    if tamper == "label":
        node["metadata"]["labels"][verdict.LABEL] = "failed"
    elif tamper == "condition":
        node["status"]["conditions"][-1]["status"] = "False"
    elif tamper == "annotation":
        node["metadata"]["annotations"][verdict.REPORT_ANNOTATION] = "{not json"
    else:
        node["status"]["conditions"] = node["status"]["conditions"][:1]
    assert verdict.read_verdict(node)["state"] == "unreadable"
    names, results, reasons = verdict.fleet_inputs([node], now=NOW)
    assert names == ["gpu-a2"] and results == {} and "unreadable" in reasons["gpu-a2"]


def test_the_summary_of_the_nodes_is_the_summary_of_the_run():
    """What a run's summary says of each node, the summary made from the verdicts it wrote says too."""
    results = {"gpu-a2": PASSED, "gpu-a4": NOT_READY, "gpu-a7": wrong_gpu()}
    results["gpu-a7"]["node"] = "gpu-a7"
    run = fleet.fleet_summary(sorted(results), results=results, run_id="p1")
    nodes = [written_node(name, result) for name, result in results.items()]
    names, from_nodes, reasons = verdict.fleet_inputs(nodes, now=NOW + 60)
    assert reasons == {}
    fleet_view = fleet.fleet_summary(names, results=from_nodes, run_id="fleet", mode="verdicts", not_run_reasons=reasons)
    keys = ("host", "status", "phase", "check", "failed_checks", "units", "run_id", "started_at")
    assert [[row[key] for key in keys] for row in fleet_view["rows"]] == [[row[key] for key in keys] for row in run["rows"]]
    # Why, on one line (the Node keeps at most DETAIL_LIMIT characters of it).
    one_line = [" ".join((row["reason"] or "").split()) or None for row in run["rows"]]
    assert [row["reason"] for row in fleet_view["rows"]] == [
        text if text is None or len(text) <= verdict.DETAIL_LIMIT else text[:verdict.DETAIL_LIMIT - 1] + "…" for text in one_line]
    assert [row["gpus"] for row in fleet_view["rows"]] == [row["gpus"] for row in run["rows"]]
    assert [row["window"]["seconds"] if row["window"] else None for row in fleet_view["rows"]] == \
        [row["window"]["seconds"] if row["window"] else None for row in run["rows"]]
    assert fleet_view["counts"] == run["counts"]
    assert "the nodes' last verdicts" in fleet_markdown(fleet_view)


def test_never_run_stale_running_and_interrupted_nodes_are_not_results():
    nodes = [written_node("fresh", PASSED, at=NOW), written_node("stale", PASSED, at=NOW - 3 * 86400),
             written_node("busy", state="running", at=NOW - 60), written_node("dead", state="running", at=NOW - 7200),
             {"metadata": {"name": "never"}, "status": {}}]
    names, results, reasons = verdict.fleet_inputs(nodes, hosts=["gone"], now=NOW, max_age=86400, max_running=900)
    assert names == ["busy", "dead", "fresh", "gone", "never", "stale"] and list(results) == ["fresh"]
    assert reasons["stale"].startswith("stale: passed at 2025-11-28") and "older than 24 h" in reasons["stale"]
    assert reasons["busy"].startswith("running: run r1") and reasons["dead"].startswith("interrupted: run r1")
    assert reasons["never"] == "never pre-flighted: node never has no verdict"
    assert reasons["gone"] == "no node gone in the cluster"
    summary = fleet.fleet_summary(names, results=results, mode="verdicts", not_run_reasons=reasons)
    assert summary["counts"] == {"nodes": 6, "failed": 0, "not_run": 5, "checked": 0, "passed": 1}
    assert dict((row["host"], row["reason"]) for row in summary["rows"])["dead"] == reasons["dead"]


def mixed_fleet():
    """Fresh, failed, stale (a pass and a failure), never run, running, interrupted and absent nodes, as the summary of
    the Nodes' verdicts reads them."""
    failed = wrong_gpu()
    failed["node"] = "bad"
    nodes = [written_node("fresh", PASSED, at=NOW), written_node("bad", failed, at=NOW),
             written_node("stale", PASSED, at=NOW - 3 * 86400), written_node("stale-bad", failed, at=NOW - 3 * 86400),
             written_node("busy", state="running", at=NOW - 60), written_node("dead", state="running", at=NOW - 7200),
             {"metadata": {"name": "never"}, "status": {}}]
    return nodes, verdict.fleet_inputs(nodes, hosts=["gone"], now=NOW, max_age=86400, max_running=900)


def test_the_summary_of_the_nodes_says_of_each_whether_its_verdict_still_holds():
    _nodes, (names, results, reasons) = mixed_fleet()
    # As the summary action hands them over: the inventory's hosts without a verdict come with None.
    results = dict(results, stale=None, never=None)
    summary = fleet.fleet_summary(names, results=results, mode="verdicts", not_run_reasons=reasons)
    states = dict((row["host"], row["freshness"]) for row in summary["rows"])
    assert states == {"fresh": "fresh", "bad": "failed", "stale": "stale", "stale-bad": "stale", "busy": "running",
                      "dead": "stale", "never": "never", "gone": "absent"}
    assert summary["freshness"] == {"fresh": 1, "stale": 3, "untrusted": 0, "failed": 1, "never": 1, "running": 1,
                                    "unreadable": 0, "absent": 1}
    # Its own column, beside the status; the reason a stale verdict no longer holds stays in the row's Why.
    lines = fleet_markdown(summary).splitlines()
    header = [line for line in lines if line.startswith("| Node | Status |")][0]
    assert header.startswith("| Node | Status | Verdict | Phase |")
    stale_row = [line for line in lines if line.startswith("| stale | ")][0]
    assert stale_row.startswith("| stale | not run | stale | - |") and "older than 24 h (gpu_demo_verdict_max_age)" in stale_row
    assert [line for line in lines if line.startswith("| never | ")][0].startswith("| never | not run | never run |")
    assert "| Verdict: stale | 3 |" in lines and "| Verdict: fresh | 1 |" in lines
    page = fleet_html(summary)
    assert 'class="badge verdict-stale">stale</span>' in page
    # The HTML table has the column too: as many cells in each row as headers.
    table = page.split('<table id="nodes">', 1)[1].split("</table>", 1)[0]
    head, body = table.split("</thead>", 1)
    assert all(row.count("</td>") == head.count("</th>") == 14 for row in body.split("<tr ")[1:])
    chinese = fleet_markdown(fleet.fleet_summary(names, results=results, mode="verdicts", not_run_reasons=reasons, lang="zh"))
    assert "| 节点 | 结论 | 结论状态 |" in chinese and "| 结论状态：已过时 | 3 |" in chinese
    assert "| gone | 未运行 | 集群中没有该节点 |" in chinese


def test_a_run_summary_has_no_verdict_column():
    summary = fleet.fleet_summary(["gpu-a2"], results={"gpu-a2": PASSED}, run_id="p1")
    assert summary["freshness"] is None and summary["rows"][0]["freshness"] is None
    assert "Verdict" not in fleet_markdown(summary) and "verdict-" not in fleet_html(summary).split("</style>")[1]


def test_the_summary_of_the_nodes_names_each_nodes_latest_report_kept_in_the_cluster():
    nodes, (names, results, reasons) = mixed_fleet()
    annotation = verdict.REPORT_CONFIGMAP_ANNOTATION
    for node, reference in zip(nodes, ["gpu-operator/gpu-preflight-report-fresh-r1", "gpu-operator/gpu-preflight-report-bad-r1",
                                       "gpu-operator/gpu-preflight-report-stale-r0", "not a configmap; rm -rf /"]):
        node["metadata"]["annotations"][annotation] = reference
    kept = verdict.report_configmaps(nodes)
    # An annotation that names no ConfigMap (edited by hand) is never shown as a command to run.
    assert kept == {"fresh": "gpu-operator/gpu-preflight-report-fresh-r1", "bad": "gpu-operator/gpu-preflight-report-bad-r1",
                    "stale": "gpu-operator/gpu-preflight-report-stale-r0"}
    summary = fleet.fleet_summary(names, results=results, mode="verdicts", not_run_reasons=reasons,
                                  report_configmaps=dict(kept, never="no-slash"))
    by_host = dict((row["host"], row["report_configmap"]) for row in summary["rows"])
    assert by_host == {"fresh": kept["fresh"], "bad": kept["bad"], "stale": kept["stale"], "stale-bad": None, "busy": None,
                       "dead": None, "never": None, "gone": None}
    text = fleet_markdown(summary)
    assert "| stale | `kubectl get configmap -n gpu-operator gpu-preflight-report-stale-r0 -o yaml` |" in text
    assert "| fresh | `kubectl get configmap -n gpu-operator gpu-preflight-report-fresh-r1 -o yaml` |" in text
    assert "stale-bad | `kubectl" not in text and "rm -rf" not in text
    assert '<code title="kubectl get configmap -n gpu-operator gpu-preflight-report-bad-r1 -o yaml">' in fleet_html(summary)


def test_verdicts_handed_by_jobs_count_when_the_cluster_cannot_be_read():
    handed = {"gpu-a2": verdict.verdict_of_result(PASSED, NOW), "gpu-a4": verdict.verdict_of_result(NOT_READY, NOW)}
    names, results, reasons = verdict.fleet_inputs(None, verdicts=handed, hosts=["gpu-a2", "gpu-a4", "gpu-a9"], now=NOW)
    assert sorted(results) == ["gpu-a2", "gpu-a4"] and results["gpu-a4"]["passed"] is False
    assert reasons == {"gpu-a9": "never pre-flighted: node gpu-a9 has no verdict"}
    # A Node's own verdict wins over a job's (the Node is the fleet's state; a job's may be older).
    node = written_node("gpu-a4", PASSED)
    node["metadata"]["name"] = "gpu-a4"
    _names, results, _reasons = verdict.fleet_inputs([node], verdicts=handed, now=NOW)
    assert results["gpu-a4"]["passed"] is True


def test_the_taint_patch_removes_ours_only_and_tests_it_first():
    ours = {"key": GATE_TAINT_KEY, "effect": "NoSchedule"}
    theirs = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
              {"key": GATE_TAINT_KEY, "effect": "NoExecute"}]
    node = {"spec": {"taints": theirs[:1] + [ours] + theirs[1:]}}
    assert verdict.taint_removal(node, GATE_TAINT_KEY) == [
        {"op": "test", "path": "/spec/taints/1", "value": ours}, {"op": "remove", "path": "/spec/taints/1"}]
    assert verdict.taint_removal({"spec": {"taints": theirs}}, GATE_TAINT_KEY) is None
    assert verdict.taint_removal({"spec": {}}, GATE_TAINT_KEY) is None


def test_job_keys_are_identifiers_of_their_own():
    assert verdict.job_stat_key(4411) == "gpu_demo_j4411"
    assert verdict.job_stat_key("20261201t0900-1a2b3c") == "gpu_demo_j20261201t0900_1a2b3c"
    with pytest.raises(verdict.VerdictError, match="job id"):
        verdict.job_stat_key("")


@pytest.mark.parametrize("present", [False, True])
def test_a_gate_without_the_startup_taint_says_it_had_nothing_to_lift(present):
    result = dict(copy.deepcopy(PASSED), gate={"taint": "gpuops.scheduling/gpu-preflight-pending", "remove": True,
                                               "present": present})
    found = verdict.verdict_of_result(result, NOW)
    assert found["gate"] == {"taint": "gpuops.scheduling/gpu-preflight-pending", "present": present}
    message = verdict.condition(found, now=NOW)["message"]
    said = "no startup taint to remove (gpuops.scheduling/gpu-preflight-pending:NoSchedule was not on the node)"
    assert (said in message) is not present and message.endswith("; run p1")
    row = fleet.node_row("gpu-a2", result)
    assert row["status"] == "passed"
    assert row["reason"] == (None if present else "no startup taint to remove: the node did not carry "
                             "gpuops.scheduling/gpu-preflight-pending:NoSchedule, so the gate had nothing to lift")
    assert fleet.node_row("gpu-a2", result, lang="zh")["reason"] == (None if present else (
        "没有可移除的启动污点：节点上没有 gpuops.scheduling/gpu-preflight-pending:NoSchedule，门禁没有可解除的污点"))


def test_a_run_outside_gate_mode_carries_no_gate():
    assert verdict.verdict_of_result(PASSED, NOW)["gate"] is None
