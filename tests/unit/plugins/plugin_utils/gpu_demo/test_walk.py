# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_demo walk's judgement (plugin_utils/_gpu_demo/walk.py) over pod_wait and kubernetes.core.k8s results shaped like the
simulated cluster's."""

import copy

import pytest

from ansible_collections.gpuops.scheduling.plugins.filter.gpu_demo import gpu_demo_walk
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.walk import judge_walk, reached_phase
from ansible.errors import AnsibleFilterError

UUID = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
OTHER = "GPU-11111111-2222-3333-4444-555555555555"
SEED = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, "
        "preemption: not eligible due to preemptionPolicy=Never.")
SETTINGS = {"node": "prod102", "resource": "nvidia.com/gpu", "namespace": "gpu-operator", "queue_name": "gpu-demo-queue"}
MANIFESTS = {"hold": [{"metadata": {"name": "gpu-demo-hold"}}], "queue": [{"metadata": {"name": "gpu-demo-queue"}}], "probe": []}
PLAN = {"units": 1, "replicas": 1, "mode": "per_unit"}


def log(uuid):
    return ("GPU 0: NVIDIA H20 (UUID: {0})\nNVIDIA_VISIBLE_DEVICES={0}\n{0}, 86016 MiB, 97871 MiB\n"
            "gpuops: evidence complete\n").format(uuid)


# kubernetes.core.k8s state=absent on the hold's one manifest: the deleted object is its result.
HOLD_REMOVAL = {"changed": True, "method": "delete", "result": {"metadata": {"name": "gpu-demo-hold"}, "status": {"phase": "Running"}}}


def judge(waits, manifests=None, plan=None, settings=None, hold_removal=None):
    return judge_walk(waits, manifests or MANIFESTS, plan or PLAN, settings or SETTINGS,
                      HOLD_REMOVAL if hold_removal is None else hold_removal)


def walk():
    """The walk's waits as pod_wait returned them on the simulated cluster, every one met."""
    hold_pod = {"name": "gpu-demo-hold", "phase": "Running", "node_name": "prod102", "preemption_policy": "Never",
                "exists": True, "log": log(UUID), "containers": [{"name": "smi", "state": "running", "allocated_resources_status": [
                    {"name": "nvidia.com/gpu", "resources": [{"resourceID": UUID, "health": "Healthy"}]}]}]}
    queue_pod = {"name": "gpu-demo-queue", "phase": "Pending", "node_name": None, "pod_ip": None, "exists": True}
    ledger = {"nodes": {"prod102": {"resources": {"nvidia.com/gpu": {
        "allocatable": 1, "requested": 1, "limits": 1, "free": 0,
        "holders": [{"namespace": "gpu-operator", "name": "gpu-demo-hold", "units": 1}]}}}},
        "pending": [{"namespace": "gpu-operator", "name": "gpu-demo-queue", "requests": {"nvidia.com/gpu": 1}}]}
    return {
        "hold": {"met": True, "elapsed": 0.231, "pods": [hold_pod]},
        "queue": {"met": True, "elapsed": 0.1, "pods": [dict(hold_pod, log=None), queue_pod], "ledger": ledger,
                  "failed_scheduling": [{"message": SEED, "from_event": True, "parsed": {"insufficient": ["nvidia.com/gpu"]}}]},
        "release": {"met": True, "elapsed": 0.215,
                    "pods": [dict(hold_pod, exists=False, log=None),
                             dict(queue_pod, phase="Succeeded", node_name="prod102", log=log(UUID))]},
        "delete": {"met": True, "pods": []},
    }


def details(judged):
    return dict((check["id"], (check["passed"], check["detail"])) for check in judged["checks"])


