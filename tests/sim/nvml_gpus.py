"""A GPU machine's real GPUs, read through NVML (pynvml from the nvidia-ml-py package), for nodes whose topology
says `gpu: {nvml: true}`: our device plugin (or, with `allocation: dra`, our DRA driver) advertises these instead of a
topology's, and our runtime gives each container only its own (tests/sim/node/gpus.go).

  nvml_gpus.py table                          the GPUs as JSON (uuid, index, minor, bus_id, name, memory_mib)
  nvml_gpus.py health --faults FILE [--interval S]
                                              keep the plugin's faults file's "unhealthy" list in step with NVML

Health: a GPU is unhealthy when NVML can no longer answer for it (lost from the bus, fallen off, any NVML error
on a plain query). NVIDIA's plugin also watches XID events; a query per interval is the simpler, slower cousin.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def proc_bus_id(nvml_bus_id: str) -> str:
    """NVML's "00000000:18:00.0" as /proc/driver/nvidia/gpus names it: "0000:18:00.0"."""
    domain, rest = nvml_bus_id.split(":", 1)
    return f"{int(domain, 16):04x}:{rest}".lower()


# NVML's architecture and brand numbers as NVIDIA's go-nvlib names them (GetArchitectureAsString, GetBrandAsString),
# which is what NVIDIA's DRA driver publishes; by pynvml's constant names, so that no number is guessed here.
ARCHITECTURE_NAMES = {"KEPLER": "Kepler", "MAXWELL": "Maxwell", "PASCAL": "Pascal", "VOLTA": "Volta", "TURING": "Turing",
                      "AMPERE": "Ampere", "ADA": "Ada Lovelace", "HOPPER": "Hopper", "BLACKWELL": "Blackwell"}
BRAND_NAMES = {"TESLA": "Tesla", "QUADRO": "Quadro", "GEFORCE": "GeForce", "TITAN": "Titan", "NVIDIA": "Nvidia",
               "NVIDIA_RTX": "NvidiaRTX", "QUADRO_RTX": "QuadroRTX", "GEFORCE_RTX": "GeForceRTX", "TITAN_RTX": "TitanRTX"}


def _named(pynvml, prefix: str, names: dict, value) -> str:
    if value is None:
        return "Unknown"
    for suffix, name in names.items():
        if getattr(pynvml, prefix + suffix, None) == value:
            return name
    return "Unknown"


def cuda_version(nvml_value: int) -> str:
    """nvmlSystemGetCudaDriverVersion's 13000 as "13.0" (major.minor, as NVIDIA's driver builds cudaDriverVersion)."""
    return f"{nvml_value // 1000}.{nvml_value % 1000 // 10}"


def _optional(pynvml, call, *args, default=None):
    """An NVML query the DRA driver's attributes want but the table can do without (an old driver may lack it)."""
    try:
        return call(*args)
    except pynvml.NVMLError:
        return default


def read_gpus() -> list:
    import pynvml  # pylint: disable=import-outside-toplevel  # only on GPU machines
    pynvml.nvmlInit()
    try:
        driver = _text(_optional(pynvml, pynvml.nvmlSystemGetDriverVersion, default="0.0.0"))
        cuda = cuda_version(_optional(pynvml, pynvml.nvmlSystemGetCudaDriverVersion, default=0))
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = _optional(pynvml, pynvml.nvmlDeviceGetCudaComputeCapability, handle, default=(0, 0))
            gpus.append({"uuid": _text(pynvml.nvmlDeviceGetUUID(handle)), "index": index,
                         "minor": pynvml.nvmlDeviceGetMinorNumber(handle),
                         "bus_id": proc_bus_id(_text(pynvml.nvmlDeviceGetPciInfo(handle).busId)),
                         "name": _text(pynvml.nvmlDeviceGetName(handle)),
                         "memory_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20,
                         "memory_bytes": pynvml.nvmlDeviceGetMemoryInfo(handle).total,
                         "architecture": _named(pynvml, "NVML_DEVICE_ARCH_", ARCHITECTURE_NAMES,
                                                _optional(pynvml, pynvml.nvmlDeviceGetArchitecture, handle)),
                         "brand": _named(pynvml, "NVML_BRAND_", BRAND_NAMES, _optional(pynvml, pynvml.nvmlDeviceGetBrand, handle)),
                         "compute_capability": f"{major}.{minor}", "driver_version": driver, "cuda_driver_version": cuda})
        return gpus
    finally:
        pynvml.nvmlShutdown()


def dra_gpu(row: dict) -> dict:
    """One row of the GPU table as our DRA driver publishes it (tests/sim/node/dra_devices.go draGPU): what NVML tells
    NVIDIA's driver about a whole GPU (a MIG-mode GPU's instances are not read here)."""
    return {"minor": row["minor"], "uuid": row["uuid"], "productName": row["name"], "brand": row.get("brand", "Nvidia"),
            "architecture": row.get("architecture", "Unknown"), "cudaComputeCapability": row.get("compute_capability", "0.0"),
            "driverVersion": row.get("driver_version", "0.0.0"), "cudaDriverVersion": row.get("cuda_driver_version", "0.0"),
            "pciBusID": row["bus_id"], "memoryBytes": int(row.get("memory_bytes") or row["memory_mib"] << 20), "mig": []}


def unhealthy(uuids: list) -> list:
    import pynvml  # pylint: disable=import-outside-toplevel
    bad = []
    for uuid in uuids:
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            pynvml.nvmlDeviceGetMemoryInfo(handle)
        except pynvml.NVMLError:
            bad.append(uuid)
    return bad


def watch_health(faults: Path, interval: float) -> None:
    import pynvml  # pylint: disable=import-outside-toplevel
    uuids = [gpu["uuid"] for gpu in read_gpus()]
    pynvml.nvmlInit()
    last = None
    while True:
        bad = unhealthy(uuids)
        if bad != last:
            faults.write_text(json.dumps({"unhealthy": bad}) + "\n")
            print(f"nvml health: unhealthy {bad or 'none'}", flush=True)
            last = bad
        time.sleep(interval)


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("table")
    health = sub.add_parser("health")
    health.add_argument("--faults", required=True, type=Path)
    health.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.command == "table":
        print(json.dumps(read_gpus(), indent=1))
    else:
        watch_health(args.faults, args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
