# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvidia-smi parsers on the real H200 output and synthetic cases; both GPU readers with fakes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.scheduling.plugins.filter import nvidia_smi as nvidia_smi_filters
from ansible_collections.gpuops.scheduling.plugins.module_utils._node import nvidia_smi as smi

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
H200 = FIXTURES / "nvidia-smi-h200"
SYNTHETIC = FIXTURES / "synthetic"
H200_UUID = "GPU-6488a48c-7479-40ca-ba29-49824ecf04fa"
H20_UUID = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
H20_UUID_1 = "GPU-9b1e7c3d-2f4a-4b6c-8d0e-1a2b3c4d5e6f"
A100_0 = "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"
A100_1 = "GPU-0c9a0b8e-6a3f-4e0a-8f4c-1f9a4c2d7e61"
MIB = 1024 * 1024


def read(path):
    return path.read_text(encoding="utf-8")


# --- nvidia-smi -L ------------------------------------------------------------------------------
def test_gpu_list_real_h200():
    assert smi.parse_gpu_list(read(H200 / "smi-L.txt")) == [{"index": 0, "name": "NVIDIA H200", "uuid": H200_UUID, "mig_devices": []}]


def test_gpu_list_mig_devices_belong_to_the_gpu_above():
    gpus = smi.parse_gpu_list(read(SYNTHETIC / "smi-L-a100-mig.txt"))
    assert [gpu["uuid"] for gpu in gpus] == [A100_0, A100_1]
    assert [(mig["index"], mig["profile"]) for mig in gpus[0]["mig_devices"]] == [(0, "3g.20gb"), (1, "1g.5gb"), (2, "1g.5gb")]
    assert gpus[0]["mig_devices"][0] == {
        "index": 0,
        "profile": "3g.20gb",
        "uuid": "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
        "parent_index": 0,
        "parent_uuid": A100_0,
    }
    assert gpus[1]["mig_devices"] == []


def test_gpu_list_r450_mig_uuids():
    gpus = smi.parse_gpu_list(read(SYNTHETIC / "smi-L-a100-mig-r450.txt"))
    assert gpus[0]["name"] == "A100-SXM4-40GB"
    assert [mig["uuid"] for mig in gpus[0]["mig_devices"]] == ["MIG-%s/1/0" % A100_0, "MIG-%s/7/0" % A100_0]


def test_gpu_list_from_a_timestamped_pod_log():
    assert smi.parse_gpu_list(read(SYNTHETIC / "hold-pod-log.txt")) == [{"index": 0, "name": "NVIDIA H20", "uuid": H20_UUID, "mig_devices": []}]


@pytest.mark.parametrize("text", ["", None, "No devices were found", read(SYNTHETIC / "smi-L-no-driver.txt")])
def test_gpu_list_without_gpus(text):
    assert smi.parse_gpu_list(text) == []


# --- NVIDIA_VISIBLE_DEVICES -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, mode, uuids, indexes",
    [
        (None, "unset", [], []),
        ("", "void", [], []),
        ("void", "void", [], []),
        ("none", "none", [], []),
        ("all", "all", [], []),
        ("ALL", "all", [], []),
        (H20_UUID, "list", [H20_UUID], []),
        ("%s,%s" % (H20_UUID, H20_UUID_1), "list", [H20_UUID, H20_UUID_1], []),
        ("0", "list", [], ["0"]),
        ("0,1", "list", [], ["0", "1"]),
        ("0:1", "list", [], ["0:1"]),
        ("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f", "list", ["MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"], []),
        # DEVICE_LIST_STRATEGY=volume-mounts (k8s-device-plugin internal/plugin/server.go updateResponseForDeviceMounts):
        # the value points at the folder of mounts; it is no device.
        ("/var/run/nvidia-container-devices", "mounts", [], []),
        ("/var/run/nvidia-container-devices/", "mounts", [], []),
    ],
)
def test_visible_devices(value, mode, uuids, indexes):
    parsed = smi.parse_visible_devices(value)
    assert (parsed["value"], parsed["mode"], parsed["uuids"], parsed["indexes"]) == (value, mode, uuids, indexes)


