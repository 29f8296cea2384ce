# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""pod_wait's task function (list + watch loop) against a scripted CoreV1Api (no cluster): it only waits and reads."""

import json

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks import pod_wait
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed
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
        return Response({"metadata": {"resourceVersion": "7"},
                         "items": [item for item in self.events if _selects(kwargs.get("field_selector"), item)]})

    def read_namespaced_pod_log(self, name, namespace, **kwargs):
        self.calls.append(("log", name))
        texts = self.logs.get(name) or [""]
        return _LogResponse(texts.pop(0) if len(texts) > 1 else texts[0])


def _selects(field_selector, event):
    """The API server's field selectors on events, as far as pod_wait uses them."""
    fields = {"involvedObject.uid": event["involvedObject"].get("uid"), "involvedObject.kind": event["involvedObject"]["kind"],
              "reason": event.get("reason")}
    wanted = [term.split("=", 1) for term in (field_selector or "").split(",") if term]
    return all(fields[key] == value for key, value in wanted)


class _LogResponse:
    def __init__(self, text):
        self.data = text.encode()


class FakeModule:
    def __init__(self, **params):
        defaults = dict(namespace="gpu-operator", names=None, label_selectors=None, count=None, node=None, timeout=5,
                        fail_on_unschedulable=False, warn_gone=False,
                        fatal_reasons=list(pod_wait.DEFAULT_FATAL_REASONS), logs=False, log_ready_pattern=None,
                        log_limit_bytes=65536, events=False, event_pod_uids=[], ledger_node=None,
                        ledger_resources=["nvidia.com/gpu"], claim_resource=None, claim_since=None)
        defaults.update(params)
        self.params = defaults
        self.failed = None
        self.warnings = []

    def warn(self, message):
        self.warnings.append(message)

    def fail_json(self, **kwargs):
        self.failed = kwargs
        raise SystemExit(1)


def run(module, api, reader=None):
    """One wait, failing as the module does (fail_json with the result so far)."""
    pod_wait.check_params(module.params)
    result, error = pod_wait.wait_for(module.params, api, reader, module.warn)
    if error:
        module.fail_json(msg=error, **result)
    return result


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


def test_deleted_waits_until_gone_and_names_them_in_a_warning():
    holding = make_pod("gpu-demo-hold", phase="Running", node="prod102", scheduled=True, deleting=True)
    api = FakeApi(pods=[holding], watches=[[("DELETED", holding)]])
    module = FakeModule(names=["gpu-demo-hold", "gpu-demo-hold-gone"], condition="deleted", warn_gone=True)
    result = run(module, api)
    assert result["changed"] is False and result["met"] is True
    assert "deleted" in result["exact"]["gpu-demo-hold"]
    assert [pod["exists"] for pod in result["pods"]] == [False, False]
    assert module.warnings == ["2 pod(s) in namespace gpu-operator gone: gpu-demo-hold, gpu-demo-hold-gone"]
    # read-only: one list and one watch, nothing written
    assert [call[:2] for call in api.calls] == [("pods", "list"), ("pods", "watch")]


def test_deleted_by_label_waits_for_every_match_and_warns_only_when_asked():
    api = FakeApi(pods=[make_pod("b", deleting=True), make_pod("a", deleting=True)],
                  watches=[[("DELETED", make_pod("a"))], [("DELETED", make_pod("b"))]])
    module = FakeModule(label_selectors=["gpuops.scheduling/run-id=x"], condition="deleted")
    result = run(module, api)
    assert sorted(pod["name"] for pod in result["pods"]) == ["a", "b"]
    assert module.warnings == []
    assert len([call for call in api.calls if call[:2] == ("pods", "watch")]) == 2


def test_a_pod_that_never_goes_times_out_naming_it(monkeypatch):
    ticks = iter(range(1000))
    monkeypatch.setattr(pod_wait.time, "time", lambda: float(next(ticks)))
    api = FakeApi(pods=[make_pod("h", phase="Running", node="prod102", deleting=True)], watches=[[]])
    module = FakeModule(names=["h"], condition="deleted", timeout=3, warn_gone=True)
    with pytest.raises(SystemExit):
        run(module, api)
    assert module.failed["msg"].startswith("timed out after 3s waiting for h to be deleted: h: Running")
    assert module.warnings == []


def test_a_wait_needs_names_or_selectors_and_a_valid_log_pattern():
    with pytest.raises(TaskFailed, match="give names or label_selectors"):
        pod_wait.check_params(FakeModule(condition="running").params)
    with pytest.raises(TaskFailed, match="log_ready_pattern is not a valid regular expression"):
        pod_wait.check_params(FakeModule(names=["h"], condition="running", log_ready_pattern="(").params)


def test_the_module_has_no_write_options():
    assert not set(pod_wait.OPTIONS) & {"create", "delete", "delete_matching", "dry_run", "grace_period",
                                        "warn_on_delete", "steps"}
    assert pod_wait.OPTIONS["condition"]["required"] is True


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


