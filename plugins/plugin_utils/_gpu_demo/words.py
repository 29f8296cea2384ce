# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""A run's failure in the run's language (``gpu_demo_report_lang``): what the play prints, the summary, the JUnit.

The judges write each check's ``detail`` in English: it is what docs/checks.md quotes, what the Node's condition and
Event carry (one language for every team on the cluster) and what people search for. Said in Chinese, a failed check
reads as a Chinese sentence: the one its detail's form has in ``MESSAGES`` (the values, which come from the cluster,
quoted), else what the check proves (``CHECK_SENTENCES``) with the whole English detail quoted as the original. What
Kubernetes, the kubelet or an API server wrote (an event, a scheduler message, an API error, a URL) stays as it was
written, quoted. In English every function here returns the text the role has always written, byte for byte.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.rows import failure_sentence

LANGS = ("en", "zh")

# Every check id's sentence, in both languages: what the check proves. The English one is the registry's title
# (plugins/module_utils/_gpu_demo/checks.py; a unit test holds them equal and every id to both languages).
CHECK_SENTENCES = {
    "node_name_valid": {
        "en": "The node name is a valid Kubernetes node name that fits in a label value.",
        "zh": "节点名是合法的 Kubernetes 节点名，并且能放进标签值。"},
    "hold_outlives_waits": {
        "en": "The hold pods sleep longer than the hold and queue waits together.",
        "zh": "占位 Pod 睡眠的时间比占卡和排队两次等待加起来还长。"},
    "timeout_usable": {
        "en": "The wait timeout is at least one second.",
        "zh": "等待超时至少 1 秒。"},
    "vllm_healthy_before": {
        "en": "The inference server is healthy before anything is created.",
        "zh": "创建任何东西之前，推理服务是健康的。"},
    "node_found": {
        "en": "The node exists and offers the GPU resource (device plugin) or devices of the DeviceClass (DRA).",
        "zh": "节点存在，并提供这种 GPU 资源（设备插件）或这个 DeviceClass 的设备（DRA）。"},
    "allocation_valid": {
        "en": "The allocation path asked for is auto, device_plugin or dra.",
        "zh": "要求的分配方式是 auto、device_plugin 或 dra 之一。"},
    "node_ready": {
        "en": "The node is Ready.",
        "zh": "节点处于 Ready。"},
    "node_schedulable": {
        "en": "The node is not cordoned.",
        "zh": "节点没有被 cordon。"},
    "node_taints_tolerated": {
        "en": "The demo pods tolerate every NoSchedule and NoExecute taint of the node.",
        "zh": "演示 Pod 容忍节点上每个 NoSchedule 和 NoExecute 污点。"},
    "resource_allocatable": {
        "en": "The node has at least one allocatable unit of the resource.",
        "zh": "节点上至少有一个可用的名额（设备插件）或设备（DRA）。"},
    "node_not_busy": {
        "en": "No other pod holds a unit of the resource on the node (unless a busy node is allowed).",
        "zh": "节点上没有别的 Pod 占着这种资源（除非允许繁忙节点）。"},
    "extended_resource_served": {
        "en": "Through DRA with plain requests, the DeviceClass serves the resource the pods ask for.",
        "zh": "通过 DRA 普通申请时，DeviceClass 提供 Pod 申请的那种资源。"},
    "free_units": {
        "en": "On a busy node that is allowed, at least one unit is free to hold.",
        "zh": "允许繁忙节点时，至少还有一个空闲名额可以占。"},
    "verdict_permitted": {
        "en": "The run's identity may write the verdict on the Node.",
        "zh": "这次运行的身份可以把结论写到 Node 上。"},
    "demo_pods_admitted": {
        "en": "The API server admits the demo pods (a server-side dry run).",
        "zh": "API 服务器接受演示 Pod（服务端试运行）。"},
    "demo_pods_never_preempt": {
        "en": "The demo pods get preemptionPolicy Never from their PriorityClass.",
        "zh": "演示 Pod 从 PriorityClass 得到 preemptionPolicy: Never。"},
    "hold_running": {
        "en": "The hold pods, which request every free unit, are Running on the node.",
        "zh": "申请全部空闲名额的占位 Pod 在这个节点上 Running。"},
    "hold_never_preempts": {
        "en": "The running hold pods have preemptionPolicy Never.",
        "zh": "运行中的占位 Pod 的 preemptionPolicy 是 Never。"},
    "hold_one_gpu_per_unit": {
        "en": "Each hold pod sees exactly as many devices as it holds units, each unit its own.",
        "zh": "每个占位 Pod 看到的设备数正好等于它占的名额，每个名额各是一张。"},
    "hold_env_corroborates": {
        "en": "What the device plugin handed over names the devices nvidia-smi shows in the pod.",
        "zh": "设备插件交付的内容与 Pod 里 nvidia-smi 看到的设备一致。"},
    "hold_devices_prepared": {
        "en": "Through DRA, each hold pod sees the device its claim was allocated.",
        "zh": "通过 DRA 时，每个占位 Pod 看到的正是它的 claim 分到的设备。"},
    "queue_pending": {
        "en": "One more pod asking for a unit stays Pending, with no node and no IP.",
        "zh": "再申请一个名额的 Pod 停在 Pending，没有节点也没有 IP。"},
    "queue_insufficient": {
        "en": "The scheduler refuses it for want of the resource (Insufficient, or cannot allocate all claims).",
        "zh": "调度器因为资源不够拒绝它（`Insufficient`，或 `cannot allocate all claims`）。"},
    "ledger_full": {
        "en": "The node's ledger reads free 0, held by the hold pods, with the queue pod pending on it.",
        "zh": "排队 Pod 等待时，节点账本剩余 0，由占位 Pod 占满，排队 Pod 在等这个资源。"},
    "hold_not_preempted": {
        "en": "The hold pods are still Running while the queue pod waits.",
        "zh": "排队 Pod 等待期间，占位 Pod 仍然 Running。"},
    "hold_devices_healthy": {
        "en": "The kubelet reports no device the hold pods were given Unhealthy.",
        "zh": "kubelet 没有把交给占位 Pod 的任何设备报告为 Unhealthy。"},
    "hold_released": {
        "en": "The hold pods are deleted.",
        "zh": "占位 Pod 已删除。"},
    "queue_ran_on_node": {
        "en": "The queue pod is then scheduled on the node and Succeeds.",
        "zh": "随后排队 Pod 被调度到这个节点并 Succeeded。"},
    "queue_got_held_gpu": {
        "en": "The queue pod saw a GPU the hold had.",
        "zh": "排队 Pod 看到的是占位 Pod 占过的卡。"},
    "run_pods_gone": {
        "en": "No pod of the run is left.",
        "zh": "这次运行的 Pod 一个不剩。"},
    "ledger_restored": {
        "en": "The node's ledger is what it was before the run.",
        "zh": "节点账本回到运行前的样子。"},
    "vllm_unchanged": {
        "en": "The inference server answers as it did before the run.",
        "zh": "推理服务的回答和运行前一样。"},
    "claims_gone": {
        "en": "Through DRA, no ResourceClaim or ResourceClaimTemplate of the run is left.",
        "zh": "通过 DRA 时，这次运行的 ResourceClaim 和 ResourceClaimTemplate 一个不剩。"},
}

