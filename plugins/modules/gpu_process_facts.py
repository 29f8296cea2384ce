#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_process_facts
short_description: Who uses each NVIDIA GPU of a node, and which pod the kubelet gave it to
version_added: 1.0.0
description:
  - Runs on a Kubernetes GPU node (over SSH) and reports every GPU (index, UUID, name, memory used
    and total, utilisation, MIG mode and MIG devices) and every compute process on them (PID, name,
    command line, GPU, memory used).
  - Reads the GPUs through NVML (the C(pynvml) module of the C(nvidia-ml-py) package) when it can, else
    through the CSV output of C(nvidia-smi --query-gpu) and C(nvidia-smi --query-compute-apps).
  - Gives each process its Kubernetes identity from C(/proc/<pid>/cgroup) (pod UID, container ID and
    runtime, for cgroup v1 and v2, the systemd and cgroupfs drivers, containerd, CRI-O and Docker),
    plus the pod's namespace and name from the container runtime's state when readable; C(host) when
    the process is in no pod. A process whose identity cannot be read is reported as C(unreadable),
    never guessed.
  - Reads which pod holds which device, and which devices the kubelet can allocate, from the kubelet's
    PodResources v1 API (C(List) and C(GetAllocatableResources) on its unix socket) through C(grpcio)
    when the node has it, else from the device manager's checkpoint file, and says which source
    answered and why the others did not. No source is not an error.
  - Changes nothing. Compare the result with the scheduler's ledger with the
    P(gpuops.scheduling.gpu_reconcile#filter) filter.
author:
  - gpuops developers (@gpuops)
requirements:
  - An NVIDIA driver on the node.
  - C(nvidia-ml-py) (C(pynvml)) for O(source=nvml); otherwise C(nvidia-smi).
  - C(grpcio) (optional) to read the kubelet's PodResources API; without it the checkpoint file is read.
  - Root (C(become)) to read the kubelet's socket and checkpoint and other users' containers.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
options:
  source:
    description:
      - Where to read the GPUs and their processes from.
      - V(auto) uses NVML when C(pynvml) imports and NVML starts, else C(nvidia-smi).
    type: str
    choices: [auto, nvml, nvidia-smi]
    default: auto
  nvidia_smi_path:
    description:
      - The C(nvidia-smi) executable, a name looked up in E(PATH) or an absolute path.
    type: str
    default: nvidia-smi
  pod_resources_socket:
    description:
      - The kubelet's PodResources unix socket, C(<kubelet root-dir>/pod-resources/kubelet.sock); set it for a
        kubelet started with another C(--root-dir).
    type: path
    default: /var/lib/kubelet/pod-resources/kubelet.sock
  checkpoint_path:
    description:
      - The kubelet device manager's checkpoint file, read when C(grpcio) is missing or the socket does not answer.
    type: path
    default: /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint
  pod_resources_timeout:
    description:
      - Seconds to wait for each of the kubelet's answers on the socket.
    type: int
    default: 5
  proc_root:
    description:
      - Where the node's C(/proc) is; another path for a host C(/proc) mounted in a container, or tests.
    type: path
    default: /proc
  host_root:
    description:
      - Prefix of the container runtimes' state directories (C(/run/containerd), C(/run/containers/storage),
        C(/var/lib/docker)), read for pod names; for a host filesystem mounted in a container, or tests.
    type: path
    default: /
notes:
  - PIDs are the driver's, that is the node's. Run the module in the node's PID namespace (over SSH, or a
    pod with C(hostPID)); otherwise processes are reported as C(unreadable).
  - Memory used per GPU follows C(nvidia-smi) (NVML's v2 memory information, without the driver's reservation)
    when the bindings and driver have it.
seealso:
  - plugin: gpuops.scheduling.gpu_reconcile
    plugin_type: filter
  - module: gpuops.scheduling.gpu_ledger_facts
"""

EXAMPLES = r"""
- name: Read the GPUs, their processes and the kubelet's allocations
  gpuops.scheduling.gpu_process_facts:
  become: true

- name: Show who is on each GPU
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpu_process_facts.processes | map(attribute='kubernetes.kind') }}"

- name: Read through nvidia-smi only, with the driver's tools in a non-standard place
  gpuops.scheduling.gpu_process_facts:
    source: nvidia-smi
    nvidia_smi_path: /usr/local/nvidia/bin/nvidia-smi
  become: true

