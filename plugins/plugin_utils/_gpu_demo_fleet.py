# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""One summary for a run of playbooks/gpu_demo.yml over many nodes: every node's row, and what its pages show.

Controller side (the summary action and report_templates.py): the words in English and Chinese and the pages live here,
never in a module. ``fleet_summary`` takes what the play left per node (the role's result, or the play's own failure record when the
node failed before its report) and returns plain data: counts, failures grouped by check, one row per node, failures
first. ``page`` prepares what the Markdown and HTML pages show (texts, numbers, the drawings' geometry); the templates
fleet.md.j2 and fleet.html.j2 of the role put it on the page (plugins/plugin_utils/_report_templates.py, which escapes
every value in the HTML). ``render_json`` writes the machine-readable file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from collections import Counter

try:
    from urllib.parse import quote
except ImportError:  # pragma: no cover - Python 2 is not supported by the collection, this keeps sanity's import test quiet
    from urllib import quote

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import check_url
from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.rows import (
    PHASES,
    STATUSES,
    result_row,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.verdict import CONFIGMAP_REF, freshness
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.pod_wait import parse_time
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo import words as failure_words
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.checks_page import installed_checks_url

# The checks page each failed check links to by default: the installed collection's, on this controller.
CHECKS_URL = installed_checks_url()

# A summary of the Nodes' verdicts says of each node whether its verdict still holds, in this order.
FRESHNESS = ("fresh", "stale", "untrusted", "failed", "never", "running", "unreadable", "absent")

# serial / parallel: one run's nodes; verdicts: the fleet's state, read from the Nodes (or the jobs' statistics).
MODES = ("serial", "parallel", "verdicts")

TEXT = {
    "en": {
        "title": "GPU scheduling pre-flight: {nodes} node(s)",
        "run": "Run", "generated": "Generated", "mode": "Mode", "serial": "one node at a time", "parallel": "in parallel",
        "verdicts": "the nodes' last verdicts",
        "passed": "passed", "failed": "failed", "checked": "check mode", "not_run": "not run",
        "verdict_ok": "Every node passed.", "verdict_bad": "{failed} of {nodes} node(s) failed.",
        "verdict_check": "Check mode: read-only checks only, nothing was created.",
        "verdict_none": "No node was tested: {reason}", "nothing_matched": "the run matched no node.",
        "by_check": "Failures by check", "check": "Check", "phase": "Phase", "count": "Nodes", "examples": "Nodes (first 5)",
        "nodes": "Nodes", "node": "Node", "status": "Status", "reason": "Why", "units": "Units held", "gpus": "GPUs seen",
        "window": "GPUs occupied", "vllm": "vLLM before / after", "memory": "Memory outside ledger",
        "total": "Run", "reports": "Reports", "story": "Story", "timeline": "timeline", "markdown": "story", "json": "JSON",
        "not_checked": "not checked", "no_answer": "no answer", "not_read": "not read", "none": "-",
        "not_run_serial": "not run: one node at a time, the run stopped after {node} failed",
        "no_result": "no result: the node's play ended before the pre-flight (unreachable, or stopped outside the role)",
        "checked_reason": "check mode: read-only checks passed, nothing was created",
        "no_gate_taint": "no startup taint to remove: the node did not carry {taint}:NoSchedule, so the gate had nothing to lift",
        "stopped_at": "Stopped at", "failed_checks": "Failed checks", "steps": "Steps", "step_ok": "ok",
        "step_failed": "failed", "step_skipped": "not reached", "filter": "Filter", "only_failures": "failures only",
        "sort_hint": "Failures first; click a column to sort.", "read_on_node": "on the node", "read_in_hold": "in the hold pods",
        "back": "back to the table", "no_report": "no per-node report (the node failed before it)",
        "in_cluster": "Kept in the cluster",
        "allocation": "GPUs through", "allocation_device_plugin": "device plugin", "allocation_dra": "DRA",
        "allocation_dra_extended_resource": "DRA (extended resource)", "check_help": "what this check proves, and what to do",
        "freshness": "Verdict", "freshness_count": "Verdict: {state}", "freshness_fresh": "fresh", "freshness_stale": "stale",
        "freshness_failed": "failed", "freshness_untrusted": "not trusted", "freshness_never": "never run",
        "freshness_running": "running", "freshness_unreadable": "unreadable",
        "freshness_absent": "not in the cluster",
    },
    "zh": {
        "title": "GPU 调度预检：{nodes} 个节点",
        "run": "运行", "generated": "生成于", "mode": "方式", "serial": "逐个节点", "parallel": "并行",
        "verdicts": "各节点上最近的结论",
        "passed": "通过", "failed": "未通过", "checked": "检查模式", "not_run": "未运行",
        "verdict_ok": "所有节点都通过了。", "verdict_bad": "{nodes} 个节点中有 {failed} 个未通过。",
        "verdict_check": "检查模式：只做只读检查，没有创建任何东西。",
        "verdict_none": "没有测试任何节点：{reason}", "nothing_matched": "这次运行没有匹配到任何节点。",
        "by_check": "按检查项汇总的失败", "check": "检查项", "phase": "阶段", "count": "节点数", "examples": "节点（前 5 个）",
        "nodes": "节点", "node": "节点", "status": "结论", "reason": "原因", "units": "占用名额", "gpus": "看到的卡",
        "window": "占卡时长", "vllm": "vLLM 前 / 后", "memory": "账本外的显存",
        "total": "总用时", "reports": "报告", "story": "经过", "timeline": "时间线", "markdown": "经过", "json": "JSON",
        "not_checked": "未检查", "no_answer": "无响应", "not_read": "未读取", "none": "-",
        "not_run_serial": "未运行：逐个节点运行，{node} 未通过后停止",
        "no_result": "没有结果：这个节点的 play 在预检之前就结束了（连不上，或者在角色之外出错）",
        "checked_reason": "检查模式：只读检查通过，没有创建任何东西",
        "no_gate_taint": "没有可移除的启动污点：节点上没有 {taint}:NoSchedule，门禁没有可解除的污点",
        "stopped_at": "停在", "failed_checks": "未通过的检查项", "steps": "步骤", "step_ok": "通过",
        "step_failed": "未通过", "step_skipped": "未进行", "filter": "筛选", "only_failures": "只看未通过",
        "sort_hint": "未通过的排在前面；点列名排序。", "read_on_node": "在节点上读取", "read_in_hold": "在占卡 Pod 里读取",
        "back": "回到表格", "no_report": "没有单节点报告（节点在报告之前就失败了）",
        "in_cluster": "集群中保存的报告",
        "allocation": "分配方式", "allocation_device_plugin": "设备插件", "allocation_dra": "DRA",
        "allocation_dra_extended_resource": "DRA（扩展资源）", "check_help": "这项检查证明什么、未通过时怎么办",
        "freshness": "结论状态", "freshness_count": "结论状态：{state}", "freshness_fresh": "有效", "freshness_stale": "已过时",
        "freshness_failed": "未通过", "freshness_untrusted": "不可信", "freshness_never": "从未运行", "freshness_running": "运行中", "freshness_unreadable": "无法读取",
        "freshness_absent": "集群中没有该节点",
    },
}

# A demo pod's states in the story's drawing (report.py's lanes).
STATE_NAMES = {
    "zh": {"pending": "等待", "unschedulable": "无法调度", "starting": "启动中", "running": "运行中", "succeeded": "已成功",
           "failed": "失败", "terminating": "终止中"},
}

PHASE_NAMES = {
    "zh": {"input": "输入", "lock": "加锁", "preflight": "预检", "prepare": "准备", "probe": "旁路探测", "hold": "占卡",
           "queue": "排队", "release": "放行", "cleanup": "收场", "report": "报告", "run": "运行"},
}


def _text(lang):
    return TEXT.get(lang) or TEXT["en"]


def _phase_name(phase, lang):
    return PHASE_NAMES.get(lang, {}).get(phase, phase)


def node_row(host, result=None, failure=None, not_run_reason=None, report_dir=None, lang="en", checks_url=CHECKS_URL):
    """One node's row (rows.result_row), with the words for a node checked in check mode or without a result:
    ``not_run_reason`` says why a node without either never ran."""
    row = result_row(host, result, failure, report_dir=report_dir, checks_url=checks_url)
    if row["status"] == "checked":
        row["reason"] = _text(lang)["checked_reason"]
    elif row["status"] == "passed" and row["gate"] and not row["gate"]["present"]:
        row["reason"] = _text(lang)["no_gate_taint"].format(taint=row["gate"]["taint"])
    elif row["status"] == "not_run":
        row["reason"] = not_run_reason or _text(lang)["no_result"]
    return row


def _configmap_ref(reference):
    """'<namespace>/<name>' when it names a ConfigMap, else None: the pages show it as a command to run."""
    return reference if isinstance(reference, str) and CONFIGMAP_REF.match(reference) else None


def _sort_key(row):
    phase = PHASES.index(row["phase"]) if row["phase"] in PHASES else len(PHASES)
    return (STATUSES.index(row["status"]), phase, row["check"] or "", row["host"])


def fleet_summary(hosts, results=None, failures=None, run_id="", mode="parallel", report_dir=None, generated_at=None,
                  lang="en", not_run_reasons=None, checks_url=CHECKS_URL, nothing_tested=None, report_configmaps=None):
    """Every node of a run -> {run_id, counts, by_check, rows (failures first), ...}.

    ``hosts``: the inventory hosts the run targeted, in the play's order; ``results``: {host: the role's result or
    None}; ``failures``: {host: {task, message} or None} for nodes that failed outside the role's report.
    In a one-node-at-a-time run (``mode`` serial) the play stops at the first failed node: the nodes after it have no
    result and are "not run", naming that node. ``not_run_reasons``: {host: why it has no result} (a summary made from
    the Nodes' verdicts: never pre-flighted, stale, interrupted). ``checks_url``: the checks page, which each failed
    check links to (none: no links). ``nothing_tested``: why the run has no node at all (a host pattern that matched
    none): a summary of no node is never a pass, and says so. ``report_configmaps``: {host: '<namespace>/<name>'} of
    each node's latest report kept in the cluster, where the row's result names none (the Nodes' annotations).
    In a summary of the Nodes' verdicts (``mode`` verdicts) each row says whether its verdict still holds
    (``freshness``: fresh, stale, failed, never...), and ``freshness`` counts the nodes of each.
    """
    if mode not in MODES:
        raise ValueError("mode must be one of %s, not %r" % (", ".join(MODES), mode))
    results, failures, words = results or {}, failures or {}, _text(lang)
    # A host of the inventory without a verdict comes with None (the summary action reads every host's facts).
    verdicts = dict((host, result) for host, result in results.items() if isinstance(result, dict))
    states = freshness(hosts or [], verdicts, not_run_reasons or {}) if mode == "verdicts" else {}
    rows, first_failed = [], None
    for host in hosts or []:
        reason = (not_run_reasons or {}).get(host)
        if mode == "serial" and first_failed is not None:
            reason = words["not_run_serial"].format(node=first_failed)
        row = node_row(host, results.get(host), failures.get(host), not_run_reason=reason, report_dir=report_dir, lang=lang,
                       checks_url=checks_url)
        if row["status"] == "failed" and first_failed is None:
            first_failed = host
        row["report_configmap"] = row.get("report_configmap") or _configmap_ref((report_configmaps or {}).get(host))
        row["freshness"] = states.get(host)
        rows.append(row)
    rows.sort(key=_sort_key)
    counts = dict((status, sum(1 for row in rows if row["status"] == status)) for status in STATUSES)
    counts["nodes"] = len(rows)
    groups = {}
    for row in rows:
        if row["status"] == "failed":
            groups.setdefault((row["phase"], row["check"] or ""), []).append(row["host"])
    by_check = [{"phase": phase, "check": check or None, "url": check_url(checks_url, check), "count": len(nodes), "nodes": nodes}
                for (phase, check), nodes in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))]
    started = sorted(row["started_at"] for row in rows if row["started_at"])
    return {"run_id": run_id, "mode": mode, "lang": lang if lang in TEXT else "en", "generated_at": generated_at,
            "started_at": started[0] if started else None, "report_dir": report_dir,
            "passed": bool(rows) and counts["failed"] == 0 and counts["not_run"] == 0,
            "nothing_tested": None if rows else (nothing_tested or words["nothing_matched"]),
            "counts": counts, "by_check": by_check, "rows": rows,
            "freshness": dict((state, sum(1 for row in rows if row["freshness"] == state)) for state in FRESHNESS)
            if mode == "verdicts" else None}


