"""`nvidia-smi` inside a simulated container: prints what the real one prints for the pod's GPUs.

The node's runtime puts a wrapper on every container's PATH that calls this with the node's GPU state file.
Which GPUs it lists is what the container was given, as containerd and the NVIDIA container toolkit give them:
the GPU device nodes its CDI devices injected (the runtime resolves them against the node's CDI specs and, there
being no real /dev/nvidiaN here, lists the injected nodes in GPUOPS_SIM_DEVICE_NODES; /dev/nvidiaN is the GPU
whose minor is N, and a MIG device of it is seen with its two /dev/nvidia-caps/nvidia-cap<N> nodes), and the
devices the toolkit's hook picks: the entries of /var/run/nvidia-container-devices
(the device plugin's volume mounts, which the runtime mounts in the container's own mount namespace), else
NVIDIA_VISIBLE_DEVICES (UUIDs, MIG UUIDs, indexes `0` / `0:3`, `all`; unset, empty, `void` and `none` give no
GPU). It never reads the allocation from anywhere else, so a device plugin that names the wrong device shows
here as the wrong GPU. (`--visible`,
a JSON list, overrides this for tools run on the node itself, which see every GPU.) Supported: `-L`, `--query-gpu=...` and `--query-compute-apps=...` with
`--format=csv[,noheader][,nounits]`, `-i`, and the plain table's first lines. Output formats follow the
real H200 captures in tests/unit/fixtures/nvidia-smi-h200.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.")


def list_gpus(gpus: list, visible: list) -> str:
    lines = []
    for position, gpu in enumerate(gpus):
        lines.append(f"GPU {position}: {gpu['name']} (UUID: {gpu['uuid']})")
        migs = [entry["mig"] for entry in visible if entry["gpu"] == gpu["index"] and entry["mig"] is not None]
        for mig in gpu.get("mig_devices") or []:
            if mig["index"] in migs:
                lines.append(f"  MIG {mig['profile']}     Device  {mig['index']}: (UUID: {mig['uuid']})")
    return "\n".join(lines)


DEVICE_LIST_DIR = "/var/run/nvidia-container-devices"


def device_names(environ, device_list_dir: str = DEVICE_LIST_DIR) -> list:
    """The devices the toolkit's hook picks: the device folder's entries when there are any, else the variable's."""
    try:
        entries = sorted(os.listdir(device_list_dir))
    except OSError:
        entries = []
    if entries:
        return entries
    names = [part.strip() for part in environ.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    return [] if "void" in names or "none" in names else names


def visible_from_environment(gpus: list, environ, device_list_dir: str = DEVICE_LIST_DIR) -> list:
    """[{"gpu": index, "mig": MIG index or None}] the container's devices, as the runtime and toolkit inject them."""
    visible = []

    def add(entry):
        if entry not in visible:
            visible.append(entry)

    nodes = set(filter(None, environ.get("GPUOPS_SIM_DEVICE_NODES", "").split(",")))
    for gpu in gpus:
        if f"/dev/nvidia{gpu.get('minor', gpu['index'])}" not in nodes:
            continue
        add({"gpu": gpu["index"], "mig": None})
        # A MIG device opens through its GPU instance's and compute instance's capability devices: with both, and its
        # parent's node, the container sees it (as a DRA driver's CDI spec for a MIG device gives them).
        for mig in gpu.get("mig_devices") or []:
            caps = {f"/dev/nvidia-caps/nvidia-cap{mig.get(key)}" for key in ("gi_cap_minor", "ci_cap_minor")}
            if "gi_cap_minor" in mig and caps <= nodes:
                add({"gpu": gpu["index"], "mig": mig["index"]})
    names = device_names(environ, device_list_dir)
    if "all" in names:
        for gpu in gpus:
            for mig in gpu.get("mig_devices") or [None]:
                add({"gpu": gpu["index"], "mig": mig["index"] if mig else None})
        return visible
    for name in names:
        for gpu in gpus:
            if name in (gpu["uuid"], str(gpu["index"])):
                add({"gpu": gpu["index"], "mig": None})
            for mig in gpu.get("mig_devices") or []:
                if name in (mig["uuid"], f"{gpu['index']}:{mig['index']}"):
                    add({"gpu": gpu["index"], "mig": mig["index"]})
    return visible


def gpu_fields(gpu: dict, position: int, units: bool, driver: str) -> dict:
    mib = " MiB" if units else ""
    return {
        "index": str(position), "uuid": gpu["uuid"], "name": gpu["name"], "gpu_name": gpu["name"],
        "memory.used": f"{gpu['used_mib']}{mib}", "memory.total": f"{gpu['memory_mib']}{mib}",
        "memory.free": f"{gpu['memory_mib'] - gpu['used_mib']}{mib}",
        "utilization.gpu": f"{min(100, gpu['used_mib'] * 100 // max(gpu['memory_mib'], 1))}{' %' if units else ''}",
        "driver_version": driver, "pci.bus_id": gpu["bus_id"],
        "mig.mode.current": "Enabled" if gpu.get("mig_devices") else "Disabled",
    }


def csv(rows: list, fields: list, header: bool, units: bool) -> str:
    lines = []
    if header:
        names = []
        for field in fields:
            suffix = " [MiB]" if units and field.startswith("memory.") or field == "used_memory" and units else ""
            names.append(field + suffix)
        lines.append(", ".join(names))
    for row in rows:
        lines.append(", ".join(row.get(field, "[N/A]") for field in fields))
    return "\n".join(lines)


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--node-state", required=True)
    parser.add_argument("--visible")
    parser.add_argument("-L", "--list-gpus", action="store_true")
    parser.add_argument("--query-gpu")
    parser.add_argument("--query-compute-apps")
    parser.add_argument("--format", default="")
    parser.add_argument("-i", "--id")
    args, _unknown = parser.parse_known_args(argv)
    with open(args.node_state, encoding="utf-8") as handle:
        state = json.load(handle)
    visible = json.loads(args.visible) if args.visible else visible_from_environment(state["gpus"], os.environ)
    indexes = sorted({entry["gpu"] for entry in visible})
    gpus = [gpu for gpu in state["gpus"] if gpu["index"] in indexes]
    if not gpus:
        print(NO_DRIVER)
        return 9
    if args.id is not None:
        gpus = [gpu for position, gpu in enumerate(gpus) if str(position) == args.id or gpu["uuid"] == args.id]
    formats = {part.strip() for part in args.format.split(",")}
    header, units = "noheader" not in formats, "nounits" not in formats
    if args.list_gpus:
        print(list_gpus(gpus, visible))
    elif args.query_gpu:
        fields = [field.strip() for field in args.query_gpu.split(",")]
        rows = [gpu_fields(gpu, position, units, state["driver_version"]) for position, gpu in enumerate(gpus)]
        print(csv(rows, fields, header, units))
    elif args.query_compute_apps:
        fields = [field.strip() for field in args.query_compute_apps.split(",")]
        uuids = {gpu["index"]: gpu["uuid"] for gpu in gpus}
        rows = [{"pid": str(proc["pid"]), "process_name": proc["name"], "gpu_uuid": uuids[proc["gpu"]],
                 "used_memory": f"{proc['used_mib']}{' MiB' if units else ''}"}
                for proc in state.get("processes") or [] if proc["gpu"] in uuids]
        print(csv(rows, fields, header, units))
    else:
        print(f"| NVIDIA-SMI 570.124.06    Driver Version: {state['driver_version']}    CUDA Version: {state['cuda_version']} |")
        for position, gpu in enumerate(gpus):
            print(f"|   {position}  {gpu['name']:<24} On | {gpu['bus_id']} Off | "
                  f"{gpu['used_mib']}MiB / {gpu['memory_mib']}MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
