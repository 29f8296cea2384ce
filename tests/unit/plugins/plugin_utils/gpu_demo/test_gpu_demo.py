# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_demo report helpers: evidence from demo pod logs, the free-unit timeline, pod lanes."""

from pathlib import Path

import pytest

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.report import (
    demo_timeline,
    free_units_timeline,
    hold_evidence,
    hold_summary,
    merge_transitions,
    pod_lanes,
    unit_noun,
)

UUID = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
SEED_LOG = (
    "GPU 0: NVIDIA H20 (UUID: {0})\n"
    "NVIDIA_DRIVER_CAPABILITIES=compute,utility\n"
    "NVIDIA_VISIBLE_DEVICES={0}\n"
    "{0}, 86016 MiB, 97871 MiB\n"
    "gpuops: evidence complete\n"
).format(UUID)


def test_seed_log_evidence():
    evidence = hold_evidence(SEED_LOG)
    assert evidence["uuids"] == [UUID]
    assert evidence["gpu_names"] == ["NVIDIA H20"]
    assert evidence["visible_devices"]["mode"] == "list"
    assert evidence["corroborated"] is True
    assert evidence["memory"] == [{"uuid": UUID, "used_bytes": 86016 * 1024 * 1024,
                                   "total_bytes": 97871 * 1024 * 1024, "used_mib": 86016, "total_mib": 97871}]


@pytest.mark.parametrize("env_line,mode,corroborated", [
    ("", "unset", None),
    ("NVIDIA_VISIBLE_DEVICES=void\n", "void", None),
    ("NVIDIA_VISIBLE_DEVICES=0\n", "list", True),
    ("NVIDIA_VISIBLE_DEVICES=0,1\n", "list", False),
    ("NVIDIA_VISIBLE_DEVICES=GPU-other\n", "list", False),
    ("NVIDIA_VISIBLE_DEVICES=all\n", "all", None),
])
def test_visible_devices_forms(env_line, mode, corroborated):
    evidence = hold_evidence("GPU 0: NVIDIA H20 (UUID: {0})\n{1}".format(UUID, env_line))
    assert evidence["visible_devices"]["mode"] == mode
    assert evidence["corroborated"] is corroborated


def test_mig_units():
    log = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaa)\n"
           "  MIG 1g.10gb     Device  0: (UUID: MIG-111)\n")
    summary = hold_summary([{"name": "h", "log": log}], {"h": 1})
    assert summary["unit_uuids"] == ["MIG-111"]
    assert summary["one_gpu_per_unit"] is True


# --- MIG: the units are the MIG devices, the GPU line is their parent ------------------------------------------
MIG_LOG = (Path(__file__).resolve().parents[3] / "fixtures" / "synthetic" / "hold-pod-log-mig.txt").read_text()
H100 = "GPU-e284f2f0-b7db-deb5-4d10-143420128721"
MIG_0 = "MIG-5068167e-8438-5874-bcde-57279823597e"
MIG_1 = "MIG-678fc2a6-04b2-5b9d-9757-d70ae2c5d8bc"
MIG_2 = "MIG-4874c758-673a-541a-847f-37122c4de0d8"


def _with_env(log, value):
    """The MIG log with another NVIDIA_VISIBLE_DEVICES line (None: no line, the variable unset)."""
    lines = [line for line in log.splitlines() if not line.startswith("NVIDIA_VISIBLE_DEVICES=")]
    if value is not None:
        lines.append("NVIDIA_VISIBLE_DEVICES=" + value)
    return "\n".join(lines) + "\n"


def test_mig_hold_pod_evidence():
    evidence = hold_evidence(MIG_LOG)
    assert evidence["unit_uuids"] == [MIG_0, MIG_1] and evidence["unit_kind"] == "mig"
    assert evidence["units"] == [
        {"uuid": MIG_0, "kind": "mig", "profile": "1g.10gb", "gpu_uuid": H100, "gpu_name": "NVIDIA H100 80GB HBM3"},
        {"uuid": MIG_1, "kind": "mig", "profile": "1g.10gb", "gpu_uuid": H100, "gpu_name": "NVIDIA H100 80GB HBM3"},
    ]
    assert evidence["uuids"] == [H100, MIG_0, MIG_1]  # everything nvidia-smi -L printed
    assert evidence["visible_devices"]["uuids"] == [MIG_0, MIG_1]
    assert evidence["corroborated"] is True  # MIG UUIDs against MIG UUIDs, the parent is not a unit
    assert [row["uuid"] for row in evidence["memory"]] == [H100]


