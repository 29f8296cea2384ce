# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""One summary for a run of playbooks/gpu_demo.yml over many nodes: every node's row, then Markdown and HTML.

``fleet_summary`` takes what the play left per node (the role's result, or the play's own failure record when the
node failed before its report) and returns plain data: counts, failures grouped by check, one row per node, failures
first. ``render_markdown`` and ``render_html`` print it. Everything from the cluster (node names, messages) is
escaped in the HTML; the page needs no server and loads nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import html
import json
import time
import posixpath

try:
    from urllib.parse import quote
except ImportError:  # pragma: no cover - Python 2 is not supported by the collection, this keeps sanity's import test quiet
    from urllib import quote

STATUSES = ("failed", "not_run", "checked", "passed")
# The order a run goes through; a failure's phase sorts by it.
PHASES = ("input", "lock", "preflight", "prepare", "probe", "hold", "queue", "release", "cleanup", "report", "run")
# A role task's name starts with its phase ("Preflight | Refuse a node ..."); these prefixes are not phase names.
TASK_PHASES = {"delete": "release", "walk": "prepare", "leftovers": "prepare", "node": "preflight"}
STORY = (("preflight", None), ("hold", "hold_running"), ("queue", "queue_refused"),
         ("release", "release_to_queue_succeeded"), ("cleanup", "delete"))
MIB = 1024 * 1024

TEXT = {
    "en": {
        "title": "GPU scheduling pre-flight: {nodes} node(s)",
        "run": "Run", "generated": "Generated", "mode": "Mode", "serial": "one node at a time", "parallel": "in parallel",
        "passed": "passed", "failed": "failed", "checked": "check mode", "not_run": "not run",
        "verdict_ok": "Every node passed.", "verdict_bad": "{failed} of {nodes} node(s) failed.",
        "verdict_check": "Check mode: read-only checks only, nothing was created.",
        "by_check": "Failures by check", "check": "Check", "phase": "Phase", "count": "Nodes", "examples": "Nodes (first 5)",
        "nodes": "Nodes", "node": "Node", "status": "Status", "reason": "Why", "units": "Units held", "gpus": "GPUs seen",
        "window": "GPUs occupied", "vllm": "vLLM before / after", "memory": "Memory outside ledger",
        "total": "Run", "reports": "Reports", "story": "Story", "timeline": "timeline", "markdown": "story", "json": "JSON",
        "not_checked": "not checked", "no_answer": "no answer", "not_read": "not read", "none": "-",
        "not_run_serial": "not run: one node at a time, the run stopped after {node} failed",
        "no_result": "no result: the node's play ended before the pre-flight (unreachable, or stopped outside the role)",
        "checked_reason": "check mode: read-only checks passed, nothing was created",
        "stopped_at": "Stopped at", "failed_checks": "Failed checks", "steps": "Steps", "step_ok": "ok",
        "step_failed": "failed", "step_skipped": "not reached", "filter": "Filter", "only_failures": "failures only",
        "sort_hint": "Failures first; click a column to sort.", "read_on_node": "on the node", "read_in_hold": "in the hold pods",
        "back": "back to the table", "no_report": "no per-node report (the node failed before it)",
    },
    "zh": {
        "title": "GPU 调度预检：{nodes} 个节点",
        "run": "运行", "generated": "生成于", "mode": "方式", "serial": "逐个节点", "parallel": "并行",
        "passed": "通过", "failed": "未通过", "checked": "检查模式", "not_run": "未运行",
        "verdict_ok": "所有节点都通过了。", "verdict_bad": "{nodes} 个节点中有 {failed} 个未通过。",
        "verdict_check": "检查模式：只做只读检查，没有创建任何东西。",
        "by_check": "按检查项汇总的失败", "check": "检查项", "phase": "阶段", "count": "节点数", "examples": "节点（前 5 个）",
        "nodes": "节点", "node": "节点", "status": "结论", "reason": "原因", "units": "占用名额", "gpus": "看到的卡",
        "window": "占卡时长", "vllm": "vLLM 前 / 后", "memory": "账本外的显存",
        "total": "总用时", "reports": "报告", "story": "经过", "timeline": "时间线", "markdown": "经过", "json": "JSON",
        "not_checked": "未检查", "no_answer": "无响应", "not_read": "未读取", "none": "-",
        "not_run_serial": "未运行：逐个节点运行，{node} 未通过后停止",
        "no_result": "没有结果：这个节点的 play 在预检之前就结束了（连不上，或者在角色之外出错）",
        "checked_reason": "检查模式：只读检查通过，没有创建任何东西",
        "stopped_at": "停在", "failed_checks": "未通过的检查项", "steps": "步骤", "step_ok": "通过",
        "step_failed": "未通过", "step_skipped": "未进行", "filter": "筛选", "only_failures": "只看未通过",
        "sort_hint": "未通过的排在前面；点列名排序。", "read_on_node": "在节点上读取", "read_in_hold": "在占卡 Pod 里读取",
        "back": "回到表格", "no_report": "没有单节点报告（节点在报告之前就失败了）",
    },
}

