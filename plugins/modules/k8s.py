#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation only: the action plugin of the same name runs kubernetes.core.k8s (plugins/action/k8s.py).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s
short_description: Manage Kubernetes objects with kubernetes.core.k8s, without a new Python process per task
version_added: 1.0.0
description:
  - Runs M(kubernetes.core.k8s) itself, with the same options and the same result. Its code creates, patches and
    deletes the objects; this collection adds nothing to what it does.
  - What differs is where its code runs. With a C(local) connection, no C(become) and C(ansible_python_interpreter)
    unset or the controller's own Python, the module's code runs in the task's worker process, which already has
    the kubernetes client loaded, instead of a new Python process that imports it again. That saves about 0.7 s
    of CPU and 0.8 s of time per task. Anywhere else M(kubernetes.core.k8s) runs as a module, as usual; C(-vvv)
    says which and why.
  - The options below come from kubernetes.core's documentation fragments. The module's other options are
    M(kubernetes.core.k8s)'s too, with the same meaning, e.g. O(kubernetes.core.k8s#module:state),
    O(kubernetes.core.k8s#module:label_selectors), O(kubernetes.core.k8s#module:delete_all),
    O(kubernetes.core.k8s#module:apply), O(kubernetes.core.k8s#module:template).
author:
  - gpuops developers (@gpuops)
extends_documentation_fragment:
  - kubernetes.core.k8s_name_options
  - kubernetes.core.k8s_resource_options
  - kubernetes.core.k8s_auth_options
  - kubernetes.core.k8s_wait_options
  - kubernetes.core.k8s_delete_options
  - ansible.builtin.action_common_attributes
  - gpuops.scheduling.k8s_action_group
attributes:
  action:
    description: Has an action plugin of the same name (kubernetes.core's own, which runs the module's code here when it can).
    support: full
  async:
    description: Not supported, as with M(kubernetes.core.k8s).
    support: none
  check_mode:
    support: full
    details:
      - As with M(kubernetes.core.k8s), a server-side dry run; nothing is written.
  diff_mode:
    support: full
  platform:
    platforms: posix
requirements:
  - python >= 3.9
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
  - jsonpatch
seealso:
  - module: kubernetes.core.k8s
notes:
  - The role C(gpuops.scheduling.gpu_demo) creates and deletes its pods with this module.
"""

EXAMPLES = r"""
- name: Create a pod from an inline definition
  gpuops.scheduling.k8s:
    state: present
    definition:
      apiVersion: v1
      kind: Pod
      metadata:
        name: gpu-check
        namespace: gpu-operator
      spec:
        restartPolicy: Never
        containers:
          - name: check
            image: registry.example.com/cuda-base:12.4
            command: ["nvidia-smi", "-L"]
            resources:
              limits:
                nvidia.com/gpu: 1

- name: Delete every pod of a run, by label
  gpuops.scheduling.k8s:
    state: absent
    kind: Pod
    namespace: gpu-operator
    label_selectors:
      - gpuops.io/run=run-20261129-2055
    delete_all: true
"""

RETURN = r"""
result:
  description:
    - The object created, patched or deleted, as M(kubernetes.core.k8s) returns it; every other value it returns
      (C(method), C(diff), C(duration), C(error)) is returned too.
  returned: success
  type: complex
  contains:
    api_version:
      description: The versioned schema of this representation of an object.
      returned: success
      type: str
    kind:
      description: Represents the REST resource this object represents.
      returned: success
      type: str
    metadata:
      description: Standard object metadata. Includes name, namespace, annotations, labels, etc.
      returned: success
      type: dict
    spec:
      description: Specific attributes of the object. Will vary based on the I(api_version) and I(kind).
      returned: success
      type: dict
    status:
      description: Current status details for the object.
      returned: success
      type: dict
"""
