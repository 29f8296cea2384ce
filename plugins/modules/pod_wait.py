#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: pod_wait
short_description: Wait for pods to run, queue, finish or disappear, reacting to a watch at once
version_added: 1.0.0
description:
  - Lists the pods (by O(names) and/or O(label_selectors)) and then follows them with a Kubernetes
    watch from that list's resourceVersion, like C(kubectl wait), so it returns as soon as the
    condition holds instead of polling every few seconds.
  - Only waits and reads; M(kubernetes.core.k8s) creates and deletes the pods. C(wait) of
    M(kubernetes.core.k8s) knows C(Ready) and conditions, polled (every O(kubernetes.core.k8s#module:wait_sleep)
    seconds); this module also knows Pending for a resource, Succeeded and gone, and reacts to the watch at once.
  - Fails at once, without waiting for O(timeout), when a pod can no longer reach the condition
    (it failed, its image cannot be pulled, the device plugin rejected it at admission
    (C(UnexpectedAdmissionError)), its deadline passed (C(DeadlineExceeded)), it was scheduled when
    it should queue, or it was deleted). The failure message names each pod with its phase and reason.
  - Returns the pods (phase, node, IP, conditions, container states), when each transition was seen,
    and on request their logs and events. For O(condition=unschedulable) it also returns the
    scheduler's C(FailedScheduling) events, parsed.
author:
  - gpuops developers (@gpuops)
options:
  namespace:
    description: Namespace of the pods.
    type: str
    required: true
  names:
    description:
      - Names of the pods that must reach the condition; a name that does not exist counts as
        deleted (which satisfies only O(condition=deleted)).
      - With O(label_selectors) as well, every matching pod is followed and reported (its transitions
        recorded), but only these must reach the condition.
      - At least one of O(names) and O(label_selectors) is required.
    type: list
    elements: str
  label_selectors:
    description:
      - Label selectors (C(key=value), C(key!=value), C(key in (a,b))), joined with AND.
      - Without O(names), every matching pod must reach the condition and at least O(count) must exist.
    type: list
    elements: str
  count:
    description:
      - With O(label_selectors) and no O(names), the number of pods expected (default 1, or 0 for
        O(condition=deleted)).
    type: int
  condition:
    description:
      - V(running) - every pod is C(Running) and bound to a node.
      - V(scheduled) - every pod is bound to a node (C(PodScheduled=True)).
      - V(unschedulable) - every pod is C(Pending) with C(PodScheduled=False), reason C(Unschedulable),
        and the scheduler's C(FailedScheduling) event for it has arrived (see RV(failed_scheduling)).
      - V(succeeded) - every pod is C(Succeeded).
      - V(finished) - every pod is C(Succeeded) or C(Failed).
      - V(deleted) - no pod is left.
    type: str
    choices: [running, scheduled, unschedulable, succeeded, finished, deleted]
    required: true
  node:
    description:
      - The node the pods must be on. A pod bound to another node fails the wait at once.
    type: str
  timeout:
    description: Seconds to wait before failing.
    type: int
    default: 120
  fail_on_unschedulable:
    description:
      - For V(running), V(scheduled), V(succeeded) and V(finished), fail at once when the scheduler
        reports a pod C(Unschedulable) instead of waiting for the timeout.
    type: bool
    default: false
  fatal_reasons:
    description:
      - Container waiting reasons after which a pod is considered unable to start.
    type: list
    elements: str
    default: [ErrImagePull, ImagePullBackOff, ErrImageNeverPull, InvalidImageName, CreateContainerConfigError,
              CreateContainerError, RunContainerError, CrashLoopBackOff]
  logs:
    description:
      - Return each pod's log (RV(pods[].log)) once the condition holds. Not for V(unschedulable) and V(deleted).
    type: bool
    default: false
  log_ready_pattern:
    description:
      - A regular expression each pod's log must contain before V(running) counts as reached, so that
        what the container prints before it settles down (for example C(nvidia-smi -L)) is in the log.
      - Implies O(logs=true).
    type: str
  log_limit_bytes:
    description: The most bytes of each log to return (the end of the log is kept).
    type: int
    default: 65536
  events:
    description:
      - Also return the events of the pods (one list call per pod, by its UID), oldest first, as C(kubectl describe) shows them.
    type: bool
    default: false
  event_pod_uids:
    description:
      - With O(events), also return the events of these pods (UIDs), for example pods of earlier waits
        that are already gone.
    type: list
    elements: str
    default: []
  ledger_node:
    description:
      - Once the condition holds, also read the scheduler's ledger of this node (as
        M(gpuops.scheduling.gpu_ledger_facts) does for one node, three more reads - the node, its non-terminated pods
        and the cluster's unscheduled pods, whatever the cluster's size) and return it in RV(ledger), so that the
        evidence of a step comes from the same call as the step.
    type: str
  ledger_resources:
    description: The extended resources of the ledger read for O(ledger_node).
    type: list
    elements: str
    default: [nvidia.com/gpu]
  warn_gone:
    description:
      - For O(condition=deleted), emit a warning naming the pods the wait saw go or found gone (for example
        the leftovers of an interrupted run that a M(kubernetes.core.k8s) task just deleted).
    type: bool
    default: false
  claim_resource:
    description:
      - While a target pod waits unscheduled, read the pods of O(node) every second and fail at once when another pod
        (not matched by O(label_selectors), or not one of O(names)) was bound there at or after O(claim_since), asks
        for this resource, and leaves none of it free - that pod took the unit the target waits for. The failure names
        it (namespace, name, priority, when it was bound); the pod is never touched.
      - Needs O(node), O(claim_since), and C(list) on pods in all namespaces and C(get) on nodes.
    type: str
  claim_since:
    description: When the unit was freed (RFC 3339), for O(claim_resource).
    type: str
  lock:
    description:
      - The run's node lock (M(gpuops.scheduling.node_lock)'s RV(gpuops.scheduling.node_lock#module:lease)). Read at the
        start and at least every 5 seconds; the wait fails at once when the Lease is gone, expired, or held by another
        holder, so that a run that lost its node stops.
    type: dict
    suboptions:
      namespace: {description: Namespace of the Lease., type: str, required: true}
      name: {description: Name of the Lease., type: str, required: true}
      holder: {description: The holder this run recorded., type: str, required: true}
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - gpuops.scheduling.k8s_action_group
  - gpuops.scheduling.in_process
attributes:
  check_mode:
    support: full
    details:
      - The module only reads; in check mode it waits as it would otherwise.
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - python >= 3.9
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
notes:
  - Times are the controller's clock when a change was seen (exact to a few milliseconds), or the API
    server's own timestamps (whole seconds) for what had already happened when the wait started.
  - The user needs C(list) and C(watch) on pods, C(get) on C(pods/log) for O(logs), C(list) and
    C(watch) on events for O(condition=unschedulable) and O(events).
seealso:
  - module: kubernetes.core.k8s
  - module: kubernetes.core.k8s_info
  - name: kubectl wait
    description: The watch-based wait this module mirrors.
    link: https://kubernetes.io/docs/reference/kubectl/generated/kubectl_wait/
"""

EXAMPLES = r"""
- name: Create the hold pod
  kubernetes.core.k8s:
    state: present
    definition: "{{ lookup('ansible.builtin.template', 'hold-pod.yaml.j2') | ansible.builtin.from_yaml }}"

- name: Wait until it runs on the node and has printed its GPUs
  gpuops.scheduling.pod_wait:
    namespace: gpu-operator
    names: [gpu-demo-hold]
    condition: running
    node: prod102
    log_ready_pattern: "gpuops: evidence complete"
    fail_on_unschedulable: true
    timeout: 120
  register: hold

- name: Wait until every pod of a run is Running (four expected)
  gpuops.scheduling.pod_wait:
    namespace: gpu-operator
    label_selectors:
      - gpuops.scheduling/run-id=20261012T080102-prod102
      - gpuops.scheduling/role=hold
    count: 4
    condition: running

- name: Wait until the queue pod is refused by the scheduler, and read the node's ledger
  gpuops.scheduling.pod_wait:
    namespace: gpu-operator
    names: [gpu-demo-queue]
    condition: unschedulable
    ledger_node: prod102
    timeout: 60
  register: queued

- name: Show what the scheduler said
  ansible.builtin.debug:
    msg: "{{ queued.failed_scheduling[0].message }}"

- name: Delete the hold pod
  kubernetes.core.k8s:
    state: absent
    kind: Pod
    namespace: gpu-operator
    name: gpu-demo-hold

- name: Wait for the queue pod to succeed, following the hold as it goes, and read the queue pod's log
  gpuops.scheduling.pod_wait:
    namespace: gpu-operator
    label_selectors: [gpuops.scheduling/run-id=20261012T080102-prod102]
    names: [gpu-demo-queue]
    condition: succeeded
    node: prod102
    logs: true

- name: Wait until every pod of the run is gone, with their events
  gpuops.scheduling.pod_wait:
    namespace: gpu-operator
    label_selectors: [gpuops.scheduling/run-id=20261012T080102-prod102]
    condition: deleted
    events: true
"""

RETURN = r"""
condition:
  description: The condition waited for.
  returned: always
  type: str
  sample: running
pods:
  description:
    - The pods, as last seen - those of O(names) first, in that order, then the other pods followed
      (matching O(label_selectors)), by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Pod name.
      returned: always
      type: str
      sample: gpu-demo-hold
    exists:
      description: Whether the pod still exists.
      returned: always
      type: bool
      sample: true
    uid:
      description: Pod UID.
      returned: when the pod was seen
      type: str
      sample: 6f1c2d3e-0000-4000-8000-000000000001
    phase:
      description: C(status.phase).
      returned: when the pod was seen
      type: str
      sample: Running
    reason:
      description: C(status.reason), for example C(UnexpectedAdmissionError) or C(DeadlineExceeded).
      returned: when the pod was seen
      type: str
      sample: null
    node_name:
      description: The node the pod is bound to, null while unscheduled.
      returned: when the pod was seen
      type: str
      sample: prod102
    pod_ip:
      description: The pod's IP (data only; nothing connects to it).
      returned: when the pod was seen
      type: str
      sample: 10.244.0.62
    scheduled:
      description: Whether the pod is bound to a node.
      returned: when the pod was seen
      type: bool
      sample: true
    unschedulable:
      description: Whether C(PodScheduled) is C(False) with reason C(Unschedulable).
      returned: when the pod was seen
      type: bool
      sample: false
    conditions:
      description: The pod's conditions (type, status, reason, message, last_transition_time).
      returned: when the pod was seen
      type: list
      elements: dict
      sample: [{"type": "PodScheduled", "status": "True", "reason": null, "message": null, "last_transition_time": "2026-10-12T08:01:02Z"}]
    containers:
      description:
        - Container states (name, state, reason, message, exit_code, started_at, finished_at, ready, restart_count, image).
        - C(allocated_resources_status) is the kubelet's health of each device the container was given, as the API
          gives it (C(status.containerStatuses[].allocatedResourcesStatus)); null where the kubelet does not report it.
      returned: when the pod was seen
      type: list
      elements: dict
      sample: [{"name": "smi", "state": "running", "reason": null, "exit_code": null, "ready": true}]
    log:
      description: The pod's log (at most O(log_limit_bytes), the end kept).
      returned: when O(logs) or O(log_ready_pattern) is set and the pod had started
      type: str
      sample: "GPU 0: NVIDIA H20 (UUID: GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76)\n"
transitions:
  description:
    - Per pod, the epoch time of each transition known (created, unschedulable, scheduled, running,
      succeeded, failed, deleting, deleted).
  returned: always
  type: dict
  sample: {"gpu-demo-hold": {"created": 1791792062.0, "scheduled": 1791792062.412, "running": 1791792063.105}}
exact:
  description: Per pod, the transitions this wait saw happen (the others come from API timestamps).
  returned: always
  type: dict
  sample: {"gpu-demo-hold": ["running", "scheduled"]}
failed_scheduling:
  description:
    - For O(condition=unschedulable), per pod the latest C(FailedScheduling) event, with its message
      parsed by P(gpuops.scheduling.failed_scheduling#filter).
  returned: when O(condition=unschedulable) and the condition was reached
  type: list
  elements: dict
  sample:
    - pod: gpu-demo-queue
      message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: not eligible due to preemptionPolicy=Never."
      source: default-scheduler
      count: 1
      at: "2026-10-12T08:01:09.120Z"
      parsed: {"nodes_total": 1, "nodes_available": 0, "reasons": {"Insufficient nvidia.com/gpu": 1}, "insufficient": ["nvidia.com/gpu"]}
events:
  description: The pods' events, oldest first (at, precise, placed_epoch, type, reason, source, object, pod, message, count).
  returned: when O(events=true)
  type: list
  elements: dict
  sample: [{"at": "2026-10-12T08:01:02.000Z", "type": "Normal", "reason": "Scheduled", "source": "default-scheduler",
            "pod": "gpu-demo-hold", "message": "Successfully assigned gpu-operator/gpu-demo-hold to prod102"}]
started_at:
  description: When the wait started (ISO 8601, controller clock).
  returned: always
  type: str
  sample: "2026-10-12T08:01:02.345Z"
finished_at:
  description: When the wait ended.
  returned: always
  type: str
  sample: "2026-10-12T08:01:05.012Z"
elapsed:
  description: Seconds the call took.
  returned: always
  type: float
  sample: 2.667
met:
  description:
    - Whether the condition was reached (and the logs, events and ledger asked for were read). False on failure, so that a task
      that sets C(failed_when) to false can judge the outcome itself.
  returned: always
  type: bool
  sample: true
ledger:
  description:
    - The ledger of O(ledger_node), in the shape of RV(gpuops.scheduling.gpu_ledger_facts#module:ledger).
  returned: when O(ledger_node) is set and the condition was reached
  type: dict
  sample: {"nodes": {"prod102": {"resources": {"nvidia.com/gpu": {"allocatable": 1, "requested": 1, "free": 0}}}}}
error:
  description: Why the module failed (the same text as C(msg)), null on success.
  returned: always
  type: str
  sample: null
foreign_claim:
  description: The pod that took the unit a target waited for (O(claim_resource)).
  returned: when such a pod ended the wait
  type: dict
  sample: {namespace: ml, name: train-0, priority: 1000, priority_class: training, bound_at: "2026-11-29T21:00:03.000Z", units: 1}
api_requests:
  description: HTTP requests made to the API server (lists, watches, log and event reads).
  returned: always
  type: int
  sample: 3
"""

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import k8s_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import run_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.pod_wait import OPTIONS, run


def main():
    # The logic is in module_utils/_tasks/pod_wait.py, shared with the action plugin that runs it in the
    # controller's process when the task runs on the controller.
    run_module(k8s_module(argument_spec=OPTIONS, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
