# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""node_verdict: write the pre-flight's verdict on a Node, or ask whether this identity may (see runner.py for how a
task function runs). What is written is built in module_utils/_gpu_demo/verdict.py.

Why not kubernetes.core: its modules cannot patch a subresource (nodes/status, where conditions live), and none of
its patches carries a field manager (only server-side apply does, which would create a Node that does not exist).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import socket
import time

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.verdict import (
    EVENT_NAMESPACE,
    FIELD_MANAGER,
    GATE_TAINT_EFFECT,
    REPORT_CONFIGMAP_ANNOTATION,
    VerdictError,
    event,
    node_writes,
    running_verdict,
    taint_removal,
    verdict_basis,
    verdict_of_result,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import (
    K8sApiError,
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
    pass

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
TAINT_ATTEMPTS = 5

# What writing a verdict needs, as RBAC rules (and how the refusal names them).
ACCESS = (
    {"verb": "patch", "resource": "nodes", "subresource": "",
     "rule": "patch on nodes (the label, the annotations and, in gate mode, the startup taint)"},
    {"verb": "patch", "resource": "nodes", "subresource": "status",
     "rule": "patch on nodes/status (the condition)"},
    {"verb": "get", "resource": "nodes", "subresource": "",
     "rule": "get on nodes (the current condition and taints)"},
    {"verb": "create", "resource": "events", "subresource": "", "group": "events.k8s.io", "namespace": EVENT_NAMESPACE,
     "rule": "create on events.k8s.io events in namespace " + EVENT_NAMESPACE + " (the verdict's Event on the Node)"},
)


def access_reviews(node):
    """The SelfSubjectAccessReviews that say whether this identity may write a verdict on ``node``."""
    return [{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
             "spec": {"resourceAttributes": dict(
                 {"group": rule.get("group", ""), "resource": rule["resource"], "subresource": rule["subresource"],
                  "verb": rule["verb"]}, **({"namespace": rule["namespace"]} if "namespace" in rule else {"name": node}))}}
            for rule in ACCESS]


def missing_rules(answers):
    """The rules (sentences) whose review was not allowed, from the API server's answers in ACCESS order."""
    return [rule["rule"] for rule, answer in zip(ACCESS, answers)
            if not ((answer or {}).get("status") or {}).get("allowed")]


class NodeVerdict:
    """Reads and writes one Node's verdict."""

    def __init__(self, client, node):
        self.api = core_v1_api(client)
        self.host = api_host(client)
        self.node = node

    def read(self):
        with explain_api_errors("read node {0}".format(self.node), self.host):
            try:
                return json.loads(self.api.read_node(self.node).data)
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

    def may_write(self):
        with explain_api_errors("ask whether this identity may write a verdict on node {0} (SelfSubjectAccessReview)"
                                .format(self.node), self.host):
            return missing_rules([json.loads(self.api.create_self_subject_access_review(review).data)
                                  for review in access_reviews(self.node)])

    def pods(self):
        """The pods on the node (the device plugin's among them), as kubectl describe node reads them."""
        with explain_api_errors("list the pods on node {0}".format(self.node), self.host):
            return json.loads(self.api.list_pod_for_all_namespaces(
                field_selector="spec.nodeName={0}".format(self.node)).data).get("items") or []

    def slices(self):
        """The ResourceSlices that publish the node's DRA devices ([] where the API server serves no DRA)."""
        with explain_api_errors("list the ResourceSlices of node {0}".format(self.node), self.host):
            try:
                return json.loads(self.api.list_resource_slice(
                    field_selector="spec.nodeName={0}".format(self.node)).data).get("items") or []
            except ApiException as error:
                # A cluster without resource.k8s.io/v1 has no DRA devices to record.
                if error.status == 404:
                    return []
                raise

    def record(self, body):
        """Create the verdict's Event (events.k8s.io/v1)."""
        with explain_api_errors("create the verdict's Event for node {0} in namespace {1}".format(
                self.node, body["metadata"]["namespace"]), self.host):
            return json.loads(self.api.create_event(body["metadata"]["namespace"], body).data)

    def write(self, writes):
        # The label and annotations first, the condition (what the scheduler's users read) last: a write refused
        # half-way never leaves the condition saying what the Node's label and report do not.
        with explain_api_errors("write the pre-flight label and annotations on node {0}".format(self.node), self.host):
            written = json.loads(self.api.patch_node(self.node, writes["metadata"], MERGE, field_manager=FIELD_MANAGER).data)
        with explain_api_errors("write the pre-flight condition on node {0} (nodes/status)".format(self.node), self.host):
            self.api.patch_node_status(self.node, writes["status"], STRATEGIC, field_manager=FIELD_MANAGER)
        return written

    def remove_taint(self, node, key, effect):
        """Remove our taint only; a list changed under us (the patch's test fails: 422, or 409) is read again."""
        for _attempt in range(TAINT_ATTEMPTS):
            patch = taint_removal(node, key, effect)
            if patch is None:
                return False
            with explain_api_errors("remove taint {0}:{1} from node {2}".format(key, effect, self.node), self.host):
                try:
                    self.api.patch_node(self.node, patch, JSON_PATCH, field_manager=FIELD_MANAGER)
                    return True
                except ApiException as error:
                    if error.status not in (409, 422):
                        raise
            node = self.read()
        raise TaskFailed("could not remove taint {0}:{1} from node {2}: its taints changed {3} times while trying".format(
            key, effect, self.node, TAINT_ATTEMPTS))


OPTIONS = dict(
    node=dict(type="str", required=True),
    state=dict(type="str", choices=["running", "verdict", "access"], default="verdict"),
    result=dict(type="dict"),
    run_id=dict(type="str"),
    resource=dict(type="str", default="nvidia.com/gpu"),
    job=dict(type="str"),
    remove_taint=dict(type="str"),
    event_instance=dict(type="str"),
)


# A Node's name is a DNS subdomain; anything else names no Node (the pre-flight's node_name_valid check says so).
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _read_or_warn(read, warn, consequence):
    """What ``read`` returns, or None (not compared later) when the API refuses it: the verdict stands without it."""
    try:
        return read()
    except K8sApiError as error:
        warn("{0}: {1}".format(error, consequence))
        return None


def run(params, check_mode, warn):
    node = params["node"]
    if not NODE_NAME.match(node or "") or len(node) > 253:
        warn("{0!r} is not a valid node name: no verdict read or written".format(node))
        return dict(changed=False, node_found=False)
    try:
        writer = NodeVerdict(k8s_client(params), node)
        if params["state"] == "access":
            missing = writer.may_write()
            return dict(changed=False, allowed=not missing, missing=missing)
        now = time.time()
        if params["state"] == "running":
            if not params["run_id"]:
                raise TaskFailed("run_id is required with state=running")
            verdict = running_verdict(node, params["run_id"], now, resource=params["resource"], job=params["job"])
        else:
            if not params["result"]:
                raise TaskFailed("result (the role's result for the node) is required with state=verdict")
            try:
                verdict = verdict_of_result(params["result"], now, job=params["job"])
            except VerdictError as error:
                raise TaskFailed("cannot make a verdict of the result for node {0}: {1}".format(node, error))
        current = writer.read()
        if current is None:
            # Nothing to write on: the run's own checks already say the node is not there.
            warn("node {0} not found: no verdict written on it".format(node))
            return dict(changed=False, node_found=False, verdict=verdict, condition=None, taint_removed=False)
        if params["state"] == "verdict":
            # What the verdict holds of: the Node as it is now, its device plugin's pod and its DRA devices; a later read
            # compares them.
            pods = _read_or_warn(writer.pods, warn, "the verdict records no device plugin pod")
            slices = _read_or_warn(writer.slices, warn, "the verdict records no DRA devices")
            verdict["basis"] = verdict_basis(current, verdict.get("resource"), pods, slices)
        writes = node_writes(verdict, current, now)
        # The report kept in the cluster (the role's report_store.yml), as <namespace>/<name>. A verdict whose report was
        # not kept removes the annotation (null in a merge patch): left, it would name an earlier verdict's report.
        if params["state"] == "verdict":
            stored = params["result"].get("report_configmap")
            writes["metadata"]["metadata"]["annotations"][REPORT_CONFIGMAP_ANNOTATION] = "{0}/{1}".format(
                stored["namespace"], stored["name"]) if stored else None
        removing = bool(params["remove_taint"]) and verdict["state"] == "passed"
        would_remove = removing and taint_removal(current, params["remove_taint"], GATE_TAINT_EFFECT) is not None
        recorded = event(verdict, current, now, params["event_instance"] or socket.gethostname()) \
            if params["state"] == "verdict" else None
        result = dict(changed=True, node_found=True, verdict=verdict, condition=writes["status"]["status"]["conditions"][0],
                      labels=writes["metadata"]["metadata"]["labels"], taint_removed=would_remove, event=recorded)
        if check_mode:
            return result
        written = writer.write(writes)
        if recorded is not None:
            try:
                writer.record(recorded)
            except K8sApiError as error:
                # The verdict is on the Node; an Event that could not be created is said, not fatal.
                warn(str(error))
                result["event"] = None
        if removing:
            result["taint_removed"] = writer.remove_taint(written, params["remove_taint"], GATE_TAINT_EFFECT)
        return result
    except K8sApiError as error:
        raise TaskFailed(str(error))