def test_visible_devices_from_a_log():
    assert smi.visible_devices_from_env(read(SYNTHETIC / "hold-pod-log.txt"))["uuids"] == [H20_UUID]
    # With CDI the variable is absent: unset, not "no GPU".
    assert smi.visible_devices_from_env("GPU 0: NVIDIA H20 (UUID: %s)\n" % H20_UUID)["mode"] == "unset"
    assert smi.visible_devices_from_env("PATH=/usr/bin\nNVIDIA_VISIBLE_DEVICES=void\n")["mode"] == "void"


def test_device_list_from_the_evidence_lines():
    text = ("NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices\n/var/run/nvidia-container-devices/%s\n"
            "2026-12-01T09:00:00Z /var/run/nvidia-container-devices/0\n/var/run/nvidia-container-devices/imex/3\n"
            "/var/run/nvidia-container-devices/%s\n" % (H20_UUID, H20_UUID))
    assert smi.device_list_from_text(text) == [H20_UUID, "0"]
    assert smi.device_list_from_text("") == [] and smi.device_list_from_text(None) == []


# --- CSV ----------------------------------------------------------------------------------------------
def test_query_gpu_real_h200_with_header_and_units():
    assert smi.parse_query_csv(read(H200 / "smi-query-gpu.csv")) == [
        {
            "index": 0,
            "uuid": H200_UUID,
            "name": "NVIDIA H200",
            "memory.used": 6251 * MIB,
            "memory.total": 143771 * MIB,
            "driver_version": "580.159.04",
            "pci.bus_id": "00000000:00:06.0",
            "mig.mode.current": "Disabled",
        }
    ]


def test_query_apps_real_h200_keys_follow_the_query_fields():
    text = read(H200 / "smi-query-apps.csv")
    # The header says used_gpu_memory although the query asked used_memory.
    assert smi.parse_query_csv(text)[0]["used_gpu_memory"] == 6242 * MIB
    assert smi.parse_query_csv(text, smi.APPS_QUERY_FIELDS) == [{"pid": 418, "process_name": "python3", "used_memory": 6242 * MIB, "gpu_uuid": H200_UUID}]


def test_query_noheader_nounits_needs_fields():
    text = read(SYNTHETIC / "smi-query-gpu-h20x2-noheader-nounits.csv")
    with pytest.raises(ValueError, match="pass the queried fields"):
        smi.parse_query_csv(text)
    rows = smi.parse_query_csv(text, smi.GPU_QUERY_FIELDS)
    assert [row["uuid"] for row in rows] == [H20_UUID, H20_UUID_1]
    # Memory fields are MiB even without units; other bare numbers stay what they are.
    assert rows[0]["memory.used"] == 82310 * MIB and rows[0]["memory.total"] == 97871 * MIB
    assert rows[0]["index"] == 0 and rows[1]["index"] == 1
    assert rows[0]["utilization.gpu"] == "35"  # no unit known without the header: left as text
    assert rows[0]["driver_version"] == "550.127.05"


def test_query_missing_values_and_percentages():
    rows = smi.parse_query_csv(read(SYNTHETIC / "smi-query-gpu-a100-mig.csv"), smi.GPU_QUERY_FIELDS)
    assert rows[0]["utilization.gpu"] is None and rows[0]["utilization.memory"] is None  # [N/A] under MIG
    assert rows[1]["utilization.gpu"] == 87 and rows[1]["utilization.memory"] == 41
    assert rows[0]["mig.mode.current"] == "Enabled"


@pytest.mark.parametrize("cell", ["[N/A]", "N/A", "[Not Supported]", "[Insufficient Permissions]", "[Unknown Error]", ""])
def test_query_cells_without_value(cell):
    assert smi.parse_query_csv("pid, used_memory\n7, %s\n" % cell, ["pid", "used_memory"]) == [{"pid": 7, "used_memory": None}]


def test_query_units_from_header_when_cells_have_none():
    text = "memory.used [MiB], power.draw [W], clocks.sm [MHz]\n100, 125.37, 1980\n"
    assert smi.parse_query_csv(text) == [{"memory.used": 100 * MIB, "power.draw": 125.37, "clocks.sm": 1980}]


def test_query_without_processes():
    assert smi.parse_query_csv("pid, process_name, used_gpu_memory [MiB], gpu_uuid\n", smi.APPS_QUERY_FIELDS) == []
    assert smi.parse_query_csv("", smi.APPS_QUERY_FIELDS) == []
    assert smi.parse_query_csv("No running processes found\n", smi.APPS_QUERY_FIELDS) == []