PHASE_NAMES = {
    "zh": {"input": "输入", "lock": "加锁", "preflight": "预检", "prepare": "准备", "probe": "旁路探测", "hold": "占卡",
           "queue": "排队", "release": "放行", "cleanup": "收场", "report": "报告", "run": "运行"},
}


def _text(lang):
    return TEXT.get(lang) or TEXT["en"]


def _phase_name(phase, lang):
    return PHASE_NAMES.get(lang, {}).get(phase, phase)


def phase_of_task(task):
    """The phase a failed task belongs to, from the role's task names ("Preflight | ...") or the role's
    argument validation ("input")."""
    name = (task or "").strip()
    if not name:
        return "run"
    if "argument" in name.lower() and "spec" in name.lower():
        return "input"
    if " | " in name:
        prefix = name.split(" | ", 1)[0].strip().lower()
        prefix = prefix.split(" : ")[-1]
        prefix = TASK_PHASES.get(prefix, prefix)
        if prefix in PHASES:
            return prefix
    return "run"


def _relative(path, report_dir):
    """A per-node report's path as the summary links it: relative to the summary's directory."""
    if not path:
        return None
    if report_dir and posixpath.isabs(path) and posixpath.isabs(report_dir):
        return posixpath.relpath(path, report_dir)
    return path


def _seconds(value):
    try:
        return None if value is None else round(float(value), 3)
    except (TypeError, ValueError):
        return None


def _vllm(result):
    before = (result.get("before") or {}).get("vllm") or {}
    after = (result.get("after") or {}).get("vllm") or {}
    return {"checked": bool(before.get("checked")),
            "before": before.get("status"), "after": after.get("status") if after.get("checked") else None,
            "healthy_before": before.get("healthy"), "healthy_after": after.get("healthy") if after.get("checked") else None}


