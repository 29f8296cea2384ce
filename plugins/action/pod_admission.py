# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""pod_admission in the controller's process where the module would run there anyway (plugin_utils/in_process.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks import pod_admission as task
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._in_process import InProcessModule


class ActionModule(InProcessModule):
    OPTIONS = task.OPTIONS
    TASK = staticmethod(task.run)