@pytest.mark.parametrize("value,mode,corroborated", [
    (MIG_1 + "," + MIG_0, "list", True),  # order does not matter
    (MIG_0, "list", False),  # one of the two
    (MIG_0 + "," + MIG_2, "list", False),  # another MIG device of the same GPU
    (H100, "list", False),  # the parent GPU is not what the device plugin handed out
    (H100 + "," + MIG_0 + "," + MIG_1, "list", False),
    ("0:0,0:1", "list", True),  # DEVICE_ID_STRATEGY=index: <gpu>:<mig> per MIG device
    ("0:0", "list", False),
    ("0,1", "list", False),  # whole-GPU indexes for MIG devices
    ("void", "void", None),
    (None, "unset", None),  # CDI
    ("all", "all", None),
])
def test_mig_visible_devices_forms(value, mode, corroborated):
    evidence = hold_evidence(_with_env(MIG_LOG, value))
    assert evidence["visible_devices"]["mode"] == mode
    assert evidence["corroborated"] is corroborated
    assert evidence["unit_uuids"] == [MIG_0, MIG_1]


def test_whole_gpu_and_mig_device_in_one_pod():
    # The mixed strategy: one nvidia.com/gpu (a GPU without MIG) and one nvidia.com/mig-1g.10gb.
    log = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: {0})\n"
           "  MIG 1g.10gb     Device  0: (UUID: {1})\n"
           "GPU 1: NVIDIA H100 80GB HBM3 (UUID: {2})\n"
           "NVIDIA_VISIBLE_DEVICES={2},{1}\n").format(H100, MIG_0, UUID)
    evidence = hold_evidence(log)
    assert evidence["unit_uuids"] == [MIG_0, UUID] and evidence["unit_kind"] == "mixed"
    assert evidence["corroborated"] is True
    assert hold_evidence(_with_env(log, "0:0,1"))["corroborated"] is True
    assert hold_evidence(_with_env(log, "0,1"))["corroborated"] is False


def test_mig_hold_summary_one_device_per_unit():
    one = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: {0})\n  MIG 1g.10gb     Device  0: (UUID: {1})\nNVIDIA_VISIBLE_DEVICES={1}\n"
    pods = [{"name": "hold-0", "log": one.format(H100, MIG_0)}, {"name": "hold-1", "log": one.format(H100, MIG_1)}]
    summary = hold_summary(pods, {"hold-0": 1, "hold-1": 1})
    assert summary["one_gpu_per_unit"] is True and summary["corroborated"] is True
    assert summary["unit_uuids"] == [MIG_0, MIG_1] and summary["distinct_uuids"] == [MIG_0, MIG_1]
    assert summary["unit_kind"] == "mig" and [unit["gpu_uuid"] for unit in summary["units"]] == [H100, H100]
    # Two pods on one MIG device is not one device per unit, though both sit on the same GPU anyway.
    shared = hold_summary([pods[0], dict(pods[1], log=one.format(H100, MIG_0))], {"hold-0": 1, "hold-1": 1})
    assert shared["one_gpu_per_unit"] is False and shared["distinct_uuids"] == [MIG_0]


def test_one_pod_with_every_mig_unit():
    summary = hold_summary([{"name": "hold", "log": MIG_LOG}], {"hold": 2})
    assert summary["one_gpu_per_unit"] is True and summary["units_seen"] == 2 and summary["corroborated"] is True
    assert hold_summary([{"name": "hold", "log": MIG_LOG}], {"hold": 3})["one_gpu_per_unit"] is False


@pytest.mark.parametrize("kind,noun", [("gpu", "GPUs"), ("mig", "MIG devices"), ("mixed", "devices"), (None, "devices")])
def test_unit_noun(kind, noun):
    assert unit_noun(kind) == noun


def _pod(name, uuid):
    return {"name": name, "node_name": "prod102", "phase": "Running",
            "log": "GPU 0: NVIDIA H20 (UUID: {0})\nNVIDIA_VISIBLE_DEVICES={0}\n".format(uuid)}


def test_hold_summary_four_pods_four_gpus():
    pods = [_pod("gpu-demo-hold-{0}".format(i), "GPU-{0}".format(i)) for i in range(4)]
    summary = hold_summary(pods, {pod["name"]: 1 for pod in pods})
    assert summary["one_gpu_per_unit"] is True
    assert summary["distinct_uuids"] == ["GPU-0", "GPU-1", "GPU-2", "GPU-3"]
    assert summary["visible_devices_modes"] == ["list"]


