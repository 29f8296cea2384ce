# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ledger against the GPUs' real use: the walkthrough's node, several GPUs, MIG, shared GPUs,
stale checkpoints, missing sources, and identities that cannot be compared."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.scheduling.plugins.filter import reconcile as reconcile_filter
from ansible_collections.gpuops.scheduling.plugins.module_utils._node.reconcile import ledger_holders, reconcile

GIB = 1024**3
MIB = 1024**2
H20 = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
H20_1 = "GPU-9b1e7c3d-2f4a-4b6c-8d0e-1a2b3c4d5e6f"
A100 = "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"
MIG_3G = "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"
MIG_1G = "MIG-8f7a1c2e-1d2b-5e6f-9a8b-7c6d5e4f3a2b"
VLLM_UID = "1b0d7a52-93c4-4f0e-8a8e-6b1f3c2d4e5a"
HOLD_UID = "7d3c1f7a-5a8e-4d8e-9a51-0c1b2e3f4a5b"
TRAINER_UID = "c2b7e0f4-9d3a-4f6b-8e1c-2a3b4c5d6e7f"


def gpu(uuid, index=0, used=0, total=96 * GIB, name="NVIDIA H20", mig_devices=()):
    return {"index": index, "uuid": uuid, "name": name, "memory_used_bytes": used, "memory_total_bytes": total, "mig_devices": list(mig_devices)}


def pod_process(pid, gpu_uuid, used, uid, namespace=None, pod_name=None, name="python3", mig_uuid=None):
    return {
        "pid": pid,
        "name": name,
        "gpu_uuid": gpu_uuid,
        "mig_uuid": mig_uuid,
        "used_memory_bytes": used,
        "kubernetes": {"kind": "pod", "pod_uid": uid, "namespace": namespace, "pod_name": pod_name, "container_name": "main", "container_id": "c" * 64},
    }


def host_process(pid, gpu_uuid, used, name="python3"):
    return {"pid": pid, "name": name, "gpu_uuid": gpu_uuid, "mig_uuid": None, "used_memory_bytes": used, "kubernetes": {"kind": "host", "container_id": None}}


def unreadable_process(pid, gpu_uuid, used):
    return {
        "pid": pid,
        "name": "python",
        "gpu_uuid": gpu_uuid,
        "mig_uuid": None,
        "used_memory_bytes": used,
        "kubernetes": {"kind": "unreadable", "reason": "cannot read /proc/%d/cgroup: permission denied" % pid},
    }


def api_allocation(namespace, pod_name, *device_ids, resource="nvidia.com/gpu"):
    return {"pod_uid": None, "namespace": namespace, "pod_name": pod_name, "container_name": "main", "resource_name": resource, "device_ids": list(device_ids)}


def checkpoint_allocation(uid, *device_ids, resource="nvidia.com/gpu"):
    return {"pod_uid": uid, "namespace": None, "pod_name": None, "container_name": "main", "resource_name": resource, "device_ids": list(device_ids)}


def facts(gpus, processes, allocations=(), source="pod-resources-grpc", errors=()):
    return {"gpus": gpus, "processes": processes, "allocations": {"source": source, "allocations": list(allocations), "errors": list(errors)}}


def ledger(requested=0, holders=(), allocatable=1, resource="nvidia.com/gpu"):
    return {
        "name": "prod102",
        "resources": {resource: {"allocatable": allocatable, "requested": requested, "free": allocatable - requested, "holders": list(holders)}},
    }


def users(gpu_report, klass):
    return [user["pid"] for user in gpu_report["users"][klass]]


# --- the walkthrough's node: one H20, vLLM in a pod that requested no GPU ----------------------------------------
def test_seed_before_the_demo_free_gpu_used_by_an_out_of_ledger_pod():
    node = facts([gpu(H20, used=82 * GIB)], [pod_process(2811, H20, 81 * GIB, VLLM_UID, "ai", "vllm-0")])
    result = reconcile(node, ledger())
    (report,) = result["gpus"]
    assert report["ledger_state"] == "free" and report["ledger_pods"] == []
    assert users(report, "out_of_ledger_pod") == [2811]
    assert report["users"]["out_of_ledger_pod"][0]["pod_name"] == "vllm-0"
    assert report["memory_bytes"] == {"in_ledger": 0, "out_of_ledger_pod": 81 * GIB, "host": 0, "unidentified": 0, "unattributed": 1 * GIB}
    assert result["warnings"] == [
        "GPU 0 %s (NVIDIA H20) is free in the ledger but 82.0 GiB of its memory is in use: "
        "out of ledger pod 81.0 GiB (pid 2811 python3 in pod ai/vllm-0); 1.0 GiB not attributed to any listed process" % H20
    ]
    assert report["warning"] == result["warnings"][0]
    assert result["summary"] == {
        "gpus": 1,
        "allocated": 0,
        "free": 1,
        "unknown": 0,
        "free_but_in_use": 1,
        "memory_bytes": {"in_ledger": 0, "out_of_ledger_pod": 81 * GIB, "host": 0, "unidentified": 0},
        "out_of_ledger_bytes": 81 * GIB,
    }


