# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Run a module's task function in the controller's task worker when the task runs on the controller anyway.

Every Kubernetes call of this collection runs on the controller (``connection: local``). Run as a module,
each task starts a new Python process that imports ansible and the kubernetes client (~0.5 s of CPU on a
small controller), then hands its result back as JSON: seven such tasks were most of a pre-flight's time,
and most of a fleet run's CPU. The action plugin runs the same task function (module_utils/_tasks/*.py)
in the worker ansible-playbook already forked for the task. The kubernetes client is imported once, in
ansible-playbook's main process, when the strategy loads this plugin, and every worker inherits it.

It does so only where the module would have run in that same place, as that same user, with that same
Python: a ``local`` connection, no become, no async, and ``ansible_python_interpreter`` unset or the
controller's own Python. Anywhere else, and when the controller's Python lacks the kubernetes client,
the module is shipped and run as usual (``-vvv`` says which and why).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import os
import sys

from ansible import constants as C
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.errors import UnsupportedError
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import (
    mask_as_kubernetes_core, module_argument_spec, unmask_kubeconfig_path)
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed
# The collection's filters, for the task workers forked after this plugin's first task to inherit (_preload.py).
from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _preload  # noqa: F401 pylint: disable=unused-import

try:
    import kubernetes  # noqa: F401 pylint: disable=unused-import
    HAS_KUBERNETES = True
except ImportError:
    HAS_KUBERNETES = False

display = Display()


def why_not_in_process(transport, become, async_val, interpreter, needs_kubernetes, executable=None):
    """None when the module would run here anyway; otherwise the reason to ship it as a module."""
    executable = executable or sys.executable
    if transport != "local":
        return "the task's connection is {0}, not local".format(transport)
    if become:
        return "become is set: the module must run as another user"
    if async_val:
        return "async tasks run as modules"
    if interpreter and not same_python(interpreter, executable):
        return "ansible_python_interpreter is {0}, not the controller's {1}".format(interpreter, executable)
    if needs_kubernetes and not HAS_KUBERNETES:
        return "the controller's Python has no kubernetes client (the module says how to install it)"
    return None


def why_not_here(action, task_vars, needs_kubernetes):
    """why_not_in_process() for the task an action plugin (``action``) runs, with the interpreter it would use."""
    task = action._task
    # A delegated task runs with the delegated host's interpreter, as ActionBase._configure_module reads it.
    host_vars = task_vars.get("ansible_delegated_vars", {}).get(task.delegate_to) if task.delegate_to else None
    interpreter = (host_vars or task_vars).get("ansible_python_interpreter")
    if interpreter is not None:
        interpreter = action._templar.template(interpreter)
    return why_not_in_process(action._connection.transport, action._play_context.become, task.async_val,
                              interpreter, needs_kubernetes)


def same_python(interpreter, executable):
    """Whether ``interpreter`` is ``executable``'s Python with its packages.

    The same file in the same directory: a virtualenv's python, python3 and python3.11 are links to one
    interpreter and find the virtualenv from their directory, while the base interpreter (the links' target)
    does not see the virtualenv's packages. The directory is compared with its links resolved: a virtualenv
    reached through a linked folder (``.venv -> ~/.cache/...``) is the same virtualenv.
    """
    try:
        return (os.path.realpath(os.path.dirname(os.path.abspath(interpreter)))
                == os.path.realpath(os.path.dirname(os.path.abspath(executable)))
                and os.path.samefile(interpreter, executable))
    except OSError:
        # Not a path to a file (e.g. "/usr/bin/env python3"): it may be any Python.
        return False


def inject_invocation(task_vars):
    """Whether a module's result carries its arguments (``invocation``), as AnsibleModule decides.

    Always up to ansible-core 2.20; from 2.21 on only with the INJECT_INVOCATION setting (default off).
    """
    if "INJECT_INVOCATION" not in C.config.get_configuration_definitions():
        return True
    return C.config.get_config_value("INJECT_INVOCATION", variables=task_vars)


@contextlib.contextmanager
def task_environment(environment):
    """os.environ with the task's ``environment:`` on top, as the module's process would have had it.

    The worker is a process of its own for this one task, so nothing leaks into other tasks; it is
    restored anyway.
    """
    saved = dict(os.environ)
    os.environ.update(dict((str(key), str(value)) for key, value in environment.items()))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def validate(options, args, module_name, **constraints):
    """(params, no_log values, error message or None), as AnsibleModule validates a module's arguments.

    ``constraints``: AnsibleModule's between options (mutually_exclusive, required_if, ...), under its names.
    After an error, ``params`` holds what could be validated (as in AnsibleModule, which then fails).
    """
    validation = ArgumentSpecValidator(options, **constraints).validate(args)
    message = None
    if validation.error_messages:
        message = validation.errors.msg
        if isinstance(validation.errors[0], UnsupportedError):
            message = "Unsupported parameters for ({0}) module: {1}".format(module_name, message)
    return validation.validated_parameters, set(validation._no_log_values), message


class InProcessModule(ActionBase):
    """Base of an action plugin that runs the module of the same name in-process where it can.

    A subclass sets ``OPTIONS`` (the module's own options), ``TASK`` (its task function) and ``K8S``
    (whether it takes kubernetes.core's connection options).
    """

    OPTIONS = {}
    TASK = None
    K8S = True
    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(InProcessModule, self).run(tmp, task_vars)
        module_name = self._task.resolved_action or self._task.action
        why_not = why_not_here(self, task_vars, self.K8S)
        if why_not:
            display.vvv("{0}: running as a module: {1}".format(module_name, why_not))
            # As ansible.builtin.normal, the action behind every plain module.
            wrap_async = self._task.async_val and not self._connection.has_native_async
            result = merge_hash(result, self._execute_module(module_name=module_name, task_vars=task_vars,
                                                             wrap_async=wrap_async))
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result
        display.vvv("{0}: running in the controller's process".format(module_name))
        environment = {}
        self._compute_environment_string(environment)
        with task_environment(environment):
            return merge_hash(result, self._run_here(module_name, inject_invocation(task_vars)))

    def _run_here(self, module_name, with_invocation=True):
        options = module_argument_spec(self.OPTIONS) if self.K8S else self.OPTIONS
        params, no_log_values, error = validate(options, dict(self._task.args), module_name)
        if self.K8S:
            # What AnsibleK8SModule masks on top of the spec's no_log (an inline kubeconfig's credentials, from
            # kubernetes.core 6.3 on), then the kubeconfig path shown again, as k8s_module() does for the module.
            mask_as_kubernetes_core(no_log_values, params)
            unmask_kubeconfig_path(no_log_values, params)
        if error:
            # A message may quote a value: secrets masked, as AnsibleModule.fail_json does.
            return remove_values(dict(failed=True, msg=error), no_log_values)
        warnings = []
        try:
            result = dict(self.TASK(params, self._play_context.check_mode, warnings.append))
        except TaskFailed as failure:
            result = dict(failure.result, failed=True, msg=failure.msg)
        result.setdefault("changed", False)
        if with_invocation:
            result["invocation"] = {"module_args": params}
        if warnings:
            result["warnings"] = warnings
        # Secrets among the arguments never reach the result, as AnsibleModule.exit_json guarantees. (Walking a
        # large result costs time: skipped when there is nothing to hide, which changes nothing.)
        return remove_values(result, no_log_values) if no_log_values else result