def _memory_outside_ledger(result):
    """Memory on the node's GPUs that the ledger does not account for: read on the node (node_processes: pods
    outside the ledger, host processes, unidentified), else in the hold pods (memory already used on the GPUs the
    demo held). None when neither was read."""
    audit = result.get("node_processes") or {}
    if audit.get("gpus"):
        total = 0
        for gpu in audit["gpus"]:
            memory = gpu.get("memory_bytes") or {}
            total += sum(int(memory.get(key) or 0) for key in ("out_of_ledger_pod", "host", "unidentified"))
        return {"bytes": total, "mib": total // MIB, "source": "node"}
    rows = (result.get("hold") or {}).get("memory") or []
    used = [row.get("used_bytes") for row in rows if isinstance(row.get("used_bytes"), int)]
    if used:
        return {"bytes": sum(used), "mib": sum(used) // MIB, "source": "hold"}
    return None


def _gpus(result):
    hold = result.get("hold") or {}
    units = hold.get("units") or []
    if units:
        return [{"uuid": unit.get("uuid"), "name": unit.get("gpu_name"), "kind": unit.get("kind")} for unit in units]
    return [{"uuid": uuid, "name": None, "kind": None} for uuid in hold.get("distinct_uuids") or []]


def _window(result):
    timeline = result.get("timeline") or {}
    window = timeline.get("window")
    if not window:
        return None
    return {"seconds": _seconds(window.get("seconds")), "start": window.get("start"), "end": window.get("end")}


def _steps(result, failed_phase):
    """The walk's phases as the node lived them: ok, failed, or not reached (no check of that phase ran)."""
    checks = result.get("checks") or []
    durations = result.get("durations") or {}
    steps = []
    for phase, duration_key in STORY:
        own = [check for check in checks if check.get("phase") == phase]
        if phase == failed_phase or any(not check.get("passed") for check in own):
            state = "failed"
        else:
            state = "ok" if own else "skipped"
        steps.append({"phase": phase, "state": state,
                      "seconds": _seconds(durations.get(duration_key)) if duration_key else None})
    if failed_phase and failed_phase not in [phase for phase, _key in STORY]:
        # A failure outside the walk's phases (the lock, for one) comes first: it stopped the run before them.
        steps.insert(0, {"phase": failed_phase, "state": "failed", "seconds": None})
    return steps


def _lanes(result):
    """The per-node report's pod lanes, as the summary's small timeline draws them (seconds since the first pod)."""
    timeline = result.get("timeline") or {}
    lanes = [{"pod": lane.get("pod"), "segments": [[segment.get("state"), segment.get("start"), segment.get("end")]
                                                   for segment in lane.get("segments") or []]}
             for lane in timeline.get("lanes") or []]
    window = timeline.get("window") or {}
    return {"span": _seconds(timeline.get("span")) or 0.0, "lanes": lanes,
            "window": [window.get("start_offset"), window.get("end_offset")] if window else None}


def node_row(host, result=None, failure=None, not_run_reason=None, report_dir=None, lang="en"):
    """One node's row: its status, where and why it failed, what it held and saw.

    ``result`` is the role's result for the node (``_gpu_demo_result``: the per-node JSON report), ``failure`` the
    play's record {task, message} of a failure that happened outside the role's own report (bad input, for one),
    ``not_run_reason`` why a node without either never ran.
    """
    words = _text(lang)
    row = {"host": host, "node": host, "status": "not_run", "phase": None, "check": None, "failed_checks": [],
           "reason": None, "message": None, "task": None, "resource": None, "allocation": None, "run_id": None, "units": None, "gpus": [], "window": None,
           "vllm": {"checked": False, "before": None, "after": None, "healthy_before": None, "healthy_after": None},
           "memory_outside_ledger": None, "started_at": None, "total_seconds": None, "reports": {}, "checks": [],
           "steps": [], "timeline": None}
    if isinstance(result, dict) and result:
        failed = [check for check in result.get("checks") or [] if not check.get("passed")]
        error = result.get("failure") or {}
        passed = bool(result.get("passed")) and not failed and not error
        if passed:
            row["status"] = "checked" if result.get("check_mode") else "passed"
            row["reason"] = words["checked_reason"] if result.get("check_mode") else None
        else:
            row["status"] = "failed"
            first = failed[0] if failed else None
            row["phase"] = first.get("phase") if first else phase_of_task(error.get("task"))
            row["check"] = first.get("id") if first else None
            row["reason"] = (first.get("detail") if first else None) or error.get("message") or "error"
            row["task"] = error.get("task")
            row["message"] = error.get("message")
        plan = result.get("plan") or {}
        hold = result.get("hold") or {}
        files = result.get("report_files") or {}
        row.update(
            node=result.get("node") or host, resource=result.get("resource"), run_id=result.get("run_id"),
            # device_plugin, or dra: the node's GPUs came through ResourceClaims (the per-node report has the claims).
            allocation=(result.get("before") or {}).get("allocation"),
            failed_checks=[check.get("id") for check in failed],
            units=hold.get("units_seen") if hold.get("units_seen") else (plan.get("units") if row["status"] == "checked" else None),
            gpus=_gpus(result), window=_window(result), vllm=_vllm(result),
            memory_outside_ledger=_memory_outside_ledger(result), started_at=result.get("started_at"),
            total_seconds=_seconds((result.get("durations") or {}).get("total")),
            reports={kind: _relative(path, report_dir) for kind, path in sorted(files.items()) if path},
            # The failed ones only: the per-node report has every check.
            checks=[{"id": check.get("id"), "phase": check.get("phase"), "detail": check.get("detail")} for check in failed],
            steps=_steps(result, row["phase"]), timeline=_lanes(result))
    elif isinstance(failure, dict) and failure:
        row.update(status="failed", phase=phase_of_task(failure.get("task")), task=failure.get("task"),
                   reason=failure.get("message") or "error", message=failure.get("message"))
        row["steps"] = [{"phase": row["phase"], "state": "failed", "seconds": None}]
    else:
        row["reason"] = not_run_reason or words["no_result"]
    return row


def failure_sentence(row):
    """What the play says when it fails a node: the role's own words (its failed checks, then its failure message)."""
    return "GPU scheduling demo on %s failed: %s: %s" % (
        row["node"], ", ".join(row["failed_checks"]) or "error", row["message"] or row["reason"] or "error")


def _sort_key(row):
    phase = PHASES.index(row["phase"]) if row["phase"] in PHASES else len(PHASES)
    return (STATUSES.index(row["status"]), phase, row["check"] or "", row["host"])


def fleet_summary(hosts, results=None, failures=None, run_id="", mode="parallel", report_dir=None, generated_at=None,
                  lang="en"):
    """Every node of a run -> {run_id, counts, by_check, rows (failures first), ...}.

    ``hosts``: the inventory hosts the run targeted, in the play's order; ``results``: {host: the role's result or
    None}; ``failures``: {host: {task, message} or None} for nodes that failed outside the role's report.
    In a one-node-at-a-time run (``mode`` serial) the play stops at the first failed node: the nodes after it have no
    result and are "not run", naming that node.
    """
    if mode not in ("serial", "parallel"):
        raise ValueError("mode must be serial or parallel, not %r" % (mode,))
    results, failures, words = results or {}, failures or {}, _text(lang)
    rows, first_failed = [], None
    for host in hosts or []:
        reason = None
        if mode == "serial" and first_failed is not None:
            reason = words["not_run_serial"].format(node=first_failed)
        row = node_row(host, results.get(host), failures.get(host), not_run_reason=reason, report_dir=report_dir, lang=lang)
        if row["status"] == "failed" and first_failed is None:
            first_failed = host
        rows.append(row)
    rows.sort(key=_sort_key)
    counts = dict((status, 0) for status in STATUSES)
    for row in rows:
        counts[row["status"]] += 1
    counts["nodes"] = len(rows)
    groups = {}
    for row in rows:
        if row["status"] == "failed":
            key = (row["phase"], row["check"] or "")
            groups.setdefault(key, []).append(row["host"])
    by_check = [{"phase": phase, "check": check or None, "count": len(nodes), "nodes": nodes}
                for (phase, check), nodes in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))]
    started = sorted(row["started_at"] for row in rows if row["started_at"])
    return {"run_id": run_id, "mode": mode, "lang": lang if lang in TEXT else "en", "generated_at": generated_at,
            "started_at": started[0] if started else None, "report_dir": report_dir,
            "passed": counts["failed"] == 0 and counts["not_run"] == 0,
            "counts": counts, "by_check": by_check, "rows": rows}


