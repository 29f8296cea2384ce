# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A playbook that still names gpuops.scheduling.k8s runs kubernetes.core.k8s (meta/runtime.yml's redirect), with a
deprecation warning that names the module to write instead; the object is created and deleted as kubernetes.core.k8s
creates and deletes it."""
from __future__ import annotations

import json
import textwrap
import uuid

import pytest

pytestmark = pytest.mark.independent

PLAY = textwrap.dedent("""\
    - hosts: localhost
      gather_facts: false
      vars:
        ansible_connection: local
        ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"
      tasks:
        - name: Create a ConfigMap with the old name
          gpuops.scheduling.k8s:
            state: present
            definition: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: settings, namespace: "{ns}"}}, data: {{a: "1"}}}}
          register: created
        - name: The same again, unchanged
          gpuops.scheduling.k8s:
            state: present
            definition: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: settings, namespace: "{ns}"}}, data: {{a: "1"}}}}
          register: again
        - name: Record the results
          ansible.builtin.copy:
            dest: "{out}"
            content: "{{{{ {{'created': created, 'again': again}} | to_json }}}}"
            mode: "0600"
    """)


@pytest.fixture()
def namespace(sim):
    name = f"redirect-{uuid.uuid4().hex[:6]}"
    sim.kubectl("create", "namespace", name)
    yield name
    sim.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_the_old_module_name_runs_kubernetes_core_k8s_with_a_deprecation_warning(sim, tmp_path, namespace):
    out = tmp_path / "results.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY.format(ns=namespace, out=out))
    run = sim.playbook(str(playbook), inventory="localhost,", extra_args=("-vvv",))
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    output = " ".join((run.stdout + run.stderr).split())
    assert "redirecting (type: modules) gpuops.scheduling.k8s to kubernetes.core.k8s" in output, output[-3000:]
    assert "gpuops.scheduling.k8s has been deprecated" in output and "Use kubernetes.core.k8s" in output
    results = json.loads(out.read_text())
    assert results["created"]["changed"] is True and results["again"]["changed"] is False
    assert results["created"]["result"]["data"] == {"a": "1"}
    configmap = json.loads(sim.kubectl("get", "configmap", "settings", "-n", namespace, "-o", "json").stdout)
    assert configmap["data"] == {"a": "1"}