# Not a check: why a node of a summary has no result.
NOT_RUN = "not_run"

# The forms of a failed check's detail that have a Chinese sentence of their own: (check id, the English form as a
# regular expression over the whole detail, the Chinese sentence). Each named group is a value from the cluster or the
# run (a node, a URL, the original error) and is quoted where it is placed; {raw_<name>} places it unquoted (a command).
# The forms are docs/checks.md's messages; a unit test renders every one of them.
MESSAGES = (
    ("node_name_valid",
     r"node name '(?P<node>.*)' is not a valid node name that fits in a label value \(at most 63 characters: "
     r"a-z, 0-9, '-', '\.'\): set gpu_demo_node to the name kubectl get nodes shows",
     "节点名 {node} 不是合法的节点名，或放不进标签值（最多 63 个字符：a-z、0-9、`-`、`.`）：把 `gpu_demo_node` "
     "设成 `kubectl get nodes` 显示的名字"),
    ("hold_outlives_waits",
     r"gpu_demo_hold_seconds \((?P<hold>[^)]*)\) must exceed twice gpu_demo_timeout \((?P<timeout>[^)]*)\): .*",
     "`gpu_demo_hold_seconds`（{hold}）必须大于 `gpu_demo_timeout`（{timeout}）的两倍：占位要比等占位和等排队两次等待"
     "都长（不设 `gpu_demo_hold_seconds` 即可：默认值由超时算出）"),
    ("timeout_usable",
     r"gpu_demo_timeout \((?P<timeout>[^)]*)\) must be at least 1 second: .*",
     "`gpu_demo_timeout`（{timeout}）至少要 1 秒：设成 0 时，任何等待（包括收场的等待）都看不到 Pod 离开"),
    ("vllm_healthy_before",
     r"inference server (?P<url>\S+) did not answer: (?P<error>.*); refusing the node "
     r"\(gpu_demo_vllm_require_healthy=true\)",
     "推理服务 {url} 没有应答，原话：{error}；因此拒绝这个节点（`gpu_demo_vllm_require_healthy=true`）"),
    ("vllm_healthy_before",
     r"inference server (?P<url>\S+) answered (?P<status>\S+) in (?P<ms>\S+) ms; refusing the node "
     r"\(gpu_demo_vllm_require_healthy=true\)",
     "推理服务 {url} 的回答是 {status}（{ms} 毫秒），不是健康的回答；因此拒绝这个节点"
     "（`gpu_demo_vllm_require_healthy=true`）"),
    ("node_found",
     r"node '(?P<node>[^']*)' not found on (?P<server>\S+)",
     "API 服务器 {server} 上没有节点 {node}"),
    ("node_found",
     r"forbidden \(403\) to (?P<action>.+) on (?P<server>\S+): (?P<message>.*)",
     "API 服务器 {server} 拒绝了这个操作（403）：{action}，原话：{message}"),
    ("node_found",
     r"cannot reach (?P<server>\S+) \(connection refused\) when trying to (?P<action>.+)",
     "连不上 API 服务器 {server}（connection refused），当时在做：{action}"),
    ("allocation_valid",
     r"gpu_demo_allocation is '(?P<value>.*)': it must be one of auto, device_plugin, dra",
     "`gpu_demo_allocation` 是 {value}：必须是 `auto`、`device_plugin`、`dra` 之一"),
    ("node_ready",
     r"node (?P<node>\S+) is not Ready: .*",
     "节点 {node} 不是 Ready：kubelet 报告 Ready 之前，调度器不会往那里放任何东西。看节点的 condition"
     "（`kubectl describe node {raw_node}`）和节点上 kubelet 的日志"),
    ("node_schedulable",
     r"node (?P<node>\S+) is cordoned \(spec\.unschedulable\): .*",
     "节点 {node} 被 cordon 了（`spec.unschedulable`）：调度器不会往那里放新的 Pod。节点可以接活时再 uncordon"
     "（`kubectl uncordon {raw_node}`）"),
    ("node_not_busy",
     r"(?P<held>.+); refusing a busy node \(gpu_demo_allow_busy_node=false\): wait for them to end, or set "
     r"gpu_demo_allow_busy_node=true to hold only the free (?:units|devices) "
     r"\(kubectl get pods -A --field-selector spec\.nodeName=(?P<node>[^)\s]+)\)",
     "节点正忙，别的 Pod 占着：{held}；拒绝繁忙节点（`gpu_demo_allow_busy_node=false`）：等它们结束，或者设置 "
     "`gpu_demo_allow_busy_node=true` 只占空闲的部分（`kubectl get pods -A --field-selector spec.nodeName={raw_node}`）"),
    ("free_units",
     r"0 free (?:unit|device)\(s\) of (?P<resource>\S+) to hold: other pods hold every (?:unit|device); run again when "
     r"one ends \(kubectl get pods -A --field-selector spec\.nodeName=(?P<node>[^)\s]+)\)",
     "{resource} 没有空闲的可占：别的 Pod 占满了；等其中一个结束后再运行"
     "（`kubectl get pods -A --field-selector spec.nodeName={raw_node}`）"),
    ("verdict_permitted",
     r"this identity may not write the verdict on node (?P<node>\S+): it lacks (?P<rules>.+) \(grant them with "
     r"playbooks/preflight_rbac\.yml, or set gpu_demo_verdict: false\)",
     "这次运行的身份不能把结论写到节点 {node} 上：缺少权限 {rules}（用 `playbooks/preflight_rbac.yml` 授权，"
     "或者设置 `gpu_demo_verdict: false`）"),
    ("demo_pods_admitted",
     r"namespace (?P<namespace>\S+) does not exist: .*",
     "命名空间 {namespace} 不存在：演示 Pod 要建在那里。创建它（`kubectl create namespace {raw_namespace}`），"
     "或者把 `gpu_demo_namespace` 设成已有的命名空间"),
    ("demo_pods_admitted",
     r"the server-side dry run of the demo pods failed: (?P<error>.*) \(kubectl apply --dry-run=server -f .*\)",
     "API 服务器对演示 Pod 的试运行（dry run）失败，原话：{error}（`kubectl apply --dry-run=server` 会给出同样的结果）"),
    ("demo_pods_never_preempt",
     r"PriorityClass (?P<class>\S+) gives the demo pods preemptionPolicy (?P<policy>\S+): .*",
     "PriorityClass {class} 给演示 Pod 的 preemptionPolicy 是 {policy}：必须是 `Never`，演示 Pod 才不会驱逐任何东西"),
    ("hold_never_preempts",
     r"hold pods have preemptionPolicy (?P<policy>.+)",
     "占位 Pod 的 preemptionPolicy 是 {policy}"),
    ("queue_insufficient",
     r"FailedScheduling: no FailedScheduling event",
     "调度器没有为排队 Pod 发出 `FailedScheduling` 事件"),
    ("queue_insufficient",
     r"FailedScheduling: (?P<message>.+)",
     "调度器拒绝排队 Pod 的原因不是资源不够，原话（`FailedScheduling`）：{message}"),
    ("hold_not_preempted",
     r"hold pods while the queue pod waits: none found",
     "排队 Pod 等待时，一个占位 Pod 也没找到"),
    ("hold_not_preempted",
     r"hold pods while the queue pod waits: (?P<pods>.+)",
     "排队 Pod 等待时占位 Pod 的状态：{pods}"),
    ("hold_released",
     r"deleted (?P<pods>.+), still terminating: (?P<left>.+)",
     "已删除 {pods}，仍在终止：{left}"),
    ("queue_got_held_gpu",
     r"the queue pod saw no GPU; the hold had (?P<had>[^;]+)",
     "排队 Pod 没有看到 GPU；占位 Pod 占过的是 {had}"),
    ("queue_got_held_gpu",
     r"the queue pod saw (?P<saw>[^;]+); the hold had (?P<had>[^;]+)",
     "排队 Pod 看到的是 {saw}；占位 Pod 占过的是 {had}"),
    ("run_pods_gone",
     r"pods remain: (?P<pods>.+)",
     "还有这次运行的 Pod 没删掉：{pods}"),
    ("vllm_unchanged",
     r"/health (?P<before>\S+) before, (?P<after>\S+) after",
     "`/health` 运行前是 {before}，运行后是 {after}"),
    ("claims_gone",
     r"left in (?P<namespace>[^:]+): (?P<objects>.+)",
     "{namespace} 里还留着：{objects}"),
    ("claims_gone",
     r"could not list the claims and templates of (?P<namespace>[^:]+): (?P<answer>.*)",
     "列不出 {namespace} 里的 claim 和模板，API 的回答：{answer}"),
    # The waits (hold_running, queue_pending, queue_ran_on_node, run_pods_gone): pod_wait's own words.
    (None,
     r"timed out after (?P<seconds>\d+)s waiting for (?P<pods>.+?) to be (?P<state>[a-z]+): (?P<states>.+)",
     "等了 {seconds} 秒，{pods} 仍然没有到达 {state}，当时的状态：{states}"),
    (None,
     r"pod (?P<pod>\S+) will not become (?P<state>[a-z]+): (?P<why>.+)",
     "Pod {pod} 不会到达 {state}，原因：{why}"),
    # Why a summary of the Nodes' verdicts has no result for a node (verdict.py's fleet_inputs).
    (NOT_RUN, r"no node (?P<node>\S+) in the cluster", "集群里没有节点 {node}"),
    (NOT_RUN, r"never pre-flighted: node (?P<node>\S+) has no verdict", "从未预检：节点 {node} 上没有结论"),
    (NOT_RUN, r"unreadable verdict on node (?P<node>\S+) \(label (?P<label>.*), condition (?P<status>.*)\): "
              r"written by hand or half written",
     "节点 {node} 上的结论无法读取（标签 {label}，condition {status}）：被手工改过，或者只写了一半"),
    (NOT_RUN, r"unreadable verdict on node (?P<node>\S+)", "节点 {node} 上的结论无法读取"),
    (NOT_RUN, r"interrupted: run (?P<run>\S+) started at (?P<at>\S+) and never wrote its verdict",
     "中断了：运行 {run} 开始于 {at}，一直没有写下结论"),
    (NOT_RUN, r"running: run (?P<run>\S+) since (?P<at>\S+)", "运行中：运行 {run}，开始于 {at}"),
    (NOT_RUN, r"stale: (?P<state>passed|failed) at (?P<at>\S+) \(run (?P<run>[^)]*)\): (?P<why>.+)",
     "已过时：{at} 的结论（{state}，运行 {run}）已不再成立，原因：{why}"),
)
_COMPILED = tuple((check_id, re.compile(pattern + r"\Z", re.S), text) for check_id, pattern, text in MESSAGES)