def test_seed_while_the_hold_pod_holds_the_gpu():
    node = facts(
        [gpu(H20, used=81 * GIB)],
        [pod_process(2811, H20, 81 * GIB, VLLM_UID, "ai", "vllm-0")],
        [api_allocation("gpu-operator", "gpu-demo-hold", H20)],
    )
    result = reconcile(node, ledger(requested=1, holders=[{"namespace": "gpu-operator", "name": "gpu-demo-hold", "units": 1}]))
    (report,) = result["gpus"]
    assert report["ledger_state"] == "allocated"
    assert report["ledger_pods"] == [
        {
            "namespace": "gpu-operator",
            "name": "gpu-demo-hold",
            "pod_uid": None,
            "resource_name": "nvidia.com/gpu",
            "container_names": ["main"],
            "device_ids": [H20],
            "in_ledger_holders": True,
        }
    ]
    # vLLM is still on the card the ledger gave to the hold pod: out of the ledger, but no "free" warning.
    assert users(report, "out_of_ledger_pod") == [2811]
    assert result["warnings"] == [] and "warning" not in report


def test_hold_pod_process_is_in_ledger():
    node = facts(
        [gpu(H20, used=1 * GIB)],
        [pod_process(77, H20, 1 * GIB, HOLD_UID, "gpu-operator", "gpu-demo-hold")],
        [api_allocation("gpu-operator", "gpu-demo-hold", H20)],
    )
    report = reconcile(node, ledger(requested=1, holders=[{"namespace": "gpu-operator", "name": "gpu-demo-hold", "units": 1}]))["gpus"][0]
    assert users(report, "in_ledger") == [77] and report["memory_bytes"]["in_ledger"] == 1 * GIB


# --- several GPUs, checkpoint allocations by UID --------------------------------------------------------------------
def test_two_gpus_pod_host_and_unreadable_processes():
    node = facts(
        [gpu(H20, 0, used=40 * GIB), gpu(H20_1, 1, used=13 * GIB)],
        [
            pod_process(100, H20, 40 * GIB, TRAINER_UID),  # no names: joined to the checkpoint by UID
            host_process(200, H20_1, 8 * GIB),
            unreadable_process(300, H20_1, 5 * GIB),
        ],
        [checkpoint_allocation(TRAINER_UID, H20)],
        source="checkpoint",
    )
    result = reconcile(node, ledger(requested=1, allocatable=2, holders=[{"namespace": "ml", "name": "trainer-0", "uid": TRAINER_UID, "units": 1}]))
    first, second = result["gpus"]
    assert first["ledger_state"] == "allocated" and users(first, "in_ledger") == [100]
    # The ledger supplied the name the checkpoint lacks.
    assert (first["ledger_pods"][0]["namespace"], first["ledger_pods"][0]["name"], first["ledger_pods"][0]["in_ledger_holders"]) == ("ml", "trainer-0", True)
    assert first["users"]["in_ledger"][0]["pod_name"] == "trainer-0"
    assert second["ledger_state"] == "free"
    assert users(second, "host") == [200] and users(second, "unidentified") == [300]
    assert second["users"]["unidentified"][0]["reason"].endswith("permission denied")
    assert second["memory_bytes"]["host"] == 8 * GIB and second["memory_bytes"]["unidentified"] == 5 * GIB
    assert len(result["warnings"]) == 1 and result["warnings"][0].startswith("GPU 1 %s" % H20_1)
    assert "host 8.0 GiB (pid 200 python3)" in result["warnings"][0] and "unidentified 5.0 GiB (pid 300 python)" in result["warnings"][0]
    assert result["summary"]["out_of_ledger_bytes"] == 8 * GIB


def test_pod_process_on_a_gpu_allocated_to_another_pod():
    node = facts(
        [gpu(H20, 0), gpu(H20_1, 1)],
        [pod_process(100, H20_1, 2 * GIB, VLLM_UID)],  # sees every GPU through NVIDIA_VISIBLE_DEVICES=all
        [checkpoint_allocation(TRAINER_UID, H20_1)],
        source="checkpoint",
    )
    report = reconcile(node)["gpus"][1]
    assert report["ledger_state"] == "allocated" and users(report, "out_of_ledger_pod") == [100]


