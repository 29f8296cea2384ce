# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpuops.scheduling.k8s against the simulated cluster: the same steps through kubernetes.core.k8s (a module process
each) and through gpuops.scheduling.k8s (kubernetes.core's code in the task's worker), each way in its own namespace,
give the same results, in check mode and diff mode too, and fail with the same messages; where the module would not
run in the controller's process, kubernetes.core.k8s itself is shipped."""
from __future__ import annotations

import json
import re
import sys
import textwrap
import uuid

import pytest

pytestmark = pytest.mark.independent

CORE = "kubernetes.core.k8s"
HERE = "gpuops.scheduling.k8s"

# The ConfigMap the steps create, find unchanged, change only in check mode, and read back.
SETTINGS = '{{apiVersion: v1, kind: ConfigMap, metadata: {{name: settings, namespace: "{ns}", labels: {{run: eq}}}}, data: {{a: "1"}}}}'

# Each step once per way; {module} and {ns} filled in per way. Every result is registered under the step's name.
STEPS = textwrap.dedent("""\
    - name: create
      {module}:
        state: present
        definition: {settings}
    - name: create_again
      {module}:
        state: present
        definition: {settings}
    - name: change_in_check_mode
      check_mode: true
      diff: true
      {module}:
        state: present
        definition: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: settings, namespace: "{ns}"}}, data: {{a: "2"}}}}
    - name: read_after_check_mode
      {module}:
        state: present
        definition: {settings}
    - name: apply_with_diff
      diff: true
      {module}:
        state: present
        apply: true
        definition: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: applied, namespace: "{ns}", labels: {{run: eq}}}},
                     data: {{b: "2"}}}}
    - name: from_file
      {module}:
        state: present
        src: "{src}"
        namespace: "{ns}"
    - name: invalid_name
      {module}:
        state: present
        definition: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: Not_Valid, namespace: "{ns}"}}}}
    - name: unknown_kind
      {module}:
        state: present
        definition: {{apiVersion: v1, kind: NoSuchKind, metadata: {{name: x, namespace: "{ns}"}}}}
    - name: bad_option
      {module}:
        state: present
        kind: ConfigMap
        name: settings
        namespace: "{ns}"
        not_an_option: 1
    - name: unreachable_through_the_environment
      environment:
        K8S_AUTH_HOST: "https://127.0.0.1:1"
      {module}:
        state: absent
        kind: ConfigMap
        name: settings
        namespace: "{ns}"
    - name: delete_all_by_label
      {module}:
        state: absent
        kind: ConfigMap
        namespace: "{ns}"
        label_selectors: [run=eq]
        delete_all: true
    - name: delete_again
      {module}:
        state: absent
        kind: ConfigMap
        name: settings
        namespace: "{ns}"
    """)

PLAY = textwrap.dedent("""\
    - hosts: localhost
      gather_facts: false
      connection: local
      vars:
        ansible_python_interpreter: "{python}"
      tasks:
    {tasks}
        - ansible.builtin.copy:
            content: "{{{{ {{{results}}} | to_json }}}}"
            dest: "{out}"
    """)

# What differs between the same object made twice (where and when), and between two runs of the same step. (A diff
# holds managedFields where their time ticked over to the next second between the two reads, whichever way it ran.)
VOLATILE = {"uid", "resourceVersion", "creationTimestamp", "time", "duration", "namespace", "selfLink", "invocation",
            "_ansible_no_log", "managedFields"}


def steps_for(module: str, ns: str, src: str, prefix: str, **task_keys) -> tuple[str, list[str]]:
    names = []
    tasks = []
    for step in re.split(r"^(?=- name: )", STEPS.format(module=module, ns=ns, src=src, settings=SETTINGS.format(ns=ns)), flags=re.M):
        if not step.strip():
            continue
        name = re.match(r"- name: (\w+)", step).group(1)
        names.append(f"{prefix}{name}")
        extra = "".join(f"  {key}: {value}\n" for key, value in task_keys.items())
        tasks.append(step.replace(f"- name: {name}\n", f"- name: {prefix}{name}\n  register: {prefix}{name}\n"
                                  f"  ignore_errors: true\n{extra}", 1))
    return textwrap.indent("".join(tasks), "    "), names