def machine_readable(summary):
    """What the JSON file and set_stats carry: the summary without the drawing data of each row."""
    rows = [dict((key, value) for key, value in row.items() if key != "timeline") for row in summary["rows"]]
    return dict(summary, rows=rows)


# -- Markdown ---------------------------------------------------------------------------------------------------------

def _md(text):
    """A table cell: one line, pipes escaped."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip()


def _gpu_text(gpus):
    if not gpus:
        return None
    names = {}
    for gpu in gpus:
        name = gpu.get("name") or "GPU"
        names[name] = names.get(name, 0) + 1
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


def _window_text(window):
    return "%.2f s" % window["seconds"] if window and window.get("seconds") is not None else "-"


def render_markdown(summary):
    """The summary for people, in the language of ``summary['lang']`` (the per-node reports' style)."""
    lang = summary["lang"]
    words, counts = _text(lang), summary["counts"]
    lines = ["# " + words["title"].format(nodes=counts["nodes"]), ""]
    if counts["failed"]:
        lines.append("**" + words["verdict_bad"].format(failed=counts["failed"], nodes=counts["nodes"]) + "**")
    elif counts["checked"] and not counts["passed"]:
        lines.append("**" + words["verdict_check"] + "**")
    elif not counts["not_run"]:
        lines.append("**" + words["verdict_ok"] + "**")
    lines += ["", "| | |", "|---|---|",
              "| %s | `%s` |" % (words["run"], _md(summary["run_id"])),
              "| %s | %s |" % (words["mode"], words[summary["mode"]]),
              "| %s | %s |" % (words["generated"], _md(summary["generated_at"] or "-"))]
    lines += ["| %s | %d |" % (words[status], counts[status]) for status in STATUSES if counts[status]]
    if summary["by_check"]:
        lines += ["", "## " + words["by_check"], "",
                  "| %s | %s | %s | %s |" % (words["phase"], words["check"], words["count"], words["examples"]),
                  "|---|---|---|---|"]
        for group in summary["by_check"]:
            lines.append("| %s | %s | %d | %s |" % (_md(_phase_name(group["phase"], lang)), _md(group["check"] or "-"),
                                                    group["count"], _md(", ".join(group["nodes"][:5]))))
    lines += ["", "## " + words["nodes"], "",
              "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                  words["node"], words["status"], words["phase"], words["check"], words["reason"], words["units"],
                  words["gpus"], words["window"], words["vllm"], words["memory"]),
              "|---|---|---|---|---|---|---|---|---|---|"]
    for row in summary["rows"]:
        story = row["reports"].get("markdown")
        node = "[%s](%s)" % (_md(row["host"]), quote(story)) if story else _md(row["host"])
        status = words[row["status"]]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            node, "**%s**" % status if row["status"] == "failed" else status,
            _md(_phase_name(row["phase"], lang)) if row["phase"] else "-", _md(row["check"] or "-"),
            _md(row["reason"] or "-"), "-" if row["units"] is None else row["units"], _md(_gpu_text(row["gpus"]) or "-"),
            _window_text(row["window"]), _md(_vllm_text(row["vllm"], words)),
            _md(_memory_text(row["memory_outside_ledger"], words))))
    return "\n".join(lines) + "\n"