def test_query_row_of_the_wrong_width_is_an_error():
    with pytest.raises(ValueError, match="has 2 cells, expected 4"):
        smi.parse_query_csv("Unable to determine the device handle for GPU0000:1B:00.0, Unknown Error\n", smi.APPS_QUERY_FIELDS)


def test_failure_classification():
    assert smi.nvidia_smi_failure(read(SYNTHETIC / "smi-L-no-driver.txt"))[0] == smi.REASON_NO_DRIVER
    assert smi.nvidia_smi_failure("Failed to initialize NVML: Insufficient Permissions")[0] == smi.REASON_NO_PERMISSION
    assert smi.nvidia_smi_failure("Failed to initialize NVML: Driver/library version mismatch")[0] == smi.REASON_FAILED
    assert smi.nvidia_smi_failure("GPU 0: NVIDIA H200 (UUID: %s)" % H200_UUID) is None


# --- the nvidia-smi reader -----------------------------------------------------------------------------
class FakeNvidiaSmi:
    """Answers the reader's commands from fixture text; records what it was asked."""

    def __init__(self, gpu_csv, apps_csv, gpu_list="", rc=0, err=""):
        self.answers = {"--query-gpu": gpu_csv, "--query-compute-apps": apps_csv, "-L": gpu_list}
        self.rc, self.err = rc, err
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        key = argv[1].split("=", 1)[0]
        return self.rc, self.answers[key] if self.rc == 0 else "", self.err


def test_nvidia_smi_reader_on_the_real_h200_output():
    # The fixture's query has other fields than the reader's: rebuild it with the reader's columns.
    run = FakeNvidiaSmi(
        "index, uuid, name, pci.bus_id, memory.used [MiB], memory.total [MiB], utilization.gpu [%%], utilization.memory [%%], "
        "mig.mode.current, driver_version\n0, %s, NVIDIA H200, 00000000:00:06.0, 6251 MiB, 143771 MiB, 0 %%, 0 %%, Disabled, 580.159.04\n" % H200_UUID,
        read(H200 / "smi-query-apps.csv"),
    )
    inventory = smi.read_with_nvidia_smi(run, "/usr/bin/nvidia-smi")
    assert inventory["driver_version"] == "580.159.04"
    assert inventory["gpus"] == [
        {
            "index": 0,
            "uuid": H200_UUID,
            "name": "NVIDIA H200",
            "pci_bus_id": "00000000:00:06.0",
            "memory_used_bytes": 6251 * MIB,
            "memory_total_bytes": 143771 * MIB,
            "utilization_gpu_percent": 0,
            "utilization_memory_percent": 0,
            "mig_mode": "disabled",
            "mig_devices": [],
        }
    ]
    assert inventory["processes"] == [{"pid": 418, "name": "python3", "gpu_uuid": H200_UUID, "gpu_index": 0, "mig_uuid": None, "used_memory_bytes": 6242 * MIB}]
    assert [call[1] for call in run.calls] == ["--query-gpu=" + ",".join(smi.GPU_QUERY_FIELDS), "--query-compute-apps=pid,process_name,used_memory,gpu_uuid"]


def test_nvidia_smi_reader_asks_for_mig_devices_only_when_mig_is_on():
    run = FakeNvidiaSmi(read(SYNTHETIC / "smi-query-gpu-a100-mig.csv"), "", read(SYNTHETIC / "smi-L-a100-mig.txt"))
    inventory = smi.read_with_nvidia_smi(run, "nvidia-smi")
    assert ["-L"] in [call[1:] for call in run.calls]
    assert [mig["profile"] for mig in inventory["gpus"][0]["mig_devices"]] == ["3g.20gb", "1g.5gb", "1g.5gb"]
    assert inventory["gpus"][0]["mig_devices"][0]["memory_total_bytes"] is None
    assert inventory["gpus"][1]["mig_devices"] == []


def test_a_failed_gpu_list_names_the_command_once():
    run = FakeNvidiaSmi(read(SYNTHETIC / "smi-query-gpu-a100-mig.csv"), "")
    answer = run.__call__

    def list_fails(argv):
        return (3, "", "Unable to list MIG devices") if argv[1] == "-L" else answer(argv)

    with pytest.raises(smi.GpuInventoryError, match=r"^nvidia-smi -L failed \(rc=3\): Unable to list MIG devices$"):
        smi.read_with_nvidia_smi(list_fails, "nvidia-smi")


