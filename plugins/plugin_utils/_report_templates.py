# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Every report this collection writes is one of these Jinja2 templates (roles/gpu_demo/templates/), rendered here.

Why one way, and this one: a report is data prepared in Python (pure functions of plugin_utils/_gpu_demo/, unit-tested:
report.py for a node, fleet.py for a run) put on a page by a template. A change to what a report shows is then made in
a template, and a change to what is known in Python; neither holds the other's work. The pages are rendered by a
Jinja2 environment of our own rather than by ansible-core's templar because ansible-core's ignores autoescape: here
every value placed in an HTML or SVG template is escaped unless the template marks it safe, so escaping is never a
choice made (or forgotten) at each value. Jinja2 ships with ansible-core; the reports are written on the controller,
where it is.

Markdown templates are not escaped (a Markdown table cell's pipes are escaped by the ``md`` filter, the one rule
Markdown has for them); JSON reports are the data itself, written as JSON by the action that writes the files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import json
import os
import posixpath
from collections.abc import Mapping

from jinja2 import ChainableUndefined, Environment, FileSystemLoader, StrictUndefined

from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _gpu_demo_fleet as fleet

# plugins/plugin_utils/ -> the collection's root -> the role's templates, where the per-node and the fleet reports are.
TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "roles", "gpu_demo", "templates")
ESCAPED = (".html.j2", ".svg.j2")


def plain(value):
    """Mappings, lists and strings as plain dict, list and str (ansible-core hands filters its own lazy and tagged
    containers, which are for its templar, not this one)."""
    if isinstance(value, Mapping):
        return dict((plain(key), plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, str):
        return str(value)
    return value


def _combine(base, *others, **options):
    """Ansible's combine filter, for the reports' use: dicts merged left to right, recursively with recursive=true."""
    result = dict(base)
    for other in others:
        for key, value in other.items():
            if options.get("recursive") and isinstance(result.get(key), Mapping) and isinstance(value, Mapping):
                result[key] = _combine(result[key], value, recursive=True)
            else:
                result[key] = value
    return result


def _md(value):
    """A Markdown table cell: one line, pipes and backslashes escaped."""
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip()


FILTERS = {
    "to_json": json.dumps,
    "to_nice_json": lambda value, indent=4: json.dumps(value, indent=indent, sort_keys=True, separators=(",", ": "),
                                                       ensure_ascii=False),
    "combine": _combine,
    "basename": lambda path: posixpath.basename(path or ""),
    "zip": lambda *lists: list(zip(*lists)),
    "difference": lambda first, second: [item for item in first if item not in second],
    "md": _md,
}


# What each check proves, in one Chinese line: the zh report's check table shows it beside the check's message, which
# stays the code's English original (docs/checks.md quotes it, so that a reader can find the entry by its words).
CHECK_TITLES_ZH = {
    "node_name_valid": "节点名是合法的 Kubernetes 节点名，并且能放进标签值。",
    "hold_outlives_waits": "占位 Pod 睡眠的时间比占卡和排队两次等待加起来还长。",
    "timeout_usable": "等待超时至少 1 秒。",
    "vllm_healthy_before": "创建任何东西之前，推理服务是健康的。",
    "node_found": "节点存在，并提供这种 GPU 资源（设备插件）或这个 DeviceClass 的设备（DRA）。",
    "allocation_valid": "要求的分配方式是 auto、device_plugin 或 dra 之一。",
    "node_ready": "节点处于 Ready。",
    "node_schedulable": "节点没有被 cordon。",
    "node_taints_tolerated": "演示 Pod 容忍节点上每个 NoSchedule 和 NoExecute 污点。",
    "resource_allocatable": "节点上至少有一个可用的名额（设备插件）或设备（DRA）。",
    "node_not_busy": "节点上没有别的 Pod 占着这种资源（除非允许繁忙节点）。",
    "extended_resource_served": "通过 DRA 普通申请时，DeviceClass 提供 Pod 申请的那种资源。",
    "free_units": "允许繁忙节点时，至少还有一个空闲名额可以占。",
    "verdict_permitted": "这次运行的身份可以把结论写到 Node 上。",
    "demo_pods_admitted": "API 服务器接受演示 Pod（服务端试运行）。",
    "demo_pods_never_preempt": "演示 Pod 从 PriorityClass 得到 preemptionPolicy: Never。",
    "hold_running": "申请全部空闲名额的占位 Pod 在这个节点上 Running。",
    "hold_never_preempts": "运行中的占位 Pod 的 preemptionPolicy 是 Never。",
    "hold_one_gpu_per_unit": "每个占位 Pod 看到的设备数正好等于它占的名额，每个名额各是一张。",
    "hold_env_corroborates": "设备插件交付的内容与 Pod 里 nvidia-smi 看到的设备一致。",
    "hold_devices_prepared": "通过 DRA 时，每个占位 Pod 看到的正是它的 claim 分到的设备。",
    "queue_pending": "再申请一个名额的 Pod 停在 Pending，没有节点也没有 IP。",
    "queue_insufficient": "调度器因为资源不够拒绝它（`Insufficient`，或 `cannot allocate all claims`）。",
    "ledger_full": "排队 Pod 等待时，节点账本剩余 0，由占位 Pod 占满，排队 Pod 在等这个资源。",
    "hold_not_preempted": "排队 Pod 等待期间，占位 Pod 仍然 Running。",
    "hold_devices_healthy": "kubelet 没有把交给占位 Pod 的任何设备报告为 Unhealthy。",
    "hold_released": "占位 Pod 已删除。",
    "queue_ran_on_node": "随后排队 Pod 被调度到这个节点并 Succeeded。",
    "queue_got_held_gpu": "排队 Pod 看到的是占位 Pod 占过的卡。",
    "run_pods_gone": "这次运行的 Pod 一个不剩。",
    "ledger_restored": "节点账本回到运行前的样子。",
    "vllm_unchanged": "推理服务的回答和运行前一样。",
    "claims_gone": "通过 DRA 时，这次运行的 ResourceClaim 和 ResourceClaimTemplate 一个不剩。",
}


class ReportUndefined(ChainableUndefined, StrictUndefined):
    """As ansible-core's undefined: ``a.b.c | default(x)`` is x when ``a`` has no ``b``; printing or testing what is
    not there is an error, not an empty string in a report."""


def _finalize(value):
    # As ansible-core prints it: nothing for None.
    return "" if value is None else value


# One environment per process: it caches the templates it has compiled.
@functools.lru_cache(maxsize=None)
def _environment():
    environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=lambda name: (name or "").endswith(ESCAPED),
                              undefined=ReportUndefined, trim_blocks=True, keep_trailing_newline=True,
                              finalize=_finalize)
    environment.filters.update(FILTERS)
    environment.globals["check_titles_zh"] = CHECK_TITLES_ZH
    return environment


def render(name, **data):
    """The text of template ``name`` with ``data`` (made plain) as its variables."""
    return _environment().get_template(name).render(**plain(data))


def fleet_markdown(summary):
    """A run's summary (plugin_utils/_gpu_demo_fleet.py fleet_summary) as Markdown."""
    return render("fleet.md.j2", page=fleet.page(summary))


def fleet_html(summary):
    """A run's summary as one self-contained HTML page."""
    return render("fleet.html.j2", page=fleet.page(summary))
