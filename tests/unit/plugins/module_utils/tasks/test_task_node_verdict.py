# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""node_verdict's task function against a scripted API (no cluster): the patch types, the field manager, check mode,
the access review, and a taint removal that never takes someone else's taint when the list changes under it."""

import json
from pathlib import Path

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks import node_verdict
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed
from kubernetes.client.rest import ApiException

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "gpu_demo_results"
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
NOT_READY = json.loads((FIXTURES / "gpu-a4-not-ready.json").read_text())
GATE = "gpuops.scheduling/gpu-preflight-pending"
OTHER = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


class Response:
    def __init__(self, payload):
        self.data = json.dumps(payload).encode()


class FakeApi:
    """The Node, the calls made, and optionally someone else changing the taints before our first taint patch."""

    def __init__(self, node, allowed=True, race=None):
        self.node = node
        self.calls = []
        self.allowed = allowed
        self.race = race
        self.event_refused = False
        # The node's ResourceSlices (a device plugin node has none), or the status the API server answers a list with.
        self.slices = []
        self.slices_refused = None

    def read_node(self, name):
        self.calls.append(("GET", name))
        if self.node is None:
            raise ApiException(status=404, reason="Not Found")
        return Response(self.node)

    def patch_node_status(self, name, body, content_type, **kwargs):
        self.calls.append(("PATCH status", content_type, kwargs.get("field_manager"), body))
        return Response(self.node)

    def patch_node(self, name, body, content_type, **kwargs):
        self.calls.append(("PATCH", content_type, kwargs.get("field_manager"), body))
        if content_type.startswith("application/json-patch"):
            if self.race:
                self.node["spec"]["taints"] = self.race
                self.race = None
            test, remove = body
            index = int(test["path"].rsplit("/", 1)[1])
            taints = self.node["spec"]["taints"]
            if index >= len(taints) or taints[index] != test["value"]:
                raise ApiException(status=422, reason="Unprocessable Entity")
            del taints[int(remove["path"].rsplit("/", 1)[1])]
        return Response(self.node)

    def list_pod_for_all_namespaces(self, **kwargs):
        self.calls.append(("LIST pods", kwargs.get("field_selector")))
        return Response({"items": [{"metadata": {"name": "nvidia-device-plugin-daemonset-7xk2p", "uid": "uid-plugin",
                                                 "labels": {"app": "nvidia-device-plugin-daemonset"}},
                                    "spec": {"nodeName": "gpu-a2"}, "status": {"phase": "Running"}}]})

    def list_resource_slice(self, **kwargs):
        self.calls.append(("LIST resourceslices", kwargs.get("field_selector")))
        if self.slices_refused:
            raise ApiException(status=self.slices_refused, reason="refused")
        return Response({"items": self.slices})

    def create_event(self, namespace, body, **kwargs):
        self.calls.append(("POST event", namespace, body))
        if self.event_refused:
            raise ApiException(status=403, reason="Forbidden")
        return Response(body)

    def create_self_subject_access_review(self, body):
        attributes = body["spec"]["resourceAttributes"]
        self.calls.append(("SSAR", attributes["verb"], attributes["resource"], attributes["subresource"]))
        allowed = self.allowed if isinstance(self.allowed, bool) else self.allowed(attributes)
        return Response({"status": {"allowed": allowed}})


@pytest.fixture()
def api(monkeypatch):
    holder = {}

    def use(fake):
        holder["api"] = fake
        return fake

    monkeypatch.setattr(node_verdict, "k8s_client", lambda params: object())
    monkeypatch.setattr(node_verdict, "api_host", lambda client: "https://127.0.0.1:6443")
    monkeypatch.setattr(node_verdict, "core_v1_api", lambda client: holder["api"])
    return use


def params(**extra):
    base = dict((name, None) for name in node_verdict.OPTIONS)
    base.update(state="verdict", resource="nvidia.com/gpu", node="gpu-a2")
    base.update(extra)
    return base


