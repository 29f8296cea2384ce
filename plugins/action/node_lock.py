# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""node_lock in the controller's process where the module would run there anyway (plugin_utils/_in_process.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks import node_lock as task
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._in_process import InProcessModule


def run_under_controller(params, check_mode, warn):
    # ansible-core forks each task's worker from ansible-playbook's main process: the worker's parent is the run,
    # whose life the lock's renewer follows.
    return task.run(params, check_mode, warn, controller_pid=os.getppid())


class ActionModule(InProcessModule):
    OPTIONS = task.OPTIONS
    TASK = staticmethod(run_under_controller)