def machine_readable(summary):
    """What the JSON file and set_stats carry: the summary without the drawing data of each row."""
    rows = [dict((key, value) for key, value in row.items() if key != "timeline") for row in summary["rows"]]
    return dict(summary, rows=rows)


# -- What the pages show (templates fleet.md.j2 and fleet.html.j2 put it on the page) -----------------------------------

COLORS = {"pending": "#c9ced6", "unschedulable": "#f0a04b", "starting": "#9ec5ef", "running": "#2f7fd3",
          "succeeded": "#3aa55d", "failed": "#d1453b", "terminating": "#8a6fc9"}
STATUS_COLORS = {"failed": "#d1453b", "not_run": "#8a8f98", "checked": "#2f7fd3", "passed": "#3aa55d"}
# The status bar spans the page's width (percent); only its height is fixed, in pixels.
STATUS_BAR_HEIGHT = 18
WINDOW_BAR = (80, 12)
LANES = (520, 16, 200)


def _gpu_text(gpus):
    if not gpus:
        return None
    names = Counter(gpu.get("name") or "GPU" for gpu in gpus)
    return ", ".join("%d × %s" % (count, name) for name, count in sorted(names.items()))


def _vllm_text(vllm, words):
    if not vllm.get("checked"):
        return words["not_checked"]
    return "%s / %s" % (vllm.get("before") or words["no_answer"], vllm.get("after") or words["none"])


