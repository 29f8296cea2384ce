# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kubernetes identity from /proc/<pid>/cgroup: one line per runtime, driver and cgroup version."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._node import cgroup as _cgroup

UID = "0f5e6a8c-1234-4b7e-9a9a-1234567890ab"
UID_ = UID.replace("-", "_")  # the systemd driver's spelling
STATIC_UID = "3d1c6b2f0e9a8d7c6b5a4f3e2d1c0b9a"  # static pods: a hash, no dashes
CID = "3f2a0c5d8e7b6a594837261504f3e2d1c0b9a8f7e6d5c4b3a291807060504030"


@pytest.mark.parametrize(
    "text, uid, container_id, runtime, qos",
    [
        pytest.param(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice/cri-containerd-%s.scope\n" % (UID_, CID),
            UID,
            CID,
            "containerd",
            "besteffort",
            id="v2-systemd-containerd-besteffort",
        ),
        pytest.param(
            "0::/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%s.scope\n" % (UID_, CID),
            UID,
            CID,
            "containerd",
            "guaranteed",
            id="v2-systemd-containerd-guaranteed",
        ),
        pytest.param(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/crio-%s.scope\n" % (UID_, CID),
            UID,
            CID,
            "cri-o",
            "burstable",
            id="v2-systemd-crio",
        ),
        pytest.param(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/crio-conmon-%s.scope\n" % (UID_, CID),
            UID,
            CID,
            "cri-o",
            "burstable",
            id="v2-systemd-crio-conmon",
        ),
        pytest.param(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice/docker-%s.scope\n" % (UID_, CID),
            UID,
            CID,
            "docker",
            "besteffort",
            id="v2-systemd-docker",
        ),
        pytest.param(
            "12:pids:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{c}.scope\n"
            "11:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{c}.scope\n"
            "1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{c}.scope\n"
            "0::/\n".format(u=UID_, c=CID),
            UID,
            CID,
            "containerd",
            "burstable",
            id="v1-systemd-containerd",
        ),
        pytest.param(
            "11:memory:/kubepods/burstable/pod%s/%s\n10:cpu,cpuacct:/kubepods/burstable/pod%s/%s\n" % (UID, CID, UID, CID),
            UID,
            CID,
            None,
            "burstable",
            id="v1-cgroupfs-containerd-or-docker",
        ),
        pytest.param("4:devices:/kubepods/pod%s/%s\n" % (UID, CID), UID, CID, None, "guaranteed", id="v1-cgroupfs-guaranteed"),
        pytest.param("4:devices:/kubepods/besteffort/pod%s/crio-%s\n" % (UID, CID), UID, CID, "cri-o", "besteffort", id="v1-cgroupfs-crio"),
        pytest.param("0::/kubepods/besteffort/pod%s/%s\n" % (UID, CID), UID, CID, None, "besteffort", id="v2-cgroupfs-k3s"),
        pytest.param(
            "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod%s.slice/cri-containerd-%s.scope\n"
            % (UID_, CID),
            UID,
            CID,
            "containerd",
            "besteffort",
            id="v2-kind-nested",
        ),
        pytest.param(
            "0::/../../kubepods-besteffort-pod%s.slice/cri-containerd-%s.scope\n" % (UID_, CID),
            UID,
            CID,
            "containerd",
            "besteffort",
            id="v2-seen-from-another-cgroup-namespace",
        ),
        pytest.param(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/cri-containerd-%s.scope\n" % (STATIC_UID, CID),
            STATIC_UID,
            CID,
            "containerd",
            "burstable",
            id="v2-static-pod",
        ),
        pytest.param(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice\n" % UID_,
            UID,
            None,
            None,
            "besteffort",
            id="v2-pod-cgroup-without-container",
        ),
    ],
)
def test_pod_processes(text, uid, container_id, runtime, qos):
    identity = _cgroup.parse_cgroup(text)
    assert identity["kind"] == "pod"
    assert (identity["pod_uid"], identity["container_id"], identity["runtime"], identity["qos_class"]) == (uid, container_id, runtime, qos)
    assert "kubepods" in identity["cgroup_path"]


@pytest.mark.parametrize(
    "text, container_id, runtime, path",
    [
        pytest.param(
            "0::/process_api/3f64b9d5cf60dfb3aefc97a8d9e548a3\n", None, None, "/process_api/3f64b9d5cf60dfb3aefc97a8d9e548a3", id="real-h200-host-python"
        ),
        pytest.param("0::/system.slice/ollama.service\n", None, None, "/system.slice/ollama.service", id="v2-systemd-service"),
        pytest.param("0::/user.slice/user-1000.slice/session-3.scope\n", None, None, "/user.slice/user-1000.slice/session-3.scope", id="v2-login-session"),
        pytest.param(
            "12:memory:/user.slice\n1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n0::/user.slice/user-1000.slice/session-3.scope\n",
            None,
            None,
            "/user.slice/user-1000.slice/session-3.scope",
            id="v1-hybrid-host",
        ),
        pytest.param("0::/system.slice/docker-%s.scope\n" % CID, CID, "docker", "/system.slice/docker-%s.scope" % CID, id="v2-docker-run-outside-kubernetes"),
        pytest.param("12:memory:/docker/%s\n" % CID, CID, "docker", "/docker/%s" % CID, id="v1-cgroupfs-docker-run"),
        pytest.param(
            "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-%s.scope\n" % CID,
            CID,
            "podman",
            "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-%s.scope" % CID,
            id="v2-podman",
        ),
        pytest.param("0::/something/pod%s/x\n" % UID, None, None, "/something/pod%s/x" % UID, id="pod-like-name-outside-kubepods"),
    ],
)
def test_host_processes(text, container_id, runtime, path):
    identity = _cgroup.parse_cgroup(text)
    assert identity == {"kind": "host", "pod_uid": None, "container_id": container_id, "runtime": runtime, "qos_class": None, "cgroup_path": path}


