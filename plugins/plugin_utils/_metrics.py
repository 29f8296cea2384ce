# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The run's metrics in Prometheus' conventions, for node_exporter's textfile collector and a Pushgateway: controller
only, written by the gpu_demo_summary action.

Per node (label ``node``): passed (1/0), the last run's end and the last success's time, the occupied window and the
failed checks; per run: nodes by outcome. A node that failed keeps the last success's time an earlier textfile held
(``previous``), as a Pushgateway keeps it in the node's group (the push adds, it does not replace the group).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.verdict import parse_iso

PREFIX = "gpuops_gpu_preflight_"
NODE_METRICS = (
    ("passed", "gauge", "1 if the node's last GPU pre-flight passed, 0 if it failed."),
    ("last_run_end_timestamp_seconds", "gauge", "When the node's last GPU pre-flight ended (Unix time)."),
    ("last_success_timestamp_seconds", "gauge", "When the node's last passed GPU pre-flight ended (Unix time)."),
    ("occupied_window_seconds", "gauge", "How long the node's GPUs were held by the last pre-flight; NaN when it held none."),
    ("failed_checks", "gauge", "How many checks the node's last GPU pre-flight failed."),
    ("not_judged_checks", "gauge", "How many checks the node's last GPU pre-flight could not judge (never counted as passed)."),
)
OUTCOMES = ("passed", "failed", "not_run", "checked")


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value):
    return repr(float(value)) if value is not None else "NaN"


def node_samples(row, previous_success=None):
    """A summary row -> {metric: value} for a node that was tested (passed or failed), else {}."""
    if row.get("status") not in ("passed", "failed"):
        return {}
    started = parse_iso(row.get("started_at"))
    ended = started + float(row.get("total_seconds") or 0) if started is not None else None
    window = row.get("window") or {}
    samples = {"passed": 1.0 if row["status"] == "passed" else 0.0, "last_run_end_timestamp_seconds": ended,
               # NaN, not 0, when no GPU was held (a run refused before its hold ran): 0 would say it was held for no
               # time, and an absent sample would leave a Pushgateway's earlier value standing.
               "occupied_window_seconds": window.get("seconds"),
               "failed_checks": float(len(row.get("failed_checks") or [])),
               "not_judged_checks": float(len(row.get("not_judged") or []))}
    success = ended if row["status"] == "passed" else previous_success
    if success is not None:
        samples["last_success_timestamp_seconds"] = success
    return samples


def textfile(summary, previous=None):
    """The summary -> node_exporter textfile text. ``previous``: {node: last success time} an earlier file held."""
    previous = previous or {}
    lines = []
    nodes = [(row.get("node") or row["host"], node_samples(row, previous.get(row.get("node") or row["host"])))
             for row in summary["rows"]]
    for name, kind, text in NODE_METRICS:
        lines += ["# HELP %s%s %s" % (PREFIX, name, text), "# TYPE %s%s %s" % (PREFIX, name, kind)]
        lines += ['%s%s{node="%s"} %s' % (PREFIX, name, _escape(node), _number(samples[name]))
                  for node, samples in nodes if name in samples]
    lines += ["# HELP %snodes Nodes of the last run by outcome." % PREFIX, "# TYPE %snodes gauge" % PREFIX]
    lines += ['%snodes{outcome="%s"} %s' % (PREFIX, outcome, _number(summary["counts"].get(outcome, 0))) for outcome in OUTCOMES]
    return "\n".join(lines) + "\n"


def previous_successes(text):
    """An earlier textfile -> {node: last success time}, read with prometheus_client's parser (none without it)."""
    try:
        from prometheus_client.parser import text_string_to_metric_families  # pylint: disable=import-outside-toplevel
    except ImportError:
        return {}
    found = {}
    try:
        for family in text_string_to_metric_families(text or ""):
            if family.name == PREFIX + "last_success_timestamp_seconds":
                found.update((sample.labels.get("node"), sample.value) for sample in family.samples)
    except ValueError:
        return {}
    return found


def push(summary, url, job="gpu_preflight", timeout=10):
    """Push each tested node's metrics to a Pushgateway, grouped by node (push-add: a failed node keeps the last success
    time its group holds). Returns {"pushed": [nodes], "error": None or a sentence}; never raises."""
    try:
        from prometheus_client import CollectorRegistry, Gauge, pushadd_to_gateway  # pylint: disable=import-outside-toplevel
    except ImportError:
        return {"pushed": [], "error": "the Python library prometheus-client is not installed on the controller"}
    pushed = []
    for row in summary["rows"]:
        node = row.get("node") or row["host"]
        samples = node_samples(row)
        if not samples:
            continue
        registry = CollectorRegistry()
        for name, _kind, text in NODE_METRICS:
            if name in samples and samples[name] is not None:
                Gauge(PREFIX + name, text, registry=registry).set(samples[name])
        try:
            pushadd_to_gateway(url, job=job, registry=registry, grouping_key={"node": node}, timeout=timeout)
        except Exception as error:  # pylint: disable=broad-except  # any failure of the push is reported, never raised
            return {"pushed": pushed, "error": "push to the Pushgateway %s failed for node %s: %s" % (url, node, error)}
        pushed.append(node)
    return {"pushed": pushed, "error": None}
