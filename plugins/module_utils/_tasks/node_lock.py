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
import socket
import time

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
    holder_identity,
    lease_body,
    lease_name,
    parse_micro_time,
    refusal_message,
    renew_period,
    renewed_meanwhile,
    take_over_message,
    utc_now,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.lease_renewer import start_renewer
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed

try:
    from kubernetes.client.rest import ApiException
except ImportError:
    # The module (k8s_module()) reports the missing library.
    pass


class NodeLock:
    """Reads and writes one node's Lease."""

    def __init__(self, client, node, namespace, holder, sleep=time.sleep):
        self.sleep = sleep
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
                if error.status == 404 and missing_namespace(error):
                    raise NamespaceMissing(namespace_missing_message(self.namespace, self.host))
                raise

    def acquire(self, duration_seconds, labels, check_mode):
        now = utc_now()
        current = self.read()
        action = decide(current, self.holder, now)
        if action == "refuse":
            raise LockHeld(refusal_message(self.node, current, now))
        if action == "take_over" and describe(current, now)["holder"]:
            # Expiry is judged on this controller's clock against a renewTime another controller wrote: with a clock
            # ahead by more than the Lease, a live lock would look expired. A live holder renews within a period,
            # whatever the clocks say (client-go's observedTime does the same): look again after one.
            self.sleep(renew_period(describe(current, now)["duration_seconds"]) + 1)
            again = self.read()
            if again is None:
                action, current = "create", None
            elif renewed_meanwhile(current, again):
                raise LockHeld(refusal_message(self.node, again, utc_now())
                               + " (It was renewed while this run looked: its holder is alive.)")
            now = utc_now()
        result = {"outcome": {"create": "created", "renew": "renewed", "take_over": "took_over"}[action]}
        if action == "take_over":
            previous = describe(current, now)
            result["previous_holder"] = previous["holder"]
            result["previous"] = dict(previous, labels=(current.get("metadata") or {}).get("labels") or {},
                                      message=take_over_message(self.node, current, now))
        if check_mode:
            return result, current
        if action == "create":
            written = self._write("POST", lease_body(self.name, self.namespace, self.holder, duration_seconds, now, labels))
        else:
            acquired = parse_micro_time(current["spec"].get("acquireTime")) if action == "renew" else now
            transitions = int(current["spec"].get("leaseTransitions") or 0) + (1 if action == "take_over" else 0)
            body = lease_body(self.name, self.namespace, self.holder, duration_seconds, now, labels,
                              acquired=acquired, resource_version=current["metadata"]["resourceVersion"],
                              transitions=transitions, uid=current["metadata"].get("uid"))
            written = self._write("PUT", body)
        if written is None:
            # Lost a race: report the winner as any later refusal would.
            raise LockHeld(refusal_message(self.node, self.read() or {}, utc_now()))
        return result, written

    def release(self, check_mode):
        # The renewer may renew between the read and the delete (409): read again, a few times (it renews every few
        # seconds, so the next try wins).
        for _attempt in range(RELEASE_ATTEMPTS):
            current = self.read()
            if current is None:
                return {"outcome": "absent"}, None
            if describe(current, utc_now())["holder"] != self.holder:
                return {"outcome": "not_held"}, current
            if check_mode:
                return {"outcome": "released"}, current
            with explain_api_errors("delete Lease {0}/{1}".format(self.namespace, self.name), self.host):
                try:
                    self.api.lease("DELETE", self.namespace, self.name, body={
                        "preconditions": {"resourceVersion": current["metadata"]["resourceVersion"]}})
                    return {"outcome": "released"}, current
                except ApiException as error:
                    if error.status == 404:
                        return {"outcome": "released"}, current
                    if error.status != 409:
                        raise
        raise K8sApiError("could not release Lease {0}/{1}: it changed at each of {2} attempts".format(
            self.namespace, self.name, RELEASE_ATTEMPTS))


RELEASE_ATTEMPTS = 5


class LockHeld(Exception):
    """Another run holds the node."""