# The play's own sentences around the checks: the refusal, a stopped walk, a failed node.
SENTENCES = {
    "en": {"refusal": "Refusing node {node}: {details}", "joiner": "; ",
           "failed": "GPU scheduling demo on {node} failed: {checks}: {message}"},
    "zh": {"refusal": "拒绝节点 {node}：{details}", "joiner": "；",
           "failed": "节点 {node} 上的 GPU 调度演示未通过：{checks}：{message}",
           "check": "{id}：{text}", "fallback": "没有做到「{sentence}」，原文：{detail}",
           "not_said": "没有做到「{sentence}」", "task": "任务 {task} 出错，原文：{message}", "error": "出错",
           "not_run": "没有结果，原文：{detail}"},
}
_CJK = re.compile(u"[\u4e00-\u9fff]")


def quoted(text):
    """``text`` quoted as written: a code span (one line), fenced with more backticks than it holds."""
    value = " ".join(str(text).split())
    longest = max([len(run) for run in re.findall(r"`+", value)] or [0])
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or longest else ""
    return "{0}{1}{2}{1}{0}".format(fence, pad, value)


def lang_of(lang):
    return lang if lang in LANGS else "en"


def check_text(check, lang="en"):
    """A failed check's detail in ``lang``: the detail itself in English; in Chinese the sentence of its form (see
    MESSAGES), else what the check proves with the detail quoted as the original."""
    detail = (check or {}).get("detail")
    if lang_of(lang) == "en":
        return detail
    check_id = (check or {}).get("id")
    text = " ".join(str(detail or "").split())
    for form_id, pattern, sentence in _COMPILED:
        if form_id not in (None, check_id):
            continue
        match = pattern.match(text)
        if match:
            values = match.groupdict()
            fields = dict((name, quoted(value)) for name, value in values.items())
            fields.update(("raw_" + name, value) for name, value in values.items())
            return sentence.format(**fields)
    words = SENTENCES["zh"]
    said = CHECK_SENTENCES.get(check_id, {}).get("zh", "").rstrip("。")
    if check_id == NOT_RUN and text and not _CJK.search(text):
        return words["not_run"].format(detail=quoted(text))
    if not text:
        return words["not_said"].format(sentence=said) if said else words["error"]
    if _CJK.search(text):
        return text     # said in Chinese already
    return words["fallback"].format(sentence=said, detail=quoted(text)) if said else quoted(text)