def test_hold_summary_detects_a_shared_gpu_without_time_slicing():
    pods = [_pod("a", "GPU-0"), _pod("b", "GPU-0")]
    assert hold_summary(pods, {"a": 1, "b": 1})["one_gpu_per_unit"] is False
    # with time-slicing replicas=4, two units on one GPU is what the device plugin does
    assert hold_summary(pods, {"a": 1, "b": 1}, replicas=4)["one_gpu_per_unit"] is True


def test_hold_summary_missing_pod_or_evidence():
    assert hold_summary([_pod("a", "GPU-0")], {"a": 1, "b": 1})["one_gpu_per_unit"] is False
    assert hold_summary([{"name": "a", "log": ""}], {"a": 1})["one_gpu_per_unit"] is False
    assert hold_summary([], {})["one_gpu_per_unit"] is False


def test_single_pod_with_all_units():
    log = "".join("GPU {0}: NVIDIA H20 (UUID: GPU-{0})\n".format(i) for i in range(4))
    summary = hold_summary([{"name": "gpu-demo-hold", "log": log}], {"gpu-demo-hold": 4})
    assert summary["one_gpu_per_unit"] is True


TRANSITIONS = {
    "gpu-demo-hold": {"created": 100.0, "scheduled": 100.2, "running": 100.5, "deleting": 104.0, "deleted": 104.3},
    "gpu-demo-queue": {"created": 102.0, "unschedulable": 102.1, "scheduled": 104.35, "running": 104.5,
                       "succeeded": 104.6, "deleted": 105.0},
}


def test_free_units_follow_the_ledger():
    steps = free_units_timeline(TRANSITIONS, 1, {"gpu-demo-hold": 1, "gpu-demo-queue": 1})
    assert [(step["at"], step["free"]) for step in steps] == [(100.2, 0), (104.3, 1), (104.35, 0), (104.6, 1)]
    assert steps[0]["holders"] == ["gpu-demo-hold"]


def test_lanes():
    lanes = pod_lanes(TRANSITIONS, 100.0, 106.0, order=["gpu-demo-hold"])
    assert [lane["pod"] for lane in lanes] == ["gpu-demo-hold", "gpu-demo-queue"]
    hold = lanes[0]["segments"]
    assert [segment["state"] for segment in hold] == ["pending", "starting", "running", "terminating"]
    assert hold[-1]["end"] == pytest.approx(4.3)
    queue = lanes[1]["segments"]
    assert [segment["state"] for segment in queue] == ["pending", "unschedulable", "starting", "running", "succeeded"]
    assert lanes[1]["gone_at"] == pytest.approx(5.0)


def test_merge_prefers_live_observations():
    first = {"transitions": {"q": {"created": 100.0, "scheduled": 104.0}}, "exact": {"q": []}}
    second = {"transitions": {"q": {"scheduled": 104.35, "succeeded": 104.6}}, "exact": {"q": ["scheduled"]}}
    third = {"transitions": {"q": {"scheduled": 104.9}}, "exact": {"q": []}}
    expected = {"q": {"created": 100.0, "scheduled": 104.35, "succeeded": 104.6}}
    assert merge_transitions([first, second, third, None]) == expected


def test_demo_timeline():
    timeline = demo_timeline([{"transitions": TRANSITIONS, "exact": {}}], 1,
                             {"gpu-demo-hold": 1, "gpu-demo-queue": 1}, start=99.0, end=106.0)
    assert timeline["span"] == 7.0
    assert timeline["free"][0] == {"at": 0.0, "free": 1}
    assert timeline["free"][1] == {"at": pytest.approx(1.2), "free": 0}
    assert timeline["offsets"]["gpu-demo-queue"]["unschedulable"] == pytest.approx(3.1)


def test_occupied_window_spans_first_hold_creation_to_last_pod_gone():
    timeline = demo_timeline([{"transitions": TRANSITIONS, "exact": {}}], 1,
                             {"gpu-demo-hold": 1, "gpu-demo-queue": 1}, start=99.0)
    assert timeline["window"]["seconds"] == 5.0
    assert timeline["window"]["start_offset"] == 1.0
    assert demo_timeline([], 1, {})["window"] is None


def test_a_hold_pod_that_never_ran_held_no_gpu_so_there_is_no_occupied_window():
    """A failed run whose hold pod stayed Pending (never bound to the node) was reported as having held the GPUs from
    its creation until its deletion (122.19 s seen on a DRA node)."""
    never_bound = {"gpu-demo-hold": {"created": 100.0, "unschedulable": 100.1, "deleting": 220.0, "deleted": 222.19}}
    timeline = demo_timeline([{"transitions": never_bound, "exact": {}}], 1, {"gpu-demo-hold": 1, "gpu-demo-queue": 1},
                             start=99.0)
    assert timeline["window"] is None and timeline["held"] is False
    held = demo_timeline([{"transitions": TRANSITIONS, "exact": {}}], 1, {"gpu-demo-hold": 1, "gpu-demo-queue": 1})
    assert held["held"] is True and held["window"]["seconds"] == 5.0


