#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_ledger_facts
short_description: Read the Kubernetes scheduler's ledger of GPU units per node
version_added: 1.0.0
description:
  - Reads, per node, the extended resources the scheduler hands out for GPUs (V(nvidia.com/gpu) by
    default, MIG profiles such as V(nvidia.com/mig-1g.10gb), shared resources such as V(nvidia.com/gpu.shared)).
  - For each resource it reports capacity, allocatable, the units requested and limited by the node's
    non-terminated pods and the free units, exactly as C(kubectl describe node) computes its
    C(Allocated resources) table, and which pods hold the units.
  - Also reports the pods waiting for one of the resources (Pending, not bound to a node), the GPU
    labels of Node Feature Discovery and GPU Feature Discovery, taints, cordon and Ready state and,
    with O(operator_namespace), whether the device plugin and feature discovery pods are Running.
  - With O(dra) (the default) it also reports, per node, the GPUs handed out through Dynamic Resource Allocation
    (resource.k8s.io/v1) - the devices the node's ResourceSlices publish, per driver and DeviceClass, and the
    ResourceClaims allocated from them with the pods they are reserved for - and whether the node's GPUs are
    allocated by a device plugin or through DRA (RV(ledger.nodes.allocation)). A node whose GPUs are only published
    through DRA advertises no extended resource and is reported, not refused.
  - This is the scheduler's bookkeeping only. Processes that use a GPU without requesting the resource
    (an inference server started with E(NVIDIA_VISIBLE_DEVICES=all), host processes) are not in it.
  - Makes a constant number of API calls whatever the number of pods (see RV(api_calls)). For one node it reads, like
    C(kubectl describe node), only what the node holds, so its cost does not grow with the cluster (O(read_strategy)).
author:
  - gpuops developers (@gpuops)
