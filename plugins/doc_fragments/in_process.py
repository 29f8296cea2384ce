# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The modules whose action plugin runs them in the controller's process (plugins/plugin_utils/_in_process.py).
    DOCUMENTATION = r"""
options: {}
attributes:
  action:
    description: Has an action plugin of the same name, which runs the module's code in the controller's process when it can.
    support: full
    details:
      - With a C(local) connection, no C(become), no C(async) and C(ansible_python_interpreter) unset or the
        controller's own Python (as in a play that delegates to localhost with C(ansible_playbook_python)), the
        module's code runs in the task's worker process instead of a new Python process. Same arguments, same
        result, about half a second less per task. Anywhere else the module runs as usual; C(-vvv) says which and why.
  async:
    description: Supports being used with the C(async) keyword.
    support: full
    details:
      - An async task always runs as a module.
"""
