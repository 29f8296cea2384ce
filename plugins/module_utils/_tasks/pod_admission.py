# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""pod_admission: ask the API server whether it would admit objects now, creating nothing (see runner.py for how a
task function runs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import (
    NAMESPACED_PATHS,
    K8sApiError,
    api_error_message,
    api_host,
    core_v1_api,
    explain_api_errors,
    k8s_client,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed

try:
    from kubernetes.client.rest import ApiException
except ImportError:  # the module says how to install the client (k8s_client fails first)
    ApiException = None

FIELD_MANAGER = "gpuops.scheduling"
# What may be asked about: the demo's pods, and the claim templates they take their GPUs through.
ADMITTED_KINDS = (("v1", "Pod"), ("resource.k8s.io/v1", "ResourceClaimTemplate"))

OPTIONS = dict(
    definitions=dict(type="list", elements="dict", default=[]),
    namespace=dict(type="str", required=True),
    label_selectors=dict(type="list", elements="str", default=[]),
)


def object_ref(definition, namespace):
    """{kind, api_version, name, namespace} of a definition; TaskFailed for a kind this module does not ask about."""
    metadata = definition.get("metadata") or {}
    api_version, kind = definition.get("apiVersion"), definition.get("kind")
    name = metadata.get("name")
    if (api_version, kind) not in ADMITTED_KINDS or not name:
        raise TaskFailed("definitions: {0} {1!r} cannot be asked about: expected a named {2}".format(
            kind or "an object without a kind", name, " or ".join("{1} ({0})".format(*pair) for pair in ADMITTED_KINDS)))
    return {"kind": kind, "api_version": api_version, "name": name, "namespace": metadata.get("namespace") or namespace}


def admitted(ref, answer):
    """What the API server made of an object it admitted: for a Pod, the preemption policy and PriorityClass it filled in."""
    spec = answer.get("spec") or {} if ref["kind"] == "Pod" else {}
    return dict(ref, admitted=True, preemption_policy=spec.get("preemptionPolicy"), priority_class_name=spec.get("priorityClassName"),
                status=None, reason=None, message=None)


def refused(ref, status, body):
    """An object the API server refused, with its Status (reason, message) as it said it."""
    try:
        answer = json.loads(body or "{}")
    except ValueError:
        answer = {"message": (body or "").strip()}
    return dict(ref, admitted=False, preemption_policy=None, priority_class_name=None, status=status,
                reason=answer.get("reason"), message=answer.get("message") or "refused ({0})".format(status))


def pod_summary(pod):
    metadata, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    return {"name": metadata.get("name"), "namespace": metadata.get("namespace"), "uid": metadata.get("uid"),
            "node_name": spec.get("nodeName"), "phase": status.get("phase"),
            "deletion_timestamp": metadata.get("deletionTimestamp"), "labels": metadata.get("labels") or {}}


def ask(api, host, definition, ref):
    """One server-side dry run. A refusal (admission, quota, RBAC, a name taken) is the answer; credentials the API
    server rejects, or an API server that cannot be reached, fail the task."""
    path = NAMESPACED_PATHS[(ref["api_version"], ref["kind"])]
    try:
        body = dict(definition, metadata=dict(definition.get("metadata") or {}, namespace=ref["namespace"]))
        return admitted(ref, json.loads(api.namespaced("POST", path, ref["namespace"], body=body, dry_run="All",
                                                       field_manager=FIELD_MANAGER).data))
    except Exception as error:  # pylint: disable=broad-except
        if ApiException is not None and isinstance(error, ApiException) and error.status and error.status != 401:
            return refused(ref, error.status, error.body)
        message = api_error_message(error, "ask whether it admits {kind} {namespace}/{name} (dry run)".format(**ref), host)
        if message is None:
            raise
        raise TaskFailed(message)


def run(params, check_mode, warn):
    """The existing pods under the labels (one list), then one dry run per definition. Read-only, check mode too."""
    namespace = params["namespace"]
    refs = [object_ref(definition, namespace) for definition in params["definitions"]]
    try:
        client = k8s_client(params)
        api, host = core_v1_api(client), api_host(client)
        existing = []
        if params["label_selectors"]:
            selector = ",".join(params["label_selectors"])
            with explain_api_errors("list the pods of namespace {0} labelled {1}".format(namespace, selector), host):
                existing = [pod_summary(pod) for pod in json.loads(api.list_namespaced_pod(namespace, label_selector=selector).data)
                            .get("items") or []]
    except K8sApiError as error:
        raise TaskFailed(str(error))
    answers = [ask(api, host, definition, ref) for definition, ref in zip(params["definitions"], refs)]
    return dict(changed=False, admitted=all(answer["admitted"] for answer in answers), objects=answers, existing=existing)
