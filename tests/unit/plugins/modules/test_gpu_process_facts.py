# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_process_facts end to end: a fake nvidia-smi executable (real H200 output), a fake pynvml,
a fake /proc and runtime state, the kubelet checkpoint or PodResources API; errors and check mode."""

from __future__ import annotations

import json
import shutil
import tempfile
from concurrent import futures
from pathlib import Path
from types import SimpleNamespace

import kubelet_pod_resources as kubelet_side
import pytest

from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpuops.scheduling.plugins.module_utils._node import pod_resources as _pod_resources
from ansible_collections.gpuops.scheduling.plugins.modules import gpu_process_facts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
H200_UUID = "GPU-6488a48c-7479-40ca-ba29-49824ecf04fa"
H20_UUID = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
MIB = 1024 * 1024
POD_UID = "1b0d7a52-93c4-4f0e-8a8e-6b1f3c2d4e5a"
CONTAINER_ID = "ab" * 32
# The real H200 capture, with the columns the module asks for.
H200_GPU_CSV = (
    "index, uuid, name, pci.bus_id, memory.used [MiB], memory.total [MiB], utilization.gpu [%], utilization.memory [%], mig.mode.current, driver_version\n"
    "0, " + H200_UUID + ", NVIDIA H200, 00000000:00:06.0, 6251 MiB, 143771 MiB, 0 %, 0 %, Disabled, 580.159.04\n"
)


def fake_nvidia_smi(tmp_path, gpu_csv=H200_GPU_CSV, apps_csv=None, exit_code=0, error=""):
    """An executable that answers the module's two queries like nvidia-smi."""
    (tmp_path / "gpu.csv").write_text(gpu_csv)
    (tmp_path / "apps.csv").write_text(apps_csv if apps_csv is not None else (FIXTURES / "nvidia-smi-h200" / "smi-query-apps.csv").read_text())
    (tmp_path / "error.txt").write_text(error)
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        "[ %d -ne 0 ] && { cat '%s/error.txt'; exit %d; }\n"
        'case "$1" in\n'
        "  --query-gpu=*) cat '%s/gpu.csv' ;;\n"
        "  --query-compute-apps=*) cat '%s/apps.csv' ;;\n"
        '  *) echo "unexpected $*" >&2; exit 2 ;;\n'
        "esac\n" % (exit_code, tmp_path, exit_code, tmp_path, tmp_path)
    )
    script.chmod(0o755)
    return str(script)


def fake_proc(tmp_path, pid, cgroup, comm="python3", cmdline="python3\0-c\0import torch\0"):
    directory = tmp_path / "proc" / str(pid)
    directory.mkdir(parents=True)
    (directory / "cgroup").write_text(cgroup)
    (directory / "comm").write_text(comm + "\n")
    (directory / "cmdline").write_text(cmdline)
    return str(tmp_path / "proc")


class FakeNvml:
    """Enough of pynvml for one GPU with one process."""

    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    nvmlMemory_v2 = 0x02000028

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__("NVML error %d" % value)
            self.value = value

    def __init__(self, init_error=None):
        self.init_error = init_error

    def nvmlInit(self):
        if self.init_error:
            raise self.NVMLError(self.init_error)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return "gpu%d" % index

    def nvmlDeviceGetUUID(self, handle):
        return H200_UUID

    def nvmlDeviceGetName(self, handle):
        return "NVIDIA H200"

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        return SimpleNamespace(total=143771 * MIB, used=6251 * MIB, free=(143771 - 6251) * MIB)

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=0, memory=0)

    def nvmlDeviceGetMigMode(self, handle):
        return [0, 0]

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId="00000000:00:06.0")

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=418, usedGpuMemory=6545211392)]

    def nvmlSystemGetProcessName(self, pid):
        return "python3"


def run_module(args, capsys, check_mode=False):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gpu_process_facts.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node with the H200's host python process and no kubelet; pynvml and grpc absent."""
    monkeypatch.setattr(gpu_process_facts, "pynvml", None)
    monkeypatch.setattr(gpu_process_facts, "grpc", None)
    proc_root = fake_proc(tmp_path, 418, "0::/process_api/3f64b9d5cf60dfb3aefc97a8d9e548a3\n")
    return {
        "nvidia_smi_path": fake_nvidia_smi(tmp_path),
        "proc_root": proc_root,
        "host_root": str(tmp_path),
        "pod_resources_socket": str(tmp_path / "missing.sock"),
        "checkpoint_path": str(tmp_path / "missing-checkpoint"),
    }


