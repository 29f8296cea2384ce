# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""report_store: keep a run's report in the cluster as a ConfigMap, and only the newest of a node's reports (see
runner.py for how a task function runs)."""

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
    api_error_message,
    api_host,
    core_v1_api,
    k8s_client,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.label_selector import selector_matcher
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed

try:
    from kubernetes.client.rest import ApiException
except ImportError:
    # The module (k8s_module()) reports the missing library.
    ApiException = None

FIELD_MANAGER = "gpuops.scheduling"
CONFIGMAPS = NAMESPACED_PATHS[("v1", "ConfigMap")]

# The module's own options; kubernetes.core's connection options come on top (_kubernetes/client.py: module_argument_spec).
OPTIONS = dict(
    definition=dict(type="dict", required=True),
    keep=dict(type="int", default=5),
    keep_selector=dict(type="str", required=True),
)


def checked(definition, keep, keep_selector):
    """(namespace, name) of the report's ConfigMap; ReportStoreError for a definition or settings that could prune the
    wrong objects."""
    metadata = definition.get("metadata") or {}
    if (definition.get("apiVersion"), definition.get("kind")) != ("v1", "ConfigMap") or not metadata.get("name") \
            or not metadata.get("namespace"):
        raise ReportStoreError("definition: expected a v1 ConfigMap with metadata.name and metadata.namespace (the "
                               "gpu_demo_report_configmap filter builds it), got {0} {1!r}".format(
                                   definition.get("kind") or "an object without a kind", metadata.get("name")))
    labels = metadata.get("labels") or {}
    # Only ConfigMaps with these labels are ever deleted (to_prune): a report without them would never be counted.
    if labels.get(MANAGED_BY) != OURS or labels.get(REPORT_LABEL) != REPORT_KIND:
        raise ReportStoreError("definition: a report carries the labels {0}={1} and {2}={3}".format(
            MANAGED_BY, OURS, REPORT_LABEL, REPORT_KIND))
    if keep < 1:
        raise ReportStoreError("keep must be at least 1 (this run's report), not {0}".format(keep))
    try:
        selects_it = selector_matcher(keep_selector)(labels)
    except ValueError as error:
        raise ReportStoreError("keep_selector: {0}".format(error))
    if not selects_it:
        # The newest `keep` would be counted without this report, and it could be pruned by the next run's count only.
        raise ReportStoreError("keep_selector {0!r} does not select the report {1} itself (its labels: {2})".format(
            keep_selector, metadata["name"], ", ".join("{0}={1}".format(*item) for item in sorted(labels.items()))))
    return metadata["namespace"], metadata["name"]


def same_content(existing, definition):
    """Whether the stored ConfigMap already says what the definition says (then nothing is written)."""
    def content(item):
        metadata = item.get("metadata") or {}
        return (item.get("data") or {}, item.get("binaryData") or {}, metadata.get("labels") or {},
                metadata.get("annotations") or {})
    wanted = content(definition)
    stored = content(existing)
    # The API server may add annotations of its own: only ours are compared.
    stored = stored[:3] + ({key: stored[3].get(key) for key in wanted[3]},)
    return stored == wanted


def refusal(error, action, host):
    """``action`` failed: the API server's message verbatim when it refused, else the collection's usual sentence."""
    if ApiException is not None and isinstance(error, ApiException) and error.status and error.status != 401:
        try:
            message = json.loads(error.body)["message"]
        except (TypeError, ValueError, KeyError):
            message = " ".join(str(error.body or error.reason).split())
        return K8sApiError("cannot {0}: {1} ({2} {3} from the Kubernetes API at {4})".format(
            action, message, error.status, error.reason, host), status=error.status)
    message = api_error_message(error, action, host)
    return K8sApiError(message, status=getattr(error, "status", None)) if message else None


class ReportStore:
    """One namespace's report ConfigMaps, through plain REST calls (CoreV1Rest)."""

    def __init__(self, api, host, namespace, dry_run=False):
        self.api, self.host, self.namespace = api, host, namespace
        # Writes asked as a server-side dry run (check mode): judged by the API server, stored nowhere.
        self.dry_run = "All" if dry_run else None

    def _call(self, action, method, **kwargs):
        try:
            return self.api.namespaced(method, CONFIGMAPS, self.namespace, **kwargs)
        except Exception as error:  # pylint: disable=broad-except
            explained = refusal(error, action, self.host)
            if explained is None:
                raise
            raise explained from error

    def read(self, name, action):
        """The ConfigMap, or None when there is none."""
        try:
            return json.loads(self._call(action, "GET", name=name).data)
        except K8sApiError as error:
            if error.status == 404:
                return None
            raise

    def create(self, definition, action):
        """POST it; None when the name is taken (409 AlreadyExists)."""
        try:
            answer = self._call(action, "POST", body=definition, field_manager=FIELD_MANAGER, dry_run=self.dry_run)
            return json.loads(answer.data)
        except K8sApiError as error:
            if error.status == 409:
                return None
            raise

    def replace(self, name, definition, resource_version, action):
        body = dict(definition, metadata=dict(definition["metadata"], resourceVersion=resource_version))
        answer = self._call(action, "PUT", name=name, body=body, field_manager=FIELD_MANAGER, dry_run=self.dry_run)
        return json.loads(answer.data)

    def list(self, selector, action):
        return json.loads(self._call(action, "GET", label_selector=selector).data).get("items") or []

    def delete(self, name, action):
        """Delete it; one gone meanwhile is as wanted. (Never in check mode: the caller says what it would delete.)"""
        try:
            self._call(action, "DELETE", name=name)
        except K8sApiError as error:
            if error.status != 404:
                raise


