# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""A run's per-node report kept in the cluster: the ConfigMap that holds it, and which older ones a run deletes.

Pure: dicts and text in, dicts and names out. The report_store module writes and deletes the objects.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

MANAGED_BY = "app.kubernetes.io/managed-by"
OURS = "gpuops.scheduling"
REPORT_LABEL = "gpuops.scheduling/report"
REPORT_KIND = "gpu-preflight"
NODE_LABEL = "gpuops.scheduling/node"
RUN_LABEL = "gpuops.scheduling/run-id"
# When the run wrote it (RFC 3339 with microseconds): the order in which a run keeps the newest.
WRITTEN_ANNOTATION = "gpuops.scheduling/written-at"
CUT_ANNOTATION = "gpuops.scheduling/report-cut"
JSON_KEY = "report.json"
# The API server refuses a ConfigMap whose data is over 1 MiB; the metadata needs room too.
DATA_LIMIT = 1024 * 1024 - 16 * 1024
# What is left out of the JSON, in this order, when the report alone is over the limit: the raw records that the
# verdict, the checks and the durations do not need.
CUTTABLE = ("events", "timeline", "pods", "node_processes", "probe")


class ReportStoreError(ValueError):
    pass


def labels(node, run_id):
    """The labels of a node's report (kubectl get configmaps -l gpuops.scheduling/report=gpu-preflight,...)."""
    return {MANAGED_BY: OURS, REPORT_LABEL: REPORT_KIND, NODE_LABEL: node, RUN_LABEL: run_id}


def selector(node):
    """The label selector of a node's reports, every run's."""
    return "{0}={1},{2}={3},{4}={5}".format(MANAGED_BY, OURS, REPORT_LABEL, REPORT_KIND, NODE_LABEL, node)


def _size(data):
    return sum(len(key.encode("utf-8")) + len(value.encode("utf-8")) for key, value in data.items())


def configmap(result, name, json_text, markdown_text, lang="en", written_at="", limit=DATA_LIMIT):
    """The ConfigMap of one node's report: the JSON exactly as written to reports/, and the Markdown.

    Over ``limit`` bytes, the Markdown goes first (the JSON holds everything it says), then the JSON's raw records
    (CUTTABLE); the annotation CUT_ANNOTATION names what was cut, so that a reader knows the data is not the file.
    """
    if not isinstance(result, dict) or not result.get("node") or not result.get("run_id"):
        raise ReportStoreError("the report needs the node and the run id")
    markdown_key = "report.{0}.md".format(lang)
    data = {JSON_KEY: json_text, markdown_key: markdown_text}
    cut = []
    if _size(data) > limit:
        del data[markdown_key]
        cut.append("{0} ({1} bytes)".format(markdown_key, len(markdown_text.encode("utf-8"))))
    if _size(data) > limit:
        shorter = dict(result)
        for key in CUTTABLE:
            if key in shorter:
                del shorter[key]
                cut.append("{0}.{1}".format(JSON_KEY, key))
                data[JSON_KEY] = json.dumps(shorter, indent=2, sort_keys=True, ensure_ascii=False)
                if _size(data) <= limit:
                    break
        if _size(data) > limit:
            raise ReportStoreError("the report of node {0} is over {1} bytes even without {2}".format(
                result["node"], limit, ", ".join(CUTTABLE)))
    annotations = {WRITTEN_ANNOTATION: str(written_at or "")}
    if cut:
        annotations[CUT_ANNOTATION] = "left out to stay under the 1 MiB object limit: " + ", ".join(cut)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": result.get("namespace"),
                         "labels": labels(result["node"], result["run_id"]), "annotations": annotations},
            "data": data}


def _order(item):
    metadata = item.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    return (annotations.get(WRITTEN_ANNOTATION) or "", metadata.get("creationTimestamp") or "", metadata.get("name") or "")


def to_prune(items, kept, current=None):
    """The names of a node's reports to delete so that ``kept`` remain, oldest first; never ``current`` (this run's)
    and never an object without our labels (the list is by label, this is a second guard)."""
    kept = int(kept)
    if kept < 1:
        raise ReportStoreError("reports_kept must be at least 1 (this run's report), not {0}".format(kept))
    ours = [item for item in items or []
            if ((item.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == OURS
            and ((item.get("metadata") or {}).get("labels") or {}).get(REPORT_LABEL) == REPORT_KIND]
    others = sorted((item for item in ours if item["metadata"].get("name") != current), key=_order)
    room = kept - (1 if current and any(item["metadata"].get("name") == current for item in ours) else 0)
    excess = len(others) - room
    return [item["metadata"]["name"] for item in others[:excess]] if excess > 0 else []
