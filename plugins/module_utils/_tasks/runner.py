# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""What a module of this collection does, apart from the process it runs in.

Each module's logic is a *task function*, ``task(params, check_mode, warn) -> result``, that raises
``TaskFailed`` to fail. ``run_module`` runs one inside the module's own Python process (AnsibleModule);
the collection's action plugins run the very same function in the controller's task worker when the
task runs on the controller anyway (plugins/plugin_utils/_in_process.py), which saves the new Python
process, the module's imports and the JSON round trip: about half a second per task.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class TaskFailed(Exception):
    """The task failed: ``msg`` says why, ``result`` holds what it did and saw until then."""

    def __init__(self, msg, **result):
        super(TaskFailed, self).__init__(msg)
        self.msg = msg
        self.result = result


def run_module(module, task):
    """Run a task function in a module's process and exit with its result (or failure)."""
    try:
        result = task(module.params, module.check_mode, module.warn)
    except TaskFailed as failure:
        module.fail_json(msg=failure.msg, **failure.result)
    module.exit_json(**result)
