"""The fake kubelet, device plugin and container runtime of the simulated GPU nodes.

It does for fake nodes what the kubelet and the NVIDIA device plugin do on a real GPU node, against a
real API server:
- registers the topology's nodes (loopback addresses, GPU capacity) and renews their Leases;
- admits pods bound to them by the real scheduler: gives each GPU pod distinct free devices of its
  node (never one a running pod holds), or rejects it as the device plugin would
  (failRequestsGreaterThanOne, no free device);
- runs each container's command as a local process, with a fake `nvidia-smi` on PATH that shows
  exactly the pod's GPUs and the device variables the plugin would set, and records what it prints as
  the container log, served to the API server on the kubelet port (so `kubectl logs` works);
- reports phases as the kubelet does: Running, Succeeded / Failed with the exit code, ErrImagePull,
  DeadlineExceeded (activeDeadlineSeconds), and finishes graceful deletions;
- posts the kubelet's events (Pulled, Created, Started, Killing, Failed).

Usage: fakelet.py --kubeconfig K --topology T --state-dir D --port P
"""
from __future__ import annotations

import argparse
import datetime
import http.server
import json
import logging
import os
import random
import shlex
import signal
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import zlib
from pathlib import Path

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parent))
import topology as topo  # noqa: E402  pylint: disable=wrong-import-position