options:
  node:
    description:
      - Name of the one node to report.
      - The module fails when the node does not exist, or advertises none of O(resource_names) and (with O(dra)) has no
        device in a ResourceSlice either.
      - When omitted, every node that advertises one of O(resource_names) or carries the label
        C(nvidia.com/gpu.present=true) is reported; other nodes are left out.
      - Mutually exclusive with O(nodes).
    type: str
  nodes:
    description:
      - Names of a few nodes to report, as O(node) does for one; each must exist and have GPUs as O(node) says.
      - Mutually exclusive with O(node).
    type: list
    elements: str
  resource_names:
    description:
      - Extended resources to report, as exact names or shell-style patterns (C(fnmatch)) matched
        against the names each node advertises in its capacity and allocatable.
    type: list
    elements: str
    default: [nvidia.com/gpu]
  operator_namespace:
    description:
      - Namespace of the NVIDIA GPU Operator (or of a standalone device plugin).
      - When set, one more list call reads its pods and reports whether the device plugin, GPU Feature
        Discovery and Node Feature Discovery pods are Running, in the cluster and on each node.
      - Pods are recognised by their C(app) or C(app.kubernetes.io/name) label or their name
        (C(nvidia-device-plugin-daemonset), C(nvidia-device-plugin), C(gpu-feature-discovery),
        C(node-feature-discovery)).
      - With RV(read_strategy=node), only the pods of that namespace on O(node) are read, so RV(ledger.operator)
        then describes the operator's pods on that node only.
    type: str
  read_strategy:
    description:
      - How the pods are read from the API server.
      - V(node) reads the node, its non-terminated pods (field selector C(spec.nodeName=<node>)) and the cluster's
        unscheduled Pending pods (C(spec.nodeName=)), three list calls whose size is what the node holds, not
        what the cluster holds.
      - V(fleet) reads every non-terminated pod of the cluster in pages of 5,000, keeping only the pods that name one
        of O(resource_names), so a cluster of 150,000 pods is never held in memory whole.
      - V(auto) reads one node, or up to 20 O(nodes), with V(node), and more nodes or the whole fleet (neither O(node)
        nor O(nodes)) with V(fleet). Both give the same ledger for the same nodes.
      - Without O(node) or O(nodes) the read is always V(fleet).
    type: str
    choices: [auto, node, fleet]
    default: auto
  dra:
    description:
      - Also read Dynamic Resource Allocation objects (resource.k8s.io/v1).
      - A V(fleet) read then lists ResourceSlices, ResourceClaims and DeviceClasses once each (three more calls, whatever
        the cluster's size); a V(node) read lists each node's ResourceSlices (field selector C(spec.nodeName)), and the
        DeviceClasses and ResourceClaims once.
      - On an API server that does not serve resource.k8s.io/v1, RV(ledger.dra_served) is V(false) and the rest of the
        ledger is as without DRA.
      - When the credentials may not make one of these reads (403), the rest of the ledger is as without DRA too, and
        RV(ledger.dra_refused) says what was refused; a node that advertises none of O(resource_names) is then refused,
        since its GPUs may be published through DRA.
    type: bool
    default: true
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - gpuops.scheduling.k8s_action_group
  - gpuops.scheduling.in_process
attributes:
  check_mode:
    support: full
    details:
      - The module only reads, so it runs and returns the same result in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - python >= 3.9
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
notes:
  - Pods are counted when their phase is neither C(Succeeded) nor C(Failed), including Pending pods
    already bound to a node and pods being deleted, as the scheduler and kubectl count them.
  - A pod's units follow the Kubernetes resource formula (k8s.io/component-helpers PodRequests) - the sum
    over app containers and sidecar (restartable) init containers, at least the largest init container
    step, plus pod overhead. A container that sets only a limit requests that limit.
  - The user needs C(get)/C(list) on nodes and C(list) on pods in all namespaces (a node read lists the pods of all
    namespaces too, with a field selector); with O(dra), C(list) on resourceslices, deviceclasses and resourceclaims
    (a node read lists the claims too, since one allocated on the node and reserved for no pod still holds its devices).
  - With the Python library C(msgspec) installed (it is in the collection's C(requirements.txt)), only the node and pod
    fields the ledger reads are decoded; on a fleet of 2,000 nodes and 20,000 pods this makes the read about three times
    faster and uses a fifth of the memory. Without it every field is decoded, with the same result.
seealso:
  - module: kubernetes.core.k8s_info
  - name: kubectl describe node
    description: The C(Allocated resources) table this module reproduces.
    link: https://kubernetes.io/docs/reference/kubectl/generated/kubectl_describe/
"""

EXAMPLES = r"""
- name: Read the GPU ledger of the node the pre-flight runs on
  gpuops.scheduling.gpu_ledger_facts:
    node: prod102
    operator_namespace: gpu-operator
  register: gpu_ledger

- name: Refuse a node whose GPUs are already held
  ansible.builtin.assert:
    that:
      - gpu_ledger.ledger.nodes.prod102.resources['nvidia.com/gpu'].free > 0
      - gpu_ledger.ledger.nodes.prod102.operator_running.device_plugin
    fail_msg: "{{ gpu_ledger.ledger.nodes.prod102.resources['nvidia.com/gpu'].holders }}"

- name: Audit every GPU node, including MIG profiles and time-sliced GPUs
  gpuops.scheduling.gpu_ledger_facts:
    resource_names:
      - nvidia.com/gpu
      - nvidia.com/gpu.shared
      - nvidia.com/mig-*
    kubeconfig: /etc/gpuops/kubeconfig
    context: prod

- name: Set the connection once for every Kubernetes module of the collection
  module_defaults:
    group/gpuops.scheduling.k8s:
      kubeconfig: "{{ lookup('ansible.builtin.env', 'HOME') }}/.kube/config"
  block:
    - name: Read the ledger of every GPU node
      gpuops.scheduling.gpu_ledger_facts:
      register: fleet

    - name: Show the free units of every node
      ansible.builtin.debug:
        msg: "{{ fleet.ledger.totals }}"
"""

RETURN = r"""
ledger:
  description:
    - The ledger. Register the result to use it; it is not set as a fact (on a large fleet a fact would double
      the result's size, and then be copied into the host's variables and any fact cache).
  returned: success
  type: dict
  contains:
    nodes:
      description: One entry per reported node, keyed by node name.
      returned: success
      type: dict
      contains:
        ready:
          description: Whether the node's C(Ready) condition is C(True).
          returned: success
          type: bool
          sample: true
        unschedulable:
          description: Whether the node is cordoned (C(spec.unschedulable)).
          returned: success
          type: bool
          sample: false
        labels:
          description:
            - The GPU labels the node carries, among C(feature.node.kubernetes.io/pci-10de.present),
              C(nvidia.com/gpu.present), C(nvidia.com/gpu.product), C(nvidia.com/gpu.count),
              C(nvidia.com/gpu.memory), C(nvidia.com/gpu.replicas), C(nvidia.com/gpu.sharing-strategy)
              and C(nvidia.com/mig.strategy).
          returned: success
          type: dict
          sample: {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H20", "nvidia.com/gpu.count": "1"}
        taints:
          description:
            - Every taint of the node (a pod that does not tolerate a C(NoSchedule) taint cannot use the node's GPUs).
          returned: success
          type: list
          elements: dict
          sample: [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        resources:
          description:
            - One entry per resource the node advertises that matches O(resource_names), keyed by resource name.
            - Empty for a node labelled C(nvidia.com/gpu.present=true) that advertises none of them.
          returned: success
          type: dict
          contains:
            capacity:
              description: Units in the node's capacity.
              returned: success
              type: int
              sample: 1
            allocatable:
              description: Units the scheduler may hand out (the node's allocatable; capacity when the node reports none).
              returned: success
              type: int
              sample: 1
            requested:
              description: Units requested by the node's non-terminated pods (C(Requests) in kubectl describe node).
              returned: success
              type: int
              sample: 1
            limits:
              description: Units limited by the node's non-terminated pods (C(Limits) in kubectl describe node).
              returned: success
              type: int
              sample: 1
            free:
              description: RV(ledger.nodes.resources.allocatable) minus RV(ledger.nodes.resources.requested).
              returned: success
              type: int
              sample: 0
            holders:
              description: The non-terminated pods on the node that request or limit this resource.
              returned: success
              type: list
              elements: dict
              contains:
                namespace:
                  description: Namespace of the pod.
                  returned: success
                  type: str
                  sample: gpu-operator
                name:
                  description: Name of the pod.
                  returned: success
                  type: str
                  sample: gpu-demo-hold
                uid:
                  description: UID of the pod (how node-side tools such as cgroups name it).
                  returned: success
                  type: str
                  sample: 3f0c2a4e-8d1b-4c55-9a7e-2b6f1d9c0e11
                phase:
                  description: The pod's phase (C(Pending) when bound but not started yet).
                  returned: success
                  type: str
                  sample: Running
                units:
                  description: Units of this resource the pod requests.
                  returned: success
                  type: int
                  sample: 1
                priority:
                  description: The pod's priority, null when the API server set none.
                  returned: success
                  type: int
                  sample: 0
                priority_class_name:
                  description: The pod's priority class, null when none.
                  returned: success
                  type: str
                  sample: null
                terminating:
                  description: Whether the pod is being deleted (it holds its units until it is gone).
                  returned: success
                  type: bool
                  sample: false
        allocation:
          description:
            - How the node's GPUs are handed out - V(device_plugin) (extended resources with units), V(dra) (devices in
              ResourceSlices), V(both), or V(none).
          returned: when O(dra) is set and resource.k8s.io/v1 is served
          type: str
          sample: dra
        dra:
          description:
            - The node's Dynamic Resource Allocation ledger, null when no ResourceSlice publishes devices on it.
          returned: when O(dra) is set and resource.k8s.io/v1 is served
          type: dict
          contains:
            drivers:
              description:
                - Per driver (V(gpu.nvidia.com) for NVIDIA's DRA driver) - C(pools), C(total), C(allocated), C(tainted)
                  and C(free) devices, C(classes) (per DeviceClass whose selectors match its devices, the same counts and
                  C(evaluated); for a class whose CEL selector this module does not evaluate, C(evaluated) V(false), the
                  counts null (not established here) and C(candidates), how many devices it may select; and
                  C(extended_resource_name), the extended resource the class serves through its C(extendedResourceName),
                  such as V(nvidia.com/gpu), or null) and C(devices).
                - Each device has C(name) (V(gpu-0)), C(pool), C(uuid), C(product), C(type) (V(gpu) or V(mig)), C(memory)
                  in bytes, C(classes), C(maybe_classes) (the classes whose selector is not evaluated here and may select
                  it, because no readable term of the selector rules it out), C(taints) (the driver's, as V(gpu.nvidia.com/xid=79:NoSchedule)), C(tainted)
                  (a V(NoSchedule) or V(NoExecute) taint, so the scheduler does not allocate it to a claim that does not
                  tolerate it; such a device is counted in C(tainted), not in C(free)), C(allocated), and when allocated
                  C(claim) (namespace, name, uid,
                  C(extended_resource) for a claim the scheduler made for a plain extended resource request),
                  C(request) and C(holders) (the pods the claim is reserved for; several pods sharing one claim share its
                  devices, and a claim reserved for none still holds them). An admin-access allocation holds no device.
              returned: success
              type: dict
              sample: {"gpu.nvidia.com": {"pools": ["prod102"], "total": 1, "allocated": 0, "free": 1, "classes": {}, "devices": []}}
        operator_running:
          description:
            - Per GPU Operator component, whether one of its pods is Running on this node.
          returned: when O(operator_namespace) is set
          type: dict
          sample: {"device_plugin": true, "gpu_feature_discovery": true, "node_feature_discovery": true}
    totals:
      description:
        - Per resource, the sums over the reported nodes of capacity, allocatable, requested, limits and free units.
      returned: success
      type: dict
      sample: {"nvidia.com/gpu": {"capacity": 1, "allocatable": 1, "requested": 1, "limits": 1, "free": 0}}
    pending:
      description:
        - Pods of every namespace that are not bound to a node and request one of the resources
          (whatever node they wait for, since an unbound pod names none).
      returned: success
      type: list
      elements: dict
      contains:
        namespace:
          description: Namespace of the pod.
          returned: success
          type: str
          sample: gpu-operator
        name:
          description: Name of the pod.
          returned: success
          type: str
          sample: gpu-demo-queue
        uid:
          description: UID of the pod.
          returned: success
          type: str
          sample: 9b2d7c1e-0f4a-4e8b-8c3d-5a6e7f8091a2
        phase:
          description: The pod's phase.
          returned: success
          type: str
          sample: Pending
        requests:
          description: Units requested, per matching resource.
          returned: success
          type: dict
          sample: {"nvidia.com/gpu": 1}
        priority:
          description: The pod's priority, null when the API server set none.
          returned: success
          type: int
          sample: 0
        priority_class_name:
          description: The pod's priority class, null when none.
          returned: success
          type: str
          sample: null
        reason:
          description: Reason of the pod's C(PodScheduled) condition, null before the scheduler tried.
          returned: success
          type: str
          sample: Unschedulable
        claims:
          description: The ResourceClaims the pod uses (resolved names), when O(dra) is set.
          returned: when O(dra) is set
          type: list
          elements: str
          sample: ["gpu-demo-queue-gpu-x7k2p"]
        message:
          description: The scheduler's message in the C(PodScheduled) condition.
          returned: success
          type: str
          sample: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        nominated_node_name:
          description: Node the scheduler nominated after preempting pods there, null when none.
          returned: success
          type: str
          sample: null
    dra_totals:
      description: Per DRA driver, the sums over the reported nodes of total, allocated, tainted and free devices.
      returned: when O(dra) is set and resource.k8s.io/v1 is served
      type: dict
      sample: {"gpu.nvidia.com": {"total": 1, "allocated": 1, "tainted": 0, "free": 0}}
    device_classes:
      description: The names of the cluster's DeviceClasses.
      returned: when O(dra) is set and resource.k8s.io/v1 is served
      type: list
      elements: str
      sample: ["gpu.nvidia.com", "mig.nvidia.com"]
    dra_served:
      description:
        - Whether the API server serves resource.k8s.io/v1; null when the credentials may not read it (RV(ledger.dra_refused)).
      returned: when O(dra) is set
      type: bool
      sample: true
    dra_refused:
      description:
        - Null when the DRA objects were read; otherwise the DRA reads the credentials may not make (each API answer,
          naming the user and the resource), and the permissions to grant.
      returned: when O(dra) is set
      type: str
      sample: null
    operator:
      description: The GPU Operator pods of O(operator_namespace).
      returned: when O(operator_namespace) is set
      type: dict
      contains:
        namespace:
          description: The namespace read.
          returned: success
          type: str
          sample: gpu-operator
        pods:
          description: The recognised pods, whatever their node or phase.
          returned: success
          type: list
          elements: dict
          sample:
            - {"name": "nvidia-device-plugin-daemonset-x7k2p", "component": "device_plugin", "node": "prod102", "phase": "Running", "ready": true}
        running:
          description: Per component, whether at least one of its pods is Running anywhere (on O(node) in a V(node) read).
          returned: success
          type: dict
          sample: {"device_plugin": true, "gpu_feature_discovery": true, "node_feature_discovery": true}
read_strategy:
  description:
    - The read made (O(read_strategy)); V(node) for one node, V(fleet) for the whole fleet, unless O(read_strategy)
      said otherwise.
  returned: success
  type: str
  sample: node
api_calls:
  description:
    - Kubernetes API reads made (node list or get, pod lists, operator pod list). A paginated list counts as one.
    - V(node) reads take 3 (4 with O(operator_namespace)), V(fleet) reads 2 (3); with O(dra), a V(fleet) read 3 more and a
      V(node) read 2 more plus one per node.
    - Does not include kubernetes.core's one-time API discovery when it meets a cluster for the first time.
  returned: success
  type: int
  sample: 3
api_requests:
  description:
    - HTTP requests those reads took. A V(node) read's lists take one request each; a V(fleet) read's pod list one
      per 5,000 pods.
  returned: success
  type: int
  sample: 3
api_bytes:
  description:
    - Bytes of the API server's responses to those reads (what the reads cost the API server to send).
  returned: success
  type: int
  sample: 61440
"""

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import k8s_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import run_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.gpu_ledger_facts import OPTIONS, run


def main():
    # The logic is in module_utils/_tasks/gpu_ledger_facts.py, shared with the action plugin that runs it in the
    # controller's process when the task runs on the controller.
    run_module(k8s_module(argument_spec=OPTIONS, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
