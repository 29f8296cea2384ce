# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.
"""What the NVIDIA tools say about a node's GPUs, as plain data.

Two halves:

* pure parsers for text the NVIDIA tools print (``nvidia-smi -L``, ``--query-gpu`` /
  ``--query-compute-apps`` CSV, the ``NVIDIA_VISIBLE_DEVICES`` value). The role reads a hold pod's
  log with them (through the filters in plugins/filter/nvidia_smi.py) and the module falls back to
  them when NVML is unavailable;
* two readers of the live GPUs, one through NVML (``pynvml``) and one through ``nvidia-smi``, that
  return the same shapes. Each takes its dependency as an argument (the pynvml module, a command
  runner), so both are unit-tested with fakes and nothing here imports a third-party package.

Memory is always in bytes; percentages are integers; a value the tool cannot give is ``None``.
"""

from __future__ import annotations

import csv
import re

MIB = 1024 * 1024

# `nvidia-smi -L`: "GPU 0: NVIDIA H200 (UUID: GPU-6488a48c-...)". search(), not match(): log lines
# may carry a timestamp prefix (`kubectl logs --timestamps`).
_GPU_LINE = re.compile(r"\bGPU (?P<index>\d+): (?P<name>.+) \(UUID: (?P<uuid>GPU-[^)\s]+)\)")
# "  MIG 1g.18gb     Device  0: (UUID: MIG-3f2a...)" (R470+) and the R450 form
# "  MIG 3g.20gb Device 0: (UUID: MIG-GPU-<gpu uuid>/1/0)".
_MIG_LINE = re.compile(r"\bMIG (?P<profile>\S+)\s+Device\s+(?P<index>\d+): \(UUID: (?P<uuid>MIG-[^)\s]+)\)")

# Cells nvidia-smi prints when it has no value; `nounits` drops the brackets of the common ones.
_NO_VALUE = ("n/a", "not supported", "insufficient permissions", "unknown error")
_MISSING = frozenset(
    _NO_VALUE
    + tuple("[%s]" % cell for cell in _NO_VALUE)
    + ("[gpu is lost]", "[requested functionality has been deprecated]", "")
)
_HEADER_CELL = re.compile(r"^(?P<field>[a-z][a-z0-9_.]*)(?: \[(?P<unit>[^\]]+)\])?$")
_VALUE_WITH_UNIT = re.compile(r"^(?P<number>-?\d+(?:\.\d+)?) ?(?P<unit>KiB|MiB|GiB|%|W|MHz|C)$")
_BYTES_PER_UNIT = {"KiB": 1024, "MiB": MIB, "GiB": 1024 * MIB}
# Fields that are plain integers in nvidia-smi output (they carry no unit to recognise them by).
_INTEGER_FIELDS = frozenset(("index", "pid", "count", "minor_number", "fan.speed", "temperature.gpu"))
# Fields whose unit is MiB when `nounits` and `noheader` leave nothing to read it from.
_MIB_FIELDS = frozenset(
    ("memory.used", "memory.total", "memory.free", "memory.reserved", "used_memory", "used_gpu_memory")
)
_NO_PROCESSES = "no running processes found"

# The fields the reader below asks nvidia-smi for (the keys of parse_query_csv() rows), and the key each
# becomes in a GPU's dict.
_GPU_KEYS = {
    "index": "index",
    "uuid": "uuid",
    "name": "name",
    "pci.bus_id": "pci_bus_id",
    "memory.used": "memory_used_bytes",
    "memory.total": "memory_total_bytes",
    "utilization.gpu": "utilization_gpu_percent",
    "utilization.memory": "utilization_memory_percent",
    "mig.mode.current": "mig_mode",
}
GPU_QUERY_FIELDS = tuple(_GPU_KEYS) + ("driver_version",)
APPS_QUERY_FIELDS = ("pid", "process_name", "used_memory", "gpu_uuid")


class GpuInventoryError(Exception):
    """The GPUs could not be read. ``reason`` is one of the REASON_* codes, for callers and tests."""

    def __init__(self, message, reason):
        super().__init__(message)
        self.reason = reason


REASON_NO_DRIVER = "no_driver"
REASON_NO_PERMISSION = "no_permission"
REASON_NO_TOOL = "no_tool"
REASON_FAILED = "failed"


