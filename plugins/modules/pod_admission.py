#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: pod_admission
short_description: Ask the Kubernetes API server whether it would admit pods now, creating nothing
version_added: 1.0.0
description:
  - Sends each of O(definitions) to the API server as a server-side dry run (C(dryRun=All)), as
    C(kubectl apply --dry-run=server) does, and returns what the API server made of each - admitted, with the
    preemption policy its PriorityClass gives a pod, or refused, with the API server's own reason and message (an
    admission policy, a quota, a missing PriorityClass or namespace, a name already taken, a missing permission).
  - With O(label_selectors), first lists the pods of O(namespace) that carry those labels (for example the pods an
    interrupted earlier run left), in one call.
  - Nothing is created or changed, in check mode or not. A refusal is the module's answer, not its failure; it fails
    only when the API server cannot be asked (unreachable, credentials refused).
author:
  - gpuops developers (@gpuops)
options:
  definitions:
    description:
      - The objects to ask about - Pods (C(v1)) and ResourceClaimTemplates (C(resource.k8s.io/v1)), each with
        C(metadata.name). Any other kind is refused with an error naming it.
    type: list
    elements: dict
    default: []
  namespace:
    description:
      - The namespace of the objects that do not name one, and where the pods of O(label_selectors) are listed.
    type: str
    required: true
  label_selectors:
    description:
      - Label selectors (C(key=value), C(key!=value), ...), all of which a pod must match to be listed in
        RV(existing). When empty, nothing is listed.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - gpuops.scheduling.k8s_action_group
  - gpuops.scheduling.in_process
attributes:
  check_mode:
    support: full
    details:
      - A dry run writes nothing, so the module asks and answers the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - python >= 3.9
  - kubernetes >= 24.2.0
notes:
  - The identity needs C(create) on the kinds it asks about (a dry run is authorized as a create) and, with
    O(label_selectors), C(list) on pods in O(namespace).
  - Admission webhooks with side effects are called only when they declare C(sideEffects) V(None) or V(NoneOnDryRun);
    the API server refuses a dry run another webhook would see, and that refusal is returned as any other.
seealso:
  - module: kubernetes.core.k8s
    description: Creates the objects (its check mode makes the same dry run, one module process per task).
  - name: Dry run (Kubernetes API concepts)
    link: https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run
"""

EXAMPLES = r"""
- name: Ask whether the demo pods would be admitted, and find the pods an earlier run left
  gpuops.scheduling.pod_admission:
    namespace: gpu-operator
    definitions: "{{ demo_pods }}"
    label_selectors:
      - app.kubernetes.io/managed-by=gpuops.scheduling
      - gpuops.scheduling/node=prod102
  register: admission

- name: Refuse pods that could preempt others
  ansible.builtin.assert:
    that: admission.objects | selectattr('kind', 'eq', 'Pod') | map(attribute='preemption_policy') | unique == ['Never']
"""

RETURN = r"""
admitted:
  description: Whether the API server admits every object.
  returned: success
  type: bool
  sample: true
objects:
  description: What the API server made of each definition, in their order.
  returned: success
  type: list
  elements: dict
  contains:
    kind:
      description: The object's kind.
      type: str
      sample: Pod
    api_version:
      description: The object's apiVersion.
      type: str
      sample: v1
    name:
      description: The object's name.
      type: str
      sample: gpu-demo-hold
    namespace:
      description: The namespace it was asked about in.
      type: str
      sample: gpu-operator
    admitted:
      description: Whether the API server admits it.
      type: bool
      sample: true
    preemption_policy:
      description: An admitted Pod's C(spec.preemptionPolicy), as the API server filled it in from its PriorityClass; null otherwise.
      type: str
      sample: Never
    priority_class_name:
      description: An admitted Pod's C(spec.priorityClassName); null otherwise.
      type: str
      sample: gpuops-preflight-no-preempt
    status:
      description: The HTTP status of a refusal; null when admitted.
      type: int
      sample: 403
    reason:
      description: The reason of the API server's Status for a refusal (V(Forbidden), V(AlreadyExists), V(Invalid), V(NotFound), ...).
      type: str
      sample: Forbidden
    message:
      description: The API server's message for a refusal, verbatim.
      type: str
      sample: 'pods "gpu-demo-hold" is forbidden: no PriorityClass with name gpuops-preflight-no-preempt was found'
existing:
  description: The pods of O(namespace) that match every one of O(label_selectors); empty when none were given.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The pod's name.
      type: str
    namespace:
      description: The pod's namespace.
      type: str
    uid:
      description: The pod's UID.
      type: str
    node_name:
      description: The node it is bound to, null while unscheduled.
      type: str
    phase:
      description: The pod's phase.
      type: str
    deletion_timestamp:
      description: When its deletion was asked for, null otherwise.
      type: str
    labels:
      description: The pod's labels.
      type: dict
  sample:
    - {name: gpu-demo-hold, namespace: gpu-operator, uid: 0f6c..., node_name: prod102, phase: Running,
       deletion_timestamp: null, labels: {app.kubernetes.io/managed-by: gpuops.scheduling}}
"""

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import k8s_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import run_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.pod_admission import OPTIONS, run


def main():
    # The logic is in module_utils/_tasks/pod_admission.py, shared with the action plugin that runs it in the
    # controller's process when the task runs on the controller.
    run_module(k8s_module(argument_spec=OPTIONS, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
