# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a verdict was proven against, its Event, and the read that calls it stale (module_utils/_gpu_demo/verdict.py)."""

import copy
import json
from pathlib import Path

import pytest
from api_server_writes import apply_writes

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo import verdict

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "gpu_demo_results"
# Recorded from the simulated cluster's DRA topology: node prod102, driver gpu.nvidia.com, one device gpu-0.
DRA_FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dra"
DRA_NODE = json.loads((DRA_FIXTURES / "nodes.json").read_text())["items"][0]
DRA_SLICE = json.loads((DRA_FIXTURES / "resourceslices.json").read_text())["items"][0]
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
NOW = 1764580000   # 2025-12-01T09:06:40Z
BOOT = "5d0c7e3a-1f2b-4c55-9a7e-0f1e2d3c4b5a"


def node(name="gpu-a2", boot=BOOT, units="2", labels=None):
    return {"metadata": {"name": name, "uid": "node-uid-1",
                         "labels": dict({"nvidia.com/gpu.present": "true", "nvidia.com/cuda.driver.major": "550",
                                         "nvidia.com/cuda.driver.minor": "54", "nvidia.com/cuda.driver.rev": "15",
                                         "nvidia.com/mig.config": "all-disabled"}, **(labels or {}))},
            "spec": {}, "status": {"allocatable": {"nvidia.com/gpu": units, "cpu": "64"},
                                   "nodeInfo": {"bootID": boot, "kubeletVersion": "v1.36.3"}}}


def plugin_pod(uid, node_name="gpu-a2", name="nvidia-device-plugin-daemonset-7xk2p"):
    return {"metadata": {"name": name, "namespace": "gpu-operator", "uid": uid,
                         "labels": {"app": "nvidia-device-plugin-daemonset"}},
            "spec": {"nodeName": node_name}, "status": {"phase": "Running"}}


def proven(on, pods, at=NOW):
    return verdict.verdict_of_result(PASSED, at, basis=verdict.verdict_basis(on, "nvidia.com/gpu", pods))


def test_the_basis_is_what_the_node_and_its_device_plugin_say():
    pods = [plugin_pod("uid-a"), plugin_pod("uid-other", node_name="gpu-a9"),
            {"metadata": {"name": "llm", "uid": "uid-llm"}, "spec": {"nodeName": "gpu-a2"}, "status": {}}]
    assert verdict.verdict_basis(node(), "nvidia.com/gpu", pods) == {
        "boot": BOOT, "kubelet": "v1.36.3", "allocatable": "2", "plugin_pod": "uid-a", "driver": "550.54.15",
        "mig": "all-disabled"}
    # Newer GPU Feature Discovery labels; a DRA node (no units of the resource), no device plugin pod, no GFD labels.
    bare = node(labels={"nvidia.com/cuda.driver-version.full": "570.86.10"})
    assert verdict.verdict_basis(bare, "nvidia.com/gpu", [])["driver"] == "570.86.10"
    dra = {"metadata": {"name": "d1", "labels": {}}, "status": {"nodeInfo": {"bootID": BOOT, "kubeletVersion": "v1"}}}
    assert verdict.verdict_basis(dra, "nvidia.com/gpu", []) == {"boot": BOOT, "kubelet": "v1"}


def test_a_verdict_of_the_node_as_it_is_is_fresh():
    assert verdict.staleness(proven(node(), [plugin_pod("uid-a")]), node(), [plugin_pod("uid-a")],
                             now=NOW + 60, max_age=86400) == []


@pytest.mark.parametrize("change, pods, expected", [
    (dict(boot="0f9e8d7c-0000-4000-8000-000000000000"), None, "the node rebooted (boot 5d0c7e3a -> 0f9e8d7c)"),
    (dict(units="1"), None, "allocatable changed 2 -> 1"),
    (dict(labels={"nvidia.com/cuda.driver.major": "570", "nvidia.com/cuda.driver.minor": "86",
                  "nvidia.com/cuda.driver.rev": "10"}), None, "the driver changed 550.54.15 -> 570.86.10"),
    (dict(labels={"nvidia.com/mig.config": "all-1g.18gb"}), None, "the MIG layout changed all-disabled -> all-1g.18gb"),
    ({}, [plugin_pod("uid-b")], "the device plugin pod was replaced"),
    ({}, [], "the device plugin pod is gone"),
])
def test_each_change_makes_it_stale_and_says_which(change, pods, expected):
    written = proven(node(), [plugin_pod("uid-a")])
    now_pods = [plugin_pod("uid-a")] if pods is None else pods
    assert verdict.staleness(written, node(**change), now_pods, now=NOW + 60, max_age=86400) == [expected]


