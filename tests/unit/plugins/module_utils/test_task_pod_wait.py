# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""pod_wait's task function (list + watch loop) against a scripted CoreV1Api (no cluster)."""

import json

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils import _task_pod_wait as pod_wait
from ansible_collections.gpuops.scheduling.plugins.module_utils._task import TaskFailed
from kubernetes.client.rest import ApiException

SEED = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.")


def make_pod(name, phase="Pending", node=None, scheduled=None, rv="1", started=False, deleting=False):
    conditions = []
    if scheduled is True:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-10-12T08:01:02Z"})
    elif scheduled == "Unschedulable":
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": SEED,
                           "lastTransitionTime": "2026-10-12T08:01:05Z"})
    status = {"phase": phase, "conditions": conditions}
    if started:
        status["containerStatuses"] = [{"name": "smi", "state": {"running": {"startedAt": "2026-10-12T08:01:03Z"}}}]
    metadata = {"name": name, "namespace": "gpu-operator", "uid": "uid-" + name, "resourceVersion": rv,
                "creationTimestamp": "2026-10-12T08:01:02Z"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-10-12T08:01:40Z"
    return {"metadata": metadata, "spec": {"nodeName": node} if node else {}, "status": status}


class Response:
    def __init__(self, payload=None, lines=()):
        self.data = json.dumps(payload).encode() if payload is not None else b""
        self._lines = lines
        self.status = 200

    def stream(self, amt=None, decode_content=False):
        for line in self._lines:
            yield (json.dumps(line) + "\n").encode()

    def close(self):
        pass

    def release_conn(self):
        pass


class FakeApi:
    """Scripted answers: pod lists, watch batches, event lists and watches, logs."""

    class api_client:  # noqa: N801 - mimics the attribute of CoreV1Api
        class configuration:  # noqa: N801
            host = "https://127.0.0.1:16443"

    def __init__(self, pods, watches=(), events=(), event_watches=(), logs=None, watch_error=None):
        self.pods = pods
        self.watches = list(watches)
        self.events = list(events)
        self.event_watches = list(event_watches)
        self.logs = dict(logs or {})
        self.watch_error = watch_error
        self.calls = []

    def list_namespaced_pod(self, namespace, watch=False, **kwargs):
        self.calls.append(("pods", "watch" if watch else "list", kwargs.get("field_selector"),
                           kwargs.get("label_selector")))
        if watch:
            if self.watch_error:
                error, self.watch_error = self.watch_error, None
                raise error
            batch = self.watches.pop(0) if self.watches else []
            return Response(lines=[{"type": kind, "object": obj} for kind, obj in batch])
        return Response({"metadata": {"resourceVersion": "5"}, "items": self.pods})

    def list_namespaced_event(self, namespace, watch=False, **kwargs):
        self.calls.append(("events", "watch" if watch else "list", kwargs.get("field_selector")))
        if watch:
            batch = self.event_watches.pop(0) if self.event_watches else []
            return Response(lines=[{"type": "ADDED", "object": obj} for obj in batch])
        return Response({"metadata": {"resourceVersion": "7"}, "items": self.events})

    def read_namespaced_pod_log(self, name, namespace, **kwargs):
        self.calls.append(("log", name))
        texts = self.logs.get(name) or [""]
        return _LogResponse(texts.pop(0) if len(texts) > 1 else texts[0])

    def delete_namespaced_pod(self, name, namespace, **kwargs):
        self.calls.append(("delete", name, kwargs.get("dry_run")))
        if not any(item["metadata"]["name"] == name for item in self.pods):
            raise ApiException(status=404, reason="Not Found")
        return Response({})

    def delete_collection_namespaced_pod(self, namespace, **kwargs):
        self.calls.append(("deletecollection", kwargs.get("label_selector")))
        return Response({"items": self.pods})


class _LogResponse:
    def __init__(self, text):
        self.data = text.encode()


class FakeModule:
    def __init__(self, check_mode=False, **params):
        defaults = dict(namespace="gpu-operator", names=None, label_selectors=None, count=None, node=None, timeout=5,
                        create=[], delete=[], delete_matching=False, dry_run=False, warn_on_delete=False, grace_period=None,
                        fail_on_unschedulable=False,
                        fatal_reasons=list(pod_wait.DEFAULT_FATAL_REASONS), logs=False, log_ready_pattern=None,
                        log_limit_bytes=65536, events=False, event_pod_uids=[], ledger_node=None,
                        ledger_resources=["nvidia.com/gpu"])
        defaults.update(params)
        self.params = defaults
        self.check_mode = check_mode
        self.failed = None
        self.warnings = []

    def warn(self, message):
        self.warnings.append(message)

    def fail_json(self, **kwargs):
        self.failed = kwargs
        raise SystemExit(1)


def run(module, api, reader=None):
    """One step, failing as the module does (fail_json with the result so far)."""
    try:
        return pod_wait.run_single(module.params, api, reader, module.check_mode, module.warn)
    except TaskFailed as failure:
        module.fail_json(msg=failure.msg, **failure.result)


def run_steps(module, api, reader=None):
    try:
        return pod_wait.run_steps(module.params, api, reader, module.check_mode, module.warn)
    except TaskFailed as failure:
        module.fail_json(msg=failure.msg, **failure.result)


def event(reason, message, uid="uid-gpu-demo-queue", name="gpu-demo-queue"):
    return {"metadata": {"name": name + ".x", "creationTimestamp": "2026-10-12T08:01:05Z"},
            "involvedObject": {"kind": "Pod", "name": name, "uid": uid}, "reason": reason, "message": message,
            "type": "Warning", "source": {"component": "default-scheduler"}}


def test_unschedulable_waits_for_condition_and_event():
    api = FakeApi(
        pods=[make_pod("gpu-demo-queue")],
        watches=[[("MODIFIED", make_pod("gpu-demo-queue", scheduled="Unschedulable", rv="6"))]],
        events=[],
        event_watches=[[event("FailedScheduling", SEED)]],
    )
    result = run(FakeModule(names=["gpu-demo-queue"], condition="unschedulable"), api)
    assert result["changed"] is False
    entry = result["failed_scheduling"][0]
    assert entry["from_event"] is True
    assert entry["parsed"]["insufficient"] == ["nvidia.com/gpu"]
    assert result["pods"][0]["unschedulable"] is True
    # one name: a field selector, no namespace-wide watch
    assert api.calls[0] == ("pods", "list", "metadata.name=gpu-demo-queue", None)
    assert ("events", "list", "involvedObject.uid=uid-gpu-demo-queue,reason=FailedScheduling") in api.calls


def test_unschedulable_fails_fast_when_the_pod_gets_scheduled():
    api = FakeApi(pods=[make_pod("gpu-demo-queue", phase="Running", node="prod102", scheduled=True)])
    module = FakeModule(names=["gpu-demo-queue"], condition="unschedulable")
    with pytest.raises(SystemExit):
        run(module, api)
    assert "it was scheduled: Running on prod102" in module.failed["msg"]
    assert module.failed["pods"][0]["phase"] == "Running"


def test_running_with_log_pattern_polls_until_evidence_is_printed():
    running = make_pod("gpu-demo-hold-0", phase="Running", node="prod102", scheduled=True, started=True, rv="6")
    api = FakeApi(
        pods=[make_pod("gpu-demo-hold-0")],
        watches=[[("MODIFIED", make_pod("gpu-demo-hold-0", node="prod102", scheduled=True)), ("MODIFIED", running)]],
        logs={"gpu-demo-hold-0": ["", "GPU 0: NVIDIA H20 (UUID: GPU-1)\n", "GPU 0: NVIDIA H20 (UUID: GPU-1)\nend\n"]},
    )
    result = run(FakeModule(label_selectors=["run=1"], count=1, condition="running", node="prod102",
                            log_ready_pattern="(?m)^end$"), api)
    assert result["pods"][0]["log"].endswith("end\n")
    assert set(result["transitions"]["gpu-demo-hold-0"]) >= {"created", "scheduled", "running"}
    assert api.calls[0] == ("pods", "list", None, "run=1")


def test_timeout_names_pods_and_reasons(monkeypatch):
    ticks = iter(range(1000))
    monkeypatch.setattr(pod_wait.time, "time", lambda: float(next(ticks)))
    api = FakeApi(pods=[make_pod("gpu-demo-queue", scheduled="Unschedulable")], watches=[[]])
    module = FakeModule(names=["gpu-demo-queue"], condition="succeeded", timeout=5)
    with pytest.raises(SystemExit):
        run(module, api)
    assert module.failed["msg"].startswith("timed out after 5s waiting for gpu-demo-queue to be succeeded: "
                                           "gpu-demo-queue: Pending (Unschedulable: 0/1 nodes are available")


def test_delete_by_name_then_wait_gone():
    holding = make_pod("gpu-demo-hold", phase="Running", node="prod102", scheduled=True)
    api = FakeApi(pods=[holding], watches=[[("MODIFIED", make_pod("gpu-demo-hold", phase="Running", deleting=True)),
                                            ("DELETED", make_pod("gpu-demo-hold", phase="Running", deleting=True))]])
    result = run(FakeModule(names=["gpu-demo-hold", "gpu-demo-hold-gone"], condition="deleted",
                            delete=["gpu-demo-hold", "gpu-demo-hold-gone"]), api)
    assert result["changed"] is True
    assert result["deleted"] == ["gpu-demo-hold"]
    assert "deleted" in result["exact"]["gpu-demo-hold"]
    assert result["pods"][0]["exists"] is False


def test_delete_in_check_mode_is_a_dry_run_without_wait():
    api = FakeApi(pods=[make_pod("gpu-demo-hold", phase="Running")])
    result = run(FakeModule(check_mode=True, names=["gpu-demo-hold"], condition="deleted",
                            delete=["gpu-demo-hold"]), api)
    assert result["changed"] is True
    assert ("delete", "gpu-demo-hold", "All") in api.calls
    assert not [call for call in api.calls if call[:2] == ("pods", "watch")]


def test_delete_matching_by_label():
    api = FakeApi(pods=[make_pod("b"), make_pod("a"), make_pod("c", deleting=True)],
                  watches=[[("DELETED", make_pod(name)) for name in ("a", "b", "c")]])
    module = FakeModule(label_selectors=["gpuops.scheduling/run-id=x"], condition="deleted", delete_matching=True,
                        warn_on_delete=True)
    result = run(module, api)
    assert result["deleted"] == ["b", "a"]
    assert module.warnings == ["deleted 2 pod(s) in namespace gpu-operator: b, a"]


def test_resource_version_too_old_lists_again():
    running = make_pod("p", phase="Running", node="prod102", scheduled=True)
    api = FakeApi(pods=[make_pod("p")], watch_error=ApiException(status=410, reason="Gone"))

    original = api.list_namespaced_pod

    def relist(namespace, watch=False, **kwargs):
        if not watch and any(call[:2] == ("pods", "list") for call in api.calls):
            api.pods = [running]
        return original(namespace, watch=watch, **kwargs)

    api.list_namespaced_pod = relist
    result = run(FakeModule(names=["p"], condition="running"), api)
    assert result["pods"][0]["phase"] == "Running"


def test_events_are_returned_on_failure_too():
    api = FakeApi(pods=[make_pod("q", phase="Failed", node="prod102")],
                  events=[event("Scheduled", "Successfully assigned gpu-operator/q to prod102", uid="uid-q", name="q")])
    module = FakeModule(names=["q"], condition="succeeded", events=True)
    with pytest.raises(SystemExit):
        run(module, api)
    assert module.failed["events"][0]["reason"] == "Scheduled"


def test_create_then_wait_and_follow_other_pods_of_the_selector():
    queue = make_pod("gpu-demo-queue")
    api = FakeApi(pods=[make_pod("gpu-demo-hold", phase="Running", node="prod102", scheduled=True, started=True)],
                  watches=[[("ADDED", queue), ("MODIFIED", make_pod("gpu-demo-queue", scheduled="Unschedulable"))]],
                  events=[event("FailedScheduling", SEED)])
    created = []

    def create(namespace, body, **kwargs):
        created.append((namespace, body["metadata"]["name"], kwargs.get("dry_run")))
        api.pods = api.pods + [queue]
        return Response(body)

    api.create_namespaced_pod = create
    result = run(FakeModule(create=[{"metadata": {"name": "gpu-demo-queue"}}], names=["gpu-demo-queue"],
                            label_selectors=["run=1"], condition="unschedulable"), api)
    assert created == [("gpu-operator", "gpu-demo-queue", None)]
    assert result["created"] == ["gpu-demo-queue"] and result["changed"] is True
    assert [pod["name"] for pod in result["pods"]] == ["gpu-demo-queue", "gpu-demo-hold"]
    assert result["pods"][1]["phase"] == "Running"
    assert len(result["failed_scheduling"]) == 1


def test_create_in_check_mode_is_a_dry_run():
    api = FakeApi(pods=[])
    calls = []
    api.create_namespaced_pod = lambda namespace, body, **kwargs: calls.append(kwargs.get("dry_run")) or Response(body)
    result = run(FakeModule(check_mode=True, create=[{"metadata": {"name": "x"}}], names=["x"],
                            condition="running"), api)
    assert calls == ["All"]
    assert result["created"] == ["x"]
    assert not [call for call in api.calls if call[:2] == ("pods", "watch")]


def test_dry_run_reports_what_admission_made_of_the_pod():
    api = FakeApi(pods=[])
    admitted = {"metadata": {"name": "h"}, "spec": {"priority": 0, "priorityClassName": "np", "preemptionPolicy": "Never"}}
    api.create_namespaced_pod = lambda namespace, body, **kwargs: Response(dict(admitted, dry=kwargs.get("dry_run")))
    result = run(FakeModule(dry_run=True, create=[{"metadata": {"name": "h"}}], names=["h"], condition=None), api)
    assert result["admitted"]["h"]["preemption_policy"] == "Never"
    assert result["changed"] is False
    assert result["transitions"] == {}


class FakeReader:
    host = "https://127.0.0.1:16443"

    def __init__(self, node):
        self.node = node

    def get_node(self, name, fields=None):
        return self.node if name == "prod102" else None

    def list_pods(self, namespace=None, field_selector=None, fields=None):
        return [make_pod("gpu-demo-hold", phase="Running", node="prod102", scheduled=True)]


def test_ledger_is_read_once_the_condition_holds():
    node = {"metadata": {"name": "prod102", "labels": {}}, "spec": {},
            "status": {"capacity": {"nvidia.com/gpu": "1"}, "allocatable": {"nvidia.com/gpu": "1"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    api = FakeApi(pods=[make_pod("q", scheduled="Unschedulable")], events=[event("FailedScheduling", SEED, uid="uid-q")])
    result = run(FakeModule(names=["q"], condition="unschedulable", ledger_node="prod102"), api,
                 reader=FakeReader(node))
    assert result["ledger"]["nodes"]["prod102"]["resources"]["nvidia.com/gpu"]["allocatable"] == 1
    module = FakeModule(names=["q"], condition="unschedulable", ledger_node="prod999")
    with pytest.raises(SystemExit):
        run(module, api, reader=FakeReader(node))
    assert "node 'prod999' not found" in module.failed["msg"]


class StepModule(FakeModule):
    def __init__(self, steps, **params):
        super().__init__(**params)
        self.params["steps"] = steps


def test_steps_run_in_order_and_stop_at_the_first_failure():
    running = make_pod("h", phase="Running", node="prod102", scheduled=True)
    api = FakeApi(pods=[running], events=[event("FailedScheduling", SEED, uid="uid-q", name="q")])
    steps = [
        {"name": "hold", "names": ["h"], "condition": "running"},
        {"name": "queue", "names": ["q"], "condition": "unschedulable"},
        {"name": "never", "names": ["h"], "condition": "deleted"},
    ]
    module = StepModule(steps, label_selectors=["run=1"], node="prod102")
    with pytest.raises(SystemExit):
        run_steps(module, api)
    failed = module.failed
    assert [step["name"] for step in failed["steps"]] == ["hold", "queue"]
    assert failed["failed_step"] == "queue"
    assert failed["msg"].startswith("step queue: pod q will not become unschedulable: the pod does not exist")
    assert failed["steps"][0]["met"] is True and failed["steps"][1]["met"] is False


def test_steps_inherit_the_module_options():
    api = FakeApi(pods=[make_pod("h", phase="Running", node="prod999", scheduled=True)])
    module = StepModule([{"names": ["h"], "condition": "running"}], node="prod102")
    with pytest.raises(SystemExit):
        run_steps(module, api)
    assert "scheduled on prod999, not on prod102" in module.failed["msg"]


def test_dry_run_applies_to_its_own_step_only():
    pod = make_pod("h", phase="Running", node="prod102", scheduled=True)
    api = FakeApi(pods=[pod], watches=[[("DELETED", pod)]])
    steps = [
        {"name": "admit", "names": ["h"], "delete": ["h"], "dry_run": True, "condition": "deleted"},
        {"name": "remove", "names": ["h"], "delete": ["h"], "condition": "deleted"},
    ]
    result = run_steps(StepModule(steps, label_selectors=["run=1"]), api)
    deletes = [call for call in api.calls if call[0] == "delete"]
    assert deletes == [("delete", "h", "All"), ("delete", "h", None)]
    assert [step["changed"] for step in result["steps"]] == [False, True]
    assert result["met"] is True