def test_nvidia_smi_reader_several_gpus_and_a_withheld_memory_value():
    run = FakeNvidiaSmi(read(SYNTHETIC / "smi-query-gpu-h20x2-noheader-nounits.csv"), read(SYNTHETIC / "smi-query-apps-h20x2.csv"))
    inventory = smi.read_with_nvidia_smi(run, "nvidia-smi")
    assert [gpu["index"] for gpu in inventory["gpus"]] == [0, 1]
    assert [(p["pid"], p["gpu_index"], p["used_memory_bytes"]) for p in inventory["processes"]] == [(2811, 0, 81920 * MIB), (30442, 0, None)]


def test_nvidia_smi_reader_without_driver():
    run = FakeNvidiaSmi("", "", rc=9, err=read(SYNTHETIC / "smi-L-no-driver.txt"))
    with pytest.raises(smi.GpuInventoryError) as raised:
        smi.read_with_nvidia_smi(run, "nvidia-smi")
    assert raised.value.reason == smi.REASON_NO_DRIVER


def test_nvidia_smi_reader_without_devices_is_empty():
    run = FakeNvidiaSmi("", "", rc=6, err="No devices were found")
    assert smi.read_with_nvidia_smi(run, "nvidia-smi") == {"driver_version": None, "gpus": [], "processes": []}


# --- the NVML reader -----------------------------------------------------------------------------------
class FakeNvml:
    """The part of pynvml the reader uses, over a description of GPUs, MIG devices and processes."""

    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_DEVICE_MIG_ENABLE = 1
    nvmlMemory_v2 = 0x02000028

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__("NVML error %d" % value)
            self.value = value

    def __init__(self, gpus, init_error=None, names=None):
        self.gpus = gpus
        self.init_error = init_error
        self.names = names or {}
        self.shutdown = False

    def nvmlInit(self):
        if self.init_error:
            raise self.NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self):
        return b"580.159.04"  # old bindings return bytes

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.gpus[index]

    def nvmlDeviceGetUUID(self, handle):
        return handle["uuid"]

    def nvmlDeviceGetName(self, handle):
        return handle["name"]

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        used = handle["used_v2"] if version is not None and version == self.nvmlMemory_v2 else handle["used_v2"] + 600 * MIB
        return SimpleNamespace(total=handle["total"], used=used, free=handle["total"] - used)

    def nvmlDeviceGetUtilizationRates(self, handle):
        if handle.get("mig"):
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(gpu=handle.get("util", 0), memory=1)

    def nvmlDeviceGetMigMode(self, handle):
        if "mig" not in handle:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return [1 if handle["mig"] else 0, 0]

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=handle.get("bus", "00000000:00:06.0"))

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index):
        slots = handle.get("mig_devices", {})
        if index not in slots:
            raise self.NVMLError(self.NVML_ERROR_NOT_FOUND)
        return slots[index]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in handle.get("processes", [])]

    def nvmlSystemGetProcessName(self, pid):
        if pid not in self.names:
            raise self.NVMLError(self.NVML_ERROR_NOT_FOUND)
        return self.names[pid]


def h200(processes=((418, 6242 * MIB),)):
    return {"uuid": H200_UUID, "name": "NVIDIA H200", "total": 143771 * MIB, "used_v2": 6251 * MIB, "mig": False, "processes": list(processes)}


def test_nvml_reader_h200_like_the_fixture():
    nvml = FakeNvml([h200()], names={418: "python3"})
    inventory = smi.read_with_nvml(nvml)
    assert nvml.shutdown
    assert inventory["driver_version"] == "580.159.04"
    gpu = inventory["gpus"][0]
    # v2 memory information: the same "used" as nvidia-smi, without the driver's reservation.
    assert (gpu["memory_used_bytes"], gpu["memory_total_bytes"], gpu["mig_mode"]) == (6251 * MIB, 143771 * MIB, "disabled")
    assert inventory["processes"] == [{"pid": 418, "name": "python3", "gpu_uuid": H200_UUID, "gpu_index": 0, "mig_uuid": None, "used_memory_bytes": 6242 * MIB}]


