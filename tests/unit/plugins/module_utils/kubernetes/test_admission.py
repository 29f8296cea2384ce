# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What pod_admission makes of the API server's answers to a dry run (module_utils/_kubernetes/admission.py), on
answers as kube-apiserver gives them."""

import json

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import admission

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-demo-hold"}, "spec": {"containers": []}}
TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu-demo-hold-gpu", "namespace": "elsewhere"}, "spec": {}}


def test_an_object_without_a_namespace_goes_to_the_modules_and_one_with_its_own_keeps_it():
    assert admission.object_ref(POD, 0, "gpu-operator") == {
        "kind": "Pod", "api_version": "v1", "name": "gpu-demo-hold", "namespace": "gpu-operator"}
    assert admission.object_ref(TEMPLATE, 1, "gpu-operator")["namespace"] == "elsewhere"
    body = admission.request_body(POD, admission.object_ref(POD, 0, "gpu-operator"))
    assert body["metadata"] == {"name": "gpu-demo-hold", "namespace": "gpu-operator"}
    assert "namespace" not in POD["metadata"]   # the caller's definition is left as it was


@pytest.mark.parametrize("definition, said", [
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}, r"definitions\[2\] \(ConfigMap 'cm', apiVersion 'v1'\)"),
    ({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"}},
     r"definitions\[2\] \(ResourceClaimTemplate 't', apiVersion 'resource.k8s.io/v1beta1'\)"),
    ({"metadata": {"name": "x"}}, r"definitions\[2\] \(no kind 'x'"),
])
def test_a_kind_not_asked_about_is_refused_naming_the_object_and_the_kinds_accepted(definition, said):
    with pytest.raises(admission.DefinitionError, match=said + r".*Pod \(v1\) or ResourceClaimTemplate \(resource.k8s.io/v1\)"):
        admission.object_ref(definition, 2, "gpu-operator")


def test_a_nameless_object_and_a_non_object_are_refused():
    with pytest.raises(admission.DefinitionError, match="has no metadata.name"):
        admission.object_ref({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "x-"}}, 0, "ns")
    with pytest.raises(admission.DefinitionError, match=r"definitions\[0\] is not an object"):
        admission.object_ref("pod.yaml", 0, "ns")


def test_an_admitted_pod_says_the_preemption_policy_its_priority_class_gave_it():
    ref = admission.object_ref(POD, 0, "gpu-operator")
    answer = dict(POD, spec={"priorityClassName": "gpuops-preflight-no-preempt", "priority": 0, "preemptionPolicy": "Never"})
    assert admission.admitted(ref, answer) == dict(ref, admitted=True, preemption_policy="Never",
                                                   priority_class_name="gpuops-preflight-no-preempt",
                                                   status=None, reason=None, message=None)
    # A claim template has no preemption policy, whatever its spec holds.
    template_ref = admission.object_ref(TEMPLATE, 1, "gpu-operator")
    assert admission.admitted(template_ref, {"spec": {"preemptionPolicy": "x"}})["preemption_policy"] is None


def status(code, reason, message):
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
                       "code": code}).encode()


def test_a_refusal_keeps_the_api_servers_reason_and_message_verbatim():
    ref = admission.object_ref(POD, 0, "gpu-operator")
    message = 'pods "gpu-demo-hold" is forbidden: no PriorityClass with name gpuops-preflight-no-preempt was found'
    assert admission.refused(ref, 403, status(403, "Forbidden", message), "Forbidden") == dict(
        ref, admitted=False, preemption_policy=None, priority_class_name=None, status=403, reason="Forbidden", message=message)
    taken = admission.refused(ref, 409, status(409, "AlreadyExists", 'pods "gpu-demo-hold" already exists'))
    assert (taken["reason"], taken["message"]) == ("AlreadyExists", 'pods "gpu-demo-hold" already exists')


def test_a_claim_template_api_the_server_does_not_serve_is_said_so():
    ref = admission.object_ref(TEMPLATE, 0, "gpu-operator")
    answer = admission.refused(ref, 404, b"404 page not found\n", "Not Found")
    assert answer["reason"] is None and answer["status"] == 404
    assert answer["message"] == "404 page not found (the API server does not serve resource.k8s.io/v1, or namespace elsewhere is missing)"
    assert admission.refused(ref, 500, b"", "Internal Server Error")["message"].startswith("500 Internal Server Error")


def test_the_pods_found_are_summarised():
    pod = {"metadata": {"name": "gpu-demo-hold", "namespace": "gpu-operator", "uid": "u1", "deletionTimestamp": "2026-12-04T10:00:00Z",
                        "labels": {"gpuops.scheduling/node": "prod102"}},
           "spec": {"nodeName": "prod102"}, "status": {"phase": "Running"}}
    assert admission.pod_summary(pod) == {"name": "gpu-demo-hold", "namespace": "gpu-operator", "uid": "u1", "node_name": "prod102",
                                          "phase": "Running", "deletion_timestamp": "2026-12-04T10:00:00Z",
                                          "labels": {"gpuops.scheduling/node": "prod102"}}
    assert admission.pod_summary({"metadata": {"name": "p"}})["labels"] == {}