def a_node(taints=None):
    return {"metadata": {"name": "gpu-a2"}, "spec": {"taints": taints or []},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def test_the_verdict_goes_to_the_status_as_a_strategic_merge_and_to_the_node_as_a_merge_patch(api):
    fake = api(FakeApi(a_node()))
    result = node_verdict.run(params(result=PASSED, job="4411"), False, lambda message: None)
    assert result["changed"] and result["condition"]["status"] == "True" and result["verdict"]["job"] == "4411"
    # The label and annotations first, the condition last.
    metadata, status = [call for call in fake.calls if call[0].startswith("PATCH")]
    assert status[1:3] == ("application/strategic-merge-patch+json", "gpuops.scheduling")
    assert [entry["type"] for entry in status[3]["status"]["conditions"]] == ["gpuops.scheduling/GPUPreflightPassed"]
    assert metadata[1:3] == ("application/merge-patch+json", "gpuops.scheduling")
    assert metadata[3]["metadata"]["labels"] == {"gpuops.scheduling/gpu-preflight": "passed"}
    # What it was proven against, in the report annotation; then its Event, after the Node says it.
    written = json.loads(metadata[3]["metadata"]["annotations"]["gpuops.scheduling/gpu-preflight-report"])
    assert written["basis"] == {"plugin_pod": "uid-plugin"}
    assert ("LIST pods", "spec.nodeName=gpu-a2") in fake.calls
    event, = [call for call in fake.calls if call[0] == "POST event"]
    assert fake.calls.index(event) > fake.calls.index(metadata) and event[1] == "default"
    assert (event[2]["reason"], event[2]["type"], event[2]["regarding"]["name"]) == ("GPUPreflightPassed", "Normal", "gpu-a2")
    assert result["event"] == event[2]


REPORT_CONFIGMAP = "gpuops.scheduling/gpu-preflight-report-configmap"


def test_the_verdict_names_its_kept_report_and_a_verdict_without_one_removes_the_earlier_name(api):
    node = a_node()
    node["metadata"]["annotations"] = {REPORT_CONFIGMAP: "gpu-demo/gpu-demo-report-gpu-a2-earlier"}
    kept = dict(PASSED, report_configmap={"namespace": "gpu-demo", "name": "gpu-demo-report-gpu-a2-now"})
    for result, named in ((kept, "gpu-demo/gpu-demo-report-gpu-a2-now"), (PASSED, None)):
        fake = api(FakeApi(node))
        node_verdict.run(params(result=result), False, lambda message: None)
        metadata, = [call for call in fake.calls if call[0] == "PATCH"]
        # A merge patch: a string sets the annotation, null removes it; it is never left naming another run's report.
        assert metadata[3]["metadata"]["annotations"][REPORT_CONFIGMAP] == named


def dra_slice(node="gpu-a2", devices=("gpu-0", "gpu-1")):
    return {"metadata": {"name": "{0}-gpu.nvidia.com-x1".format(node)},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": name} for name in devices]}}


def test_a_dra_nodes_verdict_records_the_devices_its_slices_publish(api):
    fake = api(FakeApi(a_node()))
    fake.slices = [dra_slice()]
    result = node_verdict.run(params(result=PASSED), False, lambda message: None)
    assert result["verdict"]["basis"]["dra_devices"] == ["gpu.nvidia.com/gpu-a2/gpu-0", "gpu.nvidia.com/gpu-a2/gpu-1"]
    # Only the node's slices are asked for (the API server filters by spec.nodeName).
    assert ("LIST resourceslices", "spec.nodeName=gpu-a2") in fake.calls


@pytest.mark.parametrize("status, warned", [(404, False), (403, True)])
def test_slices_that_cannot_be_read_leave_the_devices_unrecorded_and_the_verdict_stands(api, status, warned):
    """404: the API server serves no DRA (nothing to record); 403: refused, said as a warning."""
    fake = api(FakeApi(a_node()))
    fake.slices_refused = status
    warnings = []
    result = node_verdict.run(params(result=PASSED), False, warnings.append)
    assert result["changed"] and "dra_devices" not in result["verdict"]["basis"]
    assert [warning for warning in warnings if "the verdict records no DRA devices" in warning] == (
        [warnings[0]] if warned else []), warnings


def test_an_event_that_cannot_be_created_is_a_warning_and_the_verdict_stands(api):
    fake = api(FakeApi(a_node()))
    fake.event_refused = True
    warnings = []
    result = node_verdict.run(params(result=NOT_READY, event_instance="awx-task-0"), False, warnings.append)
    assert result["changed"] and result["condition"]["status"] == "False" and result["event"] is None
    assert len(warnings) == 1 and "create the verdict's Event for node gpu-a2 in namespace default" in warnings[0]
    assert [call[2]["reportingInstance"] for call in fake.calls if call[0] == "POST event"] == ["awx-task-0"]


def test_check_mode_reads_and_writes_nothing(api):
    fake = api(FakeApi(a_node([{"key": GATE, "effect": "NoSchedule"}])))
    result = node_verdict.run(params(result=PASSED, remove_taint=GATE), True, lambda message: None)
    # Reads only: the Node and its pods (what the verdict would be proven against); no patch, no Event.
    assert result["changed"] and result["taint_removed"] and [call[0] for call in fake.calls] == [
        "GET", "LIST pods", "LIST resourceslices"]
    assert result["event"]["reason"] == "GPUPreflightPassed"


def test_a_missing_node_gets_no_verdict_and_a_warning(api):
    warnings = []
    fake = api(FakeApi(None))
    result = node_verdict.run(params(result=NOT_READY, node="gpu-a9"), False, warnings.append)
    assert result["node_found"] is False and not result["changed"] and warnings == ["node gpu-a9 not found: no verdict written on it"]
    assert [call[0] for call in fake.calls] == ["GET"]


def test_a_name_that_is_no_node_name_is_never_sent(api):
    warnings = []
    fake = api(FakeApi(a_node()))
    assert node_verdict.run(params(result=PASSED, node="Prod_102!"), False, warnings.append) == {
        "changed": False, "node_found": False}
    assert node_verdict.run(params(state="access", node="../nodes"), False, warnings.append)["node_found"] is False
    assert fake.calls == [] and len(warnings) == 2 and "not a valid node name" in warnings[0]


def test_a_pass_removes_only_our_taint_even_when_the_list_changes_under_it(api):
    ours = {"key": GATE, "effect": "NoSchedule"}
    # Between our read and our patch another tool inserts a taint in front: the test fails (422), we read and retry.
    fake = api(FakeApi(a_node([ours, OTHER]), race=[{"key": "example.com/new", "effect": "NoSchedule"}, ours, OTHER]))
    result = node_verdict.run(params(result=PASSED, remove_taint=GATE), False, lambda message: None)
    assert result["taint_removed"] is True
    assert fake.node["spec"]["taints"] == [{"key": "example.com/new", "effect": "NoSchedule"}, OTHER]
    json_patches = [call for call in fake.calls if call[0] == "PATCH" and call[1] == "application/json-patch+json"]
    assert len(json_patches) == 2 and json_patches[-1][3][0] == {"op": "test", "path": "/spec/taints/1", "value": ours}


def test_a_failure_keeps_the_taint(api):
    fake = api(FakeApi(a_node([{"key": GATE, "effect": "NoSchedule"}])))
    result = node_verdict.run(params(result=NOT_READY, remove_taint=GATE), False, lambda message: None)
    assert result["taint_removed"] is False and result["condition"]["reason"] == "PreflightRefused"
    assert fake.node["spec"]["taints"] == [{"key": GATE, "effect": "NoSchedule"}]


def test_running_needs_a_run_id_and_a_verdict_needs_a_result(api):
    api(FakeApi(a_node()))
    with pytest.raises(TaskFailed, match="run_id is required"):
        node_verdict.run(params(state="running"), False, lambda message: None)
    with pytest.raises(TaskFailed, match="result .* is required"):
        node_verdict.run(params(), False, lambda message: None)
    result = node_verdict.run(params(state="running", run_id="r1"), False, lambda message: None)
    assert (result["condition"]["status"], result["labels"]) == ("Unknown", {"gpuops.scheduling/gpu-preflight": "running"})


def test_access_names_each_missing_rule(api):
    fake = api(FakeApi(a_node(), allowed=lambda attributes: attributes["subresource"] != "status"))
    result = node_verdict.run(params(state="access"), False, lambda message: None)
    assert result == {"changed": False, "allowed": False, "missing": ["patch on nodes/status (the condition)"]}
    assert not [call for call in fake.calls if call[0].startswith("PATCH")]
    api(FakeApi(a_node()))
    assert node_verdict.run(params(state="access"), False, lambda message: None)["allowed"] is True