def test_a_walk_that_followed_the_walkthrough_passes_every_check_with_the_walkthroughs_words():
    judged = judge(walk())
    assert details(judged) == {
        "hold_running": (True, "1 hold pod(s) Running on prod102 with 1 unit(s) of nvidia.com/gpu after 0.231 s"),
        "hold_never_preempts": (True, "hold pods have preemptionPolicy Never"),
        "hold_one_gpu_per_unit": (True, "nvidia-smi -L in the hold pods shows 1 device(s) for 1 unit(s), 1 distinct ({0})".format(UUID)),
        "hold_env_corroborates": (True, "the device plugin passes UUIDs in NVIDIA_VISIBLE_DEVICES: they name the GPUs nvidia-smi shows"),
        "queue_pending": (True, "gpu-demo-queue: Pending, node <none>, IP <none>"),
        "queue_insufficient": (True, "FailedScheduling: " + SEED),
        "ledger_full": (True, "ledger nvidia.com/gpu on prod102: allocatable 1, requested 1, free 0; the hold pods account for 1; "
                              "gpu-demo-queue is pending on the resource"),
        "hold_not_preempted": (True, "hold pods while the queue pod waits: gpu-demo-hold Running"),
        "hold_devices_healthy": (True, "Healthy: {0} in pod gpu-demo-hold".format(UUID)),
        "hold_released": (True, "deleted gpu-demo-hold, gone"),
        "queue_ran_on_node": (True, "gpu-demo-queue: Succeeded on prod102 after 0.215 s"),
        "queue_got_held_gpu": (True, "the queue pod saw {0}; the hold had {0}".format(UUID)),
    }
    assert [check["phase"] for check in judged["checks"]] == ["hold"] * 4 + ["queue"] * 5 + ["release"] * 3
    assert judged["during"]["free"] == 0 and judged["during"]["pending"][0]["name"] == "gpu-demo-queue"
    assert judged["hold_summary"]["unit_uuids"] == [UUID] and judged["queue_evidence"]["unit_uuids"] == [UUID]
    assert judged["queue_scheduling"]["message"] == SEED
    assert judged["steps"]["release"]["deleted"] == ["gpu-demo-hold"]


def test_a_hold_that_never_ran_stops_the_judgement_at_the_hold():
    result = {"hold": {"met": False, "error": "pod gpu-demo-hold: ErrImagePull",
                       "pods": [{"name": "gpu-demo-hold", "phase": "Pending", "preemption_policy": "Never"}]}}
    judged = judge(result, hold_removal={})
    assert [check["phase"] for check in judged["checks"]] == ["hold"] * 4
    assert details(judged)["hold_running"] == (False, "pod gpu-demo-hold: ErrImagePull")
    # Only the first cause fails: what running pods would have printed is not judged, and says why.
    cause = "not judged: hold_running failed first (pod gpu-demo-hold: ErrImagePull)"
    assert details(judged)["hold_one_gpu_per_unit"] == (None, cause)
    assert details(judged)["hold_env_corroborates"] == (None, cause)
    assert details(judged)["hold_never_preempts"] == (True, "hold pods have preemptionPolicy Never")
    assert judged["steps"]["queue"] == {"met": False, "error": "not run", "pods": []}
    assert judged["queue_scheduling"] == {} and judged["during"] == {} and judged["queue_evidence"] == {}


def test_a_queue_pod_that_was_scheduled_fails_the_queue_and_names_where_it_went():
    result = walk()
    queue = result["queue"]
    queue.update(met=False, error="pod gpu-demo-queue will not become unschedulable: it was scheduled", failed_scheduling=[])
    queue["pods"][1].update(phase="Running", node_name="prod102", pod_ip="10.244.0.9")
    judged = judge(result)
    checks = details(judged)
    assert checks["queue_pending"] == (False, "gpu-demo-queue: Running, node prod102, IP 10.244.0.9: pod gpu-demo-queue will not "
                                              "become unschedulable: it was scheduled")
    cause = ("not judged: queue_pending failed first (gpu-demo-queue: Running, node prod102, IP 10.244.0.9: pod "
             "gpu-demo-queue will not become unschedulable: it was scheduled)")
    assert checks["queue_insufficient"] == (None, cause) and checks["ledger_full"] == (None, cause)
    assert checks["hold_not_preempted"][0] is True
    assert "queue_ran_on_node" not in checks and judged["queue_evidence"] == {}


