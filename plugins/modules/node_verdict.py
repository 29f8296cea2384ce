#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: node_verdict
short_description: Write the GPU pre-flight's verdict on the Node (condition, label, annotations, startup taint)
version_added: 1.0.0
description:
  - Puts a pre-flight's verdict where the scheduler, autoscalers and people see it, on the Node itself.
  - "The condition C(gpuops.scheduling/GPUPreflightPassed): V(Unknown) while a run is on the node (reason
    C(PreflightRunning)), then V(True) (C(PreflightPassed)) or V(False) with one reason per failed phase
    (C(InvalidInput), C(LockFailed), C(PreflightRefused), C(PrepareFailed), C(BypassProbeFailed),
    C(HoldCheckFailed), C(QueueCheckFailed), C(ReleaseCheckFailed), C(CleanupCheckFailed), C(PreflightError)) and a
    one-line message naming the run. Written to C(nodes/<name>/status) as a strategic merge patch, which merges
    conditions by type: the kubelet's and other tools' conditions stay as they are."
  - "The label C(gpuops.scheduling/gpu-preflight=running|passed|failed), the annotation
    C(gpuops.scheduling/gpu-preflight-time) (when, RFC 3339) and the annotation C(gpuops.scheduling/gpu-preflight-report)
    (compact JSON: run id, job, failed phase, checks and why, units held, GPUs seen, the occupied window). Written as a
    JSON merge patch of the Node: only these keys change."
  - "With a verdict, an Event (events.k8s.io/v1) regarding the Node, in namespace C(default) where the kubelet's Node
    events are and C(kubectl events --for node/NAME) and C(kubectl describe node) find them: reportingController
    C(gpuops.scheduling/preflight), action C(Preflight), reason C(GPUPreflightPassed) (type Normal),
    C(GPUPreflightFailed) (Warning; the note names the failed phase and check) or C(GPUPreflightRefused) (Warning; the
    pre-flight refused the node before testing), the run id in the note. An Event that cannot be created is a warning."
  - "The report annotation records what the verdict was proven against (C(basis)): the node's bootID, the kubelet's
    version, the allocatable units of O(resource), on a DRA node the devices its ResourceSlices publish
    (C(driver/pool/device)), the device plugin's pod UID on the node, the NVIDIA driver version and MIG config from GPU
    Feature Discovery's labels, where present. The fleet summary compares them with the Node as it is now and calls a
    verdict stale, saying why."
  - "With a result that names its report kept in the cluster (C(report_configmap)), the annotation
    C(gpuops.scheduling/gpu-preflight-report-configmap) (C(<namespace>/<name>)) too; a verdict whose report was not kept
    removes that annotation, so that it never names an earlier verdict's report."
  - Every write names the field manager C(gpuops.scheduling) (C(kubectl get node --show-managed-fields)).
  - With O(remove_taint) and a passed verdict, removes that taint (effect C(NoSchedule)) and no other, with a JSON patch
    that first tests the taint is still where it was read. A failed verdict leaves it. Never cordons, never touches
    another tool's taints, labels or conditions.
  - Kubernetes.core cannot write these, which is why this module exists; its modules patch no subresource (the
    condition lives in nodes/status) and their patches carry no field manager.
author:
  - gpuops developers (@gpuops)
options:
  node:
    description: Name of the Kubernetes node.
    type: str
    required: true
  state:
    description:
      - V(running) marks a run on the node (condition V(Unknown), label V(running)); needs O(run_id).
      - V(verdict) writes the verdict of O(result).
      - V(access) writes nothing and asks the API server (SelfSubjectAccessReview) whether this identity may write a
        verdict (RBAC C(get) and C(patch) on C(nodes), C(patch) on C(nodes/status), C(create) on C(events.k8s.io)
        C(events) in namespace C(default)) and returns the missing rules; the pre-flight uses it to refuse a node before
        anything is created rather than fail after the walk.
    type: str
    choices: [running, verdict, access]
    default: verdict
  result:
    description:
      - The gpuops.scheduling.gpu_demo role's result for the node (its C(_gpu_demo_result) fact, the per-node JSON
        report). Required with O(state=verdict).
    type: dict
  run_id:
    description: The run's id, named by the condition's message. Required with O(state=running).
    type: str
  resource:
    description: The extended resource the run tests.
    type: str
    default: nvidia.com/gpu
  job:
    description: The job that made the verdict (an AWX job id, say), recorded in the report annotation.
    type: str
  remove_taint:
    description:
      - Gate mode, the key of the startup taint (effect C(NoSchedule)) to remove when the verdict is a pass.
      - Leave unset when a node-readiness-controller NodeReadinessRule owns the taint; it removes it once the
        condition is V(True).
    type: str
  event_instance:
    description: The Event's reportingInstance (who reported it); the controller's host name when unset.
    type: str
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - gpuops.scheduling.k8s_action_group
  - gpuops.scheduling.in_process
