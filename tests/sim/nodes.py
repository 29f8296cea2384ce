"""Real kubelet nodes for the simulated cluster: one real kubelet per topology node, with only the GPUs and the
container runtime simulated (tests/sim/node: our CRI runtime and device plugin, in Go).

Per node, under .sim/run/nodes/<node>/ (.sim/run: a link to the short folder that holds the sockets, cluster.SimDir):
  kubelet/                 the kubelet's --root-dir (pod-resources/kubelet.sock: the PodResources API)
  device-plugins/          bound over /var/lib/kubelet/device-plugins in the kubelet's own mount namespace (the
                           kubelet hard-codes that folder): kubelet.sock, our plugin's socket, and the device
                           manager's kubelet_internal_checkpoint
  runtime.sock, runtime/   our CRI runtime and its containers' working folders (none when GPUOPS_SIM_CRI_SOCKET names a
                           real runtime's socket: the kubelet talks to that one, as walkthrough.sh --real-runtime does)
  pod-logs/                the kubelet's podLogsDir (CRI-format logs our runtime writes; the kubelet serves them)
  gpus.json                the node's GPUs as nvidia-smi reads them (gpu-table.json instead on a GPU machine:
                           its real GPUs from NVML, for the runtime's private /dev per container)
  bin/nvidia-smi           nvidia-smi as a tool on the node sees it: every GPU
  container-bin/nvidia-smi nvidia-smi inside a container: only the devices its environment names
  proc/, run/containerd/   what node-side tools read about processes outside the ledger (topology `processes`)
  etc/cdi/, var/run/cdi/    the node's CDI spec folders (containerd's /etc/cdi and /var/run/cdi): the runtime resolves
                           CDI device names against the specs there; our device plugin writes its spec into the second
  plugin-*.json, faults.json, not-ready, kubelet.yaml
  dra-driver.json          on a DRA node (gpu.allocation: dra), instead of a device plugin: our DRA driver's GPUs; it
                           writes each prepared claim's CDI spec into var/run/cdi/ (the chart's CDI_ROOT). The
                           driver registers at kubelet/plugins_registry/ and keeps its socket in kubelet/plugins/,
                           both under the kubelet's own --root-dir, so each node has its own.

What the kubelet changes on the host, and how it is put back (restore_host): it writes a few kernel sysctls
(protectKernelDefaults false: vm.overcommit_memory, vm.panic_on_oom, kernel.panic, kernel.panic_on_oops,
kernel.keys.root_maxkeys/root_maxbytes): their values before the first kubelet of any simulated cluster on the
machine are saved in /run/gpuops-sim/host-sysctls.json and written back by the `simctl down` of the last cluster
to go. The mount points /var/lib/kubelet/device-plugins and
/var/run/nvidia-container-devices are created if missing, and removed then if they were.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import cluster
import topology as topo

SIMNODE_SRC = cluster.SIM_SRC / "node"
FAKE_NVIDIA_SMI = cluster.SIM_SRC / "fake_nvidia_smi.py"
DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
# Where the kubelet (cAdvisor) reads the boot id it reports as the Node's bootID.
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
# The mount point for the device plugin's volume-mounts answer: each container given devices that way gets its own
# folder there, in its own mount namespace (gpuops-simnode container-init).
DEVICE_LIST_DIR = Path("/var/run/nvidia-container-devices")
# A real container runtime in place of ours (tests/device/walkthrough.sh --real-runtime: containerd on the GPU machine):
# the CRI socket it serves. The kubelet talks to it; the node starts no runtime of its own. One node per runtime.
CRI_SOCKET_ENV = "GPUOPS_SIM_CRI_SOCKET"
SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
           "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes")
# Raised for as long as clusters run (and put back with the others): each kubelet holds 6 inotify instances and the
# API server 3, out of one per-user limit for the whole machine (128 by default): a few clusters of a few nodes
# exhaust it, and a kubelet that finds none exits ("inotify_init: too many open files"). The values kind advises.
RAISED_SYSCTLS = {"fs/inotify/max_user_instances": 1024, "fs/inotify/max_user_watches": 524288}
# Every container on a GPU node runs a CUDA-style image: it asks for compute and utility capabilities.
GPU_IMAGE_ENV = ("NVIDIA_DRIVER_CAPABILITIES=compute,utility",)
DRIVER_VERSION, CUDA_VERSION = "570.124.06", "12.8"
# What NVML reports for the products the topologies use: (architecture, CUDA compute capability).
ARCHITECTURES = {"H20": ("Hopper", "9.0"), "H100": ("Hopper", "9.0"), "H200": ("Hopper", "9.0"), "A100": ("Ampere", "8.0"),
                 "L40S": ("Ada Lovelace", "8.9"), "B200": ("Blackwell", "10.0")}
# MIG GPU-instance profile IDs (NVML), by the profile's slice count.
MIG_GI_PROFILE_IDS = {1: 19, 2: 14, 3: 9, 4: 5, 7: 0}


def simnode_binary() -> Path:
    """Build (or reuse) gpuops-simnode; cached by a hash of its sources, outside the checkout. GPUOPS_SIM_BIN_DIR
    (a prebuilt bundle, tests/device) holds it too."""
    if os.environ.get("GPUOPS_SIM_BIN_DIR"):
        return Path(os.environ["GPUOPS_SIM_BIN_DIR"]) / "gpuops-simnode"
    digest = hashlib.sha256()
    for path in sorted(SIMNODE_SRC.iterdir()):
        if path.suffix in (".go", ".mod", ".sum"):
            digest.update(path.name.encode() + path.read_bytes())
    cache = Path(os.environ.get("GPUOPS_SIM_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuops-sim")
    binary = cache / f"simnode-{digest.hexdigest()[:16]}" / "gpuops-simnode"
    if not binary.exists():
        print("[sim] building gpuops-simnode (our CRI runtime and device plugin, Go; about a minute cold)", flush=True)
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = f"{binary}.tmp-{os.getpid()}"   # several workers may build it at once: each its own, the last one stays
        subprocess.run(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", partial, "."],
                       cwd=SIMNODE_SRC, check=True, env={**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"})
        os.replace(partial, binary)
    return binary


class Node:
    """One topology node's files, ports and processes."""

    def __init__(self, sim: cluster.SimDir, spec: dict, position: int, unpullable: tuple = ()):
        self.sim = sim
        self.spec = spec
        self.name = spec["name"]
        self.gpus = topo.node_gpus(spec)
        self.dir = sim.run / "nodes" / self.name
        self.port = sim.ports.kubelet + 2 * position
        self.healthz_port = self.port + 1
        self.unpullable = list(unpullable)
        # A GPU machine's real GPUs (gpu: {nvml: true}): the machine's nvidia-smi, each container only its own GPUs.
        self.real_gpus = bool((spec.get("gpu") or {}).get("nvml"))

    # processes, as cluster.start_process names them
    @property
    def boot_id_file(self) -> Path:
        return self.dir / "boot_id"

    @property
    def kubelet_process(self) -> str:
        return f"kubelet-{self.name}"

    @property
    def runtime_process(self) -> str:
        return f"runtime-{self.name}"

    @property
    def external_runtime(self) -> bool:
        """A real container runtime serves this node's CRI (CRI_SOCKET_ENV): ours is not started."""
        return bool(os.environ.get(CRI_SOCKET_ENV))

    @property
    def cri_socket(self) -> Path:
        return Path(os.environ[CRI_SOCKET_ENV]) if self.external_runtime else self.dir / "runtime.sock"

    def plugin_process(self, resource: str) -> str:
        return f"plugin-{self.name}-{resource.replace('/', '-')}"

    @property
    def checkpoint(self) -> Path:
        return self.dir / "device-plugins" / "kubelet_internal_checkpoint"

    @property
    def pod_resources_socket(self) -> Path:
        return self.dir / "kubelet" / "pod-resources" / "kubelet.sock"

    @property
    def faults_file(self) -> Path:
        return self.dir / "faults.json"

    @property
    def dra(self) -> bool:
        return bool(self.gpus and self.gpus.dra)

    @property
    def dra_process(self) -> str:
        return f"dra-{self.name}"

    @property
    def cdi_dir(self) -> Path:
        """Where our DRA driver writes claims' CDI specs: var/run/cdi, NVIDIA's chart's CDI_ROOT (a folder the
        runtime reads)."""
        return self.cdi_spec_dirs[1]

    def dra_config(self) -> dict:
        """Our DRA driver's view of the node's GPUs: what NVML tells NVIDIA's driver about each (on a GPU machine, what
        NVML told us: the table write_files wrote)."""
        if self.real_gpus:
            import nvml_gpus  # pylint: disable=import-outside-toplevel  # GPU machines only
            table = json.loads((self.dir / "gpu-table.json").read_text())
            return {"node": self.name, "gpus": [nvml_gpus.dra_gpu(row) for row in table]}
        gpus = []
        for gpu in self.gpus.gpus:
            architecture, capability = next((value for key, value in ARCHITECTURES.items() if key in gpu.name), ("Hopper", "9.0"))
            entry = {"minor": gpu.minor, "uuid": gpu.uuid, "productName": gpu.name, "brand": "Nvidia",
                     "architecture": architecture, "cudaComputeCapability": capability, "driverVersion": DRIVER_VERSION,
                     "cudaDriverVersion": CUDA_VERSION, "pciBusID": _bus_id(gpu.index).lower()[4:],
                     "memoryBytes": gpu.memory_mib << 20, "mig": []}
            for position, mig in enumerate(gpu.mig_devices):
                slices = int(mig["profile"].split("g.", 1)[0])
                memory_gb = int(mig["profile"].split("g.", 1)[1].rstrip("gb"))
                entry["mig"].append({"uuid": mig["uuid"], "profile": mig["profile"],
                                     "giProfileID": MIG_GI_PROFILE_IDS.get(slices, 19), "placementStart": position * slices,
                                     "placementSize": slices, "memoryBytes": memory_gb * 1000 << 20,
                                     "multiprocessors": 16 * slices, "giCapMinor": mig["gi_cap_minor"],
                                     "ciCapMinor": mig["ci_cap_minor"]})
            gpus.append(entry)
        return {"node": self.name, "gpus": gpus}

    def plugin_configs(self) -> list:
        """Our device plugin's configurations: the node's resource, and on a mixed-MIG node also nvidia.com/gpu with
        no device (NVIDIA's plugin advertises the whole-GPU resource too, at 0). None on a DRA node."""
        if not self.gpus or self.dra:
            return []
        devices = []
        for unit in self.gpus.units:
            gpu, mig = unit["gpu"], unit["mig"]
            devices.append({"id": unit["id"], "uuid": mig["uuid"] if mig else gpu.uuid,
                            "index": f"{gpu.index}:{mig['index']}" if mig else str(gpu.index), "minor": gpu.minor})
        strategies = {"device_list_strategy": list(self.gpus.device_list_strategy),
                      "device_id_strategy": self.gpus.device_id_strategy}
        configs = [{"resource": self.gpus.resource, "devices": devices, **strategies,
                    "fail_requests_greater_than_one": self.gpus.fail_requests_greater_than_one,
                    "replicated": self.gpus.replicas > 1}]
        if self.gpus.resource.startswith("nvidia.com/mig-"):
            configs.append({"resource": "nvidia.com/gpu", "devices": [], **strategies})
        return configs

    @property
    def cdi_spec_dirs(self) -> list:
        """The node's CDI spec folders, as containerd's cdi_spec_dirs (/etc/cdi, /var/run/cdi): our device plugin
        writes its spec into the second, as NVIDIA's does; a DRA driver may write claim specs into either."""
        return [self.dir / "etc" / "cdi", self.dir / "var" / "run" / "cdi"]

    # --- files --------------------------------------------------------------------------------------

    def write_files(self) -> None:
        for sub in ("kubelet", "device-plugins", "runtime", "pod-logs", "bin", "container-bin", *self.cdi_spec_dirs):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        if self.real_gpus:
            import nvml_gpus  # pylint: disable=import-outside-toplevel  # GPU machines only
            (self.dir / "gpu-table.json").write_text(json.dumps(nvml_gpus.read_gpus(), indent=1))
        else:
            self._write_fake_nvidia_smi()
        self.faults_file.write_text("{}\n")
        (self.dir / "not-ready").unlink(missing_ok=True)
        for config in self.plugin_configs():
            (self.dir / f"plugin-{config['resource'].replace('/', '-')}.json").write_text(json.dumps(config, indent=1))
        if self.dra:
            (self.dir / "dra-driver.json").write_text(json.dumps(self.dra_config(), indent=1))
        (self.dir / "kubelet.yaml").write_text(json.dumps(self.kubelet_config(), indent=1))

    def _write_fake_nvidia_smi(self) -> None:
        self._write_gpu_state()
        state = shlex.quote(str(self.dir / "gpus.json"))
        python, smi = shlex.quote(sys.executable), shlex.quote(str(FAKE_NVIDIA_SMI))
        everything = shlex.quote(json.dumps([{"gpu": gpu.index, "mig": None} for gpu in self.gpus.gpus] if self.gpus else []))
        _write_script(self.dir / "bin" / "nvidia-smi", f"exec {python} {smi} --node-state {state} --visible {everything} \"$@\"")
        _write_script(self.dir / "container-bin" / "nvidia-smi", f"exec {python} {smi} --node-state {state} \"$@\"")

    def _write_gpu_state(self) -> None:
        state = {"driver_version": "570.124.06", "cuda_version": "12.8", "gpus": [], "processes": []}
        if self.gpus:
            state["gpus"] = [{"index": g.index, "uuid": g.uuid, "name": g.name, "memory_mib": g.memory_mib,
                              "used_mib": g.used_mib, "mig_devices": g.mig_devices,
                              "minor": g.minor, "bus_id": _bus_id(g.index)} for g in self.gpus.gpus]
            state["processes"] = self.gpus.processes
        (self.dir / "gpus.json").write_text(json.dumps(state, indent=1))

    def kubelet_config(self) -> dict:
        pki = self.sim.pki
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": cluster.LOOPBACK, "port": self.port, "readOnlyPort": 0,
            "healthzBindAddress": cluster.LOOPBACK, "healthzPort": self.healthz_port,
            "tlsCertFile": str(pki / "kubelet.crt"), "tlsPrivateKeyFile": str(pki / "kubelet.key"),
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": str(pki / "ca.crt")}},
            "authorization": {"mode": "AlwaysAllow"},
            # These machines: cgroup v1, no systemd, no swap accounting, a test VM's small disk.
            "failCgroupV1": False, "cgroupsPerQOS": False, "enforceNodeAllocatable": ["none"],
            "cgroupDriver": "cgroupfs", "failSwapOn": False, "resolvConf": "", "protectKernelDefaults": False,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%",
                             "imagefs.available": "1%", "imagefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "volumeStatsAggPeriod": "0s",
            "containerRuntimeEndpoint": f"unix://{self.cri_socket}",
            "imageServiceEndpoint": f"unix://{self.cri_socket}",
            "podLogsDir": str(self.dir / "pod-logs"),
            # As in a real cluster (data only: nothing resolves through it here).
            "clusterDNS": ["10.96.0.10"], "clusterDomain": "cluster.local",
            "registerNode": True, "registerWithTaints": self.spec.get("taints") or [],
            "serializeImagePulls": False,
            # A plugin's registration (allocatable) reaches the API within a second, not the default 10.
            "nodeStatusUpdateFrequency": "1s", "nodeStatusReportFrequency": "1m",
            "kubeAPIQPS": 50, "kubeAPIBurst": 100, "shutdownGracePeriod": "0s",
        }

    # --- processes ----------------------------------------------------------------------------------

    def start(self, k8s_bin: Path, simnode: Path) -> None:
        if self.external_runtime:
            cluster.wait_for(lambda: cluster.unix_socket_accepts(self.cri_socket), 30,
                             f"the container runtime to listen on {self.cri_socket} ({CRI_SOCKET_ENV})")
        else:
            self.start_runtime(simnode)
        for config in self.plugin_configs():
            self.start_plugin(simnode, config["resource"])
        if self.real_gpus:
            cluster.start_process(self.sim, self.health_process, cluster.python_argv(
                "nvml_gpus.py", "health", "--faults", str(self.faults_file)), marker="nvml_gpus.py")
        # Its own mount namespace, where this node's device-plugins folder is the kubelet's fixed one, and its
        # --root-dir is already a shared mount. A kubelet that finds its root dir on a private mount bind-mounts it
        # onto itself as it starts (MakeRShared), while its PodResources server renames a socket into
        # pod-resources/ at the same moment: a rename that straddles the new mount fails with EXDEV and the kubelet
        # exits ("failed to move temporary file to addr ... invalid cross-device link", as in k3s-io/k3s#4042).
        root_dir = self.dir / "kubelet"
        kubelet = [str(k8s_bin / "kubelet"), f"--config={self.dir / 'kubelet.yaml'}",
                   f"--kubeconfig={self.sim.kubeconfig}", f"--root-dir={root_dir}",
                   f"--cert-dir={root_dir / 'pki'}", f"--hostname-override={self.name}",
                   f"--node-ip={cluster.LOOPBACK}", "--v=1"]
        # Each node boots once, with a boot id of its own (the kernel's file, seen through this mount namespace, is what
        # the kubelet reports as bootID): `simctl.py reboot NODE` gives it a new one and restarts its kubelet.
        if not self.boot_id_file.exists():
            self.boot_id_file.write_text(str(uuid.uuid4()) + "\n")
        argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                'mount --bind "$0" ' + shlex.quote(str(DEVICE_PLUGIN_DIR)) + ' && mount --bind "$1" ' + BOOT_ID_FILE
                + ' && mount --bind "$2" "$2" && mount --make-rshared "$2" && shift 2 && exec "$@"',
                str(self.dir / "device-plugins"), str(self.boot_id_file), str(root_dir), *kubelet]
        cluster.start_process(self.sim, self.kubelet_process, argv, marker=f"--root-dir={root_dir}")
        if self.dra:
            self.start_dra_driver(simnode)

    def start_runtime(self, simnode: Path) -> None:
        runtime_argv = [str(simnode), "runtime", "--socket", str(self.dir / "runtime.sock"),
                        "--state-dir", str(self.dir / "runtime"), "--not-ready-file", str(self.dir / "not-ready")]
        runtime_argv += [arg for folder in self.cdi_spec_dirs for arg in ("--cdi-spec-dir", str(folder))]
        if self.real_gpus:
            # As the NVIDIA container toolkit does: the machine's nvidia-smi and driver libraries in every container
            # given a GPU (here: on its PATH and library path), the devices limited by container-init.
            smi = shutil.which("nvidia-smi")
            runtime_argv += ["--gpu-table", str(self.dir / "gpu-table.json")]
            if smi:
                runtime_argv += ["--tool-dir", str(Path(smi).resolve().parent)]
            if os.environ.get("LD_LIBRARY_PATH"):
                runtime_argv += ["--image-env", "LD_LIBRARY_PATH=" + os.environ["LD_LIBRARY_PATH"]]
        else:
            runtime_argv += ["--tool-dir", str(self.dir / "container-bin")]
        if self.gpus:
            runtime_argv += [arg for entry in GPU_IMAGE_ENV for arg in ("--image-env", entry)]
            if self.gpus.ledger_bypass:
                # The inference image sets NVIDIA_VISIBLE_DEVICES=all: pods asking for no GPU see every GPU.
                runtime_argv += ["--image-env", "NVIDIA_VISIBLE_DEVICES=all"]
        runtime_argv += [arg for image in self.unpullable for arg in ("--unpullable", image)]
        cluster.start_process(self.sim, self.runtime_process, runtime_argv, marker=str(self.dir / "runtime.sock"))
        # The kubelet checks the CRI endpoint once as it starts and exits if nothing answers (systemd orders it after
        # containerd): on a loaded machine the runtime may not listen yet.
        cluster.wait_for(lambda: cluster.unix_socket_accepts(self.dir / "runtime.sock"), 30,
                         f"{self.runtime_process} to listen on {self.dir / 'runtime.sock'}")

    def start_dra_driver(self, simnode: Path) -> None:
        argv = [str(simnode), "dra-driver", "--config", str(self.dir / "dra-driver.json"),
                "--kubeconfig", str(self.sim.kubeconfig), "--kubelet-root-dir", str(self.dir / "kubelet"),
                "--cdi-root", str(self.cdi_dir), "--faults", str(self.faults_file)]
        if (self.spec.get("gpu") or {}).get("dra_driver") == "unregistered":
            argv.append("--no-registration")
        cluster.start_process(self.sim, self.dra_process, argv, marker=str(self.dir / "dra-driver.json"))

    def start_plugin(self, simnode: Path, resource: str) -> None:
        argv = [str(simnode), "plugin", "--plugin-dir", str(self.dir / "device-plugins"),
                "--config", str(self.dir / f"plugin-{resource.replace('/', '-')}.json"), "--faults", str(self.faults_file),
                "--cdi-spec-dir", str(self.cdi_spec_dirs[1])]
        cluster.start_process(self.sim, self.plugin_process(resource), argv,
                              marker=str(self.dir / f"plugin-{resource.replace('/', '-')}.json"))

    def make_not_ready(self) -> None:
        """The container runtime goes down: the kubelet reports Ready=False ("container runtime is down") and
        keeps what it advertised, as a GPU node whose runtime failed does. (A runtime that never came up would
        leave the kubelet without its device manager: no GPU at all.)"""
        (self.dir / "not-ready").write_text("the topology marks this node not ready\n")

    @property
    def health_process(self) -> str:
        return f"nvml-health-{self.name}"

    def processes(self) -> list:
        names = [self.kubelet_process] + ([] if self.external_runtime else [self.runtime_process])
        names += ([self.health_process] if self.real_gpus else [])
        names += [self.dra_process] if self.dra else []
        return names + [self.plugin_process(config["resource"]) for config in self.plugin_configs()]

    def stop(self) -> None:
        # The kubelet first (it would restart what the runtime stops), then the plugins, then the runtime, which
        # ends its containers.
        cluster.stop_processes(self.sim, [self.kubelet_process])
        cluster.stop_processes(self.sim, [self.plugin_process(c["resource"]) for c in self.plugin_configs()]
                               + [self.dra_process, self.health_process])
        cluster.stop_processes(self.sim, [self.runtime_process])

    # --- what tools on the node read -----------------------------------------------------------------

    def write_process_views(self, pods: dict) -> None:
        """/proc/<pid>/cgroup and containerd task state for the topology's GPU processes (vLLM and friends), so
        node-side modules (gpu_process_facts) can tell whose they are. ``pods``: "namespace/name" -> pod dict."""
        for process in (self.gpus.processes if self.gpus else []):
            proc_dir = self.dir / "proc" / str(process["pid"])
            proc_dir.mkdir(parents=True, exist_ok=True)
            pod = pods.get(process.get("pod", ""))
            if pod:
                uid = pod["metadata"]["uid"]
                container = hashlib.sha256(f"{uid}/{process['pid']}".encode()).hexdigest()
                cgroup = (f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid.replace('-', '_')}.slice/"
                          f"cri-containerd-{container}.scope")
                task = self.dir / "run" / "containerd" / "io.containerd.runtime.v2.task" / "k8s.io" / container
                task.mkdir(parents=True, exist_ok=True)
                (task / "config.json").write_text(json.dumps({"ociVersion": "1.1.0", "annotations": {
                    "io.kubernetes.cri.container-type": "container",
                    "io.kubernetes.cri.container-name": pod["spec"]["containers"][0]["name"],
                    "io.kubernetes.cri.sandbox-name": pod["metadata"]["name"],
                    "io.kubernetes.cri.sandbox-namespace": pod["metadata"]["namespace"],
                    "io.kubernetes.cri.sandbox-uid": uid}}))
            else:
                cgroup = f"0::/system.slice/{process.get('unit', 'gpu-workload.service')}"
            (proc_dir / "cgroup").write_text(cgroup + "\n")
            cmdline = process.get("cmdline", process["name"])
            (proc_dir / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")
            (proc_dir / "comm").write_text(process["name"].rsplit("/", 1)[-1][:15] + "\n")


def _bus_id(index: int) -> str:
    """A simulated GPU's PCI bus ID as nvidia-smi prints it."""
    return f"00000000:{0x18 + index * 0x10:02X}:00.0"


def _write_script(path: Path, line: str) -> None:
    path.write_text(f"#!/bin/sh\n{line}\n")
    path.chmod(0o755)


def nodes_of(sim: cluster.SimDir, spec: dict) -> list:
    unpullable = tuple(spec.get("unpullable_images") or ())
    return [Node(sim, node, position, unpullable) for position, node in enumerate(spec["nodes"])]


# --- the host -------------------------------------------------------------------------------------------

# What the kubelets change is the machine's, shared by every simulated cluster on it (a second checkout, the
# parallel test workers): the values from before the first cluster's kubelets are kept once for the machine, and
# only the last cluster to go puts them back. The lock orders one cluster's look at the machine against
# another's kubelet start.
HOST_STATE_DIR = Path(os.environ.get("GPUOPS_SIM_HOST_STATE") or "/run/gpuops-sim")
SYSCTL_ROOT = Path("/proc/sys")


def _host_record() -> Path:
    return HOST_STATE_DIR / "host-sysctls.json"


@contextlib.contextmanager
def _host_lock():
    HOST_STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(HOST_STATE_DIR / "lock", "a", encoding="ascii") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def host_in_use(sim: cluster.SimDir):
    """Held while a cluster starts kubelets: saves what they will change on the host (once for the machine) and
    makes the device-plugins and device-list mount points; no other cluster's `down` puts the host back meanwhile."""
    with _host_lock():
        if _machine_record(sim) is None:
            values = {}
            for name in SYSCTLS:
                try:
                    values[name] = (SYSCTL_ROOT / name).read_text().strip()
                except OSError:
                    continue
            _host_record().write_text(json.dumps(
                {"sysctls": values, "created_device_plugin_dir": not DEVICE_PLUGIN_DIR.exists(),
                 "created_device_list_dir": not DEVICE_LIST_DIR.exists()}, indent=1) + "\n")
        _raise_limits()
        saved = json.loads(_host_record().read_text())
        if "created_device_list_dir" not in saved:   # a record from before that mount point
            saved["created_device_list_dir"] = not DEVICE_LIST_DIR.exists()
            _host_record().write_text(json.dumps(saved, indent=1) + "\n")
        DEVICE_PLUGIN_DIR.mkdir(parents=True, exist_ok=True)
        DEVICE_LIST_DIR.mkdir(parents=True, exist_ok=True)
        yield


def _raise_limits() -> None:
    """RAISED_SYSCTLS, each at least its value; what it was before goes into the record first."""
    record = _host_record()
    saved = json.loads(record.read_text())
    for name, wanted in RAISED_SYSCTLS.items():
        path = SYSCTL_ROOT / name
        try:
            current = path.read_text().strip()
        except OSError:
            continue
        if name not in saved["sysctls"]:
            saved["sysctls"][name] = current
            record.write_text(json.dumps(saved, indent=1) + "\n")
        if int(current) < wanted:
            try:
                path.write_text(f"{wanted}\n")
            except OSError:
                pass   # not root: the kubelets may then run short of inotify instances, and say so in their logs


def restore_host(sim: cluster.SimDir) -> list:
    """Put back what host_in_use saved, unless another cluster's node processes still run on this machine (the
    last one to go does it). Returns what could not be restored."""
    with _host_lock():
        record = _machine_record(sim)
        if record is None or _sim_node_processes():
            return []
        saved = json.loads(record.read_text())
        left = []
        for name, value in saved["sysctls"].items():
            try:
                path = SYSCTL_ROOT / name
                if path.read_text().strip() != value:
                    path.write_text(value + "\n")
            except OSError as error:
                left.append(f"sysctl {name}={value}: {error.strerror}")
        if saved.get("created_device_plugin_dir"):
            for path in (DEVICE_PLUGIN_DIR, DEVICE_PLUGIN_DIR.parent):
                try:
                    path.rmdir()
                except OSError:
                    left.append(f"{path} (not empty)")
                    break
        if saved.get("created_device_list_dir"):
            try:
                DEVICE_LIST_DIR.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                left.append(f"{DEVICE_LIST_DIR} (not empty)")
        record.unlink()
        return left


def _machine_record(sim: cluster.SimDir) -> Path | None:
    """The machine's record, if there is one. Clusters started before the record was the machine's kept it in their
    own folder (.sim/host-sysctls.json): the oldest of those (this cluster's, or a running one's) holds the values
    from before any kubelet, and becomes the machine's record."""
    record = _host_record()
    legacy = sim.root / "host-sysctls.json"
    if not record.exists():
        roots = {sim.root} | {Path(arg[len("--root-dir="):]).parents[3] for pid in _sim_node_processes()
                              for arg in _argv(pid) if arg.startswith("--root-dir=") and arg.endswith("/kubelet")}
        found = sorted((path.stat().st_mtime, str(path)) for path in (root / "host-sysctls.json" for root in roots) if path.exists())
        if found:
            record.write_text(Path(found[0][1]).read_text())
    legacy.unlink(missing_ok=True)
    return record if record.exists() else None


def _argv(pid: int) -> list:
    try:
        return [arg.decode(errors="replace") for arg in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return []


def _sim_node_processes() -> list:
    """Pids of the node processes of any simulated cluster on this machine: kubelets (their --root-dir names
    the node's folder) and our runtimes and device plugins (gpuops-simnode), whichever cluster and checkout
    started them. A kubelet a test stopped for a moment leaves its runtime behind, so its cluster still counts."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        argv = _argv(int(entry.name))
        if not argv or not argv[0]:
            continue
        program = os.path.basename(argv[0])
        if program == "gpuops-simnode" or (program == "kubelet" and any(arg.startswith("--root-dir=") for arg in argv)):
            found.append(int(entry.name))
    return found