def run(params, check_mode, warn):
    """Create the report (replace it when the same run wrote it before), then delete the oldest of the reports
    ``keep_selector`` finds beyond ``keep``, never this one."""
    definition, keep, keep_selector = params["definition"], params["keep"], params["keep_selector"]
    try:
        namespace, name = checked(definition, keep, keep_selector)
    except ReportStoreError as error:
        raise TaskFailed(str(error))
    result = dict(changed=False, configmap={"namespace": namespace, "name": name}, kept=False, created=False, pruned=[])
    keeping = "keep the report {0} in namespace {1}".format(name, namespace)
    try:
        client = k8s_client(params)
        # Check mode asks the API server with a dry run: a write it would refuse (quota, RBAC, admission) fails there too.
        store = ReportStore(core_v1_api(client), api_host(client), namespace, dry_run=check_mode)
        if store.create(definition, keeping) is not None:
            result.update(created=True, changed=True)
        else:
            # The name is taken: the same run id's report (a re-run), replaced at the version read, unless it already
            # says the same.
            existing = store.read(name, keeping)
            if existing is None:
                # Deleted between the two calls: created now, or failed if someone created it again meanwhile.
                if store.create(definition, keeping) is None:
                    raise K8sApiError("cannot {0}: it was deleted and created again by someone else meanwhile".format(keeping))
                result.update(created=True, changed=True)
            elif not same_content(existing, definition):
                store.replace(name, definition, existing["metadata"]["resourceVersion"], keeping)
                result["changed"] = True
        result["kept"] = not check_mode
        listed = store.list(keep_selector, "list the reports {0} in namespace {1}, to keep the newest {2}".format(
            keep_selector, namespace, keep))
        if check_mode and not any((item.get("metadata") or {}).get("name") == name for item in listed):
            listed.append(definition)   # counted as if written
    except K8sApiError as error:
        raise TaskFailed(str(error), **result)
    failures = []
    for old in to_prune(listed, keep, current=name):
        if check_mode:
            result.update(pruned=result["pruned"] + [old], changed=True)
            continue
        try:
            store.delete(old, "delete the old report {0} in namespace {1}".format(old, namespace))
        except K8sApiError as error:
            failures.append(str(error))
            continue
        result["pruned"].append(old)
        result["changed"] = True
    if failures:
        raise TaskFailed("the report {0} is kept in namespace {1}, but older reports beyond keep={2} could not be deleted: "
                         "{3}".format(name, namespace, keep, "; ".join(failures)), **result)
    return result