def test_age_and_what_was_not_recorded():
    written = proven(node(), [plugin_pod("uid-a")])
    assert verdict.staleness(written, node(), [plugin_pod("uid-a")], now=NOW + 86401, max_age=86400) == [
        "older than 24 h (gpu_demo_verdict_max_age)"]
    assert verdict.staleness(written, node(), [plugin_pod("uid-a")], now=NOW + 61, max_age=60) == [
        "older than 60 s (gpu_demo_verdict_max_age)"]
    # Pods not read: the device plugin is not compared; a verdict from before the basis was recorded: age only.
    assert verdict.staleness(written, node(), None, now=NOW + 60, max_age=86400) == []
    old = dict(written, basis=None)
    assert verdict.staleness(old, node(boot="other"), [], now=NOW + 60, max_age=86400) == []


def test_the_fleet_says_stale_with_the_reason_and_which_to_walk_again():
    written = proven(node(), [plugin_pod("uid-a")])
    on_node = node()
    apply_writes(on_node, verdict.node_writes(written, on_node, now=NOW), NOW)
    rebooted = copy.deepcopy(on_node)
    rebooted["metadata"]["name"] = "gpu-b2"
    rebooted["status"]["nodeInfo"]["bootID"] = "0f9e8d7c"
    pods = [plugin_pod("uid-a"), plugin_pod("uid-a", node_name="gpu-b2")]
    names, results, reasons = verdict.fleet_inputs([on_node, rebooted], hosts=["gpu-c1"], now=NOW + 60, pods=pods)
    assert list(results) == ["gpu-a2"]
    assert reasons["gpu-b2"].startswith("stale: passed at 2025-12-01T09:06:40Z (run ")
    assert reasons["gpu-b2"].endswith(": the node rebooted (boot 5d0c7e3a -> 0f9e8d7c)")
    assert verdict.freshness(names, results, reasons) == {"gpu-a2": "fresh", "gpu-b2": "stale", "gpu-c1": "absent"}


@pytest.mark.parametrize("phase, reason", [("hold", "GPUPreflightFailed"), ("preflight", "GPUPreflightRefused")])
def test_the_event_of_a_failure_is_a_warning_naming_the_phase_and_check(phase, reason):
    written = dict(proven(node(), []), state="failed", phase=phase, check="hold_one_gpu_per_unit",
                   detail="2 unit(s) held but 1 distinct GPU(s) seen", run_id="r1")
    body = verdict.event(written, node(), NOW + 0.5, "controller-1")
    assert body["type"] == "Warning" and body["reason"] == reason
    assert body["note"] == ("GPU pre-flight failed at {0} (hold_one_gpu_per_unit): 2 unit(s) held but 1 distinct GPU(s)"
                            " seen; run r1").format(phase)
    assert body["regarding"] == {"apiVersion": "v1", "kind": "Node", "name": "gpu-a2", "uid": "node-uid-1"}
    assert body["metadata"]["namespace"] == "default" and body["metadata"]["name"].startswith("gpu-a2.")
    assert (body["reportingController"], body["reportingInstance"], body["action"]) == (
        "gpuops.scheduling/preflight", "controller-1", "Preflight")
    assert body["eventTime"] == "2025-12-01T09:06:40.500000Z"


def test_the_event_of_a_pass_is_normal():
    body = verdict.event(proven(node(), []), node(), NOW, "c")
    assert (body["type"], body["reason"]) == ("Normal", "GPUPreflightPassed") and "GPU pre-flight passed" in body["note"]


# -- A DRA node: what it was proven against is the devices its ResourceSlices publish ----------------------------------

def dra_slice(devices, generation=1, node_name="prod102"):
    """The recorded slice, publishing ``devices`` (names) in pool generation ``generation``."""
    item = copy.deepcopy(DRA_SLICE)
    template = item["spec"]["devices"][0]
    item["spec"]["devices"] = [dict(copy.deepcopy(template), name=name) for name in devices]
    item["spec"]["pool"]["generation"] = generation
    item["spec"]["nodeName"] = item["spec"]["pool"]["name"] = node_name
    return item