def _failed(checks):
    return [check for check in checks or [] if isinstance(check, dict) and check.get("passed") is False]


def _checks_text(checks, lang, ids=True):
    """The failed checks said one after the other: their details joined as the role joins them (English); in Chinese
    each with its id (``ids``; not where the sentence around them names them already)."""
    lang = lang_of(lang)
    words = SENTENCES[lang]
    if lang == "en":
        return words["joiner"].join(str(check.get("detail")) for check in checks)
    return words["joiner"].join(words["check"].format(id=check.get("id"), text=check_text(check, lang)) if ids
                                else check_text(check, lang) for check in checks)


def refusal(checks, node, lang="en", ids=True):
    """The pre-flight's refusal of ``node`` for its failed ``checks`` (the role's assert): in English "Refusing node
    <node>: <details>", as the role has always said it; in Chinese each check said with its id (``ids``)."""
    lang = lang_of(lang)
    node_text = node if lang == "en" else quoted(node)
    return SENTENCES[lang]["refusal"].format(node=node_text, details=_checks_text(_failed(checks), lang, ids))


def stop(walk, lang="en"):
    """Why the walk stops (its ``stop``, the failed checks of the phase judged last) in ``lang``; "" when it goes on."""
    walk = walk or {}
    if lang_of(lang) == "en" or not walk.get("stop"):
        return walk.get("stop") or ""
    return _checks_text(_failed(walk.get("checks")), lang)