def test_the_ledger_and_the_hold_pods_while_the_queue_waits():
    result = walk()
    queue = result["queue"]
    queue["ledger"] = {}
    queue["pods"][0].update(phase="Running", deletion_timestamp="2026-11-30T02:00:00Z")
    queue["failed_scheduling"][0]["from_event"] = False
    checks = details(judge(result))
    assert checks["ledger_full"] == (False, "ledger nvidia.com/gpu on prod102: allocatable ?, requested ?, free ?; the hold pods "
                                            "account for 0; gpu-demo-queue is not pending on it (ledger not read)")
    assert checks["hold_not_preempted"][0] is False
    assert checks["queue_insufficient"][1].startswith("FailedScheduling (PodScheduled condition): ")


def test_a_queue_pod_on_another_gpu_and_a_hold_still_terminating():
    result = walk()
    release = result["release"]
    release["pods"][0]["exists"] = True
    release["pods"][1]["log"] = log(OTHER)
    checks = details(judge(result))
    assert checks["hold_released"] == (True, "deleted gpu-demo-hold, still terminating: gpu-demo-hold")
    assert checks["queue_got_held_gpu"] == (False, "the queue pod saw {0}; the hold had {1}".format(OTHER, UUID))


def test_time_slicing_and_one_pod_per_unit():
    result = walk()
    hold = result["hold"]
    hold["pods"] = [dict(hold["pods"][0], name="gpu-demo-hold-{0}".format(index)) for index in range(2)]
    manifests = dict(MANIFESTS, hold=[{"metadata": {"name": "gpu-demo-hold-0"}}, {"metadata": {"name": "gpu-demo-hold-1"}}])
    judged = judge(result, manifests, {"units": 2, "replicas": 2})
    assert details(judged)["hold_one_gpu_per_unit"] == (
        True, "nvidia-smi -L in the hold pods shows 2 device(s) for 2 unit(s), 1 distinct ({0}), up to 2 units per GPU "
              "(time-slicing)".format(UUID))
    assert details(judged)["hold_running"][1].startswith("2 hold pod(s) Running on prod102 with 2 unit(s)")


def test_the_hold_released_is_what_kubernetes_core_deleted():
    several = {"changed": True, "result": {"results": [{"changed": True, "result": {"metadata": {"name": "gpu-demo-hold-0"}}},
                                                       {"changed": False, "result": {"metadata": {"name": "gpu-demo-hold-1"}}}]}}
    manifests = dict(MANIFESTS, hold=[{"metadata": {"name": "gpu-demo-hold-0"}}, {"metadata": {"name": "gpu-demo-hold-1"}}])
    result = walk()
    result["hold"]["pods"] = [dict(result["hold"]["pods"][0], name="gpu-demo-hold-{0}".format(index)) for index in range(2)]
    result["queue"]["pods"] = [dict(pod, name="gpu-demo-hold-{0}".format(index)) for index, pod in enumerate(result["hold"]["pods"])] + \
        result["queue"]["pods"][1:]
    result["queue"]["ledger"]["nodes"]["prod102"]["resources"]["nvidia.com/gpu"]["holders"] = [
        {"namespace": "gpu-operator", "name": "gpu-demo-hold-{0}".format(index), "units": 1} for index in range(2)]
    judged = judge(result, manifests, {"units": 2, "replicas": 2}, hold_removal=several)
    assert details(judged)["hold_released"] == (False, "deleted gpu-demo-hold-0, gone")
    # a hold deletion that never ran (skipped, or the task failed) deleted nothing
    assert details(judge(walk(), hold_removal={"skipped": True}))["hold_released"] == (False, "deleted nothing, gone")


def test_waits_that_did_not_run_say_so():
    judged = judge({"hold": {"skipped": True, "changed": False}}, hold_removal={})
    assert judged["steps"]["hold"]["error"] == "not run"
    assert judged["steps"]["release"] == {"met": False, "error": "not run", "pods": [], "deleted": []}
    assert details(judged)["hold_running"] == (False, "not run")


