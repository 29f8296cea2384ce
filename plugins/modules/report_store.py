#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: report_store
short_description: Keep a run's report in the cluster as a ConfigMap, and only the newest of a node's reports
version_added: 1.0.0
description:
  - Creates the ConfigMap O(definition) that keeps one run's report of one node (as the role
    P(gpuops.scheduling.gpu_demo#role) builds it with the C(gpuops.scheduling.gpu_demo_report_configmap) filter - the
    JSON report as written on the controller, and the Markdown). When its name is taken (a re-run of the same run id),
    the ConfigMap is replaced, at the version read, unless it already holds the same.
  - Then lists the ConfigMaps of its namespace that O(keep_selector) selects and deletes the oldest, so that O(keep)
    remain, this one included. Oldest is by the C(gpuops.scheduling/written-at) annotation, then by creation, then by
    name; only ConfigMaps labelled as this collection's reports are ever deleted, and never the one just written.
  - A write the API server refuses (a quota, an admission policy, a missing permission) fails the task with the API
    server's message verbatim, naming the report and its namespace. An older report that could not be deleted fails
    the task too, naming it; RV(kept) then says the report itself is in the cluster.
  - One create (a replace only on a re-run), one list and a delete per report pruned, as plain REST calls on
    kubernetes.core's connection; each write with C(fieldManager=gpuops.scheduling).
author:
  - gpuops developers (@gpuops)
options:
  definition:
    description:
      - The report's ConfigMap (C(v1)), with C(metadata.name), C(metadata.namespace), the labels
        C(app.kubernetes.io/managed-by=gpuops.scheduling) and C(gpuops.scheduling/report=gpu-preflight), and the
        C(gpuops.scheduling/written-at) annotation.
    type: dict
    required: true
  keep:
    description:
      - How many of the reports O(keep_selector) selects remain, this one included; at least 1.
    type: int
    default: 5
  keep_selector:
    description:
      - The label selector of the reports among which the newest O(keep) are kept, typically one node's
        (C(app.kubernetes.io/managed-by=gpuops.scheduling,gpuops.scheduling/report=gpu-preflight,gpuops.scheduling/node=prod102)).
      - It must select O(definition) itself (checked against its labels before anything is written), so that the
        count includes it.
    type: str
    required: true
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - gpuops.scheduling.k8s_action_group
  - gpuops.scheduling.in_process
attributes:
  check_mode:
    support: full
    details:
      - The write is asked as a server-side dry run (C(dryRun=All)), so a write the API server would refuse fails in
        check mode too; nothing is stored or deleted. RV(created) and RV(pruned) say what would be.
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - python >= 3.9
  - kubernetes >= 24.2.0
notes:
  - "RBAC: the identity needs C(create), C(get), C(list) and C(delete) on C(configmaps) in the report's namespace, and
    C(update) to replace a report when the same run id is run again."
seealso:
  - module: gpuops.scheduling.node_verdict
    description: The Node's verdict names the report kept here.
  - module: kubernetes.core.k8s
    description: Creates and deletes any object; this module adds the keep-the-newest rule and its refusals.
"""

EXAMPLES = r"""
- name: Keep the run's report in the cluster, and the node's five newest
  gpuops.scheduling.report_store:
    definition: "{{ result | gpuops.scheduling.gpu_demo_report_configmap(name, lang='en', written_at=written_at) }}"
    keep: 5
    keep_selector: app.kubernetes.io/managed-by=gpuops.scheduling,gpuops.scheduling/report=gpu-preflight,gpuops.scheduling/node=prod102
  register: report_stored
"""

RETURN = r"""
configmap:
  description: The report's ConfigMap.
  returned: always
  type: dict
  contains:
    namespace:
      description: Its namespace.
      type: str
      sample: gpu-operator
    name:
      description: Its name.
      type: str
      sample: gpu-preflight-report-prod102-20261204t101500-a1b2c3
kept:
  description: Whether the report is in the cluster now, as written (false in check mode, and when its write failed).
  returned: always
  type: bool
  sample: true
created:
  description: Whether the ConfigMap is (or, in check mode, would be) new; false when the same run's report was replaced.
  returned: always
  type: bool
  sample: true
pruned:
  description: The names of the older reports deleted (in check mode, those that would be), oldest first.
  returned: always
  type: list
  elements: str
  sample: [gpu-preflight-report-prod102-20261128t090000-0f0f0f]
"""

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import k8s_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import run_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.report_store import OPTIONS, run


def main():
    # The logic is in module_utils/_tasks/report_store.py, shared with the action plugin that runs it in the
    # controller's process when the task runs on the controller.
    run_module(k8s_module(argument_spec=OPTIONS, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
