# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugin_utils/_in_process.py: where a task may run in the controller's process, argument checks as
AnsibleModule makes them, and the same task (vllm_health against a tiny server on 127.0.0.1) run both
ways by ansible-playbook, giving the same result."""

import copy
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import client as _k8s_client
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks import vllm_health as _task_vllm_health
from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _in_process as in_process

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "modules"))
from test_vllm_health import TOKEN, vllm  # noqa: E402,F401 pylint: disable=wrong-import-position,unused-import

CHECKOUT = Path(__file__).resolve().parents[4]


@pytest.fixture()
def venv(tmp_path):
    """A virtualenv's bin/ with python -> python3 -> the base interpreter, as `python -m venv` lays it out."""
    base = tmp_path / "base" / "python3.11"
    base.parent.mkdir()
    base.write_text("")
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(base)
    (bin_dir / "python").symlink_to("python3")
    return bin_dir


@pytest.mark.parametrize("transport, become, async_val, interpreter, why", [
    ("local", False, 0, None, None),
    ("local", False, 0, "venv/bin/python", None),
    ("local", False, 0, "venv/bin/python3", None),
    ("local", False, 0, "venv/bin/../bin/python", None),
    ("ssh", False, 0, None, "the task's connection is ssh, not local"),
    ("local", True, 0, None, "become is set: the module must run as another user"),
    ("local", False, 30, None, "async tasks run as modules"),
    ("local", False, 0, "base/python3.11", "ansible_python_interpreter is base/python3.11, not the controller's venv/bin/python"),
    ("local", False, 0, "/usr/bin/env python3", "ansible_python_interpreter is /usr/bin/env python3, not the controller's venv/bin/python"),
])
def test_runs_in_process_only_where_the_module_would_run_anyway(venv, monkeypatch, transport, become, async_val, interpreter, why):
    monkeypatch.chdir(venv.parent.parent)
    assert in_process.why_not_in_process(transport, become, async_val, interpreter, False, executable="venv/bin/python") == why


def test_a_controller_without_the_kubernetes_client_ships_kubernetes_tasks_as_modules(monkeypatch):
    monkeypatch.setattr(in_process, "HAS_KUBERNETES", False)
    assert "no kubernetes client" in in_process.why_not_in_process("local", False, 0, None, True, executable=sys.executable)
    assert in_process.why_not_in_process("local", False, 0, None, False, executable=sys.executable) is None


def test_arguments_are_checked_and_coerced_as_ansible_module_does():
    arguments = {"url": "http://x", "timeout": "3", "bearer_token": "s3cret"}
    params, no_log, error = in_process.validate(_task_vllm_health.OPTIONS, arguments, "m")
    assert error is None and params["timeout"] == 3.0 and params["retries"] == 0 and no_log == {"s3cret"}
    assert in_process.validate(_task_vllm_health.OPTIONS, {}, "m")[2] == "missing required arguments: url"
    error = in_process.validate(_task_vllm_health.OPTIONS, {"url": "http://x", "bogus": 1}, "gpuops.scheduling.vllm_health")[2]
    assert error.startswith("Unsupported parameters for (gpuops.scheduling.vllm_health) module: bogus. Supported parameters include:")
    assert "cannot be converted to an int" in in_process.validate(_task_vllm_health.OPTIONS, {"url": "u", "retries": "x"}, "m")[2]
    # Even a failed validation names the secrets to mask in its message.
    assert in_process.validate(_task_vllm_health.OPTIONS, {"bearer_token": "s3cret", "bogus": 1}, "m")[1] == {"s3cret"}


# An inline kubeconfig (``kubeconfig: "{{ lookup('file', path) | from_yaml }}"``) with every kind of credential
# a kubeconfig user can hold, each value distinctive so that a leak anywhere is found.
SECRETS = {"client-key-data": "S0VZLWRhdGEtZ3B1b3BzLXVuaXQtdGVzdC0wMDE=",
           "client-certificate-data": "Q0VSVC1kYXRhLWdwdW9wcy11bml0LXRlc3QtMDAy",
           "token": "eyJhbGciOiJSUzI1NiJ9.gpuops-unit-test-payload.gpuops-unit-test-signature",
           "password": "gpuops-unit-test-password-003"}