class NamespaceMissing(Exception):
    """The Lease's namespace does not exist: nothing was written."""


def missing_namespace(error):
    """Whether a 404 on a write says the namespace is missing (the API's Status names kind "namespaces"), not the object."""
    try:
        details = json.loads(error.body).get("details") or {}
    except (TypeError, ValueError, AttributeError):
        return False
    return details.get("kind") == "namespaces"


def namespace_missing_message(namespace, host):
    return ("namespace {0} does not exist on the Kubernetes API at {1}: the pre-flight takes its lock and creates its pods "
            "there. Create it (kubectl create namespace {0}) or set the namespace to an existing one (gpu_demo_namespace); "
            "nothing was created").format(namespace, host)


def summary(lease, namespace, name):
    state = describe(lease, utc_now()) if lease else {}
    return dict(name=name, namespace=namespace, holder=state.get("holder"), acquired=state.get("acquired"),
                renewed=state.get("renewed"), expires=state.get("expires"), expired=state.get("expired"),
                duration_seconds=state.get("duration_seconds"), transitions=state.get("transitions"))


def fresh_client(params):
    """A client with connections of its own, for the renewer forked from this worker.

    kubernetes.core caches one client (and its connection pool) per configuration in the process: the forked
    renewer would share the worker's sockets. The cache is emptied in the renewer only.
    """
    try:
        from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as kubernetes_core_client
        kubernetes_core_client._pool.clear()  # pylint: disable=protected-access
    except (ImportError, AttributeError):
        pass
    return core_v1_api(k8s_client(params))


# The module's own options; kubernetes.core's connection options come on top (_kubernetes/client.py: module_argument_spec).
OPTIONS = dict(
    node=dict(type="str", required=True),
    namespace=dict(type="str", required=True),
    holder=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    duration_seconds=dict(type="int", default=15),
    renew=dict(type="bool", default=True),
    labels=dict(type="dict", default={}),
)


def run(params, check_mode, warn, controller_pid=None):
    """``controller_pid``: the ansible-playbook (or ansible) process the task runs under, known when the task runs in
    that process's task worker (the action plugin); the renewer keeps the lock while it lives."""
    if params["duration_seconds"] < 1:
        raise TaskFailed("duration_seconds must be a positive number of seconds, got {0}".format(params["duration_seconds"]))
    renew = params["state"] == "present" and params["renew"]
    if renew and not controller_pid:
        raise TaskFailed("renew=true keeps the lock while the controller's ansible process lives, which only a task run "
                         "in that process can see: run node_lock on the controller (connection local, no become, the "
                         "controller's Python), or set renew=false and a duration_seconds longer than the whole run")
    holder = holder_identity(params["holder"], socket.gethostname(), controller_pid) if renew else params["holder"]
    try:
        lock = NodeLock(k8s_client(params), params["node"], params["namespace"], holder)
        if params["state"] == "present":
            result, lease = lock.acquire(params["duration_seconds"], params["labels"], check_mode)
        else:
            result, lease = lock.release(check_mode)
    except LockHeld as error:
        raise TaskFailed(str(error), locked=True)
    except NamespaceMissing as error:
        raise TaskFailed(str(error), namespace_missing=True)
    except K8sApiError as error:
        raise TaskFailed(str(error))
    if result["outcome"] == "took_over":
        warn(result["previous"]["message"])
    if renew and not check_mode:
        try:
            pid = start_renewer(controller_pid, lambda: fresh_client(params), lease)
        except OSError as error:
            # Without its renewer the lock would expire under the run: give it back and stop.
            lock.release(False)
            raise TaskFailed("could not start the process that renews the lock: {0}".format(error))
        result["renewer"] = {"pid": pid, "every_seconds": renew_period(params["duration_seconds"]),
                             "while_process": controller_pid}
    changed = result["outcome"] in ("created", "renewed", "took_over", "released")
    return dict(result, changed=changed, lease=summary(lease, params["namespace"], lock.name))
