# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""pod_admission: ask the API server whether it would admit objects now, creating nothing, and list the pods already
there under given labels (see runner.py for how a task function runs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.admission import (
    NOT_AN_ANSWER,
    DefinitionError,
    admitted,
    object_ref,
    pod_summary,
    refused,
    request_body,
)
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
except ImportError:
    # The module (k8s_module()) reports the missing library.
    ApiException = None

FIELD_MANAGER = "gpuops.scheduling"

# The module's own options; kubernetes.core's connection options come on top (_kubernetes/client.py: module_argument_spec).
OPTIONS = dict(
    definitions=dict(type="list", elements="dict", default=[]),
    namespace=dict(type="str", required=True),
    label_selectors=dict(type="list", elements="str", default=[]),
)


def ask(api, host, definition, ref):
    """One server-side dry run: the API server's verdict on the object, admitted or refused; TaskFailed when it gave
    none (unreachable, credentials rejected, not serving)."""
    path = NAMESPACED_PATHS[(ref["api_version"], ref["kind"])]
    try:
        answer = api.namespaced("POST", path, ref["namespace"], body=request_body(definition, ref), dry_run="All",
                                field_manager=FIELD_MANAGER)
    except Exception as error:  # pylint: disable=broad-except
        if ApiException is not None and isinstance(error, ApiException) and error.status \
                and error.status not in NOT_AN_ANSWER:
            return refused(ref, error.status, error.body, error.reason)
        message = api_error_message(error, "ask whether it admits {kind} {namespace}/{name} (a server-side dry run)"
                                    .format(**ref), host)
        if message is None:
            raise
        raise K8sApiError(message, status=getattr(error, "status", None)) from error
    return admitted(ref, json.loads(answer.data))


def run(params, check_mode, warn):
    """The pods under the labels (one list), then one dry run per definition, in order. Read-only, in check mode too:
    a dry run writes nothing."""
    namespace = params["namespace"]
    try:
        refs = [object_ref(definition, index, namespace) for index, definition in enumerate(params["definitions"])]
    except DefinitionError as error:
        raise TaskFailed(str(error))
    result = dict(changed=False, admitted=False, objects=[], existing=[])
    try:
        client = k8s_client(params)
        api, host = core_v1_api(client), api_host(client)
        if params["label_selectors"]:
            selector = ",".join(params["label_selectors"])
            with explain_api_errors("list the pods of namespace {0} labelled {1}".format(namespace, selector), host):
                listed = json.loads(api.list_namespaced_pod(namespace, label_selector=selector).data)
            result["existing"] = [pod_summary(pod) for pod in listed.get("items") or []]
        for definition, ref in zip(params["definitions"], refs):
            result["objects"].append(ask(api, host, definition, ref))
    except K8sApiError as error:
        raise TaskFailed(str(error), **result)
    result["admitted"] = all(answer["admitted"] for answer in result["objects"])
    return result