def _memory_text(memory, words):
    if memory is None:
        return words["not_read"]
    where = words["read_on_node"] if memory["source"] == "node" else words["read_in_hold"]
    return "%d MiB (%s)" % (memory["mib"], where)


def _status_bar(counts, words):
    """The run at a glance: one stacked bar across the page's width, a segment per status, each its share of the nodes
    in percent. A bar of fixed pixels was a fraction of a wide page, so 1 of 1 passed read as half done."""
    total = max(counts["nodes"], 1)
    segments, x = [], 0.0
    for status in STATUSES:
        if not counts[status]:
            continue
        share = counts[status] * 100.0 / total
        segments.append({"x": "%.2f%%" % x, "width": "%.2f%%" % share, "color": STATUS_COLORS[status],
                         "title": "%s: %d" % (words[status], counts[status])})
        x += share
    return segments


def _window_bar(row, run_start, run_span):
    """A node's run and its occupied window on the run's common time axis (where a node's GPUs were held)."""
    width, _height = WINDOW_BAR
    started = parse_time(row["started_at"])
    if started is None or run_span <= 0:
        return None
    scale = width / run_span
    drawing = {"run": {"x": "%.1f" % ((started - run_start) * scale),
                       "width": "%.1f" % max((row["total_seconds"] or 0) * scale, 1.0)}, "window": None}
    window = row["window"]
    if window and window.get("start") and window.get("end"):
        start, end = parse_time(window["start"]), parse_time(window["end"])
        if start is not None and end is not None:
            drawing["window"] = {"x": "%.1f" % ((start - run_start) * scale), "width": "%.1f" % max((end - start) * scale, 1.0)}
    return drawing


