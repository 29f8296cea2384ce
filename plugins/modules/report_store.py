#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: report_store
short_description: Keep a pre-flight's report in the cluster, and only a node's newest reports
version_added: 1.0.0
description:
  - Creates the ConfigMap that keeps one run's report of one node (as the P(gpuops.scheduling.gpu_demo#role) role builds
    it - the JSON report as written on the controller, and the Markdown), replacing it when the same run wrote it
    before, then deletes that node's oldest reports so that O(keep) remain.
  - The reports are found by the labels O(keep_selector) names and ordered by when they were written (their
    C(gpuops.scheduling/written-at) annotation), then by creation; only ConfigMaps labelled as reports of this
    collection are ever deleted, and never the one just written.
  - A write the API server refuses (a quota, an admission policy, a missing permission) fails the task with the API
    server's message. A report kept whose oldest ones could not be deleted fails the task too, naming the one left;
    RV(kept) says the report itself is there.
author:
  - gpuops developers (@gpuops)
options:
  definition:
    description:
      - The report's ConfigMap (C(v1)), with C(metadata.name), C(metadata.namespace) and the labels
        C(app.kubernetes.io/managed-by=gpuops.scheduling) and C(gpuops.scheduling/report=gpu-preflight).
    type: dict
    required: true
  keep:
    description:
      - How many of the reports O(keep_selector) finds remain, this one included.
    type: int
    default: 5
  keep_selector:
    description:
      - The label selector of the reports among which the newest O(keep) are kept, for example one node's
        (C(app.kubernetes.io/managed-by=gpuops.scheduling,gpuops.scheduling/report=gpu-preflight,gpuops.scheduling/node=prod102)).
      - Required.
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
      - Nothing is written; RV(created) and RV(pruned) say what would be.
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - python >= 3.9
  - kubernetes >= 24.2.0
notes:
  - The identity needs C(list), C(create), C(update) and C(delete) on configmaps in the report's namespace
    (C(playbooks/preflight_rbac.yml) grants them).
seealso:
  - module: gpuops.scheduling.node_verdict
    description: The Node's verdict names the report kept here.
  - module: kubernetes.core.k8s
"""

EXAMPLES = r"""
- name: Keep the run's report in the cluster, and the node's five newest
  gpuops.scheduling.report_store:
    definition: "{{ result | gpuops.scheduling.gpu_demo_report_configmap(name, json_text, markdown_text) }}"
    keep: 5
    keep_selector: app.kubernetes.io/managed-by=gpuops.scheduling,gpuops.scheduling/report=gpu-preflight,gpuops.scheduling/node=prod102
"""

RETURN = r"""
configmap:
  description: The report's ConfigMap.
  returned: always
  type: dict
  sample: {namespace: gpu-operator, name: gpu-preflight-report-prod102-20261204t101500-a1b2c3}
kept:
  description: Whether the report is in the cluster now (false in check mode).
  returned: always
  type: bool
  sample: true
created:
  description: Whether the ConfigMap is (or, in check mode, would be) new; false when the same run's report was replaced.
  returned: always
  type: bool
  sample: true
pruned:
  description: The names of the older reports deleted (in check mode, those that would be).
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