# ---------------------------------------------------------------------------------------------
# Pure parsers
# ---------------------------------------------------------------------------------------------
def parse_gpu_list(text):
    """Parse ``nvidia-smi -L`` output (or a log that contains it) into a list of GPUs.

    Each GPU is ``{index, name, uuid, mig_devices}``; each MIG device is
    ``{index, profile, uuid, parent_index, parent_uuid}``. MIG lines belong to the GPU line above
    them. Lines that are neither are ignored, so a whole pod log can be passed.
    """
    gpus = []
    for line in (text or "").splitlines():
        gpu = _GPU_LINE.search(line)
        if gpu:
            gpus.append(
                {
                    "index": int(gpu.group("index")),
                    "name": gpu.group("name").strip(),
                    "uuid": gpu.group("uuid"),
                    "mig_devices": [],
                }
            )
            continue
        mig = _MIG_LINE.search(line)
        if mig and gpus:
            parent = gpus[-1]
            parent["mig_devices"].append(
                {
                    "index": int(mig.group("index")),
                    "profile": mig.group("profile"),
                    "uuid": mig.group("uuid"),
                    "parent_index": parent["index"],
                    "parent_uuid": parent["uuid"],
                }
            )
    return gpus


# NVIDIA's device plugin with DEVICE_LIST_STRATEGY=volume-mounts sets NVIDIA_VISIBLE_DEVICES to this folder and
# mounts /dev/null at <folder>/<device> for each device; the toolkit (accept-nvidia-visible-devices-as-volume-mounts)
# then takes the device names from those mounts (k8s-device-plugin internal/plugin/server.go,
# updateResponseForDeviceMounts; nvidia-container-toolkit internal/config/image/cuda_image.go, requestsFromMounts).
DEVICE_LIST_ROOT = "/var/run/nvidia-container-devices"
# A demo pod lists the folder's entries, one full path a line (roles/gpu_demo/defaults gpu_demo_evidence_command).
_DEVICE_LIST_LINE = re.compile(r"(?:^|\s)" + re.escape(DEVICE_LIST_ROOT) + r"/(?P<name>[^/\s]+)\s*$")


def parse_visible_devices(value):
    """Interpret an ``NVIDIA_VISIBLE_DEVICES`` value as the NVIDIA container toolkit does.

    ``value`` is the variable's value, or ``None`` when it is unset. Returns
    ``{value, mode, devices, uuids, indexes}`` where ``mode`` is one of:

    * ``unset``: no variable. With CDI (the GPU Operator's default) a pod can still have GPUs.
    * ``void``: ``void`` or empty; the toolkit injects no GPU (NVIDIA's CDI specs set it so).
    * ``none``: no GPU, but the driver's libraries are mounted.
    * ``all``: every GPU of the node (how pods outside the ledger reach the cards).
    * ``mounts``: the value is ``/var/run/nvidia-container-devices``: the devices are the entries the
      device plugin mounted in that folder (see device_list_from_text), not the value.
    * ``list``: the comma-separated ``devices``; ``uuids`` holds the ``GPU-``/``MIG-`` ones and
      ``indexes`` the ``0`` / ``0:1`` ones (DEVICE_ID_STRATEGY=index).
    """
    stripped = (value or "").strip()
    if value is None:
        mode = "unset"
    elif stripped.lower() in ("", "void", "none", "all"):
        mode = stripped.lower() or "void"
    elif stripped.rstrip("/") == DEVICE_LIST_ROOT:
        mode = "mounts"
    else:
        return dict(value=value, mode="list", **classify_device_names(part.strip() for part in stripped.split(",")))
    return {"value": value, "mode": mode, "devices": [], "uuids": [], "indexes": []}


def classify_device_names(names):
    """``{devices, uuids, indexes}`` of device names: the ``GPU-``/``MIG-`` UUIDs and the ``0`` / ``0:1`` indexes."""
    devices = [device for device in names if device]
    return {
        "devices": devices,
        "uuids": [device for device in devices if device.startswith(("GPU-", "MIG-"))],
        "indexes": [device for device in devices if re.match(r"^\d+(?::\d+)?$", device)],
    }


def visible_devices_from_env(text):
    """Find ``NVIDIA_VISIBLE_DEVICES=...`` in ``env`` output or a log and interpret its value.

    The last assignment wins, as in a shell; no line at all means the variable is unset.
    """
    assignments = [re.search(r"(?:^|\s)NVIDIA_VISIBLE_DEVICES=(\S*)", line) for line in (text or "").splitlines()]
    values = [match.group(1) for match in assignments if match]
    return parse_visible_devices(values[-1] if values else None)