def test_events_are_read_per_pod_of_the_run_and_never_another_pods():
    # The namespace holds every pod's events of the last hour: another node's pod, an earlier pod of the same name.
    api = FakeApi(pods=[make_pod("q", phase="Succeeded", node="prod102")],
                  events=[event("Scheduled", "Successfully assigned gpu-operator/q to prod102", uid="uid-q", name="q"),
                          event("Started", "Started container smi", uid="uid-hold-gone", name="hold"),
                          event("Scheduled", "Successfully assigned gpu-operator/q to prod103", uid="uid-q-other", name="q"),
                          event("Scheduled", "Successfully assigned gpu-operator/x to prod104", uid="uid-x", name="x")])
    module = FakeModule(names=["q"], condition="succeeded", events=True, event_pod_uids=["uid-hold-gone", "uid-q"])
    result = run(module, api)
    assert [(row["pod"], row["reason"]) for row in result["events"]] == [("q", "Scheduled"), ("hold", "Started")]
    assert "prod102" in result["events"][0]["message"]
    assert [call for call in api.calls if call[0] == "events"] == [
        ("events", "list", "involvedObject.uid=uid-q"), ("events", "list", "involvedObject.uid=uid-hold-gone")]


def test_the_wait_follows_other_pods_of_the_selector():
    queue = make_pod("gpu-demo-queue")
    api = FakeApi(pods=[make_pod("gpu-demo-hold", phase="Running", node="prod102", scheduled=True, started=True), queue],
                  watches=[[("MODIFIED", make_pod("gpu-demo-queue", scheduled="Unschedulable"))]],
                  events=[event("FailedScheduling", SEED)])
    result = run(FakeModule(names=["gpu-demo-queue"], label_selectors=["run=1"], condition="unschedulable"), api)
    assert sorted(pod["name"] for pod in result["pods"]) == ["gpu-demo-hold", "gpu-demo-queue"]
    assert [pod["phase"] for pod in result["pods"] if pod["name"] == "gpu-demo-hold"] == ["Running"]
    assert len(result["failed_scheduling"]) == 1


class FakeReader:
    host = "https://127.0.0.1:16443"

    def __init__(self, node):
        self.node = node

    def get_node(self, name, fields=None):
        return self.node if name == "prod102" else None

    def list_pods(self, namespace=None, field_selector=None, fields=None, keep=None, page_size=None):
        if field_selector and field_selector.startswith("spec.nodeName=,"):
            return []   # no unscheduled pod
        return [make_pod("gpu-demo-hold", phase="Running", node="prod102", scheduled=True)]

    # An API server without resource.k8s.io/v1: the DRA reads answer "not served".
    def list_resource_slices(self, field_selector=None):
        return None

    def list_device_classes(self):
        return None

    def list_resource_claims(self):
        return None


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


class NodePodsReader(FakeReader):
    """The node's pods as the claim check reads them (spec.nodeName=prod102, every namespace)."""

    def __init__(self, node, node_pods):
        super().__init__(node)
        self.node_pods = node_pods
        self.reads = 0

    def list_pods(self, namespace=None, field_selector=None, fields=None, keep=None, page_size=None):
        assert namespace is None and field_selector == "spec.nodeName=prod102"
        self.reads += 1
        return self.node_pods


def gpu_pod(name, namespace, bound="2026-10-12T08:01:10Z"):
    claimed = make_pod(name, phase="Running", node="prod102", scheduled=True)
    claimed["metadata"]["namespace"] = namespace
    claimed["status"]["conditions"][0]["lastTransitionTime"] = bound
    claimed["spec"].update(priority=1000, priorityClassName="training",
                           containers=[{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}])
    return claimed


NODE_1_GPU = {"metadata": {"name": "prod102"}, "status": {"allocatable": {"nvidia.com/gpu": "1"}}}


def test_a_pod_that_took_the_released_unit_ends_the_wait_at_once_naming_it():
    api = FakeApi(pods=[make_pod("gpu-demo-queue", scheduled="Unschedulable")])
    reader = NodePodsReader(NODE_1_GPU, [gpu_pod("train-0", "ml")])
    module = FakeModule(names=["gpu-demo-queue"], condition="succeeded", node="prod102", timeout=60,
                        claim_resource="nvidia.com/gpu", claim_since="2026-10-12T08:01:09.500Z")
    with pytest.raises(SystemExit):
        run(module, api, reader=reader)
    assert module.failed["msg"].startswith("pod ml/train-0 (priority 1000, PriorityClass training) was bound to node prod102 at "
                                           "2026-10-12T08:01:10.000Z")
    assert module.failed["foreign_claim"]["name"] == "train-0" and module.failed["elapsed"] < 5
    assert reader.reads == 1