- name: Compare with the scheduler's ledger of this node
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpu_process_facts | gpuops.scheduling.gpu_reconcile(node_ledger) }}"
  vars:
    node_ledger: "{{ ledger.nodes | selectattr('name', 'equalto', inventory_hostname) | first }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    gpu_process_facts:
      description: The node's GPUs, their compute processes and the kubelet's device allocations.
      returned: always
      type: dict
      contains:
        source:
          description: What answered for the GPUs and processes.
          returned: always
          type: str
          choices: [nvml, nvidia-smi]
          sample: nvml
        driver_version:
          description: The NVIDIA driver's version.
          returned: always
          type: str
          sample: "580.159.04"
        gpus:
          description: One entry per GPU, by index.
          returned: always
          type: list
          elements: dict
          contains:
            index:
              description: The driver's GPU index.
              returned: always
              type: int
              sample: 0
            uuid:
              description: The GPU's UUID.
              returned: always
              type: str
              sample: GPU-6488a48c-7479-40ca-ba29-49824ecf04fa
            name:
              description: The product name.
              returned: always
              type: str
              sample: NVIDIA H200
            pci_bus_id:
              description: The PCI bus ID; null when the driver does not say.
              returned: always
              type: str
              sample: "00000000:00:06.0"
            memory_used_bytes:
              description: Memory in use on the GPU, in bytes.
              returned: always
              type: int
              sample: 6554648576
            memory_total_bytes:
              description: The GPU's memory, in bytes.
              returned: always
              type: int
              sample: 150754820096
            utilization_gpu_percent:
              description: Percent of time a kernel ran over the last sample period; null where unsupported (MIG).
              returned: always
              type: int
              sample: 0
            utilization_memory_percent:
              description: Percent of time memory was read or written over the last sample period; null where unsupported.
              returned: always
              type: int
              sample: 0
            mig_mode:
              description: Current MIG mode, V(enabled) or V(disabled); null on GPUs without MIG.
              returned: always
              type: str
              sample: disabled
            mig_devices:
              description:
                - The GPU's MIG devices with their C(index), C(uuid), C(profile) (for example V(1g.18gb)),
                  C(memory_used_bytes) and C(memory_total_bytes) (both null through nvidia-smi).
              returned: always
              type: list
              elements: dict
              sample:
                - index: 0
                  uuid: MIG-3f2a3a2e-2b4b-5c3e-9d55-1c0a7e0a6c11
                  profile: 1g.18gb
                  memory_used_bytes: 0
                  memory_total_bytes: 17716740096
        processes:
          description: One entry per compute process on a GPU.
          returned: always
          type: list
          elements: dict
          contains:
            pid:
              description: The process ID on the node.
              returned: always
              type: int
              sample: 418
            name:
              description: The process name the driver reports, or C(/proc/<pid>/comm) when it reports none.
              returned: always
              type: str
              sample: python3
            cmdline:
              description: The command line from C(/proc/<pid>/cmdline), arguments joined by spaces; null when unreadable.
              returned: always
              type: str
              sample: python3 -c import torch; ...
            gpu_uuid:
              description: UUID of the GPU the process uses.
              returned: always
              type: str
              sample: GPU-6488a48c-7479-40ca-ba29-49824ecf04fa
            gpu_index:
              description: Index of that GPU.
              returned: always
              type: int
              sample: 0
            mig_uuid:
              description: The MIG device the process runs on (NVML only); null otherwise.
              returned: always
              type: str
              sample: null
            used_memory_bytes:
              description: GPU memory the process uses, in bytes; null when the driver withholds it.
              returned: always
              type: int
              sample: 6545211392
            kubernetes:
              description:
                - The process's Kubernetes identity. C(kind) is V(pod), V(host) (no pod; C(container_id) and
                  C(runtime) are set for a container outside Kubernetes) or V(unreadable) (then only C(reason)).
                - For pods, C(pod_uid), C(container_id), C(runtime) (V(containerd), V(cri-o), V(docker), or null
                  when the cgroup path does not say), C(qos_class), C(cgroup_path), and C(namespace), C(pod_name),
                  C(container_name) from the runtime's state (null when not readable).
              returned: always
              type: dict
              sample:
                kind: pod
                pod_uid: 0f5e6a8c-1234-4b7e-9a9a-1234567890ab
                container_id: 3f2a0c5d8e7b6a594837261504f3e2d1c0b9a8f7e6d5c4b3a291807060504030
                runtime: containerd
                qos_class: besteffort
                cgroup_path: /kubepods.slice/kubepods-besteffort.slice/...
                namespace: ai
                pod_name: vllm-0
                container_name: vllm
        allocations:
          description: Which pod the kubelet gave which devices to, and which devices it can allocate.
          returned: always
          type: dict
          contains:
            source:
              description: What answered; V(pod-resources-grpc) is the kubelet's PodResources API through C(grpcio).
              returned: always
              type: str
              choices: [pod-resources-grpc, checkpoint, none]
              sample: pod-resources-grpc
            allocations:
              description:
                - One entry per container and resource, with C(pod_uid) (checkpoint only), C(namespace) and
                  C(pod_name) (PodResources API only), C(container_name), C(resource_name) and C(device_ids)
                  (GPU or MIG UUIDs, C(<uuid>::<replica>) for shared GPUs, or indexes).
              returned: always
              type: list
              elements: dict
              sample:
                - pod_uid: null
                  namespace: gpu-operator
                  pod_name: gpu-demo-hold
                  container_name: hold
                  resource_name: nvidia.com/gpu
                  device_ids: [GPU-6488a48c-7479-40ca-ba29-49824ecf04fa]
            allocatable:
              description:
                - The devices the kubelet can allocate, per resource (C(GetAllocatableResources); from the checkpoint,
                  the healthy devices registered when the kubelet last wrote it); null when not read.
              returned: always
              type: dict
              sample:
                nvidia.com/gpu: [GPU-6488a48c-7479-40ca-ba29-49824ecf04fa]
            errors:
              description: What each source that was tried could not answer, in order, each prefixed with the source's name.
              returned: always
              type: list
              elements: str
              sample: ["pod-resources-grpc: grpcio is not installed, so the kubelet's PodResources API on
                       /var/lib/kubelet/pod-resources/kubelet.sock was not asked"]
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.scheduling.plugins.module_utils._node import cgroup as _cgroup
from ansible_collections.gpuops.scheduling.plugins.module_utils._node import nvidia_smi as _nvidia_smi
from ansible_collections.gpuops.scheduling.plugins.module_utils._node import pod_resources as _pod_resources

try:
    import pynvml
except ImportError:
    pynvml = None
    PYNVML_IMPORT_ERROR = traceback.format_exc()
else:
    PYNVML_IMPORT_ERROR = None

try:
    import grpc
except ImportError:
    grpc = None  # optional: the kubelet's checkpoint file answers instead


def read_gpus(module):
    """(source, inventory) from the chosen backend; fails the module with a clear reason otherwise.

    With source=auto any NVML failure falls back to nvidia-smi: a driver installed by the GPU
    Operator's driver container can leave libnvidia-ml out of the host's library path while
    nvidia_smi_path still reaches its nvidia-smi.
    """
    source = module.params["source"]
    nvml_error = None
    if source in ("auto", "nvml"):
        if pynvml is None:
            if source == "nvml":
                module.fail_json(msg=missing_required_lib("nvidia-ml-py"), exception=PYNVML_IMPORT_ERROR, reason="no_nvml")
            nvml_error = "pynvml (nvidia-ml-py) is not installed"
        else:
            try:
                return "nvml", _nvidia_smi.read_with_nvml(pynvml)
            except _nvidia_smi.GpuInventoryError as exc:
                if source == "nvml":
                    module.fail_json(msg=str(exc), reason=exc.reason)
                nvml_error = str(exc)
    also = "; NVML: %s" % nvml_error if nvml_error else ""
    nvidia_smi = module.get_bin_path(module.params["nvidia_smi_path"])
    if nvidia_smi is None:
        module.fail_json(
            msg="%s not found: is the NVIDIA driver installed?%s" % (module.params["nvidia_smi_path"], also), reason=_nvidia_smi.REASON_NO_TOOL
        )
    try:
        inventory = _nvidia_smi.read_with_nvidia_smi(lambda argv: module.run_command(argv, environ_update={"LC_ALL": "C"}), nvidia_smi)
    except _nvidia_smi.GpuInventoryError as exc:
        module.fail_json(msg=str(exc) + also, reason=exc.reason)
    if nvml_error and pynvml is not None:
        module.warn("NVML failed, nvidia-smi answered instead: %s" % nvml_error)
    return "nvidia-smi", inventory


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", default="auto", choices=["auto", "nvml", "nvidia-smi"]),
            nvidia_smi_path=dict(type="str", default="nvidia-smi"),
            pod_resources_socket=dict(type="path", default="/var/lib/kubelet/pod-resources/kubelet.sock"),
            checkpoint_path=dict(type="path", default="/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"),
            pod_resources_timeout=dict(type="int", default=5),
            proc_root=dict(type="path", default="/proc"),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    source, inventory = read_gpus(module)
    processes = []
    for process in inventory["processes"]:
        seen = _cgroup.read_process(process["pid"], process["name"], module.params["proc_root"], module.params["host_root"])
        processes.append(dict(process, name=process["name"] or seen["comm"], cmdline=seen["cmdline"], kubernetes=seen["kubernetes"]))
    # Last: once grpcio has started its threads, a child forked by run_command (nvidia-smi) can abort
    # in grpcio's fork handlers.
    allocations = _pod_resources.read_allocations(
        module.params["pod_resources_socket"], module.params["checkpoint_path"], module.params["pod_resources_timeout"], grpc=grpc
    )
    facts = {"source": source, **inventory, "processes": processes, "allocations": allocations}
    module.exit_json(changed=False, ansible_facts={"gpu_process_facts": facts})


if __name__ == "__main__":
    main()
