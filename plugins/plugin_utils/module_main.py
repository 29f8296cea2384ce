# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Run another collection's module, its own ``main()``, in the controller's task worker.

A module's ``main()`` builds an AnsibleModule, which reads its arguments from the process's stdin and ends the
process with its result on stdout. Here ``main()`` runs with the module's ``AnsibleModule`` name bound, for that
call, to ``InProcessAnsibleModule``: the arguments are validated as AnsibleModule validates them
(in_process.validate(): its ArgumentSpecValidator, with the module's own spec and constraints) and ``exit_json``/``fail_json`` end the call
with the result, which goes through what AnsibleModule does to a result (secrets masked, warnings and arguments
added). Everything else is the module's own code: what it reads, writes, decides and returns.

Only for a module that takes its AnsibleModule class by that name in its own namespace and uses no more of it than
``InProcessAnsibleModule`` provides; kubernetes.core's modules reach AnsibleModule only through AnsibleK8SModule,
whose proxy lists what they use (params, check_mode, _diff, _name, warn, deprecate, debug, exit_json, fail_json).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.parameters import remove_values
from ansible.utils.display import Display

from ansible_collections.gpuops.scheduling.plugins.plugin_utils.in_process import validate

display = Display()

# AnsibleModule's constraints between options, passed on to the validator under the same names.
_CONSTRAINTS = ("mutually_exclusive", "required_together", "required_one_of", "required_if", "required_by")


class ModuleExit(Exception):
    """How ``exit_json``/``fail_json`` end the module's ``main()``: with the result, where a process would exit."""

    def __init__(self, result):
        super(ModuleExit, self).__init__("module exited")
        self.result = result


class InProcessAnsibleModule:
    """What a module's ``main()`` gets instead of AnsibleModule: the same checks, the result raised, not printed.

    A subclass made by ``bound_to()`` carries the task's arguments and settings (``TASK``).
    """

    TASK = None

    def __init__(self, argument_spec, supports_check_mode=False, **kwargs):
        task = self.TASK
        self._name = task["module_name"]
        self.check_mode = task["check_mode"]
        self._diff = task["diff"]
        self._with_invocation = task["with_invocation"]
        self._warnings = []
        self._deprecations = []
        constraints = dict((name, kwargs[name]) for name in _CONSTRAINTS if kwargs.get(name))
        # no_log_values: AnsibleK8SModule adds what it masks beyond the spec's no_log (an inline kubeconfig, 6.3+).
        self.params, self.no_log_values, error = validate(argument_spec, task["args"], self._name, **constraints)
        if error:
            self.fail_json(msg=error)
        if self.check_mode and not supports_check_mode:
            self.exit_json(skipped=True, msg="remote module ({0}) does not support check mode".format(self._name))

    def warn(self, warning):
        self._warnings.append(warning)

    def deprecate(self, msg, version=None, date=None, collection_name=None):
        self._deprecations.append(dict((key, value) for key, value in
                                       (("msg", msg), ("version", version), ("date", date), ("collection_name", collection_name))
                                       if value is not None))

    def debug(self, msg):
        display.debug(msg)

    def exit_json(self, **kwargs):
        raise ModuleExit(self._finished(kwargs))

    def fail_json(self, msg, **kwargs):
        kwargs["failed"] = True
        kwargs["msg"] = msg
        raise ModuleExit(self._finished(kwargs))

    def _finished(self, result):
        """The result as AnsibleModule returns it: arguments (where it injects them), warnings, secrets masked."""
        if self._with_invocation:
            result["invocation"] = {"module_args": getattr(self, "params", {})}
        if self._warnings:
            result["warnings"] = self._warnings
        if self._deprecations:
            result["deprecations"] = self._deprecations
        return remove_values(result, self.no_log_values) if getattr(self, "no_log_values", None) else result

    @classmethod
    def bound_to(cls, module_name, args, check_mode, diff, with_invocation):
        """The class to hand a module's ``main()``, carrying one task's arguments and settings."""
        task = dict(module_name=module_name, args=args, check_mode=check_mode, diff=diff, with_invocation=with_invocation)
        return type(cls.__name__, (cls,), {"TASK": task})


def run_main(module, module_name, args, check_mode=False, diff=False, with_invocation=True):
    """Run ``module.main()`` (an imported module file) for one task; its result, as the module process returns it.

    ``module.AnsibleModule`` is rebound for the call only. A ``main()`` that returns without exit_json or
    fail_json (a module would then print nothing, which ansible reports as a failure) fails the same way here.
    """
    original = module.AnsibleModule
    module.AnsibleModule = InProcessAnsibleModule.bound_to(module_name, args, check_mode, diff, with_invocation)
    try:
        module.main()
    except ModuleExit as ended:
        return ended.result
    finally:
        module.AnsibleModule = original
    return dict(failed=True, msg="{0} ended without a result".format(module_name))
