"""The simulated containers' nvidia-smi sees the GPUs and MIG devices the runtime gave them (tests/sim/fake_nvidia_smi.py),
and the sim numbers MIG capability devices as the kernel driver does (tests/sim/topology.py)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim"))
import fake_nvidia_smi  # noqa: E402  pylint: disable=wrong-import-position
import topology  # noqa: E402  pylint: disable=wrong-import-position


def mig_gpu():
    node = {"name": "prod104", "gpu": {"product": "NVIDIA H100 80GB HBM3", "count": 1, "memory_mib": 81559,
                                       "mig": {"profile": "1g.10gb", "per_gpu": 2}, "allocation": "dra"}}
    gpu = topology.node_gpus(node).gpus[0]
    return {"index": gpu.index, "uuid": gpu.uuid, "name": gpu.name, "minor": gpu.minor, "mig_devices": gpu.mig_devices}


def test_mig_capability_minors_follow_the_drivers_mig_minors_file():
    # NVIDIA's internal/common/nvcaps.go quotes /proc/driver/nvidia-caps/mig-minors: gpu0/gi0/access 3,
    # gpu0/gi0/ci0/access 4, gpu3/gi3/ci3/access 439, gpu6/gi11/ci7/access 920.
    first = topology.mig_instance(0, "1g.10gb", -7)
    assert (first["gi"], first["gi_cap_minor"], first["ci_cap_minor"]) == (0, 3, 4)
    assert topology.mig_instance(3, "1g.10gb", -4)["gi_cap_minor"] + 1 + 3 == 439
    assert topology.mig_instance(6, "1g.10gb", 4)["gi_cap_minor"] + 1 + 7 == 920
    # The 1-slice instances of a GPU are GPU instances 7, 8, ... with compute instance 0.
    assert [(mig["gi"], mig["ci"]) for mig in mig_gpu()["mig_devices"]] == [(7, 0), (8, 0)]


def visible(gpus, nodes):
    return fake_nvidia_smi.visible_from_environment(gpus, {"GPUOPS_SIM_DEVICE_NODES": ",".join(nodes),
                                                           "NVIDIA_VISIBLE_DEVICES": "void"}, "/nonexistent")


def test_a_mig_device_is_seen_with_its_parent_and_both_capability_nodes():
    gpu = mig_gpu()
    second = gpu["mig_devices"][1]
    caps = ["/dev/nvidia-caps/nvidia-cap{0}".format(second[key]) for key in ("gi_cap_minor", "ci_cap_minor")]
    seen = visible([gpu], ["/dev/nvidia0"] + caps)
    assert seen == [{"gpu": 0, "mig": None}, {"gpu": 0, "mig": 1}]
    listed = fake_nvidia_smi.list_gpus([gpu], seen).splitlines()
    assert listed == ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: {0})".format(gpu["uuid"]),
                      "  MIG 1g.10gb     Device  1: (UUID: {0})".format(second["uuid"])]


def test_without_the_capability_nodes_a_mig_gpu_shows_no_mig_device():
    gpu = mig_gpu()
    first = gpu["mig_devices"][0]
    assert visible([gpu], ["/dev/nvidia0"]) == [{"gpu": 0, "mig": None}]
    only_gi = ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap{0}".format(first["gi_cap_minor"])]
    assert visible([gpu], only_gi) == [{"gpu": 0, "mig": None}]
    # The capability nodes without the parent's node open nothing.
    caps = ["/dev/nvidia-caps/nvidia-cap{0}".format(first[key]) for key in ("gi_cap_minor", "ci_cap_minor")]
    assert visible([gpu], caps) == []