def test_the_filter_names_what_is_missing_or_wrong():
    unchanged = walk()
    result = copy.deepcopy(unchanged)
    assert gpu_demo_walk(result, MANIFESTS, PLAN, HOLD_REMOVAL, **SETTINGS)["checks"][0]["passed"] is True
    assert result == unchanged
    with pytest.raises(AnsibleFilterError, match="missing setting.s. queue_name"):
        gpu_demo_walk(result, MANIFESTS, PLAN, node="n", resource="r", namespace="ns")
    with pytest.raises(AnsibleFilterError, match="expects the walk's registered pod_wait results"):
        gpu_demo_walk("not a result", MANIFESTS, PLAN, **SETTINGS)


# --- MIG (the mixed strategy's nvidia.com/mig-1g.10gb): the units are MIG devices ----------------------------------
H100 = "GPU-e284f2f0-b7db-deb5-4d10-143420128721"
MIG_0 = "MIG-5068167e-8438-5874-bcde-57279823597e"
MIG_1 = "MIG-678fc2a6-04b2-5b9d-9757-d70ae2c5d8bc"
MIG_SETTINGS = dict(SETTINGS, resource="nvidia.com/mig-1g.10gb")


def mig_log(mig_uuid, visible=None):
    return ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: {0})\n  MIG 1g.10gb     Device  0: (UUID: {1})\n"
            "NVIDIA_VISIBLE_DEVICES={2}\n{0}, 38 MiB, 81559 MiB\ngpuops: evidence complete\n").format(H100, mig_uuid, visible or mig_uuid)


def mig_walk(hold_mig=MIG_0, queue_mig=MIG_0, visible=None):
    """walk() on a MIG-mixed node: the resource is nvidia.com/mig-1g.10gb and the logs show MIG devices."""
    result = copy.deepcopy(walk())
    for step in result.values():
        for pod in step.get("pods", []):
            if pod.get("log") and pod["name"] == "gpu-demo-hold":
                pod["log"] = mig_log(hold_mig, visible)
            elif pod.get("log"):
                pod["log"] = mig_log(queue_mig)
    queue = result["queue"]
    entry = queue["ledger"]["nodes"]["prod102"]["resources"].pop("nvidia.com/gpu")
    queue["ledger"]["nodes"]["prod102"]["resources"]["nvidia.com/mig-1g.10gb"] = entry
    queue["failed_scheduling"][0] = {"message": SEED.replace("nvidia.com/gpu", "nvidia.com/mig-1g.10gb"), "from_event": True,
                                     "parsed": {"insufficient": ["nvidia.com/mig-1g.10gb"]}}
    return result


def test_a_mig_walk_judges_mig_devices():
    judged = judge(mig_walk(), settings=MIG_SETTINGS)
    checks = details(judged)
    assert all(passed for passed, _detail in checks.values()), checks
    assert checks["hold_one_gpu_per_unit"][1] == (
        "nvidia-smi -L in the hold pods shows 1 device(s) for 1 unit(s), 1 distinct ({0} (1g.10gb on {1}))".format(MIG_0, H100))
    assert checks["hold_env_corroborates"][1] == "the device plugin passes UUIDs in NVIDIA_VISIBLE_DEVICES: they name the MIG devices nvidia-smi shows"
    assert checks["queue_got_held_gpu"][1] == "the queue pod saw {0} (1g.10gb on {1}); the hold had {0}".format(MIG_0, H100)
    assert judged["hold_summary"]["unit_uuids"] == [MIG_0] and judged["queue_evidence"]["unit_uuids"] == [MIG_0]


def test_a_mig_walk_whose_queue_got_another_mig_device_of_the_same_gpu_fails():
    judged = judge(mig_walk(queue_mig=MIG_1), settings=MIG_SETTINGS)
    assert details(judged)["queue_got_held_gpu"] == (
        False, "the queue pod saw {0} (1g.10gb on {1}); the hold had {2}".format(MIG_1, H100, MIG_0))


def test_a_mig_hold_whose_variable_names_the_parent_gpu_is_not_corroborated():
    judged = judge(mig_walk(visible=H100), settings=MIG_SETTINGS)
    assert details(judged)["hold_env_corroborates"] == (
        False, "the device plugin passes UUIDs in NVIDIA_VISIBLE_DEVICES, but gpu-demo-hold is given {0} and nvidia-smi shows {1}".format(
            H100, MIG_0))