def device_list_from_text(text):
    """The device names a container's ``/var/run/nvidia-container-devices`` holds, from lines that print each
    entry's full path (``/var/run/nvidia-container-devices/GPU-...``), each once, in order; ``[]`` for none."""
    matches = [_DEVICE_LIST_LINE.search(line) for line in (text or "").splitlines()]
    return list(dict.fromkeys(match.group("name") for match in matches if match))


def parse_query_csv(text, fields=None):
    """Parse ``nvidia-smi --query-*=... --format=csv[,noheader][,nounits]`` output.

    Returns one dict per data row. Keys are ``fields`` when given (what the caller asked for: the
    header can name a column differently, e.g. ``used_memory`` is printed as
    ``used_gpu_memory [MiB]``), else the header's names without their unit. With ``fields`` a
    header line is optional and recognised by its shape.

    Values: ``None`` for ``[N/A]``, ``[Not Supported]`` and the like; memory in bytes (from a
    ``MiB`` unit in the cell or the header, or for the memory fields with ``nounits``);
    percentages, watts and clocks as numbers; the integer fields (index, pid, ...) as ints; the
    rest as stripped strings. Raises ValueError for a row whose cell count does not match.
    """
    rows = [row for row in csv.reader((text or "").splitlines(), skipinitialspace=True) if row]
    rows = [row for row in rows if not (len(row) == 1 and row[0].strip().lower() == _NO_PROCESSES)]
    header_units = None
    names = list(fields) if fields else None
    if rows and all(_HEADER_CELL.match(cell.strip()) for cell in rows[0]):
        header = [_HEADER_CELL.match(cell.strip()) for cell in rows.pop(0)]
        header_units = [match.group("unit") for match in header]
        names = names or [match.group("field") for match in header]
    if names is None:
        raise ValueError("nvidia-smi CSV without a header line: pass the queried fields")
    for row in rows:
        if len(row) != len(names):
            raise ValueError("nvidia-smi CSV row has %d cells, expected %d: %s" % (len(row), len(names), ", ".join(row)))
    units = header_units or [None] * len(names)
    return [
        {name: _convert_cell(name, row[position], units[position]) for position, name in enumerate(names)} for row in rows
    ]


def _convert_cell(field, cell, header_unit):
    value = cell.strip()
    if value.lower() in _MISSING:
        return None
    with_unit = _VALUE_WITH_UNIT.match(value)
    if with_unit:
        number, unit = with_unit.group("number"), with_unit.group("unit")
    elif header_unit and re.match(r"^-?\d+(?:\.\d+)?$", value):
        number, unit = value, header_unit
    elif field in _MIB_FIELDS and value.isdigit():
        number, unit = value, "MiB"
    elif field in _INTEGER_FIELDS and re.match(r"^-?\d+$", value):
        return int(value)
    else:
        return value
    if unit in _BYTES_PER_UNIT:
        return int(float(number) * _BYTES_PER_UNIT[unit])
    return float(number) if "." in number else int(number)


def nvidia_smi_failure(text):
    """Classify nvidia-smi's error text: ``(reason, message)`` or ``None`` when it is not an error."""
    lowered = (text or "").lower()
    if "couldn't communicate with the nvidia driver" in lowered or "driver not loaded" in lowered:
        return REASON_NO_DRIVER, "the NVIDIA driver is not loaded: " + text.strip()
    if "insufficient permissions" in lowered or "permission denied" in lowered:
        return REASON_NO_PERMISSION, "no permission to use the NVIDIA driver: " + text.strip()
    if "failed to initialize nvml" in lowered or "driver/library version mismatch" in lowered:
        return REASON_FAILED, text.strip()
    return None