def test_no_claim_while_a_unit_is_free_or_the_holder_is_older_or_ours():
    for node_pods in ([gpu_pod("train-0", "ml", bound="2026-10-12T08:00:00Z")],          # there before the release
                      [gpu_pod("gpu-demo-queue-other", "gpu-operator")]):                  # names=[...]: not ours either
        api = FakeApi(pods=[make_pod("gpu-demo-queue", scheduled="Unschedulable")],
                      watches=[[("MODIFIED", make_pod("gpu-demo-queue", phase="Succeeded", node="prod102", scheduled=True,
                                                      rv="6"))]])
        reader = NodePodsReader(NODE_1_GPU, node_pods)
        module = FakeModule(names=["gpu-demo-queue"], condition="succeeded", node="prod102",
                            claim_resource="nvidia.com/gpu", claim_since="2026-10-12T08:01:09.500Z")
        if node_pods[0]["metadata"]["namespace"] == "gpu-operator":
            # Another pod of our namespace that the wait does not name is someone else's too: it is named.
            with pytest.raises(SystemExit):
                run(module, api, reader=reader)
            continue
        assert run(module, api, reader=reader)["met"]
    two = dict(NODE_1_GPU, status={"allocatable": {"nvidia.com/gpu": "2"}})
    api = FakeApi(pods=[make_pod("gpu-demo-queue", scheduled="Unschedulable")],
                  watches=[[("MODIFIED", make_pod("gpu-demo-queue", phase="Succeeded", node="prod102", scheduled=True, rv="6"))]])
    assert run(FakeModule(names=["gpu-demo-queue"], condition="succeeded", node="prod102", claim_resource="nvidia.com/gpu",
                          claim_since="2026-10-12T08:01:09.500Z"), api, reader=NodePodsReader(two, [gpu_pod("t", "ml")]))["met"]


def test_a_pod_the_wait_selects_with_inequalities_and_sets_is_its_own_not_a_claim():
    # The run's queue pod, bound after the release, selected by the wait as the API server selects (!=, notin).
    queue = make_pod("gpu-demo-queue", scheduled="Unschedulable")
    queue["metadata"]["labels"] = {"app": "gpu-demo", "role": "queue"}
    ours = gpu_pod("gpu-demo-queue", "gpu-operator")
    ours["metadata"]["labels"] = dict(queue["metadata"]["labels"])
    done = make_pod("gpu-demo-queue", phase="Succeeded", node="prod102", scheduled=True, rv="6")
    done["metadata"]["labels"] = dict(queue["metadata"]["labels"])
    api = FakeApi(pods=[queue], watches=[[("MODIFIED", done)]])
    module = FakeModule(label_selectors=["app=gpu-demo", "role!=hold", "role notin (probe, hold)"], count=1,
                        condition="succeeded", node="prod102", claim_resource="nvidia.com/gpu",
                        claim_since="2026-10-12T08:01:09.500Z")
    assert run(module, api, reader=NodePodsReader(NODE_1_GPU, [ours]))["met"]


def test_a_selector_the_wait_cannot_read_is_refused_before_any_call():
    with pytest.raises(pod_wait.TaskFailed, match=r"label_selectors: 'role in hold' is not a label selector requirement"):
        pod_wait.check_params(FakeModule(label_selectors=["role in hold"], condition="succeeded", node="prod102",
                                         claim_resource="nvidia.com/gpu", claim_since="2026-10-12T08:01:09.500Z").params)


def test_claim_resource_needs_a_node_and_a_time():
    with pytest.raises(pod_wait.TaskFailed, match="claim_resource needs node"):
        pod_wait.check_params(FakeModule(names=["q"], condition="succeeded", claim_resource="nvidia.com/gpu").params)


class LeaseApi(FakeApi):
    def __init__(self, pods, lease, **kwargs):
        super().__init__(pods, **kwargs)
        self.lease_object = lease

    def lease(self, method, namespace, name, body=None):
        assert method == "GET"
        if self.lease_object is None:
            raise ApiException(status=404)
        return Response(self.lease_object)


def test_a_wait_stops_at_once_when_the_run_lost_its_lock():
    lock = {"namespace": "gpu-operator", "name": "gpuops-preflight-prod102", "holder": "run-a on ctl pid 7"}
    taken = {"metadata": {"name": lock["name"]}, "spec": {"holderIdentity": "run-b on ctl pid 9", "leaseDurationSeconds": 15,
                                                          "acquireTime": "2099-01-01T00:00:00Z", "renewTime": "2099-01-01T00:00:00Z"}}
    module = FakeModule(names=["q"], condition="running", timeout=60, lock=lock)
    with pytest.raises(SystemExit):
        run(module, LeaseApi([make_pod("q")], taken))
    assert "no longer holds the node's lock" in module.failed["msg"] and "run-b on ctl pid 9" in module.failed["msg"]
    assert module.failed["elapsed"] < 5
    ours = dict(taken, spec=dict(taken["spec"], holderIdentity=lock["holder"]))
    api = LeaseApi([make_pod("q")], ours, watches=[[("MODIFIED", make_pod("q", phase="Running", node="n", scheduled=True,
                                                                          started=True, rv="6"))]])
    assert run(FakeModule(names=["q"], condition="running", timeout=60, lock=lock), api)["met"]
