# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""pod_admission's task function against a scripted API (no cluster): one list, one dry run per definition with our
field manager, refusals as answers, and failures only where the API server gave no verdict."""

import json

import pytest
import urllib3
from kubernetes.client.rest import ApiException

from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks import pod_admission
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed

HOST = "https://127.0.0.1:6443"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-demo-hold"},
       "spec": {"priorityClassName": "gpuops-preflight-no-preempt", "containers": []}}
TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu-demo-hold-gpu"}, "spec": {}}


class Response:
    def __init__(self, payload):
        self.data = json.dumps(payload).encode()


def api_error(code, reason, message):
    error = ApiException(status=code, reason=reason)
    error.body = json.dumps({"kind": "Status", "message": message, "reason": reason.replace(" ", ""), "code": code})
    return error


class FakeApi:
    """Admits with the PriorityClass's policy, or raises the error scripted for a name; records every call."""

    def __init__(self, errors=None, pods=()):
        self.errors, self.pods, self.calls = errors or {}, list(pods), []

    def list_namespaced_pod(self, namespace, **kwargs):
        self.calls.append(("LIST", namespace, kwargs))
        if "LIST" in self.errors:
            raise self.errors["LIST"]
        return Response({"items": self.pods})

    def namespaced(self, method, path, namespace, name=None, body=None, **kwargs):
        self.calls.append((method, path.format(namespace=namespace), body, kwargs))
        error = self.errors.get(body["metadata"]["name"])
        if error is not None:
            raise error
        answer = json.loads(json.dumps(body))
        if body["kind"] == "Pod":
            answer["spec"].update(priority=0, preemptionPolicy="Never")
        return Response(answer)


@pytest.fixture()
def api(monkeypatch):
    holder = {}

    def use(fake):
        holder["api"] = fake
        return fake

    monkeypatch.setattr(pod_admission, "k8s_client", lambda params: object())
    monkeypatch.setattr(pod_admission, "api_host", lambda client: HOST)
    monkeypatch.setattr(pod_admission, "core_v1_api", lambda client: holder["api"])
    return use


def params(**extra):
    base = dict(definitions=[TEMPLATE, POD], namespace="gpu-operator", label_selectors=[])
    base.update(extra)
    return base


def test_each_definition_is_asked_in_order_as_a_dry_run_with_our_field_manager(api):
    fake = api(FakeApi())
    result = pod_admission.run(params(), False, print)
    assert result["changed"] is False and result["admitted"] is True and result["existing"] == []
    assert [call[:2] for call in fake.calls] == [
        ("POST", "/apis/resource.k8s.io/v1/namespaces/gpu-operator/resourceclaimtemplates"),
        ("POST", "/api/v1/namespaces/gpu-operator/pods")]   # no list without selectors
    assert all(call[3] == {"dry_run": "All", "field_manager": "gpuops.scheduling"} for call in fake.calls)
    template, pod = result["objects"]
    assert template["admitted"] and template["preemption_policy"] is None and template["kind"] == "ResourceClaimTemplate"
    assert pod == {"kind": "Pod", "api_version": "v1", "name": "gpu-demo-hold", "namespace": "gpu-operator", "admitted": True,
                   "preemption_policy": "Never", "priority_class_name": "gpuops-preflight-no-preempt",
                   "status": None, "reason": None, "message": None}


def test_check_mode_asks_the_same(api):
    api(FakeApi())
    assert pod_admission.run(params(), True, print) == pod_admission.run(params(), False, print)


def test_the_pods_under_the_labels_are_listed_once_before_the_dry_runs(api):
    pod = {"metadata": {"name": "gpu-demo-hold", "namespace": "gpu-operator", "uid": "u1", "labels": {"run": "old"}},
           "spec": {"nodeName": "prod102"}, "status": {"phase": "Running"}}
    taken = api_error(409, "Already Exists", 'pods "gpu-demo-hold" already exists')
    fake = api(FakeApi(errors={"gpu-demo-hold": taken}, pods=[pod]))
    result = pod_admission.run(params(label_selectors=["app.kubernetes.io/managed-by=gpuops.scheduling",
                                                       "gpuops.scheduling/node in (prod102)"]), False, print)
    assert fake.calls[0] == ("LIST", "gpu-operator", {"label_selector": "app.kubernetes.io/managed-by=gpuops.scheduling,"
                                                                        "gpuops.scheduling/node in (prod102)"})
    assert len(fake.calls) == 3
    assert result["existing"] == [{"name": "gpu-demo-hold", "namespace": "gpu-operator", "uid": "u1", "node_name": "prod102",
                                   "phase": "Running", "deletion_timestamp": None, "labels": {"run": "old"}}]
    assert result["admitted"] is False
    assert result["objects"][1] == dict(result["objects"][1], admitted=False, status=409, reason="AlreadyExists",
                                        message='pods "gpu-demo-hold" already exists', preemption_policy=None)


@pytest.mark.parametrize("code, reason", [(403, "Forbidden"), (404, "Not Found"), (422, "Unprocessable Entity"),
                                          (500, "Internal Server Error")])
def test_a_verdict_of_the_api_server_is_the_answer_not_a_failure(api, code, reason):
    api(FakeApi(errors={"gpu-demo-hold": api_error(code, reason, "the API server's own words")}))
    result = pod_admission.run(params(), False, print)
    assert result["admitted"] is False and result["objects"][0]["admitted"] is True
    assert result["objects"][1]["status"] == code and result["objects"][1]["message"] == "the API server's own words"


@pytest.mark.parametrize("error, said", [
    (ApiException(status=401, reason="Unauthorized"), "rejected the credentials (401 Unauthorized) when trying to ask whether "
                                                      "it admits Pod gpu-operator/gpu-demo-hold"),
    (ApiException(status=503, reason="Service Unavailable"), "answered 503 Service Unavailable when trying to ask whether it admits"),
    (urllib3.exceptions.MaxRetryError(None, "/", urllib3.exceptions.NewConnectionError(None, "Connection refused")),
     "cannot reach the Kubernetes API at https://127.0.0.1:6443 (connection refused) when trying to ask whether it admits Pod"),
])
def test_no_verdict_fails_the_task_with_what_was_answered_until_then(api, error, said):
    api(FakeApi(errors={"gpu-demo-hold": error}))
    with pytest.raises(TaskFailed, match=r"^.*" + said.replace("(", r"\(").replace(")", r"\)")) as failure:
        pod_admission.run(params(), False, print)
    assert [item["name"] for item in failure.value.result["objects"]] == ["gpu-demo-hold-gpu"]


def test_a_list_that_fails_fails_the_task_before_any_dry_run(api):
    fake = api(FakeApi(errors={"LIST": api_error(403, "Forbidden", 'pods is forbidden: User "demo" cannot list resource "pods"')}))
    with pytest.raises(TaskFailed, match=r"forbidden \(403\) to list the pods of namespace gpu-operator labelled a=b on "
                                         r"the Kubernetes API at https://127.0.0.1:6443: pods is forbidden"):
        pod_admission.run(params(label_selectors=["a=b"]), False, print)
    assert len(fake.calls) == 1


def test_a_kind_not_asked_about_fails_before_any_call(api):
    fake = api(FakeApi())
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}}
    with pytest.raises(TaskFailed, match=r"definitions\[1\] \(Secret 'token', apiVersion 'v1'\) cannot be asked about"):
        pod_admission.run(params(definitions=[POD, secret]), False, print)
    assert fake.calls == []
