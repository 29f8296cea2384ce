# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write a run's report files on the controller, in the controller's own process.

Why not ansible.builtin.template: every template task runs two modules (stat, then copy), each a new
Python process of about 0.3 s on a small controller. Three reports per node made the report the costliest
step of the pre-flight and a third of a fleet run's CPU. Reports are controller artifacts anyway, like
ansible.builtin.fetch's dest, so they are written here, atomically, without a module.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_files import (
    DIR_MODE,
    ReportFilesError,
    parse_mode,
    plan_files,
    unchanged,
    write_atomically,
)

ARGUMENT_SPEC = dict(
    dir=dict(type="path", required=True),
    files=dict(
        type="list",
        elements="dict",
        required=True,
        options=dict(
            name=dict(type="str", required=True),
            content=dict(type="raw", required=True),
        ),
    ),
    mode=dict(type="str", default="0644"),
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            mode = parse_mode(args["mode"])
            directory = os.path.abspath(args["dir"])
            planned = plan_files(directory, args["files"])
        except ReportFilesError as error:
            raise AnsibleActionFail(to_native(error))

        to_write = [(path, data) for path, data in planned if not unchanged(path, data, mode)]
        result.update(changed=bool(to_write), dir=directory, files=[path for path, _data in planned])
        if self._task.check_mode or not to_write:
            return result
        try:
            if not os.path.isdir(directory):
                os.makedirs(directory, DIR_MODE)
            for path, data in to_write:
                write_atomically(path, data, mode)
        except OSError as error:
            raise AnsibleActionFail("cannot write the report files in %s: %s" % (directory, to_native(error)))
        return result