def _lanes_drawing(timeline, lang="en"):
    """The node's pods and their phases (the per-node SVG's upper half), small, for the story."""
    lanes = (timeline or {}).get("lanes") or []
    if not lanes:
        return None
    width, lane_height, left = LANES
    span = max(float(timeline.get("span") or 0), 1.0)
    drawing = {"width": left + width + 10, "height": lane_height * len(lanes) + 4, "label_x": left - 6,
               "window": None, "lanes": []}
    window = timeline.get("window")
    if window and window[0] is not None and window[1] is not None:
        drawing["window"] = {"x": "%.1f" % (left + window[0] / span * width),
                             "width": "%.1f" % max((window[1] - window[0]) / span * width, 1.0)}
    for index, lane in enumerate(lanes):
        y = index * lane_height + 2
        segments = []
        for state, start, end in lane["segments"]:
            start, end = float(start or 0), float(end or 0)
            segments.append({"x": "%.1f" % (left + start / span * width), "y": y + 1,
                             "width": "%.1f" % max((end - start) / span * width, 1.5), "height": lane_height - 4,
                             "color": COLORS.get(state, "#999"),
                             "title": "%s %.2f-%.2f s" % (STATE_NAMES.get(lang, {}).get(state, state), start, end)})
        drawing["lanes"].append({"pod": lane["pod"], "y": y + 11, "segments": segments})
    return drawing