def failure_message(failure, checks=None, node=None, lang="en", ids=True):
    """What ended a run, in ``lang``: in English its message as recorded; in Chinese the failed checks said (a refusal
    when the pre-flight failed; each with its id, ``ids``) or, with no check, the task's name and its original message
    quoted."""
    failure = failure or {}
    lang = lang_of(lang)
    message = failure.get("message")
    if lang == "en":
        return message
    failed = _failed(checks)
    if failed:
        if failed[0].get("phase") == "preflight" and node:
            return refusal(failed, node, lang, ids=ids)
        return _checks_text(failed, lang, ids)
    if message and _CJK.search(str(message)):
        return message
    if failure.get("task"):
        return SENTENCES["zh"]["task"].format(task=quoted(failure["task"]), message=quoted(message or "error"))
    return quoted(message) if message else SENTENCES["zh"]["error"]


def run_failure(result, node=None, lang="en"):
    """The sentence the role fails its host with (main.yml's last task): "GPU scheduling demo on <node> failed:
    <failed checks>: <message>" in English, as the role writes it; the same in Chinese, each check said."""
    result = result or {}
    lang = lang_of(lang)
    node = node or result.get("node")
    failed = _failed(result.get("checks"))
    ids = ", ".join(str(check.get("id")) for check in failed)
    failure = result.get("failure") or {}
    if lang == "en":
        return SENTENCES["en"]["failed"].format(node=node, checks=ids or "error", message=failure.get("message") or "")
    return SENTENCES["zh"]["failed"].format(node=quoted(node), checks=ids or SENTENCES["zh"]["error"],
                                            message=failure_message(failure, failed, node, lang, ids=False))