def test_nvidia_smi_source_reports_the_host_process(node, capsys):
    result = run_module(dict(node, source="nvidia-smi"), capsys)
    assert result["changed"] is False
    facts = result["ansible_facts"]["gpu_process_facts"]
    assert facts["source"] == "nvidia-smi" and facts["driver_version"] == "580.159.04"
    assert facts["gpus"][0]["memory_used_bytes"] == 6251 * MIB and facts["gpus"][0]["memory_total_bytes"] == 143771 * MIB
    (process,) = facts["processes"]
    assert process["pid"] == 418 and process["used_memory_bytes"] == 6242 * MIB and process["gpu_uuid"] == H200_UUID
    assert process["cmdline"] == "python3 -c import torch"
    assert process["kubernetes"]["kind"] == "host"
    assert facts["allocations"]["source"] == "none"
    assert facts["allocations"]["allocatable"] is None
    assert facts["allocations"]["errors"] == [
        "pod-resources-grpc: grpcio is not installed, so the kubelet's PodResources API on %s was not asked" % node["pod_resources_socket"],
        "checkpoint: no device-plugin checkpoint at %s" % node["checkpoint_path"],
    ]


def test_nvml_source_gives_the_same_answer(node, capsys, monkeypatch):
    monkeypatch.setattr(gpu_process_facts, "pynvml", FakeNvml())
    by_nvml = run_module(dict(node, source="nvml"), capsys)["ansible_facts"]["gpu_process_facts"]
    by_smi = run_module(dict(node, source="nvidia-smi"), capsys)["ansible_facts"]["gpu_process_facts"]
    assert by_nvml["source"] == "nvml"
    assert by_nvml["processes"] == by_smi["processes"]
    assert by_nvml["gpus"] == by_smi["gpus"]


def test_auto_prefers_nvml(node, capsys, monkeypatch):
    monkeypatch.setattr(gpu_process_facts, "pynvml", FakeNvml())
    assert run_module(node, capsys)["ansible_facts"]["gpu_process_facts"]["source"] == "nvml"


@pytest.fixture
def warnings(monkeypatch):
    # Recorded here: once a test has imported controller code, AnsibleModule.warn goes to the
    # controller's display instead of the result.
    warned = []
    monkeypatch.setattr(gpu_process_facts.AnsibleModule, "warn", lambda module, message: warned.append(message))
    return warned


def test_auto_without_pynvml_uses_nvidia_smi_quietly(node, capsys, warnings):
    result = run_module(node, capsys)
    assert result["ansible_facts"]["gpu_process_facts"]["source"] == "nvidia-smi" and warnings == []