def test_judging_through_each_phase_gives_what_judging_the_whole_walk_gives():
    """Each wait's failed_when judges the walk through its own phase; the last is the whole walk's judgement."""
    waits = walk()
    whole = judge(waits)
    for phase in ("hold", "queue", "release"):
        judged = judge_walk(waits, MANIFESTS, PLAN, SETTINGS, HOLD_REMOVAL, through=phase)
        assert judged["stop"] == "" and judged["phases"][-1] == phase
    assert judged["checks"] == whole["checks"] and judged["queue_evidence"] == whole["queue_evidence"]


def test_a_failed_phase_stops_the_walk_and_the_next_is_not_judged():
    waits = walk()
    waits["queue"] = dict(waits["queue"], met=False, error="timed out")
    judged = judge_walk(waits, MANIFESTS, PLAN, SETTINGS, through="queue")
    assert "timed out" in judged["stop"] and judged["phases"] == ["hold", "queue"]
    # What the report reads after the stop, once the run has moved on: nothing more is judged.
    after = judge_walk(waits, MANIFESTS, PLAN, SETTINGS, through="release")
    assert after["checks"] == judged["checks"] and after["phases"] == ["hold", "queue"]


def test_a_phase_a_failed_step_kept_from_running_is_judged_not_run():
    waits = walk()
    after = judge_walk({"hold": waits["hold"]}, MANIFESTS, PLAN, SETTINGS, through="queue")
    assert after["phases"] == ["hold", "queue"] and not details(after)["queue_pending"][0]
    assert "not run" in details(after)["queue_pending"][1]


def test_a_phase_the_run_did_not_reach_is_not_judged():
    waits = walk()
    assert judge_walk({"hold": waits["hold"]}, MANIFESTS, PLAN, SETTINGS, through="hold")["phases"] == ["hold"]
    assert judge_walk({}, MANIFESTS, PLAN, SETTINGS, through=None)["checks"] == []


def test_the_phase_reached_is_the_last_whose_first_step_ran_not_skipped():
    created = {"changed": True, "result": {}}
    assert reached_phase([{}, {}, {}]) is None
    assert reached_phase([created, {}, {}]) == "hold"
    assert reached_phase([created, {"failed": True, "msg": "forbidden"}, {}]) == "queue"
    assert reached_phase([{"skipped": True, "changed": False}] * 3) is None


def test_a_hold_whose_gpu_turns_unhealthy_fails_the_queue_phase_naming_it_and_goes_no_further():
    waits = walk()
    waits["queue"]["pods"][0]["containers"] = [{"name": "smi", "allocated_resources_status": [
        {"name": "nvidia.com/gpu", "resources": [{"resourceID": UUID, "health": "Unhealthy"}]}]}]
    judged = judge(waits)
    assert details(judged)["hold_devices_healthy"] == (False, "the kubelet reports Unhealthy: {0} in pod gpu-demo-hold".format(UUID))
    assert judged["hold_summary"]["device_health"][0]["devices"][0]["health"] == "Unhealthy"
    assert "queue_ran_on_node" not in details(judged)


def test_a_hold_of_a_class_whose_selector_was_not_evaluated_says_it_asked_for_every_device_it_may_select():
    result = {"hold": {"met": False, "error": "pod gpu-demo-hold: Unschedulable: cannot allocate all claims",
                       "pods": [{"name": "gpu-demo-hold", "phase": "Pending", "preemption_policy": "Never"}]}}
    plan = dict(PLAN, units=2, selector_evaluated=False, dra_request="claim")
    judged = judge(result, plan=plan, settings=dict(SETTINGS, resource="h20.example.com"), hold_removal={})
    assert details(judged)["hold_running"] == (False, (
        "pod gpu-demo-hold: Unschedulable: cannot allocate all claims; the selector of DeviceClass h20.example.com could "
        "not be evaluated before the run: the hold asked for the 2 device(s) it may select, and the scheduler may select "
        "fewer"))
