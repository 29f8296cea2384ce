# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""report_store's task function against a scripted ConfigMap store (no cluster): create, or replace the same run's
report; the oldest beyond keep deleted, never this one; check mode as a dry run; refusals named verbatim."""

import copy
import json

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo import report_store as reports
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks import report_store
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed

HOST = "https://127.0.0.1:6443"
NAMESPACE = "gpu-operator"
SELECTOR = reports.selector("prod102")


def report(name, written, node="prod102"):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": reports.labels(node, name),
                         "annotations": {reports.WRITTEN_ANNOTATION: written}},
            "data": {"report.json": "{}"}}


def api_error(code, reason, message):
    error = ApiException(status=code, reason=reason)
    error.body = json.dumps({"kind": "Status", "message": message, "reason": reason.replace(" ", ""), "code": code})
    return error


class Response:
    def __init__(self, payload):
        self.data = json.dumps(payload).encode()


class FakeConfigMaps:
    """The namespace's ConfigMaps by name; ``refuse``: (method, name) -> the ApiException to raise. Lists by the
    node label of SELECTOR only (the fake's one selector), as the API server would."""

    def __init__(self, stored=(), refuse=None):
        self.stored = {item["metadata"]["name"]: copy.deepcopy(item) for item in stored}
        self.refuse = refuse or {}
        self.calls = []
        self.version = 10

    def namespaced(self, method, path, namespace, name=None, body=None, **kwargs):
        assert path == "/api/v1/namespaces/{namespace}/configmaps" and namespace == NAMESPACE
        target = name or (body or {}).get("metadata", {}).get("name")
        self.calls.append((method, target, kwargs))
        if (method, target) in self.refuse:
            raise self.refuse[(method, target)]
        dry = kwargs.get("dry_run") == "All"
        if method == "GET" and name:
            if name not in self.stored:
                raise api_error(404, "Not Found", 'configmaps "{0}" not found'.format(name))
            return Response(self.stored[name])
        if method == "GET":
            assert kwargs["label_selector"] == SELECTOR
            return Response({"items": [item for item in self.stored.values()
                                       if item["metadata"]["labels"].get(reports.NODE_LABEL) == "prod102"]})
        if method == "POST":
            if target in self.stored:
                raise api_error(409, "Conflict", 'configmaps "{0}" already exists'.format(target))
        if method == "PUT":
            assert body["metadata"]["resourceVersion"] == self.stored[target]["metadata"]["resourceVersion"]
        if method == "DELETE":
            del self.stored[name]
            return Response({"kind": "Status", "status": "Success"})
        self.version += 1
        written = dict(copy.deepcopy(body), metadata=dict(body["metadata"], resourceVersion=str(self.version)))
        if not dry:
            self.stored[target] = written
        return Response(written)

    def writes(self):
        return [(method, name) for method, name, _kwargs in self.calls if method in ("POST", "PUT", "DELETE")]


@pytest.fixture()
def api(monkeypatch):
    holder = {}

    def use(fake):
        holder["api"] = fake
        return fake

    monkeypatch.setattr(report_store, "k8s_client", lambda params: object())
    monkeypatch.setattr(report_store, "api_host", lambda client: HOST)
    monkeypatch.setattr(report_store, "core_v1_api", lambda client: holder["api"])
    return use


OLD = [report("r1", "2026-12-01T10:00:01.000000Z"), report("r2", "2026-12-01T10:00:02.000000Z"),
       report("r3", "2026-12-01T10:00:03.000000Z"), report("other-node", "2020-01-01T00:00:00.000000Z", node="prod103")]
NEW = report("r4", "2026-12-01T10:00:04.000000Z")


def params(definition=None, **extra):
    base = dict(definition=definition or NEW, keep=2, keep_selector=SELECTOR)
    base.update(extra)
    return base


def test_the_report_is_created_and_the_oldest_beyond_keep_deleted_never_another_nodes(api):
    fake = api(FakeConfigMaps(OLD))
    result = report_store.run(params(), False, print)
    assert result == {"changed": True, "configmap": {"namespace": NAMESPACE, "name": "r4"}, "kept": True, "created": True,
                      "pruned": ["r1", "r2"]}
    assert fake.writes() == [("POST", "r4"), ("DELETE", "r1"), ("DELETE", "r2")]
    assert sorted(fake.stored) == ["other-node", "r3", "r4"]
    assert fake.calls[0][2] == {"field_manager": "gpuops.scheduling", "dry_run": None}


def test_check_mode_asks_with_a_dry_run_and_deletes_nothing(api):
    fake = api(FakeConfigMaps(OLD))
    result = report_store.run(params(), True, print)
    assert result == {"changed": True, "configmap": {"namespace": NAMESPACE, "name": "r4"}, "kept": False, "created": True,
                      "pruned": ["r1", "r2"]}
    assert fake.writes() == [("POST", "r4")] and fake.calls[0][2]["dry_run"] == "All"
    assert sorted(fake.stored) == sorted(item["metadata"]["name"] for item in OLD)


def test_a_rerun_of_the_same_run_replaces_its_report_at_the_version_read_and_again_changes_nothing(api):
    stale = report("r4", "2026-12-01T09:00:00.000000Z")
    stale["metadata"]["resourceVersion"] = "7"
    fake = api(FakeConfigMaps(OLD[2:] + [stale]))
    result = report_store.run(params(), False, print)
    assert result["created"] is False and result["changed"] is True and result["kept"] and result["pruned"] == []
    assert fake.writes() == [("POST", "r4"), ("PUT", "r4")]
    assert fake.stored["r4"]["metadata"]["annotations"] == NEW["metadata"]["annotations"]
    again = report_store.run(params(), False, print)
    assert again == dict(result, changed=False)
    assert fake.writes()[-1] == ("POST", "r4")   # refused as taken, and nothing replaced
    assert report_store.run(params(), True, print)["changed"] is False


def test_a_write_the_api_server_refuses_fails_naming_the_report_with_its_message_verbatim(api):
    quota = ('configmaps "r4" is forbidden: exceeded quota: gpuops-it-no-configmaps, requested: configmaps=1, '
             'used: configmaps=3, limited: configmaps=0')
    fake = api(FakeConfigMaps(OLD, refuse={("POST", "r4"): api_error(403, "Forbidden", quota)}))
    with pytest.raises(TaskFailed) as failure:
        report_store.run(params(), False, print)
    assert failure.value.msg == ("cannot keep the report r4 in namespace gpu-operator: " + quota
                                 + " (403 Forbidden from the Kubernetes API at https://127.0.0.1:6443)")
    assert failure.value.result["kept"] is False and failure.value.result["pruned"] == []
    assert fake.writes() == [("POST", "r4")]   # nothing pruned after a refused write
    # Check mode finds the same refusal through the dry run.
    with pytest.raises(TaskFailed, match="cannot keep the report r4"):
        report_store.run(params(), True, print)


def test_an_old_report_that_cannot_be_deleted_fails_naming_it_and_the_report_stays(api):
    refused = api_error(403, "Forbidden", 'configmaps "r1" is forbidden: User "demo" cannot delete resource "configmaps"')
    fake = api(FakeConfigMaps(OLD, refuse={("DELETE", "r1"): refused}))
    with pytest.raises(TaskFailed) as failure:
        report_store.run(params(), False, print)
    assert failure.value.msg.startswith("the report r4 is kept in namespace gpu-operator, but older reports beyond keep=2 "
                                        "could not be deleted: cannot delete the old report r1 in namespace gpu-operator: "
                                        'configmaps "r1" is forbidden')
    assert failure.value.result == {"changed": True, "configmap": {"namespace": NAMESPACE, "name": "r4"}, "kept": True,
                                    "created": True, "pruned": ["r2"]}
    assert "r4" in fake.stored and "r1" in fake.stored


def test_an_old_report_gone_meanwhile_is_as_wanted(api):
    gone = api_error(404, "Not Found", 'configmaps "r1" not found')
    api(FakeConfigMaps(OLD, refuse={("DELETE", "r1"): gone}))
    assert report_store.run(params(), False, print)["pruned"] == ["r1", "r2"]


def test_unreachable_or_unauthorized_is_the_collections_usual_sentence(api):
    api(FakeConfigMaps(OLD, refuse={("POST", "r4"): ApiException(status=401, reason="Unauthorized")}))
    with pytest.raises(TaskFailed, match=r"rejected the credentials \(401 Unauthorized\) when trying to keep the report r4 "
                                         r"in namespace gpu-operator"):
        report_store.run(params(), False, print)


@pytest.mark.parametrize("definition, extra, said", [
    (dict(NEW, kind="Secret"), {}, "expected a v1 ConfigMap with metadata.name and metadata.namespace"),
    (dict(NEW, metadata=dict(NEW["metadata"], labels={"gpuops.scheduling/node": "prod102"})), {},
     "a report carries the labels app.kubernetes.io/managed-by=gpuops.scheduling and gpuops.scheduling/report=gpu-preflight"),
    (NEW, {"keep": 0}, "keep must be at least 1"),
    (NEW, {"keep_selector": reports.selector("prod103")}, "does not select the report r4 itself"),
    (NEW, {"keep_selector": "a in b"}, "keep_selector: 'a in b' is not a label selector requirement"),
])
def test_settings_that_could_prune_the_wrong_reports_are_refused_before_any_call(api, definition, extra, said):
    fake = api(FakeConfigMaps(OLD))
    with pytest.raises(TaskFailed, match=said):
        report_store.run(params(definition, **extra), False, print)
    assert fake.calls == []