def test_empty_cgroup_text_is_an_error():
    with pytest.raises(ValueError):
        _cgroup.parse_cgroup("\n")


# --- pod names from the runtime's state ----------------------------------------------------------------
CONTAINERD_SPEC = {
    "ociVersion": "1.1.0",
    "annotations": {
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.container-name": "vllm",
        "io.kubernetes.cri.sandbox-name": "vllm-0",
        "io.kubernetes.cri.sandbox-namespace": "ai",
        "io.kubernetes.cri.sandbox-uid": UID,
    },
}
CRIO_SPEC = {
    "annotations": {
        "io.kubernetes.container.name": "hold",
        "io.kubernetes.pod.name": "gpu-demo-hold",
        "io.kubernetes.pod.namespace": "gpu-operator",
        "io.kubernetes.pod.uid": UID,
    }
}
DOCKER_CONFIG = {
    "ID": CID,
    "Config": {
        "Labels": {
            "io.kubernetes.container.name": "cuda",
            "io.kubernetes.pod.name": "cuda-job-x7k2p",
            "io.kubernetes.pod.namespace": "batch",
            "io.kubernetes.pod.uid": UID,
        }
    },
}


@pytest.mark.parametrize(
    "document, expected",
    [
        (CONTAINERD_SPEC, {"namespace": "ai", "pod_name": "vllm-0", "pod_uid": UID, "container_name": "vllm"}),
        (CRIO_SPEC, {"namespace": "gpu-operator", "pod_name": "gpu-demo-hold", "pod_uid": UID, "container_name": "hold"}),
        (DOCKER_CONFIG, {"namespace": "batch", "pod_name": "cuda-job-x7k2p", "pod_uid": UID, "container_name": "cuda"}),
        ({"annotations": {}}, {"namespace": None, "pod_name": None, "pod_uid": None, "container_name": None}),
    ],
)
def test_container_metadata(document, expected):
    assert _cgroup.parse_container_metadata(json.dumps(document)) == expected


def test_container_metadata_paths():
    assert _cgroup.container_metadata_paths("cri-o", CID, "/host/") == ["/host/run/containers/storage/overlay-containers/%s/userdata/config.json" % CID]
    everywhere = _cgroup.container_metadata_paths(None, CID)
    assert everywhere[0] == "/run/containerd/io.containerd.runtime.v2.task/k8s.io/%s/config.json" % CID
    assert everywhere[-1] == "/var/lib/docker/containers/%s/config.v2.json" % CID
    assert len(everywhere) == 4


# --- read_process over a fake /proc and runtime tree ----------------------------------------------------
def make_process(proc, pid, cgroup, comm="python3", cmdline=("python3", "-m", "vllm.entrypoints.openai.api_server")):
    directory = proc / str(pid)
    directory.mkdir(parents=True)
    (directory / "cgroup").write_text(cgroup)
    (directory / "comm").write_text(comm + "\n")
    (directory / "cmdline").write_text("\0".join(cmdline) + "\0")
    return directory


def test_read_process_pod_with_name_from_containerd(tmp_path):
    proc = tmp_path / "proc"
    make_process(proc, 2811, "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice/cri-containerd-%s.scope\n" % (UID_, CID))
    bundle = tmp_path / "run/containerd/io.containerd.runtime.v2.task/k8s.io" / CID
    bundle.mkdir(parents=True)
    (bundle / "config.json").write_text(json.dumps(CONTAINERD_SPEC))
    seen = _cgroup.read_process(2811, "/usr/bin/python3", str(proc), str(tmp_path))
    assert seen["comm"] == "python3"
    assert seen["cmdline"] == "python3 -m vllm.entrypoints.openai.api_server"
    assert seen["kubernetes"]["kind"] == "pod"
    assert (seen["kubernetes"]["namespace"], seen["kubernetes"]["pod_name"], seen["kubernetes"]["container_name"]) == ("ai", "vllm-0", "vllm")


def test_read_process_bare_id_finds_the_runtime_that_has_it(tmp_path):
    proc = tmp_path / "proc"
    make_process(proc, 77, "11:memory:/kubepods/burstable/pod%s/%s\n" % (UID, CID))
    container = tmp_path / "var/lib/docker/containers" / CID
    container.mkdir(parents=True)
    (container / "config.v2.json").write_text(json.dumps(DOCKER_CONFIG))
    assert _cgroup.read_process(77, None, str(proc), str(tmp_path))["kubernetes"]["pod_name"] == "cuda-job-x7k2p"


