#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: pod_admission
short_description: Ask the Kubernetes API server whether it would admit pods and claim templates now, creating nothing
version_added: 1.0.0
description:
  - Sends each of O(definitions) to the API server as a server-side dry run (C(dryRun=All)), as
    C(kubectl apply --dry-run=server) does, and returns what the API server made of each - admitted, with the
    preemption policy its PriorityClass gives a pod, or refused, with the API server's own reason and message (an
    admission policy, a quota, a missing PriorityClass or namespace, a name already taken, a missing permission).
  - With O(label_selectors), first lists the pods of O(namespace) that carry those labels (for example the pods an
    interrupted earlier run left), in one call.
  - Nothing is created or changed, in check mode or not. A refusal is the module's answer (RV(objects[].admitted) false,
    with the API server's reason and message), not its failure. The task fails only when the API server gives no
    verdict on the object - it cannot be reached, rejects the credentials (401), throttles (429) or is not serving
    (502, 503, 504) - or when the list of O(label_selectors) fails; the message names the API server and what was
    being asked.
  - One request per definition and, with O(label_selectors), one list - plain REST calls on kubernetes.core's
    connection.
author:
  - gpuops developers (@gpuops)
options:
  definitions:
    description:
      - The objects to ask about, in the order they would be created - Pods (C(v1)) and ResourceClaimTemplates
        (C(resource.k8s.io/v1)), each with C(metadata.name). Any other kind fails the task before anything is asked,
        naming the object and the kinds accepted.
      - Each is sent with C(dryRun=All) and C(fieldManager=gpuops.scheduling).
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
      - Label selectors (C(key=value), C(key!=value), C(key in (a,b)), ...), all of which a pod must match to be listed
        in RV(existing), before any dry run. When empty, nothing is listed.
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
  - "RBAC: the identity needs C(create) on the kinds it asks about in their namespaces (C(pods),
    C(resource.k8s.io/resourceclaimtemplates): a dry run is authorized as a create, and a missing permission is
    returned as a V(Forbidden) refusal) and, with O(label_selectors), C(list) on C(pods) in O(namespace)."
  - Admission webhooks with side effects are called only when they declare C(sideEffects) V(None) or V(NoneOnDryRun);
    the API server refuses a dry run another webhook would see, and that refusal is returned as any other.
seealso:
  - module: kubernetes.core.k8s
    description: Creates the objects (its check mode makes a dry run too, after API discovery, and fails on a refusal).
  - module: gpuops.scheduling.pod_wait
    description: Waits for the pods once they are created.
  - name: Dry run (Kubernetes API concepts)
    description: What a server-side dry run runs (admission, validation) and what it never does (store).
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
  description: Whether the API server admits every object (true when O(definitions) is empty).
  returned: always
  type: bool
  sample: true
objects:
  description: What the API server made of each definition, in their order (when the task failed, those answered until then).
  returned: always
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
      description: The HTTP status of a refusal (403, 404, 409, 422, ...); null when admitted.
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
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The pod's name.
      type: str
      sample: gpu-demo-hold
    namespace:
      description: The pod's namespace.
      type: str
      sample: gpu-operator
    uid:
      description: The pod's UID.
      type: str
      sample: 0f6c2d4e-7a1b-4c3d-9e8f-1a2b3c4d5e6f
    node_name:
      description: The node it is bound to, null while unscheduled.
      type: str
      sample: prod102
    phase:
      description: The pod's phase.
      type: str
      sample: Running
    deletion_timestamp:
      description: When its deletion was asked for, null otherwise.
      type: str
      sample: "2026-12-04T10:15:00Z"
    labels:
      description: The pod's labels.
      type: dict
      sample: {app.kubernetes.io/managed-by: gpuops.scheduling}
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
