# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The demo pods and claim templates (plugin_utils/_demo_manifests.py, through the gpu_demo_manifests filter): what each
role's pods ask for, and the settings the role gives the templates are all they read."""

import os
import re

import jinja2.meta
import jinja2.nodes
import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.scheduling.plugins.filter.gpu_demo import gpu_demo_manifests
from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _report_templates
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._demo_manifests import demo_manifests

ROLE = os.path.dirname(_report_templates.TEMPLATES)
SETTINGS = {
    "gpu_demo_node": "gpu-a1", "gpu_demo_namespace": "gpu-operator", "gpu_demo_node_selector": {},
    "gpu_demo_tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "_gpu_demo_gate_tolerations": [], "gpu_demo_labels": {"team": "ml"},
    "_gpu_demo_run_labels": {"app.kubernetes.io/managed-by": "gpuops.scheduling", "gpuops.scheduling/run-id": "r1",
                             "gpuops.scheduling/node": "gpu-a1"},
    "gpu_demo_annotations": {}, "gpu_demo_priority_class": "gpuops-preflight-no-preempt",
    "gpu_demo_termination_grace_seconds": 5, "gpu_demo_pod_security_context": {}, "gpu_demo_security_context": {},
    "gpu_demo_container_name": "smi", "gpu_demo_image": "vllm/vllm-openai:latest", "gpu_demo_image_pull_policy": "IfNotPresent",
    "gpu_demo_resource": "nvidia.com/gpu", "gpu_demo_resources": {}, "gpu_demo_device_class": "gpu.nvidia.com",
    "gpu_demo_hold_mode": "per_unit", "gpu_demo_hold_name": "gpu-demo-hold", "gpu_demo_queue_name": "gpu-demo-queue",
    "gpu_demo_probe_name": "gpu-demo-bypass-probe", "gpu_demo_hold_command": ["bash", "-c", "sleep 10"],
    "gpu_demo_queue_command": ["bash", "-c", "nvidia-smi -L"], "gpu_demo_evidence_command": "nvidia-smi -L",
    "gpu_demo_hold_seconds": 240, "gpu_demo_lock_seconds": 45, "gpu_demo_timeout": 90,
}


def names(pods):
    return [pod["metadata"]["name"] for pod in pods]


def limits(pod):
    return pod["spec"]["containers"][0]["resources"]["limits"]


def test_a_pod_per_unit_to_hold_one_to_queue_and_a_probe_without_a_gpu():
    manifests = demo_manifests({"units": 3}, SETTINGS)
    assert names(manifests["hold"]) == ["gpu-demo-hold-0", "gpu-demo-hold-1", "gpu-demo-hold-2"]
    assert [limits(pod) for pod in manifests["hold"]] == [{"nvidia.com/gpu": "1"}] * 3
    assert names(manifests["queue"]) == ["gpu-demo-queue"] and limits(manifests["queue"][0]) == {"nvidia.com/gpu": "1"}
    assert names(manifests["probe"]) == ["gpu-demo-bypass-probe"] and limits(manifests["probe"][0]) == {}
    assert manifests["claim_templates"] == []
    hold = manifests["hold"][0]
    assert hold["metadata"]["labels"] == {"team": "ml", "app.kubernetes.io/managed-by": "gpuops.scheduling",
                                          "gpuops.scheduling/run-id": "r1", "gpuops.scheduling/node": "gpu-a1",
                                          "gpuops.scheduling/role": "hold"}
    assert hold["spec"]["activeDeadlineSeconds"] == 285 and hold["spec"]["priorityClassName"] == "gpuops-preflight-no-preempt"
    assert hold["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-a1"]}]}]}
    assert "nodeName" not in hold["spec"] and hold["spec"]["automountServiceAccountToken"] is False


def test_one_pod_holds_every_unit_in_single_mode_and_none_when_nothing_is_free():
    single = demo_manifests({"units": 4}, dict(SETTINGS, gpu_demo_hold_mode="single"))
    assert names(single["hold"]) == ["gpu-demo-hold"] and limits(single["hold"][0]) == {"nvidia.com/gpu": "4"}
    assert demo_manifests({"units": 0}, SETTINGS)["hold"] == []


def test_through_the_runs_own_claims_the_pods_name_templates_and_request_no_extended_resource():
    manifests = demo_manifests({"units": 2, "dra_request": "claim"}, SETTINGS)
    assert names(manifests["claim_templates"]) == ["gpu-demo-hold", "gpu-demo-queue"]
    assert [template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"]
            for template in manifests["claim_templates"]] == [1, 1]
    hold = manifests["hold"][0]
    assert hold["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-demo-hold"}]
    assert limits(hold) == {} and hold["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]


def test_the_templates_read_nothing_but_the_plan_and_the_settings_the_role_gives_them():
    # A variable a template reads that the role does not pass would fail every run at its pre-flight.
    with open(os.path.join(ROLE, "vars", "main.yml"), encoding="utf-8") as source:
        # (one Jinja2 dict, 'name': value, ...)
        given = set(re.findall(r"'(\w+)':", yaml.safe_load(source)["_gpu_demo_pod_settings"]))
    environment = _report_templates._environment()
    for name in ("pod.yaml.j2", "claim_templates.yaml.j2"):
        source = environment.loader.get_source(environment, name)[0]
        tree = environment.parse(source)
        # (Jinja2 counts a name a template sets in one branch of an if as read too.)
        own = set(assignment.target.name for assignment in tree.find_all(jinja2.nodes.Assign))
        read = jinja2.meta.find_undeclared_variables(tree) - own
        assert read - {"_gpu_demo_plan", "_gpu_demo_pod_role"} <= given, name
    assert given == set(SETTINGS)


def test_a_setting_not_given_is_named_in_the_filters_error():
    settings = dict(SETTINGS)
    del settings["gpu_demo_image"]
    with pytest.raises(AnsibleFilterError, match="gpu_demo_manifests: cannot render the demo pods: .*gpu_demo_image"):
        gpu_demo_manifests({"units": 1}, settings)
    with pytest.raises(AnsibleFilterError, match="expects the hold's plan and the role's pod settings"):
        gpu_demo_manifests(None, SETTINGS)