def _links(row, words):
    """The node's own reports, relative to the summary (percent-encoded: nothing in a name can end the link or make it
    a javascript: URL)."""
    return [{"href": quote(row["reports"][kind], safe="/"), "title": words[label], "text": short}
            for kind, label, short in (("markdown", "markdown", "md"), ("svg", "timeline", "svg"), ("json", "json", "json"))
            if row["reports"].get(kind)]


def _verdict(summary, words):
    counts = summary["counts"]
    if not counts["nodes"]:
        return words["verdict_none"].format(reason=summary.get("nothing_tested") or words["nothing_matched"])
    if counts["failed"]:
        return words["verdict_bad"].format(failed=counts["failed"], nodes=counts["nodes"])
    if counts["checked"] and not counts["passed"]:
        return words["verdict_check"]
    return words["verdict_ok"] if not counts["not_run"] else ""


def _row_view(index, row, words, lang, run_start, run_span):
    gpus, memory, window, allocation = row["gpus"], row["memory_outside_ledger"], row["window"], row["allocation"]
    return {
        "anchor": "node-%d" % index, "host": row["host"], "node": row["node"] if row["node"] != row["host"] else None,
        "status": row["status"], "status_text": words[row["status"]], "status_rank": STATUSES.index(row["status"]),
        "freshness": row.get("freshness"),
        "freshness_text": words["freshness_" + row["freshness"]] if row.get("freshness") else None,
        "freshness_rank": FRESHNESS.index(row["freshness"]) if row.get("freshness") in FRESHNESS else len(FRESHNESS),
        "phase": _phase_name(row["phase"], lang) if row["phase"] else None,
        "phase_rank": "%02d" % (PHASES.index(row["phase"]) if row["phase"] in PHASES else 99),
        # The reason in the page's language: a failed check said in Chinese keeps its English original quoted.
        "check": row["check"], "check_url": row["check_url"], "reason": failure_words.row_reason(row, lang),
        "units": None if row["units"] is None else int(row["units"]),
        "gpus": _gpu_text(gpus), "gpu_uuids": " ".join(gpu["uuid"] or "" for gpu in gpus) or None,
        "allocation": allocation,
        "allocation_text": words.get("allocation_" + allocation, allocation) if allocation else words["none"],
        "window": "%.2f s" % window["seconds"] if window and window.get("seconds") is not None else "-",
        "window_seconds": None if not window else window.get("seconds"),
        "window_bar": _window_bar(row, run_start, run_span),
        "vllm": _vllm_text(row["vllm"], words),
        "memory": "-" if memory is None else "%d MiB" % memory["mib"], "memory_mib": None if memory is None else memory["mib"],
        "memory_text": _memory_text(memory, words),
        "total": "-" if row["total_seconds"] is None else "%.1f s" % row["total_seconds"], "total_seconds": row["total_seconds"],
        "links": _links(row, words),
        # The story below the table.
        "steps": [{"state": step["state"], "phase": _phase_name(step["phase"], lang), "state_text": words["step_" + step["state"]],
                   "seconds": ("%.2f s" % step["seconds"]) if step["seconds"] is not None and step["state"] != "skipped" else None}
                  for step in row["steps"]],
        "task": row["task"],
        "checks": [dict(check, phase=_phase_name(check["phase"], lang), text=failure_words.check_text(check, lang))
                   for check in row["checks"]],
        "gpu_list": [{"uuid": gpu["uuid"], "name": gpu["name"]} for gpu in gpus],
        "lanes": _lanes_drawing(row.get("timeline"), lang),
        # The Markdown table's link to the node's story.
        "story": quote(row["reports"]["markdown"]) if row["reports"].get("markdown") else None,
        # The report kept in the cluster: the kubectl command that reads it.
        "report_configmap": row.get("report_configmap"),
        "in_cluster": ("kubectl get configmap -n {0} {1} -o yaml".format(*row["report_configmap"].split("/", 1))
                       if row.get("report_configmap") else None),
    }