def test_auto_when_nvml_fails_uses_nvidia_smi_and_says_so(node, capsys, monkeypatch, warnings):
    monkeypatch.setattr(gpu_process_facts, "pynvml", FakeNvml(init_error=FakeNvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    result = run_module(node, capsys)
    assert result["ansible_facts"]["gpu_process_facts"]["source"] == "nvidia-smi"
    assert warnings == [
        "NVML failed, nvidia-smi answered instead: NVML initialisation failed: the NVIDIA driver is not loaded or libnvidia-ml is missing (NVML error 12)"
    ]


def test_nvml_requested_but_not_installed(node, capsys):
    result = run_module(dict(node, source="nvml"), capsys)
    assert result["failed"] and "nvidia-ml-py" in result["msg"] and result["reason"] == "no_nvml"


def test_nvml_requested_without_permission(node, capsys, monkeypatch):
    monkeypatch.setattr(gpu_process_facts, "pynvml", FakeNvml(init_error=FakeNvml.NVML_ERROR_NO_PERMISSION))
    result = run_module(dict(node, source="nvml"), capsys)
    assert result["failed"] and result["reason"] == "no_permission" and "no permission" in result["msg"]


def test_no_driver(node, tmp_path, capsys):
    error = (FIXTURES / "synthetic" / "smi-L-no-driver.txt").read_text()
    failing = tmp_path / "failing"
    failing.mkdir()
    result = run_module(dict(node, nvidia_smi_path=fake_nvidia_smi(failing, exit_code=9, error=error)), capsys)
    assert result["failed"] and result["reason"] == "no_driver" and "NVIDIA driver is not loaded" in result["msg"]


def test_no_nvidia_smi(node, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(gpu_process_facts, "pynvml", FakeNvml(init_error=FakeNvml.NVML_ERROR_DRIVER_NOT_LOADED))
    result = run_module(dict(node, nvidia_smi_path=str(tmp_path / "nowhere" / "nvidia-smi")), capsys)
    assert result["failed"] and result["reason"] == "no_tool"
    assert "not found: is the NVIDIA driver installed?" in result["msg"] and "NVML:" in result["msg"]


def test_check_mode_reads_the_same(node, capsys):
    normal = run_module(node, capsys)
    checked = run_module(node, capsys, check_mode=True)
    assert checked["changed"] is False and checked["ansible_facts"] == normal["ansible_facts"]


def test_pod_process_with_checkpoint_allocation(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(gpu_process_facts, "pynvml", None)
    monkeypatch.setattr(gpu_process_facts, "grpc", None)
    cgroup = "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice/cri-containerd-%s.scope\n" % (
        POD_UID.replace("-", "_"),
        CONTAINER_ID,
    )
    proc_root = fake_proc(tmp_path, 2811, cgroup, cmdline="python3\0-m\0vllm.entrypoints.openai.api_server\0")
    bundle = tmp_path / "run/containerd/io.containerd.runtime.v2.task/k8s.io" / CONTAINER_ID
    bundle.mkdir(parents=True)
    annotations = {
        "io.kubernetes.cri.sandbox-name": "vllm-0",
        "io.kubernetes.cri.sandbox-namespace": "ai",
        "io.kubernetes.cri.sandbox-uid": POD_UID,
        "io.kubernetes.cri.container-name": "vllm",
    }
    (bundle / "config.json").write_text(json.dumps({"annotations": annotations}))
    checkpoint = tmp_path / "kubelet_internal_checkpoint"
    checkpoint.write_text((FIXTURES / "pod-resources" / "checkpoint-numa.json").read_text())
    gpu_csv = "".join((FIXTURES / "synthetic" / "smi-query-gpu-h20x2-noheader-nounits.csv").read_text())
    apps_csv = "pid, process_name, used_gpu_memory [MiB], gpu_uuid\n2811, python3, 81920 MiB, %s\n" % H20_UUID
    args = {
        "nvidia_smi_path": fake_nvidia_smi(tmp_path, gpu_csv=gpu_csv, apps_csv=apps_csv),
        "proc_root": proc_root,
        "host_root": str(tmp_path),
        "pod_resources_socket": str(tmp_path / "missing.sock"),
        "checkpoint_path": str(checkpoint),
    }
    facts = run_module(args, capsys)["ansible_facts"]["gpu_process_facts"]
    assert [gpu["uuid"] for gpu in facts["gpus"]] == [H20_UUID, "GPU-9b1e7c3d-2f4a-4b6c-8d0e-1a2b3c4d5e6f"]
    identity = facts["processes"][0]["kubernetes"]
    assert (identity["kind"], identity["pod_uid"], identity["runtime"], identity["namespace"], identity["pod_name"]) == (
        "pod",
        POD_UID,
        "containerd",
        "ai",
        "vllm-0",
    )
    assert facts["allocations"]["source"] == "checkpoint" and len(facts["allocations"]["allocations"]) == 2


def test_allocations_from_the_kubelets_pod_resources_api(node, capsys, monkeypatch):
    """grpcio installed and a kubelet (a real grpcio server) on the socket: the API answers, not the checkpoint."""
    grpc = pytest.importorskip("grpc")
    monkeypatch.setattr(gpu_process_facts, "grpc", grpc)
    hold = {"name": "gpu-demo-hold", "namespace": "gpu-operator", "containers": [
        {"name": "hold", "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": [H200_UUID], "numa_nodes": [0]}]}]}
    answers = {
        "List": lambda request, context: kubelet_side.encode_list_response([hold]),
        "GetAllocatableResources": lambda request, context: kubelet_side.encode_allocatable_response(
            [{"resource_name": "nvidia.com/gpu", "device_ids": [H200_UUID], "numa_nodes": [0]}]),
    }
    directory = tempfile.mkdtemp(prefix="pr")  # short: unix socket paths are limited to 108 bytes
    socket_path = directory + "/kubelet.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handlers = {name: grpc.unary_unary_rpc_method_handler(answer) for name, answer in answers.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_pod_resources.SERVICE, handlers),))
    server.add_insecure_port("unix:" + socket_path)
    server.start()
    try:
        facts = run_module(dict(node, pod_resources_socket=socket_path), capsys)["ansible_facts"]["gpu_process_facts"]
    finally:
        server.stop(0)
        shutil.rmtree(directory, ignore_errors=True)
    assert facts["allocations"] == {
        "source": "pod-resources-grpc",
        "allocations": [{"pod_uid": None, "namespace": "gpu-operator", "pod_name": "gpu-demo-hold", "container_name": "hold",
                         "resource_name": "nvidia.com/gpu", "device_ids": [H200_UUID]}],
        "allocatable": {"nvidia.com/gpu": [H200_UUID]},
        "errors": [],
    }