def dra_proven(slices):
    return verdict.verdict_of_result(dict(PASSED, node="prod102"), NOW,
                                     basis=verdict.verdict_basis(DRA_NODE, "nvidia.com/gpu", [], slices))


def test_a_dra_nodes_basis_names_its_published_devices_and_a_device_plugin_node_records_none():
    assert verdict.verdict_basis(DRA_NODE, "nvidia.com/gpu", [], [DRA_SLICE])["dra_devices"] == ["gpu.nvidia.com/prod102/gpu-0"]
    # A republished pool: only its newest generation counts (what the scheduler reads); another node's slice is not ours.
    slices = [dra_slice(["gpu-0", "gpu-1"], generation=1), dra_slice(["gpu-1", "gpu-0"], generation=2),
              dra_slice(["gpu-0"], node_name="prod103")]
    assert verdict.verdict_basis(DRA_NODE, "nvidia.com/gpu", [], slices)["dra_devices"] == [
        "gpu.nvidia.com/prod102/gpu-0", "gpu.nvidia.com/prod102/gpu-1"]
    assert "dra_devices" not in verdict.verdict_basis(node(), "nvidia.com/gpu", [plugin_pod("uid-a")], slices)
    assert "dra_devices" not in verdict.verdict_basis(DRA_NODE, "nvidia.com/gpu", [], None)


@pytest.mark.parametrize("now_devices, expected", [
    (["gpu-0"], "the node's DRA devices changed 2 -> 1 (gone: gpu.nvidia.com/prod102/gpu-1)"),
    (["gpu-0", "gpu-1", "gpu-2"], "the node's DRA devices changed 2 -> 3 (new: gpu.nvidia.com/prod102/gpu-2)"),
    (["gpu-0", "gpu-7"], "the node's DRA devices changed 2 -> 2 (gone: gpu.nvidia.com/prod102/gpu-1; "
                         "new: gpu.nvidia.com/prod102/gpu-7)"),
    ([], "the node's DRA devices changed 2 -> 0 (gone: gpu.nvidia.com/prod102/gpu-0, gpu.nvidia.com/prod102/gpu-1)"),
])
def test_changed_dra_devices_make_it_stale_and_say_which(now_devices, expected):
    written = dra_proven([dra_slice(["gpu-0", "gpu-1"])])
    assert verdict.staleness(written, DRA_NODE, [], now=NOW + 60, max_age=86400,
                             slices=[dra_slice(now_devices, generation=3)]) == [expected]


def test_the_same_dra_devices_are_fresh_and_slices_not_read_are_not_compared():
    written = dra_proven([dra_slice(["gpu-0", "gpu-1"])])
    assert verdict.staleness(written, DRA_NODE, [], now=NOW + 60, max_age=86400,
                             slices=[dra_slice(["gpu-1", "gpu-0"], generation=2)]) == []
    assert verdict.staleness(written, DRA_NODE, [], now=NOW + 60, max_age=86400, slices=None) == []


def test_many_changed_devices_are_named_three_at_most():
    written = dra_proven([dra_slice(["gpu-{0}".format(index) for index in range(8)])])
    reason, = verdict.staleness(written, DRA_NODE, [], now=NOW + 60, max_age=86400, slices=[dra_slice(["gpu-0"], 2)])
    assert reason.startswith("the node's DRA devices changed 8 -> 1 (gone: gpu.nvidia.com/prod102/gpu-1, ")
    assert reason.endswith("gpu.nvidia.com/prod102/gpu-3 and 4 more)")


def test_the_fleet_says_a_dra_node_is_stale_when_its_devices_changed():
    written = dra_proven([dra_slice(["gpu-0", "gpu-1"])])
    on_node = copy.deepcopy(DRA_NODE)
    apply_writes(on_node, verdict.node_writes(written, on_node, now=NOW), NOW)
    _names, results, reasons = verdict.fleet_inputs([on_node], now=NOW + 60, pods=[], slices=[dra_slice(["gpu-0"], 2)])
    assert results == {} and reasons["prod102"].endswith(
        ": the node's DRA devices changed 2 -> 1 (gone: gpu.nvidia.com/prod102/gpu-1)")
    _names, results, reasons = verdict.fleet_inputs([on_node], now=NOW + 60, pods=[], slices=[dra_slice(["gpu-0", "gpu-1"])])
    assert list(results) == ["prod102"] and reasons == {}
