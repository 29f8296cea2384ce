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
  - As in Kubernetes' leader election, the Lease is short (O(duration_seconds), 15 s) and renewed while the run
    lives (O(renew)), so a run that dies (ended, killed, out of memory) loses the node within O(duration_seconds),
    and a live run never does.
  - A lock whose holder died expires by itself at C(renewTime + leaseDurationSeconds); the next run takes
    it over (C(leaseTransitions) + 1) and is warned. Taking over uses the Lease's resourceVersion, so of two runs
    racing for an expired or absent lock exactly one wins.
  - A missing O(namespace) is refused with a clear message before anything is written.
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
      - Use something a person can trace back, such as the run id and the AWX job. With O(renew) the controller's
        host name and the process id are added (C(<holder> on <host> pid <pid>)); release with RV(lease.holder).
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
      - How long the lock lasts without renewal (the Lease's C(leaseDurationSeconds)); a run that dies blocks the node
        this long at most.
      - With O(renew=false), make it longer than the longest run, so a live run never loses its lock.
    type: int
    default: 15
  renew:
    description:
      - Keep the lock while the ansible-playbook process that runs the task lives, renewing it every
        O(duration_seconds) / 5 seconds (at least 1), and stop renewing the moment that process is gone.
      - Needs the task to run in the controller's own process (connection C(local), no become, the controller's
        Python); elsewhere the task fails and says so.
      - Ignored with O(state=absent).
    type: bool
    default: true
  labels:
    description: Labels to put on the Lease.
    type: dict
    default: {}
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - gpuops.scheduling.k8s_action_group
  - gpuops.scheduling.in_process
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
    holder: "run-20261129-2055 awx-job-4411"
  register: node_lock

- name: Release the lock
  gpuops.scheduling.node_lock:
    node: prod102
    namespace: gpu-operator
    holder: "{{ node_lock.lease.holder }}"
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
      sample: run-20261129-2055 awx-job-4411 on awx-ee-7f9c pid 4711
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
    duration_seconds:
      description: The Lease's duration.
      type: int
      sample: 15
    transitions:
      description: How many times the lock changed holder (C(leaseTransitions)).
      type: int
      sample: 1
previous_holder:
  description: The holder of an expired lock that was taken over.
  returned: when outcome is took_over
  type: str
  sample: run-20261129-2001 awx-job-4407 on awx-ee-7f9c pid 4002
previous:
  description: The expired lock that was taken over, as it was.
  returned: when outcome is took_over
  type: dict
  contains:
    holder: {description: Its holder., type: str}
    renewed: {description: When it was last renewed., type: str}
    expires: {description: When it expired., type: str}
    labels: {description: Its labels (the run id of the run that died)., type: dict}
    message: {description: The warning given., type: str}
renewer:
  description: The process that renews the lock while the run lives.
  returned: when O(renew) and O(state=present), not in check mode
  type: dict
  contains:
    pid: {description: Its process id., type: int, sample: 4712}
    every_seconds: {description: Seconds between renewals., type: float, sample: 3.0}
    while_process: {description: The process whose life it follows (ansible-playbook)., type: int, sample: 4711}
namespace_missing:
  description: Whether the task failed because O(namespace) does not exist.
  returned: when it failed for that reason
  type: bool
"""

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import k8s_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import run_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.node_lock import OPTIONS, run


def main():
    # The logic is in module_utils/_tasks/node_lock.py, shared with the action plugin that runs it in the
    # controller's process when the task runs on the controller.
    run_module(k8s_module(argument_spec=OPTIONS, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
