# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""report_store: keep a run's report in the cluster, and only a node's newest reports (see runner.py for how a task
function runs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.report_store import (
    MANAGED_BY,
    OURS,
    REPORT_KIND,
    REPORT_LABEL,
    ReportStoreError,
    to_prune,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import (
    NAMESPACED_PATHS,
    K8sApiError,
    api_host,
    core_v1_api,
    explain_api_errors,
    k8s_client,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed

FIELD_MANAGER = "gpuops.scheduling"
CONFIGMAPS = NAMESPACED_PATHS[("v1", "ConfigMap")]

OPTIONS = dict(
    definition=dict(type="dict", required=True),
    keep=dict(type="int", default=5),
    keep_selector=dict(type="str"),
)


def checked(definition):
    """namespace and name of the report's ConfigMap; TaskFailed for anything else."""
    metadata = definition.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if (definition.get("apiVersion"), definition.get("kind")) != ("v1", "ConfigMap") or not metadata.get("name") \
            or not metadata.get("namespace"):
        raise TaskFailed("definition: expected a v1 ConfigMap with metadata.name and metadata.namespace (the role's "
                         "gpu_demo_report_configmap filter builds it)")
    if labels.get(MANAGED_BY) != OURS or labels.get(REPORT_LABEL) != REPORT_KIND:
        raise TaskFailed("definition: a report carries the labels {0}={1} and {2}={3}, which keep_selector finds it by".format(
            MANAGED_BY, OURS, REPORT_LABEL, REPORT_KIND))
    return metadata["namespace"], metadata["name"]


def run(params, check_mode, warn):
    """Create the report (replace it when this run wrote it before), then delete the oldest beyond ``keep``."""
    namespace, name = checked(params["definition"])
    if params["keep"] < 1:
        raise TaskFailed("keep must be at least 1 (this run's report), not {0}".format(params["keep"]))
    if not params["keep_selector"]:
        raise TaskFailed("keep_selector is required: the label selector of the reports among which the newest {0} are kept"
                         .format(params["keep"]))
    result = dict(changed=False, configmap={"namespace": namespace, "name": name}, kept=False, created=False, pruned=[])
    try:
        client = k8s_client(params)
        api, host = core_v1_api(client), api_host(client)
        with explain_api_errors("list the reports in namespace {0} labelled {1}".format(namespace, params["keep_selector"]), host):
            listed = json.loads(api.namespaced("GET", CONFIGMAPS, namespace, label_selector=params["keep_selector"]).data)
        items = listed.get("items") or []
        exists = any((item.get("metadata") or {}).get("name") == name for item in items)
        # The list holds the reports before this one: this one is counted among the kept as if written.
        kept = items if exists else items + [{"metadata": dict(params["definition"]["metadata"])}]
        prune = to_prune(kept, params["keep"], current=name)
        result.update(changed=True, created=not exists, pruned=prune)
        if check_mode:
            return result
        result["pruned"] = []
        with explain_api_errors("keep the report {0} in namespace {1}".format(name, namespace), host):
            write(api, namespace, name, params["definition"], exists)
        result["kept"] = True
        for old in prune:
            with explain_api_errors("delete the old report {0} in namespace {1} (the report {2} was kept)".format(
                    old, namespace, name), host):
                try:
                    api.namespaced("DELETE", CONFIGMAPS, namespace, name=old)
                except Exception as error:  # pylint: disable=broad-except
                    if getattr(error, "status", None) != 404:   # gone meanwhile: as wanted
                        raise
            result["pruned"].append(old)
    except (K8sApiError, ReportStoreError) as error:
        raise TaskFailed(str(error), **result)
    return result


def write(api, namespace, name, definition, exists):
    """Create it; one this run already wrote (a re-run of the same run id) is replaced."""
    if exists:
        api.namespaced("PUT", CONFIGMAPS, namespace, name=name, body=definition, field_manager=FIELD_MANAGER)
    else:
        api.namespaced("POST", CONFIGMAPS, namespace, body=definition, field_manager=FIELD_MANAGER)