def row_reason(row, lang="en"):
    """A summary row's reason (its first failed check's detail, else the failure's message) in ``lang``."""
    lang = lang_of(lang)
    if lang == "en" or row.get("status") not in ("failed", "not_run"):
        return row.get("reason")
    if row.get("status") == "not_run":
        return check_text({"id": NOT_RUN, "detail": row.get("reason")}, lang) if row.get("reason") else None
    if row.get("checks"):
        first = row["checks"][0]
        return check_text({"id": first.get("id"), "detail": first.get("detail") or row.get("reason")}, lang)
    return failure_message({"task": row.get("task"), "message": row.get("message") or row.get("reason")}, lang=lang)


def row_failure_sentence(row, lang="en"):
    """What the play says when it fails a node (the summary's failed_hosts), in ``lang``: in English the sentence of
    rows.failure_sentence, in Chinese the same with each failed check said."""
    if lang_of(lang) == "en":
        return failure_sentence(row)
    failed = [dict(check, passed=False) for check in row.get("checks") or []]
    if failed:
        first_phase = failed[0].get("phase")
        said = refusal(failed, row["node"], lang, ids=False) if first_phase == "preflight" else _checks_text(failed, lang, False)
    else:
        said = failure_message({"task": row.get("task"), "message": row.get("message") or row.get("reason")}, lang=lang)
    return SENTENCES["zh"]["failed"].format(node=quoted(row["node"]), checks=", ".join(row["failed_checks"])
                                            or SENTENCES["zh"]["error"], message=said)