def test_nvml_reader_falls_back_to_v1_memory_on_old_bindings():
    nvml = FakeNvml([h200()])
    nvml.nvmlMemory_v2 = None
    assert smi.read_with_nvml(nvml)["gpus"][0]["memory_used_bytes"] == (6251 + 600) * MIB


def test_nvml_reader_mig_devices_and_their_processes():
    mig_0 = {
        "uuid": "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
        "name": "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
        "total": 19968 * MIB,
        "used_v2": 8000 * MIB,
        "processes": [(5001, 7900 * MIB)],
    }
    mig_2 = {"uuid": "MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c5d", "name": "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "total": 4864 * MIB, "used_v2": 0, "processes": []}
    gpu_0 = {
        "uuid": A100_0,
        "name": "NVIDIA A100-SXM4-40GB",
        "total": 40960 * MIB,
        "used_v2": 8012 * MIB,
        "mig": True,
        "mig_devices": {0: mig_0, 2: mig_2},
        "processes": [(5001, None)],
    }
    gpu_1 = {"uuid": A100_1, "name": "NVIDIA A100-SXM4-40GB", "total": 40960 * MIB, "used_v2": 0, "util": 3}
    inventory = smi.read_with_nvml(FakeNvml([gpu_0, gpu_1], names={5001: "/usr/bin/python3"}))
    first, second = inventory["gpus"]
    assert first["mig_mode"] == "enabled" and first["utilization_gpu_percent"] is None
    assert [(mig["index"], mig["profile"], mig["memory_total_bytes"]) for mig in first["mig_devices"]] == [
        (0, "3g.20gb", 19968 * MIB),
        (2, "1g.5gb", 4864 * MIB),
    ]
    assert second["mig_mode"] is None and second["utilization_gpu_percent"] == 3
    # The MIG device's answer (with its memory) replaces the parent's for the same pid.
    assert inventory["processes"] == [
        {"pid": 5001, "name": "/usr/bin/python3", "gpu_uuid": A100_0, "gpu_index": 0, "mig_uuid": mig_0["uuid"], "used_memory_bytes": 7900 * MIB}
    ]


def test_nvml_reader_process_name_may_be_unknown():
    assert smi.read_with_nvml(FakeNvml([h200()]))["processes"][0]["name"] is None


@pytest.mark.parametrize(
    "error, reason",
    [
        (FakeNvml.NVML_ERROR_DRIVER_NOT_LOADED, smi.REASON_NO_DRIVER),
        (FakeNvml.NVML_ERROR_LIBRARY_NOT_FOUND, smi.REASON_NO_DRIVER),
        (FakeNvml.NVML_ERROR_NO_PERMISSION, smi.REASON_NO_PERMISSION),
        (999, smi.REASON_FAILED),
    ],
)
def test_nvml_reader_init_errors(error, reason):
    with pytest.raises(smi.GpuInventoryError) as raised:
        smi.read_with_nvml(FakeNvml([], init_error=error))
    assert raised.value.reason == reason


# --- the filters -------------------------------------------------------------------------------------
def test_filters_are_registered():
    assert sorted(nvidia_smi_filters.FilterModule().filters()) == ["nvidia_smi_gpus", "nvidia_smi_query", "nvidia_visible_devices"]


def test_filters_take_text_or_lines():
    lines = read(SYNTHETIC / "hold-pod-log.txt").splitlines()
    assert nvidia_smi_filters.nvidia_smi_gpus(lines)[0]["uuid"] == H20_UUID
    assert nvidia_smi_filters.nvidia_visible_devices(lines, from_text=True)["uuids"] == [H20_UUID]
    assert nvidia_smi_filters.nvidia_visible_devices(None)["mode"] == "unset"
    assert nvidia_smi_filters.nvidia_smi_query(read(H200 / "smi-query-apps.csv"), list(smi.APPS_QUERY_FIELDS))[0]["pid"] == 418


def test_filters_reject_wrong_input():
    with pytest.raises(AnsibleFilterError):
        nvidia_smi_filters.nvidia_smi_gpus({"not": "text"})
    with pytest.raises(AnsibleFilterError):
        nvidia_smi_filters.nvidia_visible_devices(["GPU-1"])
    with pytest.raises(AnsibleFilterError, match="pass the queried fields"):
        nvidia_smi_filters.nvidia_smi_query("1, 2\n")