def test_a_hold_pod_bound_but_never_prepared_held_no_gpu_either():
    """Through DRA with a driver the kubelet does not know, the hold pod is bound (its claim allocated) and waits in
    ContainerCreating until the wait gives up: the run reported "GPUs held 122.19 s" for a GPU no container had."""
    never_ran = {"gpu-demo-hold": {"created": 100.0, "scheduled": 100.1, "deleting": 220.0, "deleted": 222.19}}
    timeline = demo_timeline([{"transitions": never_ran, "exact": {}}], 1, {"gpu-demo-hold": 1, "gpu-demo-queue": 1})
    assert timeline["window"] is None and timeline["held"] is False


def test_merge_keeps_inexact_times_after_exact_ones():
    hold_step = {"transitions": {"h": {"created": 100.9, "scheduled": 100.95}}, "exact": {"h": ["created"]}}
    queue_step = {"transitions": {"h": {"created": 100.0, "scheduled": 100.0, "running": 100.0}}, "exact": {"h": []}}
    merged = merge_transitions([hold_step, queue_step])["h"]
    assert merged["created"] == 100.9
    assert merged["scheduled"] >= 100.9 and merged["running"] >= merged["scheduled"]


def test_lanes_keep_life_order_for_equal_times():
    lanes = pod_lanes({"h": {"created": 1.0, "scheduled": 1.0, "running": 1.0, "deleted": 2.0}}, 0.0, 3.0)
    assert [segment["state"] for segment in lanes[0]["segments"]] == ["pending", "starting", "running"]
    assert lanes[0]["segments"][-1] == {"state": "running", "start": 1.0, "end": 2.0}


def test_a_pod_a_later_wait_no_longer_finds_was_gone_by_that_waits_start():
    """kubernetes.core.k8s deleted the hold between two waits: no watch saw it go, the next wait's start bounds it."""
    hold_wait = {"started_at": "2026-10-12T08:01:02.000Z", "transitions": {"h": {"created": 1791792062.0, "running": 1791792062.5}}}
    release_wait = {"started_at": "2026-10-12T08:01:04.250Z", "transitions": {"q": {"created": 1791792063.0}}}
    delete_wait = {"started_at": "2026-10-12T08:01:06.000Z", "transitions": {}}
    merged = merge_transitions([hold_wait, release_wait, delete_wait])
    assert merged["h"]["deleted"] == 1791792064.25 and merged["q"]["deleted"] == 1791792066.0
    # a deletion a watch saw is kept; a wait without a start proves nothing
    seen = dict(release_wait, transitions={"q": {"created": 1791792063.0, "deleted": 1791792065.1}})
    assert merge_transitions([hold_wait, seen, delete_wait])["q"]["deleted"] == 1791792065.1
    assert "deleted" not in merge_transitions([hold_wait, {"transitions": {}}])["h"]


# --- how the device plugin handed the GPUs over ------------------------------------------------------------
# The shapes a hold pod's evidence takes in each of NVIDIA's device list strategies, with each device ID strategy:
# NVIDIA/k8s-device-plugin v0.20.0 internal/plugin/server.go getAllocateResponse (updateResponseForDeviceListEnvVar:
# NVIDIA_VISIBLE_DEVICES=<ids joined by ",">; updateResponseForDeviceMounts: NVIDIA_VISIBLE_DEVICES=
# /var/run/nvidia-container-devices and a /dev/null mount at /var/run/nvidia-container-devices/<id> per device;
# updateResponseForCDI: CDI names only, the variable left to the CDI spec, which sets it to void: the toolkit's
# pkg/nvcdi/wrapper.go GetCommonEdits). The ids are UUIDs or indexes (uniqueDeviceIDsFromAnnotatedDeviceIDs).
UUID_1 = "GPU-6f8194bc-f7fc-d1e5-bf0f-a7e181482c11"
SMI_ONE = "GPU 0: NVIDIA H20 (UUID: {0})\n".format(UUID)
SMI_TWO = SMI_ONE + "GPU 1: NVIDIA H20 (UUID: {0})\n".format(UUID_1)
DEVICE_DIR = "/var/run/nvidia-container-devices"