# (kubernetes.core < 6.3 masks every string of it, even in other values: names here are not words of the results.)
INLINE_KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "unit-test-context",
    "clusters": [{"name": "unit-test-cluster", "cluster": {"server": "https://127.0.0.1:6443",
                                                           "certificate-authority-data": "Q0EtZGF0YS1ncHVvcHMtdW5pdC10ZXN0LTAwNA=="}}],
    "users": [{"name": "unit-test-user", "user": dict(SECRETS, username="unit-test-admin")}],
    "contexts": [{"name": "unit-test-context",
                  "context": {"cluster": "unit-test-cluster", "user": "unit-test-user", "namespace": "gpu-operator"}}],
}


class EchoingTask(in_process.InProcessModule):
    """An API task whose result quotes the kubeconfig it was given, as an error message might."""

    OPTIONS = {"node": {"type": "str"}}

    @staticmethod
    def TASK(params, check_mode, warn):  # noqa: N802 pylint: disable=invalid-name
        user = params["kubeconfig"]["users"][0]["user"]
        assert {key: user[key] for key in SECRETS} == SECRETS   # the task itself gets the real credentials
        return {"node": params["node"], "echo": "connected as {0} with {1}".format(user["username"], sorted(user.values()))}


def run_here(action_class, args):
    action = action_class.__new__(action_class)   # _run_here needs only the task's arguments and check mode
    action._task = SimpleNamespace(args=args)
    action._play_context = SimpleNamespace(check_mode=False)
    return action._run_here("gpuops.scheduling.test")


def test_an_inline_kubeconfig_is_masked_in_process_as_kubernetes_core_masks_it():
    """Issue 12: from kubernetes.core 6.3 on the kubeconfig option is not no_log any more; AnsibleK8SModule's
    constructor masks an inline one, and the in-process runner gets that masking by building one.
    Fails if a kubernetes.core release masks an inline kubeconfig neither through its spec nor that constructor."""
    result = run_here(EchoingTask, {"kubeconfig": copy.deepcopy(INLINE_KUBECONFIG), "node": "prod102"})
    assert "failed" not in result, result
    shown = json.dumps(result)
    assert [name for name, value in SECRETS.items() if value in shown] == []
    assert result["node"] == "prod102" and "connected as" in result["echo"]
    shown_user = result["invocation"]["module_args"]["kubeconfig"]["users"][0]["user"]
    assert shown_user["client-key-data"] != SECRETS["client-key-data"]


def test_kubernetes_core_masks_an_inline_kubeconfig_through_its_spec_or_its_constructor():
    no_log_values = set()
    _k8s_client.mask_as_kubernetes_core(no_log_values, {"kubeconfig": copy.deepcopy(INLINE_KUBECONFIG)})
    if AUTH_ARG_SPEC["kubeconfig"].get("no_log"):
        # kubernetes.core < 6.3: the whole option is no_log, the argument validator masks every value in it.
        assert set(SECRETS.values()) <= in_process.validate(AUTH_ARG_SPEC, {"kubeconfig": INLINE_KUBECONFIG}, "m")[1]
    else:
        # kubernetes.core >= 6.3: AnsibleK8SModule masks the credentials only, not words such as the namespace.
        assert set(SECRETS.values()) <= no_log_values and "gpu-operator" not in no_log_values


class PathTask(in_process.InProcessModule):
    TASK = staticmethod(lambda params, check_mode, warn: {"loaded": params["kubeconfig"]})


def test_a_kubeconfig_path_stays_visible_in_process():
    """A path is no secret (kubernetes.core < 6.3 marks the whole option no_log): errors can name the file."""
    result = run_here(PathTask, {"kubeconfig": "/etc/gpuops/kubeconfig"})
    assert result["loaded"] == result["invocation"]["module_args"]["kubeconfig"] == "/etc/gpuops/kubeconfig"


def test_the_task_environment_applies_inside_and_is_restored(monkeypatch):
    monkeypatch.setenv("GPUOPS_KEPT", "1")
    monkeypatch.delenv("GPUOPS_TASK", raising=False)
    with in_process.task_environment({"GPUOPS_TASK": 2, "GPUOPS_KEPT": "3"}):
        assert os.environ["GPUOPS_TASK"] == "2" and os.environ["GPUOPS_KEPT"] == "3"
    assert "GPUOPS_TASK" not in os.environ and os.environ["GPUOPS_KEPT"] == "1"


