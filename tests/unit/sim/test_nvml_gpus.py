"""On a GPU machine our DRA driver publishes what NVML says about each GPU (tests/sim/nvml_gpus.py): pure parts only,
the NVML reads run on the lent H200 (tests/device/walkthrough.sh --dra)."""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim"))
import nvml_gpus  # noqa: E402  pylint: disable=wrong-import-position

# The H200's row as read_gpus writes it (values of tests/unit/fixtures/nvidia-smi-h200: driver 580.159.04, CUDA 13.0).
H200 = {"uuid": "GPU-6488a48c-7479-40ca-ba29-49824ecf04fa", "index": 0, "minor": 0, "bus_id": "0000:00:06.0",
        "name": "NVIDIA H200", "memory_mib": 143771, "memory_bytes": 143771 << 20, "architecture": "Hopper",
        "brand": "Nvidia", "compute_capability": "9.0", "driver_version": "580.159.04", "cuda_driver_version": "13.0"}


def test_the_dra_driver_publishes_the_real_gpu_as_nvml_reports_it():
    assert nvml_gpus.dra_gpu(H200) == {
        "minor": 0, "uuid": "GPU-6488a48c-7479-40ca-ba29-49824ecf04fa", "productName": "NVIDIA H200", "brand": "Nvidia",
        "architecture": "Hopper", "cudaComputeCapability": "9.0", "driverVersion": "580.159.04", "cudaDriverVersion": "13.0",
        "pciBusID": "0000:00:06.0", "memoryBytes": 143771 << 20, "mig": []}


def test_nvml_numbers_become_nvidias_names():
    assert nvml_gpus.cuda_version(13000) == "13.0" and nvml_gpus.cuda_version(12080) == "12.8"
    fake = types.SimpleNamespace(NVML_DEVICE_ARCH_HOPPER=9, NVML_DEVICE_ARCH_AMPERE=7, NVML_BRAND_NVIDIA=14)
    assert nvml_gpus._named(fake, "NVML_DEVICE_ARCH_", nvml_gpus.ARCHITECTURE_NAMES, 9) == "Hopper"
    assert nvml_gpus._named(fake, "NVML_BRAND_", nvml_gpus.BRAND_NAMES, 14) == "Nvidia"
    assert nvml_gpus._named(fake, "NVML_DEVICE_ARCH_", nvml_gpus.ARCHITECTURE_NAMES, 42) == "Unknown"
    assert nvml_gpus.proc_bus_id("00000000:00:06.0") == "0000:00:06.0"


def test_a_gpu_machines_dra_node_hands_its_driver_the_real_gpus(tmp_path, monkeypatch):
    # topology h200-dra on the H200: no device plugin config, and the driver's GPUs are NVML's table, not made up.
    import cluster  # pylint: disable=import-outside-toplevel
    import nodes  # pylint: disable=import-outside-toplevel
    import topology  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(nvml_gpus, "read_gpus", lambda: [dict(H200)])
    spec = topology.load("h200-dra")["nodes"][0]
    node = nodes.Node(cluster.SimDir(tmp_path, port_offset=0), spec, 0)
    assert node.dra and node.real_gpus and node.plugin_configs() == []
    node.write_files()
    config = json.loads((node.dir / "dra-driver.json").read_text())
    assert config == {"node": "prod102", "gpus": [nvml_gpus.dra_gpu(H200)]}


class NVMLError(Exception):
    pass


def stand_in_pynvml(brand_error=False):
    """The pynvml calls read_gpus makes, answering as the H200 did (a stand-in for the calls' names and shapes)."""
    def brand(_handle):
        if brand_error:
            raise NVMLError("Not Supported")
        return 14
    return types.SimpleNamespace(
        NVMLError=NVMLError, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: b"580.159.04", nvmlSystemGetCudaDriverVersion=lambda: 13000,
        nvmlDeviceGetCount=lambda: 1, nvmlDeviceGetHandleByIndex=lambda index: "gpu0",
        nvmlDeviceGetCudaComputeCapability=lambda handle: (9, 0), nvmlDeviceGetUUID=lambda handle: H200["uuid"],
        nvmlDeviceGetMinorNumber=lambda handle: 0,
        nvmlDeviceGetPciInfo=lambda handle: types.SimpleNamespace(busId=b"00000000:00:06.0"),
        nvmlDeviceGetName=lambda handle: b"NVIDIA H200",
        nvmlDeviceGetMemoryInfo=lambda handle: types.SimpleNamespace(total=143771 << 20),
        nvmlDeviceGetArchitecture=lambda handle: 9, nvmlDeviceGetBrand=brand,
        NVML_DEVICE_ARCH_HOPPER=9, NVML_DEVICE_ARCH_AMPERE=7, NVML_BRAND_NVIDIA=14, NVML_BRAND_TESLA=2)


def test_read_gpus_gives_the_table_the_driver_needs(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", stand_in_pynvml())
    assert nvml_gpus.read_gpus() == [H200]


def test_a_query_nvml_cannot_answer_leaves_its_attribute_unknown(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", stand_in_pynvml(brand_error=True))
    assert nvml_gpus.read_gpus()[0]["brand"] == "Unknown"