# -- HTML -------------------------------------------------------------------------------------------------------------

def _e(value):
    """Escape for HTML text and attribute values (quotes too)."""
    return html.escape("" if value is None else str(value), quote=True)


def _href(path):
    """A relative link to a per-node file: percent-encoded, so nothing in a name can leave the attribute or become a
    javascript: URL."""
    return _e(quote(path, safe="/"))


COLORS = {"pending": "#c9ced6", "unschedulable": "#f0a04b", "starting": "#9ec5ef", "running": "#2f7fd3",
          "succeeded": "#3aa55d", "failed": "#d1453b", "terminating": "#8a6fc9"}
STATUS_COLORS = {"failed": "#d1453b", "not_run": "#8a8f98", "checked": "#2f7fd3", "passed": "#3aa55d"}

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Noto Sans CJK SC",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0 0 4px;font-size:20px}header p{margin:0;color:#c9ced6}
main{padding:16px 24px}.tiles{display:flex;gap:12px;flex-wrap:wrap;margin:0 0 12px}
.tile{background:#fff;border-radius:6px;padding:8px 14px;border-left:6px solid #999;min-width:110px}
.tile b{display:block;font-size:22px}.tile.failed{border-color:#d1453b}.tile.passed{border-color:#3aa55d}
.tile.not_run{border-color:#8a8f98}.tile.checked{border-color:#2f7fd3}.tile.nodes{border-color:#1d2330}
section.box{background:#fff;border-radius:6px;padding:12px 16px;margin:0 0 16px}h2{font-size:16px;margin:0 0 8px}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{background:#eef0f3;position:sticky;top:0;cursor:pointer;white-space:nowrap;user-select:none}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
td.reason{min-width:14em;max-width:34em;overflow-wrap:break-word}#nodes td:first-child,#nodes td.nowrap{white-space:nowrap}
#nodes{font-size:13px}td.num{text-align:right;white-space:nowrap}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;white-space:nowrap}
.badge.failed{background:#d1453b}.badge.passed{background:#3aa55d}.badge.not_run{background:#8a8f98}.badge.checked{background:#2f7fd3}
tr.failed td{background:#fff5f4}code{font-size:12px}.muted{color:#6b7280}.tools{margin:0 0 8px;display:flex;gap:16px;align-items:center}
details.node{background:#fff;border-radius:6px;margin:0 0 6px;padding:6px 12px}details.node summary{cursor:pointer}
details.node:target{outline:2px solid #2f7fd3}.steps span{display:inline-block;margin:2px 6px 2px 0;padding:1px 8px;border-radius:4px;font-size:12px}
.step-ok{background:#e3f4e8}.step-failed{background:#fbe1de}.step-skipped{background:#eef0f3;color:#6b7280}
.table-wrap{max-height:75vh;overflow:auto}
"""

# Inline, no external script: sort a column on click (numbers by data-v), filter rows by text and status.
SCRIPT = """
(function(){
var table=document.getElementById('nodes'),body=table.tBodies[0];
function value(row,index){var cell=row.cells[index];var v=cell.getAttribute('data-v');return v===null?cell.textContent.trim().toLowerCase():v;}
Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,index){th.addEventListener('click',function(){
 var ascending=th.getAttribute('aria-sort')!=='ascending';
 Array.prototype.forEach.call(table.tHead.rows[0].cells,function(other){other.removeAttribute('aria-sort');});
 th.setAttribute('aria-sort',ascending?'ascending':'descending');
 var rows=Array.prototype.slice.call(body.rows),numeric=th.getAttribute('data-type')==='num';
 rows.sort(function(a,b){var x=value(a,index),y=value(b,index);
  if(numeric){x=x===''?-1:parseFloat(x);y=y===''?-1:parseFloat(y);}
  return (x<y?-1:x>y?1:0)*(ascending?1:-1);});
 rows.forEach(function(row){body.appendChild(row);});});});
var text=document.getElementById('filter'),only=document.getElementById('only-failures');
function apply(){var needle=text.value.toLowerCase();Array.prototype.forEach.call(body.rows,function(row){
 var show=(!only.checked||row.classList.contains('failed'))&&(!needle||row.textContent.toLowerCase().indexOf(needle)>=0);
 row.style.display=show?'':'none';});}
text.addEventListener('input',apply);only.addEventListener('change',apply);
function open(){var target=location.hash&&document.getElementById(location.hash.slice(1));if(target&&target.tagName==='DETAILS'){target.open=true;}}
window.addEventListener('hashchange',open);open();
})();
"""


def _status_bar(counts, words, width=600, height=18):
    """The run at a glance: one stacked bar, a segment per status."""
    total = max(counts["nodes"], 1)
    parts, x = [], 0.0
    for status in STATUSES:
        if not counts[status]:
            continue
        share = counts[status] * float(width) / total
        parts.append('<rect x="%.1f" y="0" width="%.1f" height="%d" fill="%s"><title>%s: %d</title></rect>' % (
            x, share, height, STATUS_COLORS[status], _e(words[status]), counts[status]))
        x += share
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s">%s</svg>'
            % (width, height, _e(words["status"]), "".join(parts)))


def _window_bar(row, run_start, run_span, width=80, height=12):
    """A node's run and its occupied window on the run's common time axis (where a node's GPUs were held)."""
    started = _epoch(row["started_at"])
    if started is None or run_span <= 0:
        return ""
    scale = width / run_span
    x = (started - run_start) * scale
    length = max((row["total_seconds"] or 0) * scale, 1.0)
    parts = ['<rect x="%.1f" y="3" width="%.1f" height="%d" fill="#c9ced6"/>' % (x, length, height - 6)]
    window = row["window"]
    if window and window.get("start") and window.get("end"):
        start, end = _epoch(window["start"]), _epoch(window["end"])
        if start is not None and end is not None:
            parts.append('<rect x="%.1f" y="0" width="%.1f" height="%d" fill="#2f7fd3"/>' % (
                (start - run_start) * scale, max((end - start) * scale, 1.0), height))
    return '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">%s</svg>' % (width, height, "".join(parts))


def _epoch(iso):
    """'2026-11-30T21:39:37Z' or with fractions -> epoch seconds (None when unreadable)."""
    if not iso:
        return None
    text = str(iso).rstrip("Z")
    fraction = 0.0
    if "." in text:
        text, digits = text.split(".", 1)
        try:
            fraction = float("0." + "".join(ch for ch in digits if ch.isdigit()) or "0")
        except ValueError:
            fraction = 0.0
    try:
        return calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) + fraction
    except ValueError:
        return None


def _lanes_svg(timeline, width=520, lane_height=16):
    """The node's pods and their phases (the per-node SVG's upper half), small and inline."""
    lanes = (timeline or {}).get("lanes") or []
    if not lanes:
        return ""
    span, left = max(float(timeline.get("span") or 0), 1.0), 200
    height = lane_height * len(lanes) + 4
    parts = []
    window = timeline.get("window")
    if window and window[0] is not None and window[1] is not None:
        parts.append('<rect x="%.1f" y="0" width="%.1f" height="%d" fill="#fff4d6"/>' % (
            left + window[0] / span * width, max((window[1] - window[0]) / span * width, 1.0), height))
    for index, lane in enumerate(lanes):
        y = index * lane_height + 2
        parts.append('<text x="%d" y="%d" text-anchor="end" font-size="11">%s</text>' % (left - 6, y + 11, _e(lane["pod"])))
        for state, start, end in lane["segments"]:
            start, end = float(start or 0), float(end or 0)
            parts.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %.2f-%.2f s</title></rect>' % (
                left + start / span * width, y + 1, max((end - start) / span * width, 1.5), lane_height - 4,
                COLORS.get(state, "#999"), _e(state), start, end))
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">%s</svg>'
            % (left + width + 10, height, "".join(parts)))


def _cell(text, sort_value=None, css=None, title=None):
    attributes = ""
    if css:
        attributes += ' class="%s"' % css
    if sort_value is not None:
        attributes += ' data-v="%s"' % _e(sort_value)
    if title:
        attributes += ' title="%s"' % _e(title)
    return "<td%s>%s</td>" % (attributes, text)


def _links(row, words):
    reports = row["reports"]
    links = []
    for kind, label, short in (("markdown", words["markdown"], "md"), ("svg", words["timeline"], "svg"), ("json", words["json"], "json")):
        if reports.get(kind):
            links.append('<a href="%s" title="%s">%s</a>' % (_href(reports[kind]), _e(label), short))
    return " · ".join(links)


def render_html(summary):
    """One self-contained page: inline CSS, SVG and script, nothing loaded from anywhere; every value escaped."""
    lang = summary["lang"]
    words, counts, rows = _text(lang), summary["counts"], summary["rows"]
    starts = [(_epoch(row["started_at"]), row["total_seconds"] or 0) for row in rows if row["started_at"]]
    starts = [(start, total) for start, total in starts if start is not None]
    run_start = min(start for start, _total in starts) if starts else 0.0
    run_span = max(start + total for start, total in starts) - run_start if starts else 0.0
    out = ['<!DOCTYPE html>\n<html lang="%s"><head><meta charset="utf-8">' % ("zh-CN" if lang == "zh" else "en"),
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           # Nothing may be loaded from elsewhere, even if a value slipped through unescaped.
           '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
           'script-src \'unsafe-inline\'; img-src data:">',
           "<title>%s</title><style>%s</style></head><body>" % (_e(words["title"].format(nodes=counts["nodes"])), CSS)]
    if counts["failed"]:
        verdict = words["verdict_bad"].format(failed=counts["failed"], nodes=counts["nodes"])
    elif counts["checked"] and not counts["passed"]:
        verdict = words["verdict_check"]
    else:
        verdict = words["verdict_ok"] if not counts["not_run"] else ""
    out.append('<header><h1>%s</h1><p>%s <code>%s</code> · %s: %s · %s %s</p><p id="verdict">%s</p></header><main>' % (
        _e(words["title"].format(nodes=counts["nodes"])), _e(words["run"]), _e(summary["run_id"]), _e(words["mode"]),
        _e(words[summary["mode"]]), _e(words["generated"]), _e(summary["generated_at"] or "-"), _e(verdict)))
    out.append('<div class="tiles"><div class="tile nodes"><b>%d</b>%s</div>' % (counts["nodes"], _e(words["nodes"])))
    for status in STATUSES:
        out.append('<div class="tile %s" id="count-%s"><b>%d</b>%s</div>' % (status, status, counts[status], _e(words[status])))
    out.append("</div>" + _status_bar(counts, words))
    if summary["by_check"]:
        labels = tuple(_e(words[key]) for key in ("by_check", "phase", "check", "count", "examples"))
        out.append('<section class="box" id="by-check"><h2>%s</h2><table><thead><tr><th>%s</th><th>%s</th><th>%s</th>'
                   '<th>%s</th></tr></thead><tbody>' % labels)
        for group in summary["by_check"]:
            out.append("<tr><td>%s</td><td><code>%s</code></td><td class=\"num\">%d</td><td>%s</td></tr>" % (
                _e(_phase_name(group["phase"], lang)), _e(group["check"] or "-"), group["count"],
                _e(", ".join(group["nodes"][:5]) + (" …" if len(group["nodes"]) > 5 else ""))))
        out.append("</tbody></table></section>")
    headers = [(words["node"], None), (words["status"], None), (words["phase"], None), (words["check"], None),
               (words["reason"], None), (words["units"], "num"), (words["gpus"], None), (words["window"], "num"),
               (words["vllm"], None), (words["memory"], "num"), (words["total"], "num"), (words["reports"], None)]
    out.append('<section class="box"><h2>%s</h2><div class="tools"><label>%s <input id="filter" type="search"></label>'
               '<label><input id="only-failures" type="checkbox"> %s</label><span class="muted">%s</span></div>'
               '<div class="table-wrap"><table id="nodes"><thead><tr>%s</tr></thead><tbody>' % (
                   _e(words["nodes"]), _e(words["filter"]), _e(words["only_failures"]), _e(words["sort_hint"]),
                   "".join('<th%s>%s</th>' % (' data-type="num"' if kind else "", _e(label)) for label, kind in headers)))
    for index, row in enumerate(rows):
        anchor = "node-%d" % index
        status_rank = STATUSES.index(row["status"])
        gpus = row["gpus"]
        memory = row["memory_outside_ledger"]
        window = row["window"]
        cells = [
            _cell('<a href="#%s">%s</a>%s' % (anchor, _e(row["host"]),
                                              (' <span class="muted">(%s)</span>' % _e(row["node"])) if row["node"] != row["host"] else ""),
                  sort_value=row["host"]),
            _cell('<span class="badge %s">%s</span>' % (row["status"], _e(words[row["status"]])), sort_value=status_rank),
            _cell(_e(_phase_name(row["phase"], lang) if row["phase"] else "-"),
                  sort_value="%02d" % (PHASES.index(row["phase"]) if row["phase"] in PHASES else 99)),
            _cell("<code>%s</code>" % _e(row["check"]) if row["check"] else "-", sort_value=row["check"] or "~"),
            _cell(_e(row["reason"] or "-"), css="reason"),
            _cell("-" if row["units"] is None else str(int(row["units"])), sort_value="" if row["units"] is None else row["units"],
                  css="num"),
            _cell(_e(_gpu_text(gpus) or "-"), title=" ".join(gpu["uuid"] or "" for gpu in gpus) or None, css="nowrap"),
            _cell(_e(_window_text(window)) + " " + _window_bar(row, run_start, run_span),
                  sort_value="" if not window or window.get("seconds") is None else window["seconds"], css="num"),
            _cell(_e(_vllm_text(row["vllm"], words)), css="nowrap"),
            _cell(_e("-" if memory is None else "%d MiB" % memory["mib"]), sort_value="" if memory is None else memory["mib"],
                  css="num", title=_memory_text(memory, words)),
            _cell(_e("-" if row["total_seconds"] is None else "%.1f s" % row["total_seconds"]),
                  sort_value="" if row["total_seconds"] is None else row["total_seconds"], css="num"),
            _cell(_links(row, words) or '<span class="muted">-</span>', css="nowrap"),
        ]
        out.append('<tr class="%s" data-node="%s">%s</tr>' % (row["status"], _e(row["host"]), "".join(cells)))
    out.append("</tbody></table></div></section>")
    out.append('<section class="box" id="stories"><h2>%s</h2>' % _e(words["story"]))
    for index, row in enumerate(rows):
        out.append(_story(row, "node-%d" % index, words, lang))
    out.append("</section></main><script>%s</script></body></html>\n" % SCRIPT)
    return "".join(out)


def _story(row, anchor, words, lang):
    parts = ['<details class="node" id="%s"><summary><span class="badge %s">%s</span> <b>%s</b> %s</summary>' % (
        anchor, row["status"], _e(words[row["status"]]),
        _e(row["host"]), _e(row["reason"] or ""))]
    if row["steps"]:
        parts.append('<p class="steps">%s: %s</p>' % (_e(words["steps"]), "".join(
            '<span class="step-%s">%s: %s%s</span>' % (
                step["state"], _e(_phase_name(step["phase"], lang)), _e(words["step_" + step["state"]]),
                (" (%.2f s)" % step["seconds"]) if step["seconds"] is not None and step["state"] != "skipped" else "")
            for step in row["steps"])))
    if row["task"]:
        parts.append("<p>%s <i>%s</i>: %s</p>" % (_e(words["stopped_at"]), _e(row["task"]), _e(row["reason"])))
    failed = row["checks"]
    if failed:
        parts.append("<p>%s:</p><ul>%s</ul>" % (_e(words["failed_checks"]), "".join(
            "<li><code>%s</code> (%s): %s</li>" % (_e(check["id"]), _e(_phase_name(check["phase"], lang)), _e(check["detail"]))
            for check in failed)))
    if row["gpus"]:
        parts.append("<p>%s: %s</p>" % (_e(words["gpus"]), ", ".join(
            "<code>%s</code>%s" % (_e(gpu["uuid"]), (" " + _e(gpu["name"])) if gpu["name"] else "") for gpu in row["gpus"])))
    parts.append(_lanes_svg(row["timeline"]))
    links = _links(row, words)
    parts.append('<p>%s · <a href="#nodes">%s</a></p></details>' % (links or _e(words["no_report"]), _e(words["back"])))
    return "".join(parts)


def render_json(summary):
    """The JSON file: machine-readable, keys sorted, as the per-node JSON reports are written."""
    return json.dumps(machine_readable(summary), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