PLAYBOOK = textwrap.dedent("""\
    - hosts: localhost
      gather_facts: false
      tasks:
        - gpuops.scheduling.vllm_health:
            url: "{{ base }}/health"
            models_url: "{{ base }}/v1/models"
            bearer_token: "{{ token }}"
            fail_on_unhealthy: "{{ strict }}"
          register: health
          ignore_errors: true
        - ansible.builtin.copy:
            content: "{{ health | to_json }}"
            dest: "{{ out }}"
    """)


def run_playbook(tmp_path, base, interpreter, strict=True, text=PLAYBOOK, inject_invocation=True):
    playbook = tmp_path / "play.yml"
    playbook.write_text(text)
    out = tmp_path / "result.json"
    extra_vars = {"base": base, "token": TOKEN, "strict": strict, "out": str(out)}
    env = {key: value for key, value in os.environ.items() if not key.lower().endswith("_proxy")}
    # Results carry the task's arguments: always up to ansible-core 2.20, from 2.21 on only with this setting.
    env["ANSIBLE_INJECT_INVOCATION"] = str(inject_invocation)
    # An async job's results in the test's own folder: the default ~/.ansible_async is expanded from HOME by the job
    # and from the password database by async_status, two folders where HOME is not the user's home.
    env["ANSIBLE_ASYNC_DIR"] = str(tmp_path / "async")
    completed = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-i", "localhost,", "-c", "local", "-vvv",
         "-e", json.dumps(extra_vars), "-e", "ansible_python_interpreter=" + interpreter],
        cwd=CHECKOUT, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout, json.loads(out.read_text())


def comparable(result):
    # What differs between two runs of the same check: timings, and where the module was run from.
    return {key: value for key, value in result.items() if key not in ("latency_ms", "elapsed", "invocation", "_ansible_no_log")}


@pytest.mark.parametrize("status, inject_invocation", [(200, True), (503, True), (200, False)])
def test_in_process_and_module_runs_give_the_same_result(tmp_path, vllm, status, inject_invocation):
    server = vllm(health_status=status, token=TOKEN)
    # The same Python under another path: the plugin cannot tell it is the controller's, so it ships the module.
    other_path = tmp_path / "python"
    other_path.symlink_to(sys.executable)
    here_output, here = run_playbook(tmp_path, server.base, sys.executable, inject_invocation=inject_invocation)
    shipped_output, shipped = run_playbook(tmp_path, server.base, str(other_path), inject_invocation=inject_invocation)
    assert "gpuops.scheduling.vllm_health: running in the controller's process" in here_output
    assert "gpuops.scheduling.vllm_health: running as a module: ansible_python_interpreter is " in shipped_output
    assert comparable(here) == comparable(shipped)
    assert ("invocation" in here) is ("invocation" in shipped)
    assert here["failed"] is (status != 200) and here["healthy"] is (status == 200)
    if inject_invocation:
        assert "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in here_output  # -vvv shows the arguments, masked
    assert TOKEN not in here_output and TOKEN not in json.dumps(here)


def test_an_async_task_runs_as_a_module(tmp_path, vllm):
    server = vllm(token=TOKEN)
    # async is the job's limit, not what the test measures: on a loaded machine (load 17 seen) the shipped module
    # took longer than 30 s to start and answer, and the job was ended before it had.
    text = PLAYBOOK.replace("      register: health\n", "      register: health\n      async: 300\n      poll: 1\n")
    output, result = run_playbook(tmp_path, server.base, sys.executable, text=text)
    assert "gpuops.scheduling.vllm_health: running as a module: async tasks run as modules" in output
    assert result.get("healthy") is True, result


def test_a_virtualenv_reached_through_a_linked_folder_is_the_same_python(tmp_path):
    # make setup may link .venv to a virtualenv kept under ~/.cache: the playbook's python and the interpreter
    # named through the link are one virtualenv. A link to the same file in another folder is not (see above).
    real_bin = tmp_path / "cache" / "venv" / "bin"
    real_bin.mkdir(parents=True)
    (real_bin / "python").symlink_to(sys.executable)
    (tmp_path / ".venv").symlink_to(tmp_path / "cache" / "venv")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "python").symlink_to(sys.executable)
    assert in_process.same_python(str(tmp_path / ".venv" / "bin" / "python"), str(real_bin / "python"))
    assert not in_process.same_python(str(elsewhere / "python"), str(real_bin / "python"))