def test_read_process_metadata_of_another_pod_is_not_used(tmp_path):
    proc = tmp_path / "proc"
    make_process(proc, 78, "0::/kubepods/besteffort/pod%s/%s\n" % (UID, CID))
    bundle = tmp_path / "run/containerd/io.containerd.runtime.v2.task/k8s.io" / CID
    bundle.mkdir(parents=True)
    other = dict(CONTAINERD_SPEC, annotations=dict(CONTAINERD_SPEC["annotations"], **{"io.kubernetes.cri.sandbox-uid": STATIC_UID}))
    (bundle / "config.json").write_text(json.dumps(other))
    identity = _cgroup.read_process(78, None, str(proc), str(tmp_path))["kubernetes"]
    assert identity["pod_uid"] == UID and identity["pod_name"] is None


def test_read_process_pod_without_readable_metadata_keeps_its_uid(tmp_path):
    proc = tmp_path / "proc"
    make_process(proc, 79, "0::/kubepods.slice/kubepods-pod%s.slice/crio-%s.scope\n" % (UID_, CID))
    identity = _cgroup.read_process(79, "python3", str(proc), str(tmp_path))["kubernetes"]
    assert (identity["kind"], identity["pod_uid"], identity["runtime"], identity["pod_name"]) == ("pod", UID, "cri-o", None)


def test_read_process_host(tmp_path):
    proc = tmp_path / "proc"
    make_process(proc, 418, "0::/process_api/3f64b9d5cf60dfb3aefc97a8d9e548a3\n", cmdline=("python3", "-c", "import torch"))
    seen = _cgroup.read_process(418, "python3", str(proc))
    assert seen["kubernetes"]["kind"] == "host" and seen["cmdline"] == "python3 -c import torch"


def test_read_process_that_exited(tmp_path):
    seen = _cgroup.read_process(4242, "python3", str(tmp_path / "proc"))
    assert seen == {
        "comm": None,
        "cmdline": None,
        "kubernetes": {"kind": "unreadable", "reason": "cannot read %s/proc/4242/cgroup: the process has exited" % tmp_path},
    }


def test_read_process_without_permission(tmp_path, monkeypatch):
    proc = tmp_path / "proc"
    make_process(proc, 900, "0::/system.slice/x.service\n")
    real_read = _cgroup._read

    def deny_cgroup(path):
        if path.endswith("/cgroup"):
            raise PermissionError(13, "Permission denied")
        return real_read(path)

    monkeypatch.setattr(_cgroup, "_read", deny_cgroup)
    identity = _cgroup.read_process(900, None, str(proc))["kubernetes"]
    assert identity["kind"] == "unreadable" and identity["reason"].endswith("permission denied")


def test_read_process_in_another_pid_namespace_is_not_guessed(tmp_path):
    proc = tmp_path / "proc"
    make_process(proc, 418, "0::/system.slice/sshd.service\n", comm="sshd", cmdline=("sshd: root@pts/0",))
    identity = _cgroup.read_process(418, "python3", str(proc))["kubernetes"]
    assert identity["kind"] == "unreadable" and "another PID namespace" in identity["reason"]


@pytest.mark.parametrize(
    "reported, comm, argv0, exe",
    [
        ("python3", "python3", None, None),
        ("/usr/bin/python3", "python3", None, None),
        ("tritonserver-long-name", "tritonserver-lo", None, None),  # comm keeps 15 characters
        ("python3.12", "python3", "python3", "/usr/bin/python3.12"),  # the driver names the link's target
        ("vllm", "pt_main_thread", "/opt/venv/bin/vllm", None),  # a thread renamed comm
        ("python3 -m vllm.entrypoints.openai.api_server", "python3", "python3", None),  # the whole command line
        ("/usr/bin/python3 -m a/b", "python3", "/usr/bin/python3", None),
        ("VLLM::EngineCore", "VLLM::EngineCor", "VLLM::EngineCore", None),  # setproctitle
    ],
)
def test_same_process_tolerates_how_names_are_spelled(reported, comm, argv0, exe):
    assert _cgroup._same_process(reported, comm, argv0, exe)


@pytest.mark.parametrize(
    "reported, comm, argv0, exe",
    [
        ("python3", "sshd", "sshd: root@pts/0", "/usr/sbin/sshd"),
        ("/opt/torch/.venv/bin/python3", "bash", "-bash", None),
        ("python3 train.py", "nginx", "nginx: worker process", None),
        ("", "python3", "python3", None),
    ],
)
def test_same_process_tells_another_process_apart(reported, comm, argv0, exe):
    assert not _cgroup._same_process(reported, comm, argv0, exe)


def test_read_process_uses_the_exe_link(tmp_path):
    proc = tmp_path / "proc"
    directory = make_process(proc, 5, "0::/\n", comm="python3", cmdline=("python3",))
    os.symlink("/usr/bin/python3.12", str(directory / "exe"))
    assert _cgroup.read_process(5, "python3.12", str(proc))["kubernetes"]["kind"] == "host"
