# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.
"""Which Kubernetes pod and container a process belongs to, from ``/proc/<pid>/cgroup``.

The kubelet puts every pod in a cgroup named after the pod's UID, and the runtime puts each
container in a child cgroup named after the container ID. The names depend on the cgroup driver
and the runtime:

==========================  =====================================================================
systemd driver (v1 or v2)   /kubepods.slice/kubepods-burstable.slice/
                            kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope
                            (crio-<id>.scope for CRI-O, docker-<id>.scope for Docker)
cgroupfs driver             /kubepods/burstable/pod<uid>/<id>   (crio-<id> for CRI-O)
Guaranteed QoS              no besteffort/burstable level: kubepods-pod<uid>.slice, /kubepods/pod<uid>
==========================  =====================================================================

Under cgroup v1 the file has one line per hierarchy, under v2 a single ``0::`` line. The pod
segment is searched anywhere in the path, so nested layouts (kind, a cgroup namespace that shows
``/../..``) work too. Static pods have a 32-hex-digit UID without dashes.

The pod's name and namespace are not in the cgroup path; the runtime's state for the container
(OCI config annotations for containerd and CRI-O, labels for Docker) has them, and
``container_metadata_paths`` / ``parse_container_metadata`` read it when the caller may.
"""

from __future__ import annotations

import json
import os
import re

KIND_POD = "pod"
KIND_HOST = "host"
KIND_UNREADABLE = "unreadable"

_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32}"
# systemd driver: kubepods-pod<uid>.slice, kubepods-besteffort-pod<uid>.slice; kind and some
# distributions prefix it with kubelet- (kubelet-kubepods-burstable-pod<uid>.slice).
_SYSTEMD_POD = re.compile(r"^(?:kubelet-)?kubepods(?:-(?P<qos>besteffort|burstable))?-pod(?P<uid>" + _UID + r")\.slice$")
_CGROUPFS_POD = re.compile(r"^pod(?P<uid>" + _UID + r")$")
_CONTAINER_ID = r"(?P<id>[0-9a-f]{64})"
# (pattern, runtime) for the segment that names the container, first match wins.
_CONTAINER_SEGMENTS = (
    (re.compile(r"^cri-containerd-" + _CONTAINER_ID + r"(?:\.scope)?$"), "containerd"),
    (re.compile(r"^crio-conmon-" + _CONTAINER_ID + r"(?:\.scope)?$"), "cri-o"),
    (re.compile(r"^crio-" + _CONTAINER_ID + r"(?:\.scope)?$"), "cri-o"),
    (re.compile(r"^docker-" + _CONTAINER_ID + r"(?:\.scope)?$"), "docker"),
    (re.compile(r"^libpod-" + _CONTAINER_ID + r"(?:\.scope)?$"), "podman"),
    # cgroupfs driver with containerd or Docker: the bare ID says nothing about the runtime.
    (re.compile(r"^" + _CONTAINER_ID + r"$"), None),
)
# Containers outside Kubernetes: /system.slice/docker-<id>.scope (systemd), /docker/<id> (cgroupfs).
_PLAIN_DOCKER_PARENT = "docker"


def parse_cgroup(text):
    """Kubernetes identity of a process from the text of its ``/proc/<pid>/cgroup``.

    Returns ``{kind, pod_uid, container_id, runtime, qos_class, cgroup_path}``. ``kind`` is
    ``pod`` when a line names a kubelet pod cgroup, else ``host``: a host process, or a container
    that no pod owns (``docker run``), whose ``container_id`` and ``runtime`` are then still given.
    ``runtime`` is ``containerd``, ``cri-o``, ``docker``, ``podman``, or ``None`` when the path
    does not say (cgroupfs driver with a bare container ID). Raises ValueError on empty text.
    """
    lines = [line.strip().split(":", 2) for line in (text or "").splitlines()]
    paths = [parts[2] for parts in lines if len(parts) == 3 and parts[2]]
    if not paths:
        raise ValueError("empty cgroup file")
    for path in paths:
        identity = _pod_identity(path)
        if identity:
            return identity
    # Not in a pod: report the unified (v2) line, else the first, and any plain container in it.
    path = next((line.split(":", 2)[2] for line in text.splitlines() if line.startswith("0::")), paths[0])
    identity = {"kind": KIND_HOST, "pod_uid": None, "container_id": None, "runtime": None, "qos_class": None, "cgroup_path": path}
    for path in paths:
        container = _plain_container(path)
        if container:
            identity.update(container_id=container[0], runtime=container[1], cgroup_path=path)
            break
    return identity


