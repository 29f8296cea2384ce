# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""FailedScheduling messages as kube-scheduler writes them (samples from real clusters and its sources)."""

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.scheduling_events import (
    event_timeline,
    parse_failed_scheduling,
)

SEED = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.")


def test_seed_message():
    parsed = parse_failed_scheduling(SEED)
    assert parsed["format"] == "framework"
    assert parsed["nodes_total"] == 1
    assert parsed["nodes_available"] == 0
    assert parsed["reasons"] == {"Insufficient nvidia.com/gpu": 1}
    assert parsed["insufficient"] == ["nvidia.com/gpu"]
    assert parsed["messages"] == []
    assert parsed["message"] == SEED
    assert parsed["preemption"]["nodes_total"] == 1
    assert parsed["preemption"]["reasons"] == {"No preemption victims found for incoming pod": 1}
    assert parsed["preemption"]["eligible"] is True


def test_event_form_with_doubled_period():
    # Events of 1.2x schedulers end with "pod.." (the event recorder adds a period).
    parsed = parse_failed_scheduling(
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod..")
    assert parsed["reasons"] == {"Insufficient cpu": 1}
    assert parsed["preemption"]["reasons"] == {"No preemption victims found for incoming pod": 1}


def test_several_reasons_and_a_taint():
    parsed = parse_failed_scheduling(
        "0/5 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, 1 Insufficient "
        "nvidia.com/gpu, 1 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: 0/5 nodes "
        "are available: 1 No preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling.")
    assert parsed["nodes_total"] == 5
    assert parsed["reasons"] == {
        "node(s) didn't match Pod's node affinity/selector": 3,
        "Insufficient nvidia.com/gpu": 1,
        "node(s) had untolerated taint {nvidia.com/gpu: present}": 1,
    }
    assert parsed["insufficient"] == ["nvidia.com/gpu"]
    assert parsed["preemption"]["reasons"] == {
        "No preemption victims found for incoming pod": 1,
        "Preemption is not helpful for scheduling": 4,
    }


def test_memory_taint_and_cordon():
    parsed = parse_failed_scheduling(
        "0/5 nodes are available: 3 Insufficient memory, 1 node(s) had untolerated taint {dedicated: gpu}, "
        "1 node(s) were unschedulable. preemption: 0/5 nodes are available: 5 No preemption victims found "
        "for incoming pod.")
    assert parsed["reasons"] == {"Insufficient memory": 3, "node(s) had untolerated taint {dedicated: gpu}": 1,
                                 "node(s) were unschedulable": 1}
    assert parsed["insufficient"] == ["memory"]


def test_dynamic_resource_allocation_postfilter_message():
    # Since 1.32 the DRA plugin's PostFilter message precedes the preemption part.
    parsed = parse_failed_scheduling(
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match pod anti-affinity "
        "rules. no new claims to deallocate, preemption: 0/3 nodes are available: 1 Preemption is not helpful "
        "for scheduling, 2 No preemption victims found for incoming pod.")
    assert parsed["reasons"] == {"node(s) had untolerated taint(s)": 1,
                                 "node(s) didn't match pod anti-affinity rules": 2}
    assert parsed["messages"] == ["no new claims to deallocate"]
    assert parsed["insufficient"] == []
    assert parsed["preemption"]["nodes_total"] == 3


def test_preemption_policy_never():
    # What our own queue pod (preemptionPolicy: Never) gets.
    parsed = parse_failed_scheduling(
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, "
        "preemption: not eligible due to preemptionPolicy=Never.")
    assert parsed["insufficient"] == ["nvidia.com/gpu"]
    assert parsed["preemption"]["eligible"] is False
    assert parsed["preemption"]["nodes_total"] is None
    assert parsed["preemption"]["messages"] == ["not eligible due to preemptionPolicy=Never"]


def test_taints_with_empty_values():
    parsed = parse_failed_scheduling(
        "0/2 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling.")
    assert parsed["reasons"] == {
        "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }": 1,
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1,
    }
    assert parsed["preemption"]["reasons"] == {"Preemption is not helpful for scheduling": 2}


def test_prefilter_message():
    parsed = parse_failed_scheduling(
        '0/3 nodes are available: persistentvolumeclaim "rc-definitely-missing-pvc" not found. preemption: '
        "0/3 nodes are available: 3 No preemption victims found for incoming pod..")
    assert parsed["reasons"] == {}
    assert parsed["messages"] == ['persistentvolumeclaim "rc-definitely-missing-pvc" not found']
    assert parsed["nodes_total"] == 3


def test_1_1x_taint_wording_has_a_comma_inside_a_reason():
    parsed = parse_failed_scheduling(
        "0/3 nodes are available: 1 node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't "
        "tolerate, 2 Insufficient cpu.")
    assert parsed["reasons"] == {
        "node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't tolerate": 1,
        "Insufficient cpu": 2,
    }
    assert parsed["preemption"] is None


def test_without_preemption_part():
    parsed = parse_failed_scheduling("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    assert parsed["insufficient"] == ["nvidia.com/gpu"]
    assert parsed["preemption"] is None


def test_mig_and_shared_resources():
    parsed = parse_failed_scheduling(
        "0/2 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb, 1 Insufficient nvidia.com/gpu.shared. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    assert parsed["insufficient"] == ["nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"]


def test_1_6_to_1_9_predicates_form():
    parsed = parse_failed_scheduling(
        "No nodes are available that match all of the following predicates:: Insufficient cpu (1), "
        "PodToleratesNodeTaints (2).")
    assert parsed["format"] == "predicates"
    assert parsed["reasons"] == {"Insufficient cpu": 1, "PodToleratesNodeTaints": 2}
    assert parsed["insufficient"] == ["cpu"]
    assert parsed["nodes_total"] is None


def test_1_5_fit_failure_summary():
    parsed = parse_failed_scheduling(
        "pod (gpu-demo-queue) failed to fit in any node\nfit failure summary on nodes : "
        "Insufficient alpha.kubernetes.io/nvidia-gpu (1)")
    assert parsed["format"] == "predicates"
    assert parsed["insufficient"] == ["alpha.kubernetes.io/nvidia-gpu"]


@pytest.mark.parametrize("message", ["", None, "binding rejected: running Bind plugin \"DefaultBinder\": x"])
def test_unknown_forms(message):
    parsed = parse_failed_scheduling(message)
    assert parsed["format"] == "unknown"
    assert parsed["reasons"] == {}
    assert parsed["insufficient"] == []


def test_rejects_non_strings():
    with pytest.raises(TypeError):
        parse_failed_scheduling(42)


def _event(name, reason, message, at, uid="u-1", component="default-scheduler", **extra):
    event = {
        "metadata": {"name": name + ".1", "creationTimestamp": at},
        "involvedObject": {"kind": "Pod", "name": name, "uid": uid, "namespace": "gpu-operator"},
        "reason": reason,
        "message": message,
        "type": "Warning" if reason == "FailedScheduling" else "Normal",
        "source": {"component": component} if component != "kubelet-new" else {},
    }
    event.update(extra)
    return event


def test_event_timeline_orders_like_kubectl_describe():
    events = [
        _event("gpu-demo-hold", "Started", "Started container smi", "2026-10-12T08:01:03Z", component="kubelet"),
        _event("gpu-demo-hold", "Scheduled", "Successfully assigned gpu-operator/gpu-demo-hold to prod102",
               "2026-10-12T08:01:03Z"),
        _event("gpu-demo-hold", "Pulled", 'Container image "x" already present on machine',
               "2026-10-12T08:01:03Z", component="kubelet"),
        _event("gpu-demo-hold", "Created", "Created container smi", "2026-10-12T08:01:03Z", component="kubelet"),
        _event("other", "Scheduled", "Successfully assigned gpu-operator/other to prod102", "2026-10-12T08:01:00Z",
               uid="u-9"),
        _event("gpu-demo-queue", "FailedScheduling", SEED, None, uid="u-2", component="kubelet-new",
               eventTime="2026-10-12T08:01:05.123456Z", reportingComponent="default-scheduler",
               series={"count": 3, "lastObservedTime": "2026-10-12T08:01:09.000001Z"}),
    ]
    rows = event_timeline(events, pods=[{"uid": "u-1"}, {"uid": "u-2"}])
    assert [row["reason"] for row in rows] == ["Scheduled", "Pulled", "Created", "Started", "FailedScheduling"]
    assert rows[0]["source"] == "default-scheduler"
    assert rows[0]["object"] == "pod/gpu-demo-hold"
    assert rows[-1]["source"] == "default-scheduler"
    assert rows[-1]["count"] == 3
    assert rows[-1]["at"] == "2026-10-12T08:01:05.123Z"
    assert rows[-1]["last_at"] == "2026-10-12T08:01:09.000Z"


def test_event_timeline_by_name_and_since():
    events = [
        _event("gpu-demo-hold", "Scheduled", "old run", "2026-10-12T07:00:00Z", uid="old"),
        _event("gpu-demo-hold", "Scheduled", "this run", "2026-10-12T08:01:03Z", uid="new"),
    ]
    rows = event_timeline(events, pods=["gpu-demo-hold"], since=1791792000.0)
    assert [row["message"] for row in rows] == ["this run"]
    assert len(event_timeline(events)) == 2


def test_event_timeline_keeps_time_order_across_pods_but_binding_first_within_a_pod():
    events = [
        _event("hold", "Pulled", "pulled", None, uid="h", component="kubelet", eventTime="2026-10-12T08:01:03.100Z"),
        _event("hold", "Scheduled", "bound", None, uid="h", eventTime="2026-10-12T08:01:03.102Z"),
        _event("hold", "Killing", "stop", None, uid="h", component="kubelet", eventTime="2026-10-12T08:01:03.700Z"),
        _event("queue", "FailedScheduling", SEED, None, uid="q", eventTime="2026-10-12T08:01:03.600Z"),
    ]
    rows = event_timeline(events)
    assert [(row["pod"], row["reason"]) for row in rows] == [
        ("hold", "Scheduled"), ("hold", "Pulled"), ("queue", "FailedScheduling"), ("hold", "Killing")]


def test_a_whole_second_event_is_said_as_such_and_never_placed_before_what_it_follows():
    """The kubelet's core/v1 Events carry whole seconds (firstTimestamp, lastTimestamp), the scheduler's eventTime
    microseconds: "Pulling" at 08:01:03 happened within that second, after "Scheduled" at 08:01:03.391, and its
    row must say it is whole seconds rather than read 0.391 s before the binding."""
    events = [
        _event("hold", "Scheduled", "bound", None, uid="h", eventTime="2026-10-12T08:01:03.391000Z"),
        _event("hold", "Pulling", "pulling", None, uid="h", component="kubelet", firstTimestamp="2026-10-12T08:01:03Z",
               lastTimestamp="2026-10-12T08:01:03Z"),
        _event("hold", "Pulled", "pulled", None, uid="h", component="kubelet", eventTime="2026-10-12T08:01:03.600000Z"),
        _event("hold", "Created", "created", None, uid="h", component="kubelet", firstTimestamp="2026-10-12T08:01:03Z"),
        _event("queue", "FailedScheduling", SEED, None, uid="q", eventTime="2026-10-12T08:01:03.500000Z"),
    ]
    rows = event_timeline(events)
    assert [(row["pod"], row["reason"]) for row in rows] == [
        ("hold", "Scheduled"), ("hold", "Pulling"), ("queue", "FailedScheduling"), ("hold", "Pulled"), ("hold", "Created")]
    assert [row["precise"] for row in rows] == [True, False, True, True, False]
    by_reason = dict((row["reason"], row) for row in rows)
    # The API's own time is kept; where the row is placed is not earlier than what the event follows.
    assert by_reason["Pulling"]["at_epoch"] == by_reason["Created"]["at_epoch"] == 1791792063.0
    assert by_reason["Pulling"]["placed_epoch"] == pytest.approx(1791792063.391)
    assert by_reason["Created"]["placed_epoch"] == pytest.approx(1791792063.6)


def test_a_whole_second_event_of_another_pod_keeps_its_second():
    events = [
        _event("hold", "Scheduled", "bound", None, uid="h", eventTime="2026-10-12T08:01:03.391000Z"),
        _event("other", "Started", "started", None, uid="o", component="kubelet", firstTimestamp="2026-10-12T08:01:03Z"),
    ]
    rows = event_timeline(events)
    assert [row["reason"] for row in rows] == ["Started", "Scheduled"]
    assert rows[0]["placed_epoch"] == rows[0]["at_epoch"]


# Captured from kube-scheduler 1.36.3 on the simulated cluster: a pod whose claim (DeviceClass gpu.nvidia.com) finds
# the node's only GPU allocated to another claim.
DRA_SHORTAGE = ("0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, preemption: 0/1 nodes are "
                "available: 1 Preemption is not helpful for scheduling.")


def test_dra_cannot_allocate_all_claims():
    parsed = parse_failed_scheduling(DRA_SHORTAGE)
    assert parsed["reasons"] == {"cannot allocate all claims": 1}
    assert parsed["messages"] == ["still not schedulable"]
    assert parsed["insufficient"] == []
    assert parsed["dra"] == {"shortage": {"cannot allocate all claims": 1}, "cannot_allocate": True, "problems": []}
    assert parsed["preemption"]["reasons"] == {"Preemption is not helpful for scheduling": 1}


def test_dra_shortage_is_not_read_into_a_device_plugin_refusal():
    parsed = parse_failed_scheduling("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, "
                                     "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
    assert parsed["dra"]["cannot_allocate"] is False and parsed["insufficient"] == ["nvidia.com/gpu"]


def test_dra_prefilter_problems():
    missing = parse_failed_scheduling("0/1 nodes are available: request gpu: device class big.gpu.example.com does not exist. "
                                      "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    assert missing["dra"]["cannot_allocate"] is False
    assert missing["dra"]["problems"] == [{"kind": "device_class_missing", "request": "gpu", "device_class": "big.gpu.example.com",
                                           "text": "request gpu: device class big.gpu.example.com does not exist"}]
    pinned = parse_failed_scheduling("0/2 nodes are available: 2 resourceclaim not available on the node.")
    assert [problem["kind"] for problem in pinned["dra"]["problems"]] == ["claim_pinned_elsewhere"]
