# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugin_utils/module_main.py: a module's main() run in-process gives what the same main() gives with the real
AnsibleModule (run here as ansible's own unit tests run modules: arguments patched in, the printed JSON read back).

kubernetes.core.k8s against a cluster, both ways, is tests/integration/test_k8s_in_process.py."""

import contextlib
import io
import json
import types

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.kubernetes.core.plugins.modules import k8s as kubernetes_core_k8s
from ansible_collections.gpuops.scheduling.plugins.plugin_utils import module_main
from ansible_collections.gpuops.scheduling.plugins.plugin_utils.in_process import inject_invocation

# A module as modules are written: AnsibleModule by name in its namespace, its result through exit_json/fail_json.
SOURCE = '''
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            count=dict(type="int", default=1),
            token=dict(type="str", no_log=True),
            mode=dict(type="str", choices=["a", "b"]),
            other=dict(type="str"),
        ),
        mutually_exclusive=[("mode", "other")],
        required_if=[("count", 0, ("mode",))],
        supports_check_mode=SUPPORTS_CHECK_MODE,
    )
    if module.params["name"] == "warn":
        module.warn("careful with " + str(module.params["token"]))
        module.deprecate("old option", version="2.0.0", collection_name="example.collection")
    if module.params["name"] == "fail":
        module.fail_json(msg="failed with " + str(module.params["token"]), detail=module.params["count"])
    if module.params["name"] == "silent":
        return
    module.exit_json(changed=not module.check_mode, name=module.params["name"], count=module.params["count"],
                     echoed=module.params["token"], diff_mode=module._diff)
'''


def example_module(supports_check_mode=True):
    module = types.ModuleType("example_module")
    module.SUPPORTS_CHECK_MODE = supports_check_mode
    exec(compile(SOURCE, "example_module.py", "exec"), module.__dict__)  # pylint: disable=exec-used
    return module


def with_ansible_module(module, args, check_mode=False, diff=False):
    """The module's main() with the real AnsibleModule: what a module process prints."""
    internal = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff, _ansible_module_name="example")
    printed = io.StringIO()
    with patch_module_args(internal), contextlib.redirect_stdout(printed), pytest.raises(SystemExit):
        module.main()
    return json.loads(printed.getvalue())


def in_process(module, args, check_mode=False, diff=False):
    # The task's arguments in its result where AnsibleModule puts them (up to ansible-core 2.20; 2.21: on request).
    return module_main.run_main(module, "example", dict(args), check_mode=check_mode, diff=diff,
                                with_invocation=inject_invocation({}))


def comparable(result):
    # Warnings and deprecations: run in this (controller) process, AnsibleModule hands them to ansible's display
    # instead of its result, so they are compared in test_warnings_and_deprecations_are_returned_masked.
    return dict((key, value) for key, value in result.items()
                if not key.startswith("_ansible") and key not in ("warnings", "deprecations"))


@pytest.mark.parametrize("args, check_mode, diff", [
    ({"name": "plain"}, False, False),
    ({"name": "plain", "count": "3"}, False, True),           # "3" coerced to 3, as AnsibleModule does
    ({"name": "plain", "token": "s3cret"}, False, False),     # the no_log value masked in the result
    ({"name": "plain"}, True, False),                         # check mode
    ({"name": "warn", "token": "s3cret"}, False, False),      # warnings and deprecations, secrets masked in them
    ({"name": "fail", "token": "s3cret", "count": 2}, False, False),
    ({"name": "plain", "bogus": 1}, False, False),            # an unknown option
    ({"count": 2}, False, False),                             # a required option missing
    ({"name": "plain", "count": "many"}, False, False),       # the wrong type
    ({"name": "plain", "mode": "c"}, False, False),           # not one of the choices
    ({"name": "plain", "mode": "a", "other": "x"}, False, False),  # mutually exclusive
    ({"name": "plain", "count": 0}, False, False),            # required_if
])
def test_in_process_gives_what_ansible_module_gives(args, check_mode, diff):
    module = example_module()
    expected = with_ansible_module(module, args, check_mode, diff)
    assert comparable(in_process(module, args, check_mode, diff)) == comparable(expected)
    assert module.AnsibleModule is basic.AnsibleModule  # rebound for the call only


def test_warnings_and_deprecations_are_returned_masked():
    result = in_process(example_module(), {"name": "warn", "token": "s3cret"})
    assert result["warnings"] == ["careful with ********"]
    assert result["deprecations"] == [{"msg": "old option", "version": "2.0.0", "collection_name": "example.collection"}]
    assert "warnings" not in in_process(example_module(), {"name": "plain"})


def test_secrets_never_reach_the_result():
    result = in_process(example_module(), {"name": "fail", "token": "s3cret"})
    assert result["failed"] is True and "s3cret" not in json.dumps(result), result


def test_a_module_without_check_mode_is_skipped_in_check_mode():
    module = example_module(supports_check_mode=False)
    expected = with_ansible_module(module, {"name": "plain"}, check_mode=True)
    assert comparable(in_process(module, {"name": "plain"}, check_mode=True)) == comparable(expected)
    assert expected["skipped"] is True


def test_arguments_shown_only_where_ansible_injects_them():
    result = module_main.run_main(example_module(), "example", {"name": "plain"}, with_invocation=False)
    assert "invocation" not in result and result["name"] == "plain"


def test_a_main_that_ends_without_a_result_fails():
    result = in_process(example_module(), {"name": "silent"})
    assert result == {"failed": True, "msg": "example ended without a result"}


def test_an_error_inside_main_is_raised_and_the_binding_restored():
    module = example_module()

    def broken_main():
        module.AnsibleModule(argument_spec={})
        raise RuntimeError("boom")

    module.main = broken_main
    with pytest.raises(RuntimeError, match="boom"):
        in_process(module, {})
    assert module.AnsibleModule is basic.AnsibleModule


@pytest.mark.parametrize("args", [
    {"kind": "Pod", "name": "a", "generate_name": "a-"},                            # mutually exclusive
    {"kind": "Pod", "name": "a", "state": "gone"},                                  # not one of the choices
    {"kind": "Pod", "name": "a", "nonsense": True},                                 # not an option of kubernetes.core.k8s
    {"kind": "Pod", "name": "a", "api_key": "s3cret", "wait_timeout": "soon"},      # the wrong type, a secret beside it
])
def test_kubernetes_core_k8s_refuses_bad_arguments_in_process_as_its_module_does(args):
    # Refused before any connection is made: kubernetes.core's own spec and constraints, through either class.
    expected = with_ansible_module(kubernetes_core_k8s, args)
    result = module_main.run_main(kubernetes_core_k8s, "example", dict(args), with_invocation=inject_invocation({}))
    assert comparable(result) == comparable(expected)
    assert result["failed"] is True and "s3cret" not in json.dumps(result)
    assert kubernetes_core_k8s.AnsibleModule is not module_main.InProcessAnsibleModule