# ---------------------------------------------------------------------------------------------
# Readers of the live GPUs. Both return {"driver_version", "gpus", "processes"}:
#   gpu:     index, uuid, name, pci_bus_id, memory_used_bytes, memory_total_bytes,
#            utilization_gpu_percent, utilization_memory_percent, mig_mode, mig_devices
#   mig:     index, uuid, profile, memory_used_bytes, memory_total_bytes
#   process: pid, name, gpu_uuid, gpu_index, mig_uuid, used_memory_bytes
# ---------------------------------------------------------------------------------------------
def read_with_nvidia_smi(run, nvidia_smi):
    """Read GPUs and compute processes with nvidia-smi's CSV output.

    ``run(argv)`` returns ``(rc, stdout, stderr)`` (AnsibleModule.run_command fits). MIG devices
    come from ``nvidia-smi -L``, asked only when a GPU has MIG enabled; their memory and the
    MIG device of each process are not in the CSV output and stay ``None``.
    """
    gpu_rows = _query(run, nvidia_smi, "--query-gpu", GPU_QUERY_FIELDS)
    gpus = [{key: row[field] for field, key in _GPU_KEYS.items()} for row in gpu_rows]
    for gpu in gpus:
        # "Enabled"/"Disabled"; None on GPUs without MIG (the value is [N/A] there).
        gpu["mig_mode"] = gpu["mig_mode"].lower() if isinstance(gpu["mig_mode"], str) else None
    listed = {}
    if any(gpu["mig_mode"] == "enabled" for gpu in gpus):
        rc, out, err = run([nvidia_smi, "-L"])
        if rc != 0:
            raise _command_error(rc, out, err, "-L")
        listed = {gpu["uuid"]: gpu["mig_devices"] for gpu in parse_gpu_list(out)}
    for gpu in gpus:
        gpu["mig_devices"] = [
            dict(index=mig["index"], uuid=mig["uuid"], profile=mig["profile"],
                 memory_used_bytes=None, memory_total_bytes=None)
            for mig in listed.get(gpu["uuid"], [])
        ]
    index_by_uuid = {gpu["uuid"]: gpu["index"] for gpu in gpus}
    app_rows = _query(run, nvidia_smi, "--query-compute-apps", APPS_QUERY_FIELDS)
    processes = [
        {
            "pid": row["pid"],
            "name": row["process_name"],
            "gpu_uuid": row["gpu_uuid"],
            "gpu_index": index_by_uuid.get(row["gpu_uuid"]),
            "mig_uuid": None,
            "used_memory_bytes": row["used_memory"],
        }
        for row in app_rows
    ]
    driver_versions = {row["driver_version"] for row in gpu_rows if row["driver_version"]}
    return {"driver_version": driver_versions.pop() if len(driver_versions) == 1 else None, "gpus": gpus, "processes": processes}


def _query(run, nvidia_smi, query, fields):
    argv = [nvidia_smi, query + "=" + ",".join(fields), "--format=csv"]
    rc, out, err = run(argv)
    if rc != 0:
        if "no devices were found" in (out + err).lower():
            return []
        raise _command_error(rc, out, err, " ".join(argv[1:]))
    try:
        return parse_query_csv(out, fields)
    except ValueError as exc:
        raise GpuInventoryError("unexpected output from nvidia-smi %s: %s" % (" ".join(argv[1:]), exc), REASON_FAILED)


def _command_error(rc, out, err, what):
    text = (err or "").strip() or (out or "").strip()
    classified = nvidia_smi_failure(text)
    if classified:
        return GpuInventoryError(classified[1], classified[0])
    return GpuInventoryError("nvidia-smi %s failed (rc=%s): %s" % (what, rc, text), REASON_FAILED)


def read_with_nvml(nvml):
    """Read GPUs and compute processes through NVML; ``nvml`` is the imported ``pynvml`` module.

    Initialises and shuts NVML down itself. NVML errors that mean "no driver" or "no permission"
    become GpuInventoryError with that reason.
    """
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise _nvml_error(nvml, exc, "NVML initialisation")
    try:
        gpus = []
        processes = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            gpu, mig_handles = _nvml_gpu(nvml, handle, index)
            gpus.append(gpu)
            processes.extend(_nvml_processes(nvml, handle, gpu, mig_handles))
        return {"driver_version": _text(nvml.nvmlSystemGetDriverVersion()), "gpus": gpus, "processes": processes}
    except nvml.NVMLError as exc:
        raise _nvml_error(nvml, exc, "NVML query")
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass  # nothing left to release; the answer above stands


def _nvml_error(nvml, exc, what):
    value = getattr(exc, "value", None)
    if value in (getattr(nvml, "NVML_ERROR_DRIVER_NOT_LOADED", None), getattr(nvml, "NVML_ERROR_LIBRARY_NOT_FOUND", None)):
        return GpuInventoryError("%s failed: the NVIDIA driver is not loaded or libnvidia-ml is missing (%s)" % (what, exc), REASON_NO_DRIVER)
    if value == getattr(nvml, "NVML_ERROR_NO_PERMISSION", None):
        return GpuInventoryError("%s failed: no permission to use the NVIDIA driver (%s)" % (what, exc), REASON_NO_PERMISSION)
    return GpuInventoryError("%s failed: %s" % (what, exc), REASON_FAILED)


