# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubernetes.core.k8s, with its module's own code run in the task worker where the module would run there anyway.

kubernetes.core's action plugin prepares the arguments (``template``, ``src``, ``kubeconfig``) exactly as for
kubernetes.core.k8s; only where the module runs differs. Shipped as a module, each task starts a Python process
that imports ansible and the kubernetes client (~0.7 s of CPU): that was most of a walk's CPU and ~5 s of its
time. Where plugin_utils/in_process.py would ship a module (another connection, become, async, another Python,
no kubernetes client here), kubernetes.core.k8s itself is shipped.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.utils.display import Display

from ansible_collections.kubernetes.core.plugins.action.k8s import ActionModule as KubernetesCoreK8sAction
from ansible_collections.gpuops.scheduling.plugins.plugin_utils.in_process import (
    inject_invocation, task_environment, why_not_here)
from ansible_collections.gpuops.scheduling.plugins.plugin_utils.module_main import run_main

try:
    from ansible_collections.kubernetes.core.plugins.modules import k8s as kubernetes_core_k8s
except ImportError:
    # Without the kubernetes client here, why_not_here() ships the module, which says how to install it.
    kubernetes_core_k8s = None

display = Display()

MODULE = "kubernetes.core.k8s"


class ActionModule(KubernetesCoreK8sAction):

    def _execute_module(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        task_vars = task_vars or {}
        why_not = why_not_here(self, task_vars, needs_kubernetes=True)
        if not why_not and kubernetes_core_k8s is None:
            why_not = "kubernetes.core's k8s module cannot be imported here"
        if why_not:
            display.vvv("{0}: running {1} as a module: {2}".format(self._task.action, MODULE, why_not))
            return super(ActionModule, self)._execute_module(module_name=MODULE, module_args=module_args,
                                                             task_vars=task_vars, **kwargs)
        display.vvv("{0}: running {1} in the controller's process".format(self._task.action, MODULE))
        args = dict(self._task.args if module_args is None else module_args)
        environment = {}
        self._compute_environment_string(environment)
        with task_environment(environment):
            # Check and diff mode as ActionBase._update_module_args hands them to a module.
            return run_main(kubernetes_core_k8s, MODULE, args, check_mode=bool(self._task.check_mode),
                            diff=bool(self._task.diff), with_invocation=inject_invocation(task_vars))