LOG = logging.getLogger("fakelet")
FAKE_NVIDIA_SMI = Path(__file__).resolve().parent / "fake_nvidia_smi.py"
LEASE_SECONDS = 40
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def rfc3339(moment: datetime.datetime | None = None) -> str:
    return (moment or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime.datetime | None = None) -> str:
    return (moment or now()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pod_gpu_request(pod: dict, resource: str) -> int:
    """Units of `resource` the pod needs: the max of any init container and the sum of app containers."""
    def units(container):
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(resource) or (resources.get("requests") or {}).get(resource) or 0
        return int(value)
    app = sum(units(c) for c in pod["spec"].get("containers") or [])
    init = max([units(c) for c in pod["spec"].get("initContainers") or []] or [0])
    return max(app, init)


class ContainerLog:
    """One container's output, kept in CRI log format (`<time> stdout F <line>`) as a real node does."""

    def __init__(self, path: Path):
        self.path = path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")
        self.finished = threading.Event()
        self._lock = threading.Lock()

    def append(self, text: str) -> None:
        with self._lock, self.path.open("a") as handle:
            handle.write(f"{micro_time()} stdout F {text}\n")

    def pump(self, stream) -> None:
        for raw in iter(stream.readline, b""):
            self.append(raw.decode(errors="replace").rstrip("\n"))
        self.finished.set()

    def lines(self):
        return self.path.read_text().splitlines() if self.path.exists() else []


class PodRun:
    """What the node knows of one admitted pod: its devices, its containers' processes and logs."""

    def __init__(self, pod: dict, node: str, devices: list):
        self.uid = pod["metadata"]["uid"]
        self.namespace = pod["metadata"]["namespace"]
        self.name = pod["metadata"]["name"]
        self.node = node
        self.pod = pod
        self.devices = devices                      # units of the node's resource, as in NodeGpus.units
        self.started_at = now()
        self.init_pending = list(pod["spec"].get("initContainers") or [])
        self.containers = {}                        # name -> {"proc", "log", "started", "finished", "exit"}
        self.logs = {}                              # container name -> ContainerLog
        self.phase = "Pending"
        self.terminating = False
        self.image_pull_failed = False


class FakeKubelet:
    def __init__(self, kubeconfig: str, topology_file: str, state_dir: Path, port: int):
        config.load_kube_config(config_file=kubeconfig)
        self.core = client.CoreV1Api()
        self.coordination = client.CoordinationV1Api()
        self.topology = topo.load(topology_file)
        self.state_dir = state_dir
        self.port = port
        self.nodes = {node["name"]: node for node in self.topology["nodes"]}
        self.gpus = {name: topo.node_gpus(node) for name, node in self.nodes.items()}
        self.unpullable = set(self.topology.get("unpullable_images") or [])
        self.runs: dict[str, PodRun] = {}
        self.lock = threading.RLock()
        self.stopping = threading.Event()
        self.pod_ip_counter = 10

    # --- nodes ----------------------------------------------------------------------------------

    def register_nodes(self) -> None:
        for node in self.topology["nodes"]:
            body, status = topo.node_object(node, self.port)
            try:
                self.core.create_node(body)
            except ApiException as error:
                if error.status != 409:
                    raise
                self.core.patch_node(node["name"], {"metadata": body["metadata"], "spec": body["spec"]})
            status["conditions"] = self._node_conditions(node)
            self.core.patch_node_status(node["name"], {"status": status})
            self._write_node_gpu_state(node["name"])
        self.renew_leases()

    def _node_conditions(self, node: dict) -> list:
        stamp = rfc3339()
        ready = bool(node.get("ready", True))
        conditions = [{"type": kind, "status": "False", "reason": f"KubeletHas{reason}", "message": message,
                       "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
                      for kind, reason, message in (("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
                                                    ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
                                                    ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"))]
        conditions.append({"type": "Ready", "status": "True" if ready else "False",
                           "reason": "KubeletReady" if ready else "KubeletNotReady",
                           "message": "kubelet is posting ready status" if ready else "container runtime network not ready (simulated)",
                           "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
        return conditions

    def renew_leases(self) -> None:
        for name, node in self.nodes.items():
            if not node.get("ready", True):
                continue   # a NotReady node stops renewing, as a dead kubelet would
            body = {"metadata": {"name": name, "namespace": "kube-node-lease"},
                    "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": micro_time()}}
            try:
                self.coordination.patch_namespaced_lease(name, "kube-node-lease", body)
            except ApiException as error:
                if error.status != 404:
                    raise
                self.coordination.create_namespaced_lease("kube-node-lease", body)

    def heartbeat_loop(self) -> None:
        beats = 0
        while not self.stopping.wait(10):
            beats += 1
            try:
                self.renew_leases()
                if beats % 4 == 0:   # node status every 40 s, well inside the controller's grace period
                    for name, node in self.nodes.items():
                        if node.get("ready", True):
                            self.core.patch_node_status(name, {"status": {"conditions": self._node_conditions(node)}})
            except Exception:  # pylint: disable=broad-except  # keep beating through API restarts
                LOG.exception("heartbeat failed")

    def write_node_views(self) -> None:
        """What tools running ON each node would read: nvidia-smi, /proc/<pid>/cgroup, the device checkpoint.

        Lets node-side modules (gpu_process_facts) run against a fake node by pointing their
        nvidia_smi_path / proc_root / checkpoint_path options at .sim/run/nodes/<node>/.
        """
        for name, gpus in self.gpus.items():
            root = self.state_dir / "nodes" / name
            (root / "bin").mkdir(parents=True, exist_ok=True)
            everything = json.dumps([{"gpu": gpu.index, "mig": None} for gpu in gpus.gpus] if gpus else [])
            wrapper = root / "bin" / "nvidia-smi"
            wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_NVIDIA_SMI))} "
                               f"--node-state {shlex.quote(str(self.state_dir / 'nodes' / (name + '.json')))} "
                               f"--visible {shlex.quote(everything)} \"$@\"\n")
            wrapper.chmod(0o755)
            self.write_checkpoint(name)

    def write_checkpoint(self, node_name: str) -> None:
        """The kubelet device manager's checkpoint: which pod's container holds which device IDs."""
        gpus = self.gpus[node_name]
        entries = []
        for run in self.runs.values():
            if run.node == node_name and run.devices:
                container = run.pod["spec"]["containers"][0]["name"]
                entries.append({"PodUID": run.uid, "ContainerName": container, "ResourceName": gpus.resource,
                                "DeviceIDs": {"0": [device["id"] for device in run.devices]}, "AllocResp": ""})
        registered = {gpus.resource: [unit["id"] for unit in gpus.units]} if gpus else {}
        path = self.state_dir / "nodes" / node_name / "kubelet_internal_checkpoint"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"PodDeviceEntries": entries, "RegisteredDevices": registered}
        path.write_text(json.dumps({"Data": data, "Checksum": zlib.crc32(json.dumps(data).encode())}))

    def _write_node_gpu_state(self, node_name: str) -> None:
        """The node's GPUs as the fake nvidia-smi reads them: cards, memory in use, processes."""
        gpus = self.gpus[node_name]
        state = {"driver_version": "570.124.06", "cuda_version": "12.8", "gpus": [], "processes": []}
        if gpus:
            state["gpus"] = [{"index": g.index, "uuid": g.uuid, "name": g.name, "memory_mib": g.memory_mib,
                              "used_mib": g.used_mib, "mig_devices": g.mig_devices,
                              "bus_id": f"00000000:{0x18 + g.index * 0x10:02X}:00.0"} for g in gpus.gpus]
            state["processes"] = gpus.processes
        path = self.state_dir / "nodes" / f"{node_name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, indent=1))

    # --- topology's pre-existing pods ----------------------------------------------------------

    # --- events ---------------------------------------------------------------------------------

    def event(self, run_or_pod, reason: str, message: str, kind: str = "Normal", field_path: str | None = None) -> None:
        pod = run_or_pod.pod if isinstance(run_or_pod, PodRun) else run_or_pod
        meta = pod["metadata"]
        stamp = now()
        involved = {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
                    "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion")}
        if field_path:
            involved["fieldPath"] = field_path
        body = {"metadata": {"generateName": meta["name"] + ".", "namespace": meta["namespace"]},
                "involvedObject": involved, "reason": reason, "message": message, "type": kind,
                "source": {"component": "kubelet", "host": pod["spec"].get("nodeName")},
                "firstTimestamp": rfc3339(stamp), "lastTimestamp": rfc3339(stamp), "count": 1,
                # Sub-second order: several kubelet events share a second.
                "eventTime": micro_time(stamp), "action": reason,
                "reportingComponent": "kubelet", "reportingInstance": pod["spec"].get("nodeName")}
        try:
            self.core.create_namespaced_event(meta["namespace"], body)
        except ApiException as error:
            LOG.warning("event %s for %s/%s not recorded: %s", reason, meta["namespace"], meta["name"], error.reason)

    # --- pods -----------------------------------------------------------------------------------

    def watch_pods(self, field_selector: str = "spec.nodeName!=") -> None:
        """Every bound pod (one watch for all the nodes), or one node's pods (``spec.nodeName=<node>``: on a
        bench cluster of 150,000 pods, a few light nodes among thousands of others watch their own pods only)."""
        while not self.stopping.is_set():
            try:
                listing = self.core.list_pod_for_all_namespaces(field_selector=field_selector)
                for item in listing.items:
                    self.on_pod(self.core.api_client.sanitize_for_serialization(item), "ADDED")
                stream = watch.Watch().stream(self.core.list_pod_for_all_namespaces, field_selector=field_selector,
                                              resource_version=listing.metadata.resource_version,
                                              timeout_seconds=300, _request_timeout=330)
                for change in stream:
                    self.on_pod(self.core.api_client.sanitize_for_serialization(change["object"]), change["type"])
            except Exception:  # pylint: disable=broad-except  # relist after API restarts or 410 Gone
                if not self.stopping.is_set():
                    LOG.exception("pod watch broke; relisting")
                    time.sleep(1)

    def on_pod(self, pod: dict, change: str) -> None:
        node = pod["spec"].get("nodeName")
        if node not in self.nodes:
            return
        uid = pod["metadata"]["uid"]
        with self.lock:
            run = self.runs.get(uid)
            if change == "DELETED":
                if run:
                    self.kill(run, grace=0)
                    self.runs.pop(uid, None)
                return
            if run:
                run.pod = pod
                if pod["metadata"].get("deletionTimestamp") and not run.terminating:
                    run.terminating = True
                    threading.Thread(target=self.terminate, args=(run,), daemon=True).start()
                return
            phase = (pod.get("status") or {}).get("phase")
            if pod["metadata"].get("deletionTimestamp"):
                self.finish_deletion(pod)
                return
            if phase in ("Succeeded", "Failed"):
                return
            if phase == "Running":
                # Restart of the fakelet: a process we no longer have ended with the node agent.
                self.set_terminal_after_restart(pod)
                return
            self.admit(pod, node)

    def admit(self, pod: dict, node: str) -> None:
        gpus = self.gpus[node]
        wanted = pod_gpu_request(pod, gpus.resource) if gpus else 0
        if gpus and wanted > 1 and gpus.fail_requests_greater_than_one:
            self.reject(pod, f"Allocate failed due to rpc error: code = Unknown desc = request for '{gpus.resource}: {wanted}' "
                             "too large: maximum request size for shared resources is 1, which is unexpected")
            return
        devices = []
        if wanted:
            held = {device["id"] for run in self.runs.values() if run.node == node for device in run.devices}
            free = [unit for unit in gpus.units if unit["id"] not in held]
            if len(free) < wanted:
                self.reject(pod, f"Allocate failed due to requested number of devices unavailable for {gpus.resource}. "
                                 f"Requested: {wanted}, Available: {len(free)}, which is unexpected")
                return
            devices = self._pick(free, wanted, gpus)
        run = PodRun(pod, node, devices)
        self.runs[run.uid] = run
        if devices:
            self.write_checkpoint(node)
        self.pod_ip_counter += 1
        run.pod_ip = f"10.244.0.{self.pod_ip_counter % 250 + 2}"   # status data only, never a destination
        self.start_next(run)

    @staticmethod
    def _pick(free: list, wanted: int, gpus) -> list:
        """Spread time-sliced units over distinct cards first, as the device plugin prefers."""
        if gpus.replicas <= 1:
            return free[:wanted]
        by_card, picked = {}, []
        for unit in free:
            by_card.setdefault(unit["gpu"].uuid, []).append(unit)
        while len(picked) < wanted:
            for units in by_card.values():
                if units and len(picked) < wanted:
                    picked.append(units.pop(0))
        return picked

    def reject(self, pod: dict, message: str) -> None:
        self.event(pod, "UnexpectedAdmissionError", message, kind="Warning")
        self._patch_status(pod, {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": message,
                                 "startTime": rfc3339()})

    # --- containers -----------------------------------------------------------------------------

    def start_next(self, run: PodRun) -> None:
        """Start the next init container, or every app container once the init containers are done."""
        spec = run.pod["spec"]
        if run.init_pending:
            container = run.init_pending[0]
            if not self._pull(run, container):
                return
            self._start_container(run, container)
            self._report(run)
            return
        for container in spec["containers"]:
            if not self._pull(run, container):
                return
        for container in spec["containers"]:
            self._start_container(run, container)
        run.phase = "Running"
        self._report(run)

    def _pull(self, run: PodRun, container: dict) -> bool:
        image = container.get("image", "")
        path = f"spec.containers{{{container['name']}}}"
        if image in self.unpullable or image.endswith(":does-not-exist"):
            if not run.image_pull_failed:
                run.image_pull_failed = True
                message = (f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull and unpack image '
                           f'"{image}": not found (simulated registry)')
                self.event(run, "Pulling", f'Pulling image "{image}"', field_path=path)
                self.event(run, "Failed", message, kind="Warning", field_path=path)
                self.event(run, "Failed", "Error: ErrImagePull", kind="Warning", field_path=path)
                self._report(run, waiting={container["name"]: ("ErrImagePull", message)})
                threading.Timer(2.0, self._back_off, args=(run, container, image)).start()
            return False
        self.event(run, "Pulled", f'Container image "{image}" already present on machine', field_path=path)
        return True

    def _back_off(self, run: PodRun, container: dict, image: str) -> None:
        if run.uid in self.runs and not run.terminating:
            path = f"spec.containers{{{container['name']}}}"
            self.event(run, "BackOff", f'Back-off pulling image "{image}"', field_path=path)
            self.event(run, "Failed", "Error: ImagePullBackOff", kind="Warning", field_path=path)
            self._report(run, waiting={container["name"]: ("ImagePullBackOff", f'Back-off pulling image "{image}"')})

    def _container_env(self, run: PodRun, container: dict, bin_dir: Path) -> dict:
        env = {"PATH": f"{bin_dir}:{HOST_PATH}", "HOSTNAME": run.name, "HOME": str(bin_dir.parent),
               "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
        gpus = self.gpus[run.node]
        visible = self._visible_gpus(run)
        if gpus and run.devices:
            # Light nodes (the fleet benchmark) hand GPUs over only through the variable.
            if "envvar" in gpus.device_list_strategy and gpus.device_id_strategy == "uuid":
                env["NVIDIA_VISIBLE_DEVICES"] = ",".join(device["id"].split("::")[0] if not device["mig"] else device["id"]
                                                         for device in run.devices)
            elif "envvar" in gpus.device_list_strategy:
                env["NVIDIA_VISIBLE_DEVICES"] = ",".join(
                    str(device["gpu"].index) if not device["mig"] else f"{device['gpu'].index}:{device['mig']['index']}"
                    for device in run.devices)
            env["NVIDIA_DRIVER_CAPABILITIES"] = "compute,utility"
        elif gpus and gpus.ledger_bypass and visible:
            env["NVIDIA_VISIBLE_DEVICES"] = "all"
            env["NVIDIA_DRIVER_CAPABILITIES"] = "compute,utility"
        field_values = {"metadata.name": run.name, "metadata.namespace": run.namespace, "spec.nodeName": run.node,
                        "status.podIP": getattr(run, "pod_ip", ""), "metadata.uid": run.uid, "status.hostIP": "127.0.0.1"}
        for item in container.get("env") or []:
            if "value" in item:
                env[item["name"]] = str(item["value"])
            elif ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") in field_values:
                env[item["name"]] = field_values[item["valueFrom"]["fieldRef"]["fieldPath"]]
        return env

    def _visible_gpus(self, run: PodRun) -> list:
        """What nvidia-smi inside the container sees: its own devices, or every card on a bypass node."""
        gpus = self.gpus[run.node]
        if not gpus:
            return []
        if run.devices:
            return [{"gpu": device["gpu"].index, "mig": device["mig"]["index"] if device["mig"] else None}
                    for device in run.devices]
        if gpus.ledger_bypass:
            return [{"gpu": gpu.index, "mig": None} for gpu in gpus.gpus]
        return []

    def _start_container(self, run: PodRun, container: dict) -> None:
        name = container["name"]
        workdir = self.state_dir / "run" / run.uid / name
        bin_dir = workdir / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        visible = json.dumps(self._visible_gpus(run))
        node_state = self.state_dir / "nodes" / f"{run.node}.json"
        wrapper = bin_dir / "nvidia-smi"
        wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_NVIDIA_SMI))} "
                           f"--node-state {shlex.quote(str(node_state))} --visible {shlex.quote(visible)} \"$@\"\n")
        wrapper.chmod(0o755)
        # The container's HOME: login shells (`bash -lc`, as in the walkthrough) reset PATH from
        # /etc/profile, and the profile files put the container's nvidia-smi back in front.
        for profile in (".bash_profile", ".profile"):
            (workdir / profile).write_text(f"export PATH={shlex.quote(str(bin_dir))}:$PATH\n")
        argv = list(container.get("command") or []) + list(container.get("args") or [])
        if not argv:
            argv = ["sh", "-c", "exec sleep infinity"]   # an image's own entrypoint: a long-running server
        log = ContainerLog(self.state_dir / "logs" / run.namespace / run.name / f"{name}.log")
        run.logs[name] = log
        env = self._container_env(run, container, bin_dir)
        try:
            proc = subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as error:
            log.append(f"exec {argv[0]}: {error.strerror}")
            log.finished.set()
            run.containers[name] = {"proc": None, "log": log, "started": now(), "finished": now(), "exit": 128,
                                    "reason": "StartError", "init": container in (run.pod["spec"].get("initContainers") or [])}
            self.event(run, "Failed", f"Error: failed to create containerd task: exec: {argv[0]!r}: {error.strerror}",
                       kind="Warning", field_path=f"spec.containers{{{name}}}")
            return
        threading.Thread(target=log.pump, args=(proc.stdout,), daemon=True).start()
        run.containers[name] = {"proc": proc, "log": log, "started": now(), "finished": None, "exit": None,
                                "reason": None, "init": container in (run.pod["spec"].get("initContainers") or [])}
        path = f"spec.{'initContainers' if run.containers[name]['init'] else 'containers'}{{{name}}}"
        self.event(run, "Created", f"Created container: {name}", field_path=path)
        self.event(run, "Started", f"Started container {name}", field_path=path)

    def monitor_loop(self) -> None:
        """Notices exited processes and expired deadlines, as the kubelet's pod workers do."""
        while not self.stopping.wait(0.1):
            with self.lock:
                runs = list(self.runs.values())
            for run in runs:
                try:
                    self._check(run)
                except Exception:  # pylint: disable=broad-except  # one pod's trouble must not stop the node
                    LOG.exception("checking %s/%s failed", run.namespace, run.name)

    def _check(self, run: PodRun) -> None:
        if run.terminating or run.phase in ("Succeeded", "Failed"):
            return
        changed = False
        for state in run.containers.values():
            proc = state["proc"]
            if state["finished"] is None and proc is not None and proc.poll() is not None:
                state["log"].finished.wait(2)
                state["finished"], state["exit"] = now(), proc.returncode
                state["reason"] = "Completed" if proc.returncode == 0 else "Error"
                changed = True
        deadline = run.pod["spec"].get("activeDeadlineSeconds")
        if deadline and (now() - run.started_at).total_seconds() > int(deadline):
            message = "Pod was active on the node longer than the specified deadline"
            self.event(run, "DeadlineExceeded", message, kind="Warning")
            self._kill_processes(run, grace=0)
            run.phase = "Failed"
            self._report(run, reason="DeadlineExceeded", message=message)
            self._release(run)
            return
        if not changed:
            return
        if run.init_pending:
            current = run.containers.get(run.init_pending[0]["name"])
            if current and current["finished"]:
                if current["exit"] != 0 and run.pod["spec"].get("restartPolicy", "Always") == "Never":
                    run.phase = "Failed"
                    self._report(run)
                    self._release(run)
                    return
                run.init_pending.pop(0)
                self.start_next(run)
            return
        app = [state for state in run.containers.values() if not state["init"]]
        if all(state["finished"] for state in app):
            # Restarting containers (restartPolicy Always/OnFailure) is beyond this simulation: every
            # pod's containers run once and the pod ends as they ended.
            run.phase = "Failed" if any(state["exit"] != 0 for state in app) else "Succeeded"
            self._report(run)
            self._release(run)
        else:
            self._report(run)

    def _release(self, run: PodRun) -> None:
        """A terminated pod's devices go back to the plugin (the ledger also drops it: phase is terminal)."""
        if run.devices:
            run.devices = []
            self.write_checkpoint(run.node)

    # --- status ---------------------------------------------------------------------------------

    def _container_status(self, run: PodRun, container: dict, waiting: dict | None = None) -> dict:
        name = container["name"]
        state = run.containers.get(name)
        status = {"name": name, "image": container.get("image", ""), "imageID": "", "restartCount": 0,
                  "ready": False, "started": False}
        if waiting and name in waiting:
            reason, message = waiting[name]
            status["state"] = {"waiting": {"reason": reason, "message": message}}
        elif state is None:
            status["state"] = {"waiting": {"reason": "PodInitializing"}}
        elif state["finished"] is None:
            status.update(ready=not state["init"], started=True,
                          containerID=f"containerd://{abs(hash((run.uid, name))):064x}"[:77],
                          state={"running": {"startedAt": rfc3339(state["started"])}})
            status["imageID"] = f"sha256:{abs(hash(status['image'])):064x}"[:71]
        else:
            status.update(containerID=f"containerd://{abs(hash((run.uid, name))):064x}"[:77],
                          state={"terminated": {"exitCode": state["exit"], "reason": state["reason"],
                                                "startedAt": rfc3339(state["started"]),
                                                "finishedAt": rfc3339(state["finished"])}})
        return status

    def _report(self, run: PodRun, waiting: dict | None = None, reason: str | None = None, message: str | None = None) -> None:
        spec = run.pod["spec"]
        stamp = rfc3339()
        app_statuses = [self._container_status(run, c, waiting) for c in spec["containers"]]
        init_statuses = [self._container_status(run, c, waiting) for c in spec.get("initContainers") or []]
        ready = run.phase == "Running" and all(s["ready"] for s in app_statuses)
        initialized = not run.init_pending
        conditions = [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": stamp},
            {"type": "Initialized", "status": "True" if initialized else "False", "lastTransitionTime": stamp},
            {"type": "ContainersReady", "status": "True" if ready else "False", "lastTransitionTime": stamp},
            {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": stamp},
        ]
        if run.phase in ("Succeeded", "Failed"):
            for condition in conditions[2:]:
                condition["reason"] = "PodCompleted" if run.phase == "Succeeded" else "PodFailed"
        status = {"phase": run.phase, "conditions": conditions, "hostIP": "127.0.0.1",
                  "hostIPs": [{"ip": "127.0.0.1"}], "podIP": run.pod_ip, "podIPs": [{"ip": run.pod_ip}],
                  "startTime": rfc3339(run.started_at), "containerStatuses": app_statuses, "qosClass": "BestEffort"}
        if init_statuses:
            status["initContainerStatuses"] = init_statuses
        if reason:
            status["reason"], status["message"] = reason, message
        self._patch_status(run.pod, status)

    def _patch_status(self, pod: dict, status: dict) -> None:
        meta = pod["metadata"]
        try:
            self.core.patch_namespaced_pod_status(meta["name"], meta["namespace"], {"status": status})
        except ApiException as error:
            if error.status != 404:
                LOG.warning("status of %s/%s not updated: %s", meta["namespace"], meta["name"], error.reason)

    # --- termination ----------------------------------------------------------------------------

    def _kill_processes(self, run: PodRun, grace: float) -> None:
        procs = [state["proc"] for state in run.containers.values() if state["proc"] and state["proc"].poll() is None]
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while grace > 0 and time.monotonic() < deadline and any(proc.poll() is None for proc in procs):
            time.sleep(0.05)
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()
        for state in run.containers.values():
            if state["finished"] is None:
                code = state["proc"].returncode if state["proc"] else 137
                state["finished"], state["exit"] = now(), 128 - code if code < 0 else code
                state["reason"] = "Error" if state["exit"] else "Completed"

    def kill(self, run: PodRun, grace: float) -> None:
        self._kill_processes(run, grace)
        self._release(run)

    def terminate(self, run: PodRun) -> None:
        """Graceful deletion: stop the containers, then remove the pod object (grace period 0)."""
        grace = run.pod["metadata"].get("deletionGracePeriodSeconds")
        grace = 30 if grace is None else int(grace)
        running = [name for name, state in run.containers.items() if state["finished"] is None]
        for name in running:
            self.event(run, "Killing", f"Stopping container {name}", field_path=f"spec.containers{{{name}}}")
        self.kill(run, grace)
        with self.lock:
            if run.phase not in ("Succeeded", "Failed") and run.containers:
                app = [s for s in run.containers.values() if not s["init"]]
                run.phase = "Failed" if any(s["exit"] for s in app) else "Succeeded"
                self._report(run)
        self.finish_deletion(run.pod)

    def finish_deletion(self, pod: dict) -> None:
        meta = pod["metadata"]
        try:
            self.core.delete_namespaced_pod(meta["name"], meta["namespace"], grace_period_seconds=0,
                                            body=client.V1DeleteOptions(grace_period_seconds=0,
                                                                        preconditions=client.V1Preconditions(uid=meta["uid"])))
        except ApiException as error:
            if error.status not in (404, 409):
                LOG.warning("deleting %s/%s failed: %s", meta["namespace"], meta["name"], error.reason)
        with self.lock:
            self.runs.pop(meta["uid"], None)

    def set_terminal_after_restart(self, pod: dict) -> None:
        """The fakelet restarted: its processes died with it, as containers do when a node reboots."""
        message = "Pod was terminated in response to the node agent restarting (simulated)"
        self._patch_status(pod, {"phase": "Failed", "reason": "Terminated", "message": message})

    # --- logs over the kubelet port --------------------------------------------------------------

    def container_log(self, namespace: str, pod: str, container: str):
        with self.lock:
            for run in self.runs.values():
                if run.namespace == namespace and run.name == pod:
                    return run.logs.get(container) or (next(iter(run.logs.values())) if not container else None)
        path = self.state_dir / "logs" / namespace / pod / f"{container}.log"
        if path.exists():
            log = ContainerLog.__new__(ContainerLog)
            log.path, log.finished = path, threading.Event()
            log.finished.set()
            return log
        return None

    def shutdown(self, *_args) -> None:
        self.stopping.set()
        with self.lock:
            for run in list(self.runs.values()):
                self._kill_processes(run, grace=0)
        os._exit(0)  # pylint: disable=protected-access  # watch threads block in sockets


class KubeletHandler(http.server.BaseHTTPRequestHandler):
    """The part of the kubelet API the API server proxies for `kubectl logs`."""

    kubelet: FakeKubelet = None
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # pylint: disable=arguments-differ
        LOG.debug("kubelet api: " + fmt, *args)

    def do_GET(self):  # pylint: disable=invalid-name
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        parts = url.path.strip("/").split("/")
        if url.path in ("/healthz", "/readyz"):
            return self._send(200, b"ok")
        if len(parts) != 4 or parts[0] != "containerLogs":
            return self._send(404, b"not found")
        log = self.kubelet.container_log(parts[1], parts[2], parts[3])
        if log is None:
            return self._send(404, f'container "{parts[3]}" in pod "{parts[2]}" is not available'.encode())
        timestamps = query.get("timestamps", ["false"])[0] == "true"
        tail = int(query.get("tailLines", ["-1"])[0])
        follow = query.get("follow", ["false"])[0] == "true"

        def render(line):
            stamp, _stream, _tag, text = (line.split(" ", 3) + ["", "", ""])[:4]
            return f"{stamp} {text}\n" if timestamps else f"{text}\n"

        lines = log.lines()
        if tail >= 0:
            lines = lines[-tail:] if tail else []
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk("".join(render(line) for line in lines).encode())
        sent = len(log.lines())
        while follow and not log.finished.is_set():
            time.sleep(0.2)
            current = log.lines()
            if len(current) > sent:
                self._chunk("".join(render(line) for line in current[sent:]).encode())
                sent = len(current)
        self._chunk(b"")
        return None

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class ThreadingHTTPSServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--topology", required=True)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--watch-per-node", action="store_true",
                        help="watch each node's pods by field selector instead of every bound pod (big clusters)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    random.seed(0)
    kubelet = FakeKubelet(args.kubeconfig, args.topology, args.state_dir, args.port)
    signal.signal(signal.SIGTERM, kubelet.shutdown)
    signal.signal(signal.SIGINT, kubelet.shutdown)

    KubeletHandler.kubelet = kubelet
    server = ThreadingHTTPSServer(("127.0.0.1", args.port), KubeletHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    kubelet.register_nodes()
    threading.Thread(target=kubelet.heartbeat_loop, daemon=True).start()
    threading.Thread(target=kubelet.monitor_loop, daemon=True).start()
    if args.watch_per_node:
        for node in kubelet.nodes:
            threading.Thread(target=kubelet.watch_pods, args=(f"spec.nodeName={node}",), daemon=True).start()
    else:
        threading.Thread(target=kubelet.watch_pods, daemon=True).start()
    kubelet.write_node_views()
    LOG.info("fakelet ready: %d node(s), kubelet API on 127.0.0.1:%d", len(kubelet.nodes), args.port)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