def _nvml_optional(nvml, call, *args):
    """NVML calls a GPU may not support (utilisation on MIG, MIG mode on older GPUs): None, not an error."""
    try:
        return call(*args)
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) in (getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", None), getattr(nvml, "NVML_ERROR_NOT_FOUND", None)):
            return None
        raise


def _nvml_memory(nvml, handle):
    # The v2 structure's `used` leaves out the driver's reservation, as nvidia-smi does; v1 counts
    # it as used (about 600 MiB on an idle H200). Older bindings or drivers only have v1.
    version_2 = getattr(nvml, "nvmlMemory_v2", None)
    if version_2 is not None:
        try:
            return nvml.nvmlDeviceGetMemoryInfo(handle, version=version_2)
        except (TypeError, nvml.NVMLError):
            pass  # fall through to v1
    return nvml.nvmlDeviceGetMemoryInfo(handle)


def _nvml_gpu(nvml, handle, index):
    memory = _nvml_memory(nvml, handle)
    utilization = _nvml_optional(nvml, nvml.nvmlDeviceGetUtilizationRates, handle)
    mig = _nvml_optional(nvml, nvml.nvmlDeviceGetMigMode, handle)
    pci = _nvml_optional(nvml, nvml.nvmlDeviceGetPciInfo, handle)
    gpu = {
        "index": index,
        "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
        "name": _text(nvml.nvmlDeviceGetName(handle)),
        "pci_bus_id": _text(getattr(pci, "busId", None)),
        "memory_used_bytes": int(memory.used),
        "memory_total_bytes": int(memory.total),
        "utilization_gpu_percent": int(utilization.gpu) if utilization is not None else None,
        "utilization_memory_percent": int(utilization.memory) if utilization is not None else None,
        "mig_mode": None if mig is None else ("enabled" if mig[0] == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1) else "disabled"),
        "mig_devices": [],
    }
    mig_handles = []
    if gpu["mig_mode"] == "enabled":
        for mig_index in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
            mig_handle = _nvml_optional(nvml, nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, mig_index)
            if mig_handle is None:
                continue  # an unused slot in the GPU's MIG layout
            mig_memory = _nvml_memory(nvml, mig_handle)
            gpu["mig_devices"].append(
                {
                    "index": mig_index,
                    "uuid": _text(nvml.nvmlDeviceGetUUID(mig_handle)),
                    "profile": _mig_profile(_text(nvml.nvmlDeviceGetName(mig_handle))),
                    "memory_used_bytes": int(mig_memory.used),
                    "memory_total_bytes": int(mig_memory.total),
                }
            )
            mig_handles.append(mig_handle)
    return gpu, mig_handles


def _mig_profile(name):
    # NVML names a MIG device like its parent plus the profile: "NVIDIA A100-SXM4-40GB MIG 1g.5gb".
    match = re.search(r"MIG (\S+)$", name or "")
    return match.group(1) if match else name


def _nvml_processes(nvml, handle, gpu, mig_handles):
    """Compute processes of one GPU; with MIG, each MIG device is asked too, to learn where they run."""
    found = {}
    for process in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
        found[process.pid] = _nvml_process(nvml, process, gpu, None)
    for mig, mig_handle in zip(gpu["mig_devices"], mig_handles):
        for process in _nvml_optional(nvml, nvml.nvmlDeviceGetComputeRunningProcesses, mig_handle) or []:
            found[process.pid] = _nvml_process(nvml, process, gpu, mig["uuid"])
    return list(found.values())


def _nvml_process(nvml, process, gpu, mig_uuid):
    used = getattr(process, "usedGpuMemory", None)
    try:
        name = _text(nvml.nvmlSystemGetProcessName(process.pid))
    except nvml.NVMLError:
        name = None  # the caller falls back to /proc
    return {
        "pid": int(process.pid),
        "name": name,
        "gpu_uuid": gpu["uuid"],
        "gpu_index": gpu["index"],
        "mig_uuid": mig_uuid,
        # pynvml gives None when the driver withholds the number (NVML_VALUE_NOT_AVAILABLE).
        "used_memory_bytes": int(used) if used is not None else None,
    }


def _text(value):
    # pynvml returns str on recent versions and bytes on old ones.
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value