def test_device_ids_as_indexes():
    node = facts([gpu(H20, 0), gpu(H20_1, 1)], [], [checkpoint_allocation(TRAINER_UID, "1")], source="checkpoint")
    states = [report["ledger_state"] for report in reconcile(node)["gpus"]]
    assert states == ["free", "allocated"]


# --- MIG and shared GPUs -----------------------------------------------------------------------------------------------
def test_mig_device_allocation_marks_its_parent_gpu():
    a100 = gpu(A100, name="NVIDIA A100-SXM4-40GB", used=8 * GIB, total=40 * GIB, mig_devices=[{"index": 0, "uuid": MIG_3G}, {"index": 1, "uuid": MIG_1G}])
    node = facts(
        [a100],
        [pod_process(5001, A100, 7 * GIB, TRAINER_UID, "ml", "trainer-0", mig_uuid=MIG_3G)],
        [api_allocation("ml", "trainer-0", MIG_3G, resource="nvidia.com/mig-3g.20gb")],
    )
    report = reconcile(
        node, ledger(requested=1, allocatable=2, resource="nvidia.com/mig-3g.20gb", holders=[{"namespace": "ml", "name": "trainer-0", "units": 1}])
    )["gpus"][0]
    assert report["ledger_state"] == "allocated" and report["ledger_pods"][0]["device_ids"] == [MIG_3G]
    assert users(report, "in_ledger") == [5001] and report["users"]["in_ledger"][0]["mig_uuid"] == MIG_3G


def test_r450_mig_uuid_and_shared_replicas_resolve_to_the_gpu():
    node = facts(
        [gpu(A100, 0), gpu(H20_1, 1)],
        [],
        [
            api_allocation("ml", "a", "MIG-%s/1/0" % A100, resource="nvidia.com/mig-3g.20gb"),
            api_allocation("ml", "b", H20_1 + "::0", H20_1 + "::3", resource="nvidia.com/gpu.shared"),
        ],
    )
    first, second = reconcile(node)["gpus"]
    assert first["ledger_state"] == "allocated" and second["ledger_state"] == "allocated"
    assert second["ledger_pods"][0]["device_ids"] == [H20_1 + "::0", H20_1 + "::3"]


def test_unknown_device_ids():
    node = facts([gpu(H20)], [], [api_allocation("ml", "a", "GPU-not-on-this-node"), api_allocation("net", "b", "0000:3b:00.2", resource="example.com/nic")])
    result = reconcile(node)
    assert result["gpus"][0]["ledger_state"] == "free"
    # Only GPU resources are worth a warning; other device plugins' IDs are ignored.
    assert result["warnings"] == ["device GPU-not-on-this-node of nvidia.com/gpu (pod ml/a) is not a GPU of this node"]


# --- sources that are missing, stale or not comparable ----------------------------------------------------------------
def test_stale_checkpoint_entry_does_not_make_the_gpu_allocated():
    node = facts([gpu(H20, used=2 * GIB)], [host_process(9, H20, 2 * GIB)], [checkpoint_allocation(HOLD_UID, H20)], source="checkpoint")
    result = reconcile(node, ledger(requested=0))
    report = result["gpus"][0]
    assert report["ledger_state"] == "free" and report["ledger_pods"][0]["in_ledger_holders"] is False
    assert result["warnings"][0] == "the kubelet still lists uid %s on GPU device(s) %s but the ledger does not count that pod (ended?)" % (HOLD_UID, H20)
    assert result["warnings"][1].startswith("GPU 0 %s (NVIDIA H20) is free in the ledger" % H20)


def test_no_allocation_source_and_an_idle_ledger_still_finds_the_free_gpu_in_use():
    node = facts([gpu(H20, used=6 * GIB)], [host_process(418, H20, 6 * GIB)], source="none", errors=["no kubelet PodResources socket at /x"])
    result = reconcile(node, ledger(requested=0))
    assert result["gpus"][0]["ledger_state"] == "free"
    assert result["warnings"][0] == "no allocation source answered on the node (no kubelet PodResources socket at /x): which pod holds which GPU is unknown"
    assert "host 6.0 GiB (pid 418 python3)" in result["warnings"][1]


