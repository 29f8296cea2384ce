# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""node_lock: take or release a node's pre-flight Lease (see runner.py for how a task function runs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import (
    K8sApiError,
    api_host,
    core_v1_api,
    explain_api_errors,
    k8s_client,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.lease import (
    decide,
    describe,
    lease_body,
    lease_name,
    parse_micro_time,
    refusal_message,
    utc_now,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed

try:
    from kubernetes.client.rest import ApiException
except ImportError:
    # The module (k8s_module()) reports the missing library.
    pass


class NodeLock:
    """Reads and writes one node's Lease."""

    def __init__(self, client, node, namespace, holder):
        self.api = core_v1_api(client)
        self.host = api_host(client)
        self.node = node
        self.namespace = namespace
        self.name = lease_name(node)
        self.holder = holder

    def read(self):
        with explain_api_errors("read Lease {0}/{1}".format(self.namespace, self.name), self.host):
            try:
                return json.loads(self.api.lease("GET", self.namespace, self.name).data)
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

    def _write(self, method, body):
        """Create (POST) or replace (PUT); None when another run got there first (409 Conflict)."""
        with explain_api_errors("write Lease {0}/{1}".format(self.namespace, self.name), self.host):
            try:
                return json.loads(self.api.lease(method, self.namespace, self.name if method == "PUT" else None, body).data)
            except ApiException as error:
                if error.status == 409:
                    return None
                raise

    def acquire(self, duration_seconds, labels, check_mode):
        now = utc_now()
        current = self.read()
        action = decide(current, self.holder, now)
        if action == "refuse":
            raise LockHeld(refusal_message(self.node, current, now))
        result = {"outcome": {"create": "created", "renew": "renewed", "take_over": "took_over"}[action]}
        if action == "take_over":
            result["previous_holder"] = describe(current, now)["holder"]
        if check_mode:
            return result, current
        if action == "create":
            written = self._write("POST", lease_body(self.name, self.namespace, self.holder, duration_seconds, now, labels))
        else:
            acquired = parse_micro_time(current["spec"].get("acquireTime")) if action == "renew" else now
            body = lease_body(self.name, self.namespace, self.holder, duration_seconds, now, labels,
                              acquired=acquired, resource_version=current["metadata"]["resourceVersion"])
            written = self._write("PUT", body)
        if written is None:
            # Lost a race: report the winner as any later refusal would.
            raise LockHeld(refusal_message(self.node, self.read() or {}, utc_now()))
        return result, written

    def release(self, check_mode):
        current = self.read()
        if current is None:
            return {"outcome": "absent"}, None
        if describe(current, utc_now())["holder"] != self.holder:
            return {"outcome": "not_held"}, current
        if not check_mode:
            with explain_api_errors("delete Lease {0}/{1}".format(self.namespace, self.name), self.host):
                try:
                    self.api.lease("DELETE", self.namespace, self.name, body={
                        "preconditions": {"resourceVersion": current["metadata"]["resourceVersion"]}})
                except ApiException as error:
                    if error.status not in (404, 409):
                        raise
        return {"outcome": "released"}, current


class LockHeld(Exception):
    """Another run holds the node."""


def summary(lease, namespace, name):
    state = describe(lease, utc_now()) if lease else {}
    return dict(name=name, namespace=namespace, holder=state.get("holder"), acquired=state.get("acquired"),
                renewed=state.get("renewed"), expires=state.get("expires"), expired=state.get("expired"))


# The module's own options; kubernetes.core's connection options come on top (_k8s_client.module_argument_spec).
OPTIONS = dict(
    node=dict(type="str", required=True),
    namespace=dict(type="str", required=True),
    holder=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    duration_seconds=dict(type="int", default=900),
    labels=dict(type="dict", default={}),
)


def run(params, check_mode, warn):
    if params["duration_seconds"] < 1:
        raise TaskFailed("duration_seconds must be a positive number of seconds, got {0}".format(params["duration_seconds"]))
    try:
        lock = NodeLock(k8s_client(params), params["node"], params["namespace"], params["holder"])
        if params["state"] == "present":
            result, lease = lock.acquire(params["duration_seconds"], params["labels"], check_mode)
        else:
            result, lease = lock.release(check_mode)
    except LockHeld as error:
        raise TaskFailed(str(error), locked=True)
    except K8sApiError as error:
        raise TaskFailed(str(error))
    changed = result["outcome"] in ("created", "renewed", "took_over", "released")
    return dict(result, changed=changed, lease=summary(lease, params["namespace"], lock.name))
