# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The conditions of pod_wait, on pod dicts shaped like the API's."""

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.pod_wait import (
    HOPELESS,
    MET,
    WAITING,
    PodSetWatch,
    api_transitions,
    describe,
    evaluate,
    iso,
    parse_time,
    summarize,
)

UNSCHEDULABLE_MESSAGE = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def pod(name="gpu-demo-hold", phase="Pending", node=None, scheduled=None, container=None, reason=None,
        deleting=False, uid=None, created="2026-10-12T08:01:02Z"):
    """A Pod dict. scheduled: True / "Unschedulable" / None; container: (state, details)."""
    conditions = []
    if scheduled is True:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-10-12T08:01:02Z"})
    elif scheduled == "Unschedulable":
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": UNSCHEDULABLE_MESSAGE, "lastTransitionTime": "2026-10-12T08:01:05Z"})
    status = {"phase": phase, "conditions": conditions}
    if reason:
        status["reason"] = reason
        status["message"] = "Pod was rejected: " + reason
    if container:
        state, details = container
        status["containerStatuses"] = [{"name": "smi", "ready": state == "running", "restartCount": 0,
                                        "image": "vllm", "state": {state: details}}]
    metadata = {"name": name, "namespace": "gpu-operator", "uid": uid or "uid-" + name,
                "creationTimestamp": created, "resourceVersion": "10"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-10-12T08:01:40Z"
    spec = {"nodeName": node} if node else {}
    return {"metadata": metadata, "spec": spec, "status": status}


RUNNING = pod(phase="Running", node="prod102", scheduled=True,
              container=("running", {"startedAt": "2026-10-12T08:01:03Z"}))


def test_time_helpers():
    assert parse_time("2026-10-12T08:01:02Z") == parse_time("2026-10-12T08:01:02.000000Z")
    assert parse_time("2026-10-12T08:01:02.123456789Z") - parse_time("2026-10-12T08:01:02Z") == pytest.approx(0.123456)
    assert parse_time(None) is None
    assert parse_time("yesterday") is None
    assert iso(parse_time("2026-10-12T08:01:02.5Z")) == "2026-10-12T08:01:02.500Z"


def test_summary_of_a_running_pod():
    summary = summarize(RUNNING)
    assert summary["phase"] == "Running"
    assert summary["node_name"] == "prod102"
    assert summary["scheduled"] is True
    assert summary["containers"][0]["state"] == "running"
    assert describe(summary) == "Running on prod102"


@pytest.mark.parametrize("condition,the_pod,expected", [
    ("running", RUNNING, MET),
    ("running", pod(), WAITING),
    ("running", pod(scheduled=True, node="prod102", container=("waiting", {"reason": "ContainerCreating"})), WAITING),
    ("running", pod(scheduled=True, node="prod102", container=("waiting", {"reason": "ImagePullBackOff"})), HOPELESS),
    ("running", pod(scheduled=True, node="prod102", container=("waiting", {"reason": "ErrImagePull"})), HOPELESS),
    ("running", pod(phase="Failed", node="prod102", reason="UnexpectedAdmissionError"), HOPELESS),
    ("running", pod(phase="Failed", node="prod102", reason="DeadlineExceeded"), HOPELESS),
    ("running", pod(phase="Succeeded", node="prod102", scheduled=True), HOPELESS),
    ("running", pod(phase="Running", node="prod999", scheduled=True), HOPELESS),
    ("running", pod(scheduled="Unschedulable"), WAITING),
    ("running", dict(RUNNING, metadata=dict(RUNNING["metadata"], deletionTimestamp="x")), HOPELESS),
    ("scheduled", pod(scheduled=True, node="prod102"), MET),
    ("unschedulable", pod(scheduled="Unschedulable"), MET),
    ("unschedulable", pod(), WAITING),
    ("unschedulable", pod(scheduled=True, node="prod102"), HOPELESS),
    ("unschedulable", pod(phase="Failed"), HOPELESS),
    ("succeeded", pod(phase="Succeeded", node="prod102", scheduled=True), MET),
    ("succeeded", pod(scheduled="Unschedulable"), WAITING),
    ("succeeded", pod(phase="Failed", node="prod102", scheduled=True), HOPELESS),
    ("finished", pod(phase="Failed", node="prod102", scheduled=True), MET),
    ("finished", RUNNING, WAITING),
    ("deleted", RUNNING, WAITING),
])
def test_evaluate(condition, the_pod, expected):
    state, why = evaluate(condition, summarize(the_pod), node="prod102")
    assert state == expected, why


def test_evaluate_missing_pod():
    assert evaluate("deleted", None)[0] == MET
    assert evaluate("running", None)[0] == HOPELESS


def test_fail_on_unschedulable():
    summary = summarize(pod(scheduled="Unschedulable"))
    state, why = evaluate("running", summary, fail_on_unschedulable=True)
    assert state == HOPELESS
    assert "Insufficient nvidia.com/gpu" in why


def test_custom_fatal_reasons():
    summary = summarize(pod(scheduled=True, node="n", container=("waiting", {"reason": "ErrImagePull"})))
    assert evaluate("running", summary, fatal_reasons=["ImagePullBackOff"])[0] == WAITING


def test_describe_names_the_reason():
    text = describe(summarize(pod(scheduled=True, node="prod102",
                                  container=("waiting", {"reason": "ImagePullBackOff",
                                                         "message": 'Back-off pulling image "x"'}))))
    assert text == 'Pending on prod102 (ImagePullBackOff: Back-off pulling image "x")'
    assert "UnexpectedAdmissionError" in describe(summarize(pod(phase="Failed", reason="UnexpectedAdmissionError")))
    assert "Unschedulable: 0/1 nodes" in describe(summarize(pod(scheduled="Unschedulable")))
    terminated = ("terminated", {"reason": "Error", "exitCode": 1})
    assert "exit code 1" in describe(summarize(pod(phase="Failed", container=terminated)))


def test_watch_by_names_follows_events():
    watch = PodSetWatch("running", names=["a", "b"], node="prod102")
    watch.load([pod("a"), pod("b")], now=100.0)
    assert watch.verdict()[0] == WAITING
    watch.apply("MODIFIED", pod("a", phase="Running", node="prod102", scheduled=True,
                                container=("running", {"startedAt": "2026-10-12T08:01:03Z"})), now=101.0)
    assert watch.verdict()[0] == WAITING
    watch.apply("MODIFIED", pod("b", phase="Running", node="prod102", scheduled=True,
                                container=("running", {"startedAt": "2026-10-12T08:01:03Z"})), now=101.5)
    state, message = watch.verdict()
    assert state == MET, message
    assert watch.transitions()["b"]["running"] == 101.5
    assert watch.transitions()["a"]["created"] == parse_time("2026-10-12T08:01:02Z")
    assert watch.exact()["a"] == ["running", "scheduled"]


def test_watch_ignores_other_pods_and_counts_selector_matches():
    watch = PodSetWatch("running", count=2)
    watch.load([RUNNING], now=1.0)
    assert watch.verdict() == (WAITING, "1 pod(s) found, 2 expected")
    watch.apply("ADDED", pod("gpu-demo-hold-1", phase="Running", node="prod102", scheduled=True), now=2.0)
    assert watch.verdict()[0] == MET
    named = PodSetWatch("running", names=["x"])
    named.apply("ADDED", RUNNING, now=1.0)
    assert named.report() == [{"name": "x", "exists": False}]


def test_watch_fails_fast_on_a_hopeless_pod():
    watch = PodSetWatch("running", names=["gpu-demo-hold-0", "gpu-demo-hold-1"])
    rejected = pod("gpu-demo-hold-1", phase="Failed", node="prod102", reason="UnexpectedAdmissionError")
    watch.load([pod("gpu-demo-hold-0"), rejected], now=1.0)
    state, message = watch.verdict()
    assert state == HOPELESS
    assert message.startswith("pod gpu-demo-hold-1 will not become running: it failed: Failed on prod102 "
                              "(UnexpectedAdmissionError")


def test_deleted_by_names_and_by_selector():
    watch = PodSetWatch("deleted", names=["a"])
    watch.load([pod("a", phase="Running", deleting=True)], now=1.0)
    assert watch.verdict()[0] == WAITING
    watch.apply("DELETED", pod("a", phase="Running", deleting=True), now=2.5)
    assert watch.verdict()[0] == MET
    assert watch.transitions()["a"]["deleted"] == 2.5
    assert watch.report()[0]["exists"] is False
    empty = PodSetWatch("deleted")
    empty.load([], now=1.0)
    assert empty.verdict()[0] == MET


def test_list_observations_do_not_override_api_times():
    watch = PodSetWatch("succeeded", names=["q"])
    done = pod("q", phase="Succeeded", node="prod102", scheduled=True,
               container=("terminated", {"startedAt": "2026-10-12T08:01:10Z", "finishedAt": "2026-10-12T08:01:11Z",
                                         "exitCode": 0, "reason": "Completed"}))
    watch.load([done], now=parse_time("2026-10-12T08:01:20Z"))
    times = watch.transitions()["q"]
    assert times["running"] == parse_time("2026-10-12T08:01:10Z")
    assert times["succeeded"] == parse_time("2026-10-12T08:01:11Z")
    assert watch.exact() == {"q": []}


def test_api_transitions_of_a_queued_pod():
    times = api_transitions(summarize(pod("q", scheduled="Unschedulable")))
    assert set(times) == {"created", "unschedulable"}


def test_unknown_condition():
    with pytest.raises(ValueError):
        PodSetWatch("ready")


def test_a_pod_deleted_before_the_list_is_recorded_gone():
    watch = PodSetWatch("deleted", record_all=True)
    watch.apply("MODIFIED", pod("gpu-demo-hold", phase="Running", deleting=True), now=10.0)
    # The watch expired (410) and the pod went meanwhile: the list again no longer has it.
    watch.load([], now=10.2)
    times = watch.transitions()["gpu-demo-hold"]
    assert (times["deleting"], times["deleted"]) == (10.0, 10.2)
    assert watch.verdict()[0] == MET


def test_api_times_never_come_before_what_the_watch_saw():
    watch = PodSetWatch("running", names=["h"], record_all=True)
    created = parse_time("2026-10-12T08:01:02Z") + 0.7
    watch.load([], now=created - 0.5)
    watch.apply("ADDED", pod("h"), now=created)
    # bound and started within the same second, seen by a list after the watch expired (410): .000 timestamps
    watch.load([pod("h", phase="Running", node="prod102", scheduled=True,
                    container=("running", {"startedAt": "2026-10-12T08:01:02Z"}))], now=created + 0.05)
    times = watch.transitions()["h"]
    assert times["created"] == created
    assert times["scheduled"] >= created and times["running"] >= times["scheduled"]