def _pod_identity(path):
    segments = [segment for segment in path.split("/") if segment]
    for position, segment in enumerate(segments):
        systemd = _SYSTEMD_POD.match(segment)
        cgroupfs = _CGROUPFS_POD.match(segment)
        if systemd:
            qos = systemd.group("qos") or "guaranteed"
        elif cgroupfs and "kubepods" in "/".join(segments[:position]):
            parent = segments[position - 1]
            qos = parent if parent in ("besteffort", "burstable") else "guaranteed"
        else:
            continue  # a "pod<hex>" directory outside the kubelet's tree is not a pod either
        following = segments[position + 1] if position + 1 < len(segments) else ""
        container_id, runtime = _container_segment(following) or (None, None)
        return {
            "kind": KIND_POD,
            "pod_uid": (systemd or cgroupfs).group("uid").replace("_", "-"),
            "container_id": container_id,
            "runtime": runtime,
            "qos_class": qos,
            "cgroup_path": path,
        }
    return None


def _container_segment(segment):
    for pattern, runtime in _CONTAINER_SEGMENTS:
        match = pattern.match(segment)
        if match:
            return match.group("id"), runtime
    return None


def _plain_container(path):
    segments = [segment for segment in path.split("/") if segment]
    for position, segment in enumerate(segments):
        container_id, runtime = _container_segment(segment) or (None, None)
        # A bare ID says its runtime only under Docker's cgroupfs parent.
        if runtime or (container_id and position and segments[position - 1] == _PLAIN_DOCKER_PARENT):
            return container_id, runtime or "docker"
    return None


def container_metadata_paths(runtime, container_id, root="/"):
    """Files that may hold a container's pod name and namespace, most likely first.

    With ``runtime`` None (cgroupfs driver, bare ID) every runtime's file is a candidate; the
    caller reads the first that exists. ``root`` prefixes them (a host filesystem mounted in a
    container, or a test tree).
    """
    root = root.rstrip("/")
    containerd = [
        # The OCI bundle of a running container; k3s/RKE2 keep containerd's state under /run/k3s.
        "%s/run/containerd/io.containerd.runtime.v2.task/k8s.io/%s/config.json" % (root, container_id),
        "%s/run/k3s/containerd/io.containerd.runtime.v2.task/k8s.io/%s/config.json" % (root, container_id),
    ]
    crio = ["%s/run/containers/storage/overlay-containers/%s/userdata/config.json" % (root, container_id)]
    docker = ["%s/var/lib/docker/containers/%s/config.v2.json" % (root, container_id)]
    by_runtime = {"containerd": containerd, "cri-o": crio, "docker": docker}
    if runtime in by_runtime:
        return by_runtime[runtime]
    return containerd + crio + docker


def parse_container_metadata(text):
    """Pod name, namespace, UID and container name from a runtime's container state file.

    Accepts an OCI runtime spec (``annotations``: containerd's ``io.kubernetes.cri.*`` or
    CRI-O's ``io.kubernetes.pod.*``) or Docker's ``config.v2.json`` (``Config.Labels``, set by
    dockershim / cri-dockerd). Returns ``{namespace, pod_name, pod_uid, container_name}``, values
    ``None`` where absent. Raises ValueError when the text is not JSON.
    """
    document = json.loads(text)
    # Docker's labels, then the OCI annotations of containerd and CRI-O.
    labels = dict((document.get("Config") or {}).get("Labels") or {}, **(document.get("annotations") or {}))

    def first(*keys):
        return next((labels[key] for key in keys if labels.get(key)), None)

    return {
        "namespace": first("io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace"),
        "pod_name": first("io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"),
        "pod_uid": first("io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"),
        "container_name": first("io.kubernetes.cri.container-name", "io.kubernetes.container.name"),
    }