def normalised(value, namespace: str):
    """A result with what differs between the two namespaces' objects (and between runs) taken out."""
    if isinstance(value, dict):
        kept = {key: normalised(item, namespace) for key, item in value.items() if key not in VOLATILE}
        # A part left empty by what was taken out (a diff's metadata that held only managedFields) goes too.
        return {key: item for key, item in kept.items() if item != {} or value[key] == {}}
    if isinstance(value, list):
        return [normalised(item, namespace) for item in value]
    if isinstance(value, str):
        # ansible-core 2.19+ says where a failure with a traceback came from: "Module failed:" for a module process.
        value = value.replace("Task failed: Module failed: ", "Task failed: ")
        return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>", value.replace(namespace, "<ns>"))
    return value


@pytest.fixture()
def namespaces(sim):
    names = {way: f"eq-{way}-{uuid.uuid4().hex[:6]}" for way in ("core", "here", "shipped")}
    for name in names.values():
        sim.kubectl("create", "namespace", name)
    yield names
    for name in names.values():
        sim.kubectl("delete", "namespace", name, "--wait=false", check=False)


def run_both_ways(sim, tmp_path, namespaces):
    src = tmp_path / "configmap.yml"
    src.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-file\n  labels: {run: eq}\ndata:\n  c: '3'\n")
    # The controller's Python through a script: the action cannot tell it is the same one, so it ships the module
    # (a link to it from another folder would not find the virtualenv's packages).
    other_python = tmp_path / "python"
    other_python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    other_python.chmod(0o755)
    core, core_names = steps_for(CORE, namespaces["core"], src, "core_")
    here, here_names = steps_for(HERE, namespaces["here"], src, "here_")
    shipped, shipped_names = steps_for(HERE, namespaces["shipped"], src, "shipped_",
                                       vars=f"{{ansible_python_interpreter: '{other_python}'}}")
    out = tmp_path / "results.json"
    names = core_names + here_names + shipped_names
    results = ", ".join(f"'{name}': {name}" for name in names)
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY.format(tasks=core + here + shipped, results=results, out=out, python=sys.executable))
    run = sim.playbook(str(playbook), inventory="localhost,", extra_args=("-vvv",))
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    return run.stdout, json.loads(out.read_text()), [name.split("_", 1)[1] for name in core_names]


def test_the_same_steps_give_the_same_results_both_ways(sim, tmp_path, namespaces):
    output, results, steps = run_both_ways(sim, tmp_path, namespaces)
    assert output.count(f"{HERE}: running {CORE} in the controller's process") == len(steps)
    assert output.count(f"{HERE}: running {CORE} as a module: ansible_python_interpreter is ") == len(steps)
    for step in steps:
        core = normalised(results[f"core_{step}"], namespaces["core"])
        for way in ("here", "shipped"):
            assert normalised(results[f"{way}_{step}"], namespaces[way]) == core, (way, step)
    # What the steps did, so that two ways that both did nothing would not pass.
    assert results["here_create"]["changed"] is True and results["here_create_again"]["changed"] is False
    assert results["here_change_in_check_mode"]["changed"] is True and results["here_change_in_check_mode"]["diff"]
    assert results["here_read_after_check_mode"]["changed"] is False  # the check-mode change was not written
    assert results["here_read_after_check_mode"]["result"]["data"] == {"a": "1"}
    assert results["here_from_file"]["result"]["metadata"]["name"] == "from-file"
    for failed in ("invalid_name", "unknown_kind", "bad_option", "unreachable_through_the_environment"):
        assert results[f"here_{failed}"]["failed"] is True, failed
    assert "Unsupported parameters" in results["here_bad_option"]["msg"]
    assert "port=1)" in results["here_unreachable_through_the_environment"]["msg"]
    assert results["here_delete_all_by_label"]["changed"] is True
    assert results["here_delete_again"]["changed"] is False
    left = sim.kubectl("get", "configmaps", "-n", namespaces["here"], "-l", "run=eq", "-o", "name").stdout.split()
    assert left == []