attributes:
  check_mode:
    support: full
    details:
      - Reads the Node and returns what it would write, without writing. O(state=access) asks the API server in
        check mode too (a review is no write).
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - "RBAC: C(get) and C(patch) on C(nodes), C(patch) on C(nodes/status), C(list) on C(pods) (the device plugin's pod),
    C(list) on C(resource.k8s.io) C(resourceslices) (a DRA node's devices), C(create) on C(events.k8s.io) C(events)
    in namespace C(default) (playbooks/preflight_rbac.yml grants them).
    RBAC cannot narrow a patch to these keys: C(patch) on C(nodes) allows any label or taint. The
    collection's ValidatingAdmissionPolicy (roles/preflight_rbac, C(preflight_rbac_node_policy)) can."
  - A node that does not exist, or a name that is no node name, gets no verdict (a warning says so); the run's own
    checks already refused it.
seealso:
  - module: gpuops.scheduling.gpu_demo_summary
requirements:
  - python >= 3.9
  - kubernetes >= 24.2.0
"""

EXAMPLES = r"""
- name: Mark the run on the node
  gpuops.scheduling.node_verdict:
    node: prod102
    state: running
    run_id: 20261201t0900-1a2b3c

- name: Write the verdict, and lift the startup taint if it passed
  gpuops.scheduling.node_verdict:
    node: prod102
    result: "{{ _gpu_demo_result }}"
    remove_taint: gpuops.scheduling/gpu-preflight-pending

- name: May this identity write verdicts?
  gpuops.scheduling.node_verdict:
    node: prod102
    state: access
  register: verdict_access
"""

RETURN = r"""
verdict:
  description: The verdict as written in the report annotation.
  returned: unless O(state=access)
  type: dict
  sample:
    v: 1
    state: failed
    node: prod102
    run_id: 20261201t0900-1a2b3c
    job: "4411"
    at: "2026-12-01T09:00:12Z"
    started_at: "2026-12-01T09:00:00Z"
    resource: nvidia.com/gpu
    phase: hold
    reason: HoldCheckFailed
    check: hold_one_gpu_per_unit
    failed_checks: [hold_one_gpu_per_unit]
    detail: 4 unit(s) held but 1 distinct GPU(s) seen
    task: null
    units: 4
    gpus: [{uuid: GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76, name: NVIDIA H20, kind: gpu}]
    window: {seconds: 4.2, start: "2026-12-01T09:00:03Z", end: "2026-12-01T09:00:07Z"}
    total_seconds: 12.1
    basis: {boot: 5d0c7e3a-1f2b-4c55-9a7e-0f1e2d3c4b5a, kubelet: v1.36.3, allocatable: "4",
            plugin_pod: 0b8f3f5e-6a4c-4c1e-9d1b-2f7a8e9c0d1e, driver: 550.54.15, mig: all-disabled}
    # On a DRA node, instead of allocatable: dra_devices: [gpu.nvidia.com/prod102/gpu-0]
condition:
  description: The condition written (null when the node was not found).
  returned: unless O(state=access)
  type: dict
  sample:
    type: gpuops.scheduling/GPUPreflightPassed
    status: "False"
    reason: HoldCheckFailed
    message: "GPU pre-flight failed at hold (hold_one_gpu_per_unit): 4 unit(s) held but 1 distinct GPU(s) seen; run 20261201t0900-1a2b3c"
    lastHeartbeatTime: "2026-12-01T09:00:12Z"
    lastTransitionTime: "2026-12-01T09:00:12Z"
event:
  description: The Event created for the verdict (null with O(state=running), or when it could not be created).
  returned: when the node was found, unless O(state=access)
  type: dict
  sample:
    apiVersion: events.k8s.io/v1
    kind: Event
    metadata: {name: prod102.188d3c2f6b1e2a40, namespace: default}
    regarding: {apiVersion: v1, kind: Node, name: prod102}
    reportingController: gpuops.scheduling/preflight
    reportingInstance: awx-task-0
    action: Preflight
    reason: GPUPreflightFailed
    type: Warning
    note: >-
      GPU pre-flight failed at hold (hold_one_gpu_per_unit): 4 unit(s) held but 1 distinct GPU(s) seen;
      run 20261201t0900-1a2b3c
labels:
  description: The label written.
  returned: when the node was found, unless O(state=access)
  type: dict
  sample: {gpuops.scheduling/gpu-preflight: failed}
node_found:
  description: Whether the node exists (nothing is written on a node that does not).
  returned: unless O(state=access)
  type: bool
  sample: true
taint_removed:
  description: Whether the startup taint was removed (would be, in check mode).
  returned: unless O(state=access)
  type: bool
  sample: false
allowed:
  description: Whether this identity may write a verdict on the node.
  returned: when O(state=access) and O(node) is a valid node name
  type: bool
  sample: false
missing:
  description: The RBAC rules this identity lacks to write a verdict.
  returned: when O(state=access) and O(node) is a valid node name
  type: list
  elements: str
  sample: ["patch on nodes/status (the condition)"]
"""

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import k8s_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import run_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.node_verdict import OPTIONS, run


def main():
    # The logic is in module_utils/_tasks/node_verdict.py, shared with the action plugin that runs it in the
    # controller's process when the task runs on the controller.
    run_module(k8s_module(argument_spec=OPTIONS, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