@pytest.mark.parametrize("strategy, log, handover, named, corroborated", [
    ("envvar, uuid", SMI_ONE + "NVIDIA_VISIBLE_DEVICES={0}\n".format(UUID), "uuids", [UUID], True),
    ("envvar, uuid, two", SMI_TWO + "NVIDIA_VISIBLE_DEVICES={0},{1}\n".format(UUID_1, UUID), "uuids", [UUID_1, UUID], True),
    ("envvar, index", SMI_ONE + "NVIDIA_VISIBLE_DEVICES=3\n", "indexes", ["3"], True),
    ("volume-mounts, uuid", SMI_ONE + "NVIDIA_VISIBLE_DEVICES={0}\n{0}/{1}\n".format(DEVICE_DIR, UUID), "mounts", [UUID], True),
    ("volume-mounts, uuid, two", SMI_TWO + "NVIDIA_VISIBLE_DEVICES={0}\n{0}/{1}\n{0}/{2}\n".format(DEVICE_DIR, UUID, UUID_1),
     "mounts", [UUID, UUID_1], True),
    ("volume-mounts, index", SMI_ONE + "NVIDIA_VISIBLE_DEVICES={0}\n{0}/0\n".format(DEVICE_DIR), "mounts", ["0"], True),
    # A custom evidence command that does not list the folder: nothing names the devices.
    ("volume-mounts, unlisted", SMI_ONE + "NVIDIA_VISIBLE_DEVICES={0}\n".format(DEVICE_DIR), "mounts", [], None),
    ("cdi-cri or cdi-annotations", SMI_ONE + "NVIDIA_VISIBLE_DEVICES=void\n", "cdi", [], None),
    ("CDI without the spec's variable", SMI_ONE, "cdi", [], None),
    ("an image's all", SMI_TWO + "NVIDIA_VISIBLE_DEVICES=all\n", "all", [], None),
    ("no device", "NVIDIA_VISIBLE_DEVICES=void\n", "none", [], None),
])
def test_each_hand_over_is_read_from_the_pods_evidence(strategy, log, handover, named, corroborated):
    evidence = hold_evidence(log)
    assert (evidence["handover"], evidence["named"], evidence["corroborated"]) == (handover, named, corroborated), strategy


@pytest.mark.parametrize("log", [
    # the plugin named the first GPU for a pod that got the second (its nvidia-smi shows what was injected)
    SMI_ONE + "NVIDIA_VISIBLE_DEVICES={0}\n".format(UUID_1),
    SMI_ONE + "NVIDIA_VISIBLE_DEVICES={0}\n{0}/{1}\n".format(DEVICE_DIR, UUID_1),
    SMI_ONE + "NVIDIA_VISIBLE_DEVICES={0}\n{0}/0\n{0}/1\n".format(DEVICE_DIR),
    # the variable itself taken for a device (what the evidence was read as before volume mounts were known)
    SMI_ONE + "NVIDIA_VISIBLE_DEVICES={0}\n{0}/not-a-gpu\n".format(DEVICE_DIR),
])
def test_names_that_are_not_the_devices_shown_are_not_corroborated(log):
    assert hold_evidence(log)["corroborated"] is False


def test_the_hand_over_in_words_never_shows_an_internal_name():
    from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.report import HANDOVER_WORDS, handover_text
    assert set(HANDOVER_WORDS["en"]) == set(HANDOVER_WORDS["zh"])
    for lang, words in HANDOVER_WORDS.items():
        for way, text in words.items():
            for internal in ("envvar", "volume-mounts", "cdi-cri", "cdi-annotations", " is list", "uuids", "mode"):
                assert internal not in text, (lang, way, text)
    assert handover_text(["mounts"]) == "the device plugin mounts one file per GPU under /var/run/nvidia-container-devices"
    assert handover_text(["indexes"]) == "the device plugin passes GPU indexes in NVIDIA_VISIBLE_DEVICES"
    assert handover_text(["uuids"], "zh") == "设备插件通过 NVIDIA_VISIBLE_DEVICES 传递 GPU UUID"
    assert "through CDI" in handover_text(["cdi"])


def test_two_pods_shown_one_gpu_name_it_as_shared():
    log = SMI_ONE + "NVIDIA_VISIBLE_DEVICES={0}\n{0}/{1}\n".format(DEVICE_DIR, UUID)
    summary = hold_summary([{"name": "a", "log": log}, {"name": "b", "log": log}], {"a": 1, "b": 1})
    assert summary["one_gpu_per_unit"] is False and summary["shared"] == [UUID]
    assert summary["handovers"] == ["mounts"] and summary["corroborated"] is True