def read_process(pid, reported_name=None, proc_root="/proc", host_root="/"):
    """What ``/proc`` and the container runtime say about one process.

    Returns ``{comm, cmdline, kubernetes}``. ``kubernetes`` is ``parse_cgroup``'s answer plus
    ``namespace``, ``pod_name`` and ``container_name`` from the runtime's state (``None`` where it
    cannot be read), or ``{kind: unreadable, reason}`` when the process's cgroup cannot be read:
    it exited, ``/proc`` hides it (``hidepid``), or it is not the process the GPU reported.
    ``reported_name`` is the name NVML or nvidia-smi gave for ``pid``: when it differs from this
    ``/proc``'s process, the module runs in another PID namespace than the driver's (a container
    without ``hostPID``) and that other process's identity would be a guess.
    """
    base = "%s/%d" % (proc_root.rstrip("/"), int(pid))
    comm = _optional(_read, base + "/comm")
    cmdline = _optional(_read, base + "/cmdline")
    result = {
        "comm": comm.strip() if comm is not None else None,
        "cmdline": " ".join(part for part in cmdline.split("\0") if part) if cmdline is not None else None,
    }
    try:
        cgroup_text = _read(base + "/cgroup")
    except OSError as exc:
        result["kubernetes"] = _unreadable("cannot read %s/cgroup: %s" % (base, _os_reason(exc)))
        return result
    names = [result["comm"], cmdline.split("\0", 1)[0] if cmdline else None, _optional(os.readlink, base + "/exe")]
    if reported_name and not _same_process(reported_name, *names):
        result["kubernetes"] = _unreadable(
            "pid %s in %s is %r, not %r as the GPU driver reported: another PID namespace?" % (pid, proc_root, result["comm"], reported_name)
        )
        return result
    try:
        identity = parse_cgroup(cgroup_text)
    except ValueError as exc:
        result["kubernetes"] = _unreadable("%s/cgroup: %s" % (base, exc))
        return result
    identity.update(namespace=None, pod_name=None, container_name=None)
    if identity["kind"] == KIND_POD and identity["container_id"]:
        identity.update(_pod_metadata(identity, host_root))
    result["kubernetes"] = identity
    return result


def _pod_metadata(identity, host_root):
    for path in container_metadata_paths(identity["runtime"], identity["container_id"], host_root):
        try:
            metadata = parse_container_metadata(_read(path))
        except (OSError, ValueError):
            continue  # not this runtime's file, or not readable by us: the UID still identifies the pod
        if metadata["pod_uid"] and metadata["pod_uid"] != identity["pod_uid"]:
            continue  # another container that happens to share the ID would be a wrong answer
        return {key: metadata[key] for key in ("namespace", "pod_name", "container_name")}
    return {}


def _same_process(reported_name, comm, argv0, exe):
    """Whether the name the driver reported can be this /proc process's.

    The kernel truncates comm to 15 characters; argv[0] may be a path or a title rewritten with
    setproctitle; the driver may name the executable behind a symbolic link (python3 -> python3.12)
    or give the whole command line. A different process fails every comparison.
    """
    reported = reported_name.strip()
    candidates = {_basename(reported), _basename(reported.split()[0])} if reported else set()
    return any(
        (comm and comm in (candidate, candidate[:15])) or any(name and candidate == _basename(name) for name in (argv0, exe))
        for candidate in candidates
    )


def _basename(path):
    return path.rstrip("/").rsplit("/", 1)[-1]


def _unreadable(reason):
    return {"kind": KIND_UNREADABLE, "reason": reason}


def _os_reason(exc):
    if isinstance(exc, FileNotFoundError):
        return "the process has exited"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return str(exc)


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _optional(read, path):
    """``read(path)``, or None when the file cannot be read."""
    try:
        return read(path)
    except OSError:
        return None
