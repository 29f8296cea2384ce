# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""What the API server made of a server-side dry run (pod_admission), and the pods already there.

Pure: definitions, the API's answers (its JSON bodies) and pods in, plain dicts out. The task function
(_tasks/pod_admission.py) makes the calls.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# The kinds pod_admission asks about: the demo's pods, and the claim templates they take their GPUs through.
ACCEPTED_KINDS = (("v1", "Pod"), ("resource.k8s.io/v1", "ResourceClaimTemplate"))

# The answers that are no judgement of the object but of the request or of the way to the API server: the task fails
# on these, naming the API server (401: the credentials; 429: throttled; 502-504: a proxy or an API server that is
# not serving). Any other status carries the API server's verdict on the object (400 Bad Request, 403 Forbidden by
# RBAC or an admission plugin, 404 a namespace or API that is not there, 409 AlreadyExists, 422 Invalid, 500 a webhook
# that failed), which is the module's answer.
NOT_AN_ANSWER = (401, 429, 502, 503, 504)


class DefinitionError(ValueError):
    """A definition pod_admission does not ask about."""


def accepted_kinds():
    return " or ".join("{1} ({0})".format(api_version, kind) for api_version, kind in ACCEPTED_KINDS)


def object_ref(definition, index, namespace):
    """{kind, api_version, name, namespace} of the ``index``-th definition; DefinitionError for one not asked about.

    An object without metadata.namespace goes to ``namespace``, as kubectl -n does.
    """
    if not isinstance(definition, dict):
        raise DefinitionError("definitions[{0}] is not an object but {1!r}: expected a {2}".format(
            index, definition, accepted_kinds()))
    metadata = definition.get("metadata") or {}
    api_version, kind, name = definition.get("apiVersion"), definition.get("kind"), metadata.get("name")
    described = "definitions[{0}] ({1} {2!r}, apiVersion {3!r})".format(index, kind or "no kind", name, api_version)
    if (api_version, kind) not in ACCEPTED_KINDS:
        raise DefinitionError("{0} cannot be asked about: pod_admission asks about a {1} only".format(
            described, accepted_kinds()))
    if not name:
        raise DefinitionError("{0} has no metadata.name: the answer is reported by name".format(described))
    return {"kind": kind, "api_version": api_version, "name": name, "namespace": metadata.get("namespace") or namespace}


def request_body(definition, ref):
    """The definition as sent: in its namespace (a copy, the caller's dict unchanged)."""
    return dict(definition, metadata=dict(definition.get("metadata") or {}, namespace=ref["namespace"]))


def admitted(ref, answer):
    """An object the API server admitted (``answer``: the object as it would have stored it). For a Pod, the
    preemption policy and PriorityClass it filled in (the Priority admission plugin copies the class's policy)."""
    spec = (answer.get("spec") or {}) if ref["kind"] == "Pod" else {}
    return dict(ref, admitted=True, preemption_policy=spec.get("preemptionPolicy"),
                priority_class_name=spec.get("priorityClassName"), status=None, reason=None, message=None)


def refused(ref, status, body, http_reason=None):
    """An object the API server refused, with the reason and message of its Status, verbatim. A body that is no Status
    (a 404 for an API the server does not serve is plain text) is quoted as it came."""
    try:
        answer = json.loads(body or "")
    except (TypeError, ValueError):
        answer = None
    if not isinstance(answer, dict) or answer.get("kind") != "Status":
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
        answer = {"message": " ".join(text.split()) or "{0} {1}".format(status, http_reason or "").strip()}
        if status == 404 and ref["api_version"] != "v1":
            answer["message"] += " (the API server does not serve {0}, or namespace {1} is missing)".format(
                ref["api_version"], ref["namespace"])
    return dict(ref, admitted=False, preemption_policy=None, priority_class_name=None, status=status,
                reason=answer.get("reason"), message=answer.get("message"))


def pod_summary(pod):
    """A pod found under the labels, as pod_admission returns it."""
    metadata, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    return {"name": metadata.get("name"), "namespace": metadata.get("namespace"), "uid": metadata.get("uid"),
            "node_name": spec.get("nodeName"), "phase": status.get("phase"),
            "deletion_timestamp": metadata.get("deletionTimestamp"), "labels": metadata.get("labels") or {}}