def page(summary):
    """What the summary's pages show (fleet.md.j2, fleet.html.j2): every text in the summary's language, every number
    formatted, every drawing's geometry; the templates only place it (and escape it, in HTML)."""
    lang = summary["lang"]
    words, counts, rows = _text(lang), summary["counts"], summary["rows"]
    starts = [(parse_time(row["started_at"]), row["total_seconds"] or 0) for row in rows if row["started_at"]]
    starts = [(start, total) for start, total in starts if start is not None]
    run_start = min(start for start, _total in starts) if starts else 0.0
    run_span = max(start + total for start, total in starts) - run_start if starts else 0.0
    numeric = ("units", "window", "memory", "total")
    show_freshness = summary["mode"] == "verdicts"
    columns = ("node", "status") + (("freshness",) if show_freshness else ()) + (
        "phase", "check", "reason", "units", "gpus", "allocation", "window", "vllm", "memory", "total", "reports")
    return {
        "lang": lang, "html_lang": "zh-CN" if lang == "zh" else "en", "words": words,
        "title": words["title"].format(nodes=counts["nodes"]), "run_id": summary["run_id"],
        "mode": words[summary["mode"]], "generated_at": summary["generated_at"] or "-", "verdict": _verdict(summary, words),
        "counts": counts, "statuses": [{"status": status, "count": counts[status], "text": words[status]} for status in STATUSES],
        "status_bar": _status_bar(counts, words), "status_bar_height": STATUS_BAR_HEIGHT, "window_bar_size": WINDOW_BAR,
        "by_check": [dict(group, phase=_phase_name(group["phase"], lang),
                          examples=", ".join(group["nodes"][:5]) + (" …" if len(group["nodes"]) > 5 else ""),
                          examples_md=", ".join(group["nodes"][:5])) for group in summary["by_check"]],
        "headers": [{"text": words[key], "numeric": key in numeric} for key in columns],
        # A summary of the Nodes' verdicts: how many still hold, and each node's in its own column.
        "show_freshness": show_freshness,
        "freshness": [{"state": state, "count": count,
                       "text": words["freshness_count"].format(state=words["freshness_" + state])}
                      for state, count in ((state, (summary.get("freshness") or {}).get(state, 0)) for state in FRESHNESS)
                      if count] if show_freshness else [],
        "rows": [_row_view(index, row, words, lang, run_start, run_span) for index, row in enumerate(rows)],
    }


def render_json(summary):
    """The JSON file: machine-readable, keys sorted, as the per-node JSON reports are written."""
    return json.dumps(machine_readable(summary), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
