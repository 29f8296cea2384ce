#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: node_lock
short_description: Take or release a per-node pre-flight lock held in a Kubernetes Lease
version_added: 1.0.0
description:
  - Makes sure only one GPU pre-flight runs on a node at a time. Two runs on one node would fight over
    its GPUs, and the second run's hold pods would queue behind the first's.
  - The lock is a C(coordination.k8s.io/v1) Lease named C(gpuops-preflight-<node>) that records who holds
    the node (O(holder)), since when, and for how long (O(duration_seconds)).
  - A lock whose holder died expires by itself at C(renewTime + leaseDurationSeconds); the next run takes
    it over. Taking over uses the Lease's resourceVersion, so of two runs racing for an expired or absent
    lock exactly one wins.
author:
  - gpuops developers (@gpuops)
options:
  node:
    description: Name of the Kubernetes node to lock.
    type: str
    required: true
  namespace:
    description: Namespace of the Lease (the namespace the pre-flight creates its pods in).
    type: str
    required: true
  holder:
    description:
      - Identity of this run, recorded as the Lease's C(holderIdentity) and shown to any run that is refused.
      - Use something a person can trace back, such as the run id and the controller host.
    type: str
    required: true
  state:
    description:
      - V(present) takes the lock (or renews it when O(holder) already has it); fails when another holder
        has a lock that has not expired.
      - V(absent) releases the lock if O(holder) has it; a lock of another holder is left alone.
    type: str
    choices: [present, absent]
    default: present
  duration_seconds:
    description:
      - How long the lock lasts without renewal. Make it longer than the longest run, so a live run never
        loses its lock, and short enough that a killed run does not block the node for long.
    type: int
    default: 900
  labels:
    description: Labels to put on the Lease.
    type: dict
    default: {}
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - gpuops.scheduling.k8s_action_group
attributes:
  check_mode:
    support: full
    details:
      - Reads the Lease and reports what it would do, without writing.
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - python >= 3.9
  - kubernetes >= 24.2.0
"""

EXAMPLES = r"""
- name: Lock prod102 for this run
  gpuops.scheduling.node_lock:
    node: prod102
    namespace: gpu-operator
    holder: "run-20261129-2055@awx-job-4411"
    duration_seconds: 600

- name: Release the lock
  gpuops.scheduling.node_lock:
    node: prod102
    namespace: gpu-operator
    holder: "run-20261129-2055@awx-job-4411"
    state: absent
"""

RETURN = r"""
outcome:
  description: What was done.
  returned: always
  type: str
  sample: created
  choices: [created, renewed, took_over, released, not_held, absent]
lease:
  description: The Lease after the action (before it, when released or in check mode).
  returned: always
  type: dict
  contains:
    name:
      description: Name of the Lease.
      type: str
      sample: gpuops-preflight-prod102
    namespace:
      description: Namespace of the Lease.
      type: str
      sample: gpu-operator
    holder:
      description: The holder recorded in the Lease.
      type: str
      sample: run-20261129-2055@awx-job-4411
    acquired:
      description: When the holder took the lock.
      type: str
      sample: "2026-11-29T20:55:00.123456Z"
    renewed:
      description: When the holder last renewed it.
      type: str
      sample: "2026-11-29T20:55:00.123456Z"
    expires:
      description: When the lock expires unless renewed.
      type: str
      sample: "2026-11-29T21:05:00.123456Z"
    expired:
      description: Whether the lock had expired.
      type: bool
      sample: false
previous_holder:
  description: The holder of an expired lock that was taken over.
  returned: when outcome is took_over
  type: str
  sample: run-20261129-2001@awx-job-4407
"""

import json

from ansible_collections.gpuops.scheduling.plugins.module_utils._k8s_client import (
    K8sApiError,
    api_host,
    core_v1_api,
    explain_api_errors,
    k8s_client,
    k8s_module,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._lease import (
    decide,
    describe,
    lease_body,
    lease_name,
    parse_micro_time,
    refusal_message,
    utc_now,
)

try:
    from kubernetes.client.rest import ApiException
except ImportError:
    # k8s_module() reports the missing library.
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


def main():
    module = k8s_module(
        argument_spec=dict(
            node=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            holder=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            duration_seconds=dict(type="int", default=900),
            labels=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["duration_seconds"] < 1:
        module.fail_json(msg="duration_seconds must be a positive number of seconds, got {0}".format(params["duration_seconds"]))
    try:
        lock = NodeLock(k8s_client(module), params["node"], params["namespace"], params["holder"])
        if params["state"] == "present":
            result, lease = lock.acquire(params["duration_seconds"], params["labels"], module.check_mode)
        else:
            result, lease = lock.release(module.check_mode)
    except LockHeld as error:
        module.fail_json(msg=str(error), locked=True)
    except K8sApiError as error:
        module.fail_json(msg=str(error))
    changed = result["outcome"] in ("created", "renewed", "took_over", "released")
    module.exit_json(changed=changed, lease=summary(lease, params["namespace"], lock.name), **result)


if __name__ == "__main__":
    main()
