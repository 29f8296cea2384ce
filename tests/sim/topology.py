"""Topology files (tests/sim/topologies/*.yaml) -> the fake nodes' GPUs and the Node objects to register.

The schema is documented at the top of topologies/default.yaml.
"""
from __future__ import annotations

import hashlib
import uuid as uuidlib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

TOPOLOGIES = Path(__file__).resolve().parent / "topologies"
# NVIDIA's device plugin: DEVICE_LIST_STRATEGY and DEVICE_ID_STRATEGY (api/config/v1/strategy.go, consts.go).
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
ALLOCATIONS = ("device_plugin", "dra")


class TopologyError(ValueError):
    pass


@dataclass
class Gpu:
    index: int
    uuid: str
    name: str
    memory_mib: int
    used_mib: int = 0
    mig_devices: list = field(default_factory=list)   # [{"index", "uuid", "profile"}]
    minor: int = -1   # its /dev/nvidiaN; the index unless given

    def __post_init__(self):
        if self.minor < 0:
            self.minor = self.index


@dataclass
class NodeGpus:
    """What the fake device plugin advertises on one node, and what each unit maps to."""

    resource: str
    gpus: list
    replicas: int = 1
    fail_requests_greater_than_one: bool = False
    device_list_strategy: tuple = ("envvar",)
    device_id_strategy: str = "uuid"
    ledger_bypass: bool = False
    processes: list = field(default_factory=list)
    allocation: str = "device_plugin"   # or "dra": the GPUs are ResourceSlices of driver gpu.nvidia.com

    @property
    def dra(self) -> bool:
        return self.allocation == "dra"

    @property
    def units(self) -> list:
        """Device IDs the plugin registers, each naming the physical GPU (and MIG device) it stands for."""
        units = []
        for gpu in self.gpus:
            if gpu.mig_devices:
                units.extend({"id": mig["uuid"], "gpu": gpu, "mig": mig} for mig in gpu.mig_devices)
            elif self.replicas > 1:
                units.extend({"id": f"{gpu.uuid}::{replica}", "gpu": gpu, "mig": None} for replica in range(self.replicas))
            else:
                units.append({"id": gpu.uuid, "gpu": gpu, "mig": None})
        return units


def _stable_uuid(prefix: str, *parts) -> str:
    digest = hashlib.sha256("/".join(str(part) for part in parts).encode()).digest()
    return f"{prefix}-{uuidlib.UUID(bytes=digest[:16])}"


def load(path_or_name: str | Path) -> dict:
    path = Path(path_or_name)
    if not path.suffix:
        path = TOPOLOGIES / f"{path_or_name}.yaml"
    if not path.exists():
        raise TopologyError(f"topology {path_or_name!r}: no such file {path}")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise TopologyError(f"topology {path}: 'nodes' must be a non-empty list")
    names = [node.get("name") for node in data["nodes"]]
    if len(set(names)) != len(names) or not all(names):
        raise TopologyError(f"topology {path}: every node needs a unique 'name' (got {names})")
    for node in data["nodes"]:
        node_gpus(node)   # validate early, with the file's name in the message
    return data


def node_gpus(node: dict) -> NodeGpus | None:
    spec = node.get("gpu")
    if not spec:
        return None
    if spec.get("nvml"):
        return real_gpus(spec)
    count = int(spec.get("count", 1))
    product = spec.get("product", "NVIDIA H20")
    uuids = spec.get("uuids") or [_stable_uuid("GPU", node["name"], index) for index in range(count)]
    if len(uuids) != count:
        raise TopologyError(f"node {node['name']}: gpu.uuids has {len(uuids)} entries, gpu.count is {count}")
    list_strategy, id_strategy = strategies(node["name"], spec)
    allocation = allocation_of(node["name"], spec)
    used = {int(index): int(mib) for index, mib in (spec.get("memory_used_mib") or {}).items()}
    minors = [int(minor) for minor in spec.get("minors") or range(count)]
    if len(minors) != count or len(set(minors)) != count:
        raise TopologyError(f"node {node['name']}: gpu.minors needs {count} distinct numbers, got {spec.get('minors')}")
    mig = spec.get("mig")
    gpus = []
    for index, gpu_uuid in enumerate(uuids):
        gpu = Gpu(index=index, uuid=gpu_uuid, name=product, memory_mib=int(spec.get("memory_mib", 97871)),
                  used_mib=used.get(index, 0), minor=minors[index])
        if mig:
            gpu.mig_devices = [dict({"index": mig_index, "profile": mig["profile"],
                                     "uuid": _stable_uuid("MIG", gpu_uuid, mig_index)},
                                    **mig_instance(minors[index], mig["profile"], mig_index))
                               for mig_index in range(int(mig.get("per_gpu", 7)))]
        gpus.append(gpu)
    if mig and any(name.startswith("cdi-") for name in list_strategy):
        raise TopologyError(f"node {node['name']}: the CDI strategies are not simulated on MIG devices")
    resource = spec.get("resource") or (f"nvidia.com/mig-{mig['profile']}" if mig else "nvidia.com/gpu")
    return NodeGpus(resource=resource, gpus=gpus, replicas=int(spec.get("replicas", 1)),
                    fail_requests_greater_than_one=bool(spec.get("fail_requests_greater_than_one", False)),
                    device_list_strategy=list_strategy, device_id_strategy=id_strategy, ledger_bypass=bool(spec.get("ledger_bypass", False)),
                    processes=list(spec.get("processes") or []), allocation=allocation)


