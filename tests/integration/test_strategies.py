"""Every way NVIDIA's device plugin hands a GPU over (its DEVICE_LIST_STRATEGY, with DEVICE_ID_STRATEGY uuid or
index), on the simulated node whose plugin answers as NVIDIA's does and whose runtime does what containerd and
the NVIDIA container toolkit do with the answer: the demo passes and says in words which way the node uses, and a
plugin that names the wrong device fails it, naming the GPU two pods were both given.

(The variable with UUIDs is the default topology's, in test_gpu_demo.py; its wrong-device walk is in
test_real_kubelet.py. CDI names by index are walked with cdi-cri only: the plugin names its CDI devices the same way
in both CDI strategies, tests/sim/node/plugin_test.go.)
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_gpu_demo import assert_clean_pass, run_demo, topology  # noqa: F401  pylint: disable=unused-import  # the fixture

from conftest import CHECKOUT, SIM_SRC

UUIDS = "the device plugin passes UUIDs in NVIDIA_VISIBLE_DEVICES"
INDEXES = "the device plugin passes GPU indexes in NVIDIA_VISIBLE_DEVICES"
MOUNTS = "the device plugin mounts one file per GPU under /var/run/nvidia-container-devices"
CDI = "the device plugin hands the GPUs over through CDI"


def simctl(*args: str) -> None:
    subprocess.run([sys.executable, str(SIM_SRC / "simctl.py"), *args], check=True, cwd=CHECKOUT, stdout=subprocess.DEVNULL)


CASES = [
    ("strategy-envvar-index", "indexes", INDEXES, "indexes"),
    ("strategy-volume-mounts", "mounts", MOUNTS, "uuids"),
    ("strategy-volume-mounts-index", "mounts", MOUNTS, "indexes"),
    ("strategy-cdi-annotations", "cdi", CDI, None),
    ("cdi", "cdi", CDI, None),                      # cdi-cri, UUIDs
    ("strategy-cdi-cri-index", "cdi", CDI, None),   # device nodes that are not the indexes
]


@pytest.mark.parametrize("name, way, words, named", [pytest.param(*case, id=case[0]) for case in CASES])
def test_each_hand_over_passes_and_a_wrong_device_fails_naming_it(sim, topology, tmp_path, name, way, words, named):
    topology(name)
    gpus = json.loads((sim.dir.run / "nodes" / "prod102" / "gpus.json").read_text())["gpus"]
    run = run_demo(sim, tmp_path)
    assert_clean_pass(run)
    hold = run.result["hold"]
    assert hold["handovers"] == [way] and hold["distinct_uuids"] == sorted(gpu["uuid"] for gpu in gpus)
    detail = run.check("hold_env_corroborates")["detail"]
    assert detail.startswith(words), detail
    if named == "uuids":   # the device folder's entries are the GPUs nvidia-smi shows
        assert sorted(uuid for pod in hold["pods"] for uuid in pod["named"]) == hold["distinct_uuids"]
        assert "they name the GPUs nvidia-smi shows" in detail
    elif named == "indexes":
        assert sorted(index for pod in hold["pods"] for index in pod["named"]) == ["0", "1"]
    else:
        assert "nvidia-smi -L is the evidence" in detail
    assert words in run.markdown.read_text()

    # Every answer names the node's first GPU, whatever the kubelet allocated: both hold pods get it.
    simctl("fault", "prod102", json.dumps({"wrong_id": "first"}))
    try:
        wrong = run_demo(sim, tmp_path)
    finally:
        simctl("fault", "prod102", "{}")
    assert wrong.rc != 0, wrong.output[-3000:]
    failed = {check["id"]: check["detail"] for check in wrong.result["checks"] if not check["passed"]}
    assert "hold_one_gpu_per_unit" in failed, wrong.result["checks"]
    assert "{0} is shown in more than 1 hold pod".format(gpus[0]["uuid"]) in failed["hold_one_gpu_per_unit"]