def test_no_allocation_source_with_units_requested_falls_back_to_the_ledger_holders():
    node = facts(
        [gpu(H20, used=10 * GIB)],
        [
            pod_process(1, H20, 5 * GIB, HOLD_UID, "gpu-operator", "gpu-demo-hold"),
            pod_process(2, H20, 5 * GIB, VLLM_UID, "ai", "vllm-0"),
            pod_process(3, H20, 0, TRAINER_UID),
        ],
        source="none",
    )
    hold_ledger = ledger(requested=1, holders=[{"namespace": "gpu-operator", "pod_name": "gpu-demo-hold", "units": 1}])
    report = reconcile(node, hold_ledger)["gpus"][0]
    assert report["ledger_state"] == "unknown"
    # Process 1's runtime metadata links the holder's name to its UID, so process 3 (UID only) compares too.
    assert users(report, "in_ledger") == [1] and users(report, "out_of_ledger_pod") == [2, 3]
    node["processes"] = node["processes"][1:]
    report = reconcile(node, hold_ledger)["gpus"][0]
    assert users(report, "out_of_ledger_pod") == [2]
    assert users(report, "unidentified") == [3] and "UID only" in report["users"]["unidentified"][0]["reason"]


def test_no_allocation_source_and_no_ledger():
    report = reconcile(facts([gpu(H20)], [pod_process(1, H20, GIB, HOLD_UID)], source="none"))["gpus"][0]
    assert report["ledger_state"] == "unknown" and users(report, "unidentified") == [1]


def test_pod_known_by_uid_only_is_not_compared_with_an_allocation_known_by_name():
    node = facts([gpu(H20, used=GIB)], [pod_process(1, H20, GIB, HOLD_UID)], [api_allocation("gpu-operator", "gpu-demo-hold", H20)])
    report = reconcile(node, ledger(requested=1, holders=[{"namespace": "gpu-operator", "name": "gpu-demo-hold", "units": 1}]))["gpus"][0]
    assert users(report, "unidentified") == [1]
    # ...until a source links the UID to the name (gpu_ledger_facts may give holders' UIDs).
    report = reconcile(node, ledger(requested=1, holders=[{"namespace": "gpu-operator", "name": "gpu-demo-hold", "uid": HOLD_UID, "units": 1}]))["gpus"][0]
    assert users(report, "in_ledger") == [1] and report["users"]["in_ledger"][0]["pod_name"] == "gpu-demo-hold"


def test_unattributed_memory_threshold():
    node = facts([gpu(H20, used=300 * MIB)], [], [])
    assert reconcile(node)["warnings"][0].endswith("0.3 GiB not attributed to any listed process")
    assert reconcile(node, min_unattributed_bytes=512 * MIB)["warnings"] == []


def test_process_memory_withheld_counts_as_zero_but_still_warns():
    node = facts([gpu(H20, used=None)], [host_process(1, H20, None)], [])
    result = reconcile(node)
    assert result["gpus"][0]["memory_bytes"]["host"] == 0 and result["gpus"][0]["memory_bytes"]["unattributed"] is None
    assert "host 0.0 GiB (pid 1 python3)" in result["warnings"][0]


def test_process_on_an_unlisted_gpu():
    result = reconcile(facts([gpu(H20)], [host_process(5, "GPU-gone", GIB)], []))
    assert result["warnings"] == ["processes on GPU-gone, a GPU the node did not list: pid 5 python3"]


def test_ledger_holders_adapter():
    node_ledger = {
        "resources": {
            "cpu": {"holders": [{"namespace": "x", "name": "y"}]},
            "nvidia.com/gpu": {"holders": [{"namespace": "a", "name": "b", "uid": "u", "units": 2}]},
            "nvidia.com/mig-1g.10gb": {"holders": [{"namespace": "c", "pod_name": "d", "units": 1}]},
        }
    }
    assert ledger_holders(node_ledger) == [
        {"namespace": "a", "name": "b", "uid": "u", "resource": "nvidia.com/gpu", "units": 2},
        {"namespace": "c", "name": "d", "uid": None, "resource": "nvidia.com/mig-1g.10gb", "units": 1},
    ]
    assert ledger_holders(None) == [] and ledger_holders({}) == []


# --- the filter ------------------------------------------------------------------------------------------------------------
def test_filter_wraps_reconcile():
    assert list(reconcile_filter.FilterModule().filters()) == ["gpu_reconcile"]
    node = facts([gpu(H20, used=82 * GIB)], [pod_process(2811, H20, 81 * GIB, VLLM_UID, "ai", "vllm-0")])
    assert reconcile_filter.gpu_reconcile(node, ledger(), "268435456")["summary"]["free_but_in_use"] == 1


@pytest.mark.parametrize("node_facts, node_ledger", [("text", None), ({"gpus": []}, ["not", "a", "dict"]), ({"gpus": [{"index": 0}]}, None)])
def test_filter_rejects_wrong_input(node_facts, node_ledger):
    with pytest.raises(AnsibleFilterError):
        reconcile_filter.gpu_reconcile(node_facts, node_ledger)