# The first GPU-instance ID NVML gives a GPU's instances of a profile, by its slice count (the 1-slice instances of an
# A100 or H100 are GI 7 to 13, the 2-slice ones 3 to 5, the 3-slice ones 1 and 2, the 7-slice one 0).
MIG_FIRST_GI_IDS = {1: 7, 2: 3, 3: 1, 4: 0, 7: 0}
# /proc/driver/nvidia-caps/mig-minors: gpu<m>/gi<g>/access is 3 + 135 m + 9 g, its ci<c>/access 1 + c above it (15 GPU
# instances of 8 compute instances per GPU, after config 1 and monitor 2: NVIDIA's internal/common/nvcaps.go lists
# gpu3/gi3/ci3/access 439 and gpu6/gi11/ci7/access 920).


def mig_instance(gpu_minor: int, profile: str, position: int) -> dict:
    """A MIG device's GPU and compute instance IDs and their capability devices' minors (/dev/nvidia-caps/nvidia-cap<N>),
    as the kernel driver numbers them: the container must be given both to open the MIG device."""
    slices = int(profile.split("g.", 1)[0])
    gi, ci = MIG_FIRST_GI_IDS.get(slices, 7) + position, 0
    gi_cap = 3 + 135 * gpu_minor + 9 * gi
    return {"gi": gi, "ci": ci, "gi_cap_minor": gi_cap, "ci_cap_minor": gi_cap + 1 + ci}


def real_gpus(spec: dict) -> NodeGpus:
    """`gpu: {nvml: true}`: this machine's own GPUs, as NVML reports them (a GPU machine, tests/device)."""
    import nvml_gpus  # pylint: disable=import-outside-toplevel  # needs pynvml and a driver
    gpus = [Gpu(index=gpu["index"], uuid=gpu["uuid"], name=gpu["name"], memory_mib=gpu["memory_mib"], minor=gpu["minor"])
            for gpu in nvml_gpus.read_gpus()]
    if not gpus:
        raise TopologyError("gpu.nvml: NVML reports no GPU on this machine")
    list_strategy, id_strategy = strategies("nvml", spec)
    return NodeGpus(resource=spec.get("resource", "nvidia.com/gpu"), gpus=gpus,
                    device_list_strategy=list_strategy, device_id_strategy=id_strategy, allocation=allocation_of("nvml", spec))


def allocation_of(node: str, spec: dict) -> str:
    """gpu.allocation: device_plugin (the default) or dra."""
    allocation = spec.get("allocation", "device_plugin")
    if allocation not in ALLOCATIONS:
        raise TopologyError(f"node {node}: gpu.allocation must be one of {ALLOCATIONS}, got {allocation!r}")
    return allocation


def strategies(node: str, spec: dict) -> tuple:
    """gpu.device_list_strategy (one name, a comma-separated list or a list) and gpu.device_id_strategy."""
    value = spec.get("device_list_strategy", "envvar")
    names = tuple(part.strip() for part in (value.split(",") if isinstance(value, str) else value))
    for name in names:
        if name not in DEVICE_LIST_STRATEGIES:
            raise TopologyError(f"node {node}: gpu.device_list_strategy must be among {DEVICE_LIST_STRATEGIES}, got {name!r}")
    id_strategy = spec.get("device_id_strategy", "uuid")
    if id_strategy not in DEVICE_ID_STRATEGIES:
        raise TopologyError(f"node {node}: gpu.device_id_strategy must be one of {DEVICE_ID_STRATEGIES}, got {id_strategy!r}")
    return names, id_strategy


def node_labels(node: dict, gpus: NodeGpus | None) -> dict:
    labels = {"kubernetes.io/hostname": node["name"], "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "type": "kwok-like-fake", "gpuops.sim/fake-node": "true"}
    if gpus:
        spec = node["gpu"]
        labels.update({
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": gpus.gpus[0].name.replace(" ", "-"),
            "nvidia.com/gpu.count": str(len(gpus.gpus)),
            "nvidia.com/gpu.memory": str(gpus.gpus[0].memory_mib),
            "nvidia.com/gpu.replicas": str(gpus.replicas),
            "nvidia.com/mig.strategy": "mixed" if spec.get("mig") else "none",
        })
        if gpus.replicas > 1:
            labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    labels.update(node.get("labels") or {})
    return labels


def node_object(node: dict, kubelet_port: int) -> tuple[dict, dict]:
    """(Node object to create, its status) for a topology node. Addresses are loopback only."""
    gpus = node_gpus(node)
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    if gpus and not gpus.dra:
        capacity[gpus.resource] = str(len(gpus.units))
        if gpus.resource.startswith("nvidia.com/mig-"):
            # Mixed MIG strategy: whole GPUs are all partitioned.
            capacity["nvidia.com/gpu"] = "0"
    body = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node["name"], "labels": node_labels(node, gpus),
                     "annotations": {"gpuops.sim/managed-by": "fakelet", "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"unschedulable": bool(node.get("unschedulable", False)), "taints": node.get("taints") or []},
    }
    status = {
        "capacity": capacity, "allocatable": dict(capacity),
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": node["name"]}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        "nodeInfo": {"kubeletVersion": "v1.36.3", "kubeProxyVersion": "", "containerRuntimeVersion": "containerd://1.7.0-fake",
                     "operatingSystem": "linux", "architecture": "amd64", "osImage": "gpuops simulated node",
                     "kernelVersion": "6.1.0", "machineID": node["name"], "systemUUID": node["name"], "bootID": node["name"]},
    }
    return body, status
