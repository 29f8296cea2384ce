# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The scheduler's ledger of extended resources, computed the way ``kubectl describe node`` does.

Pure functions over plain API dicts (``kubectl get -o json``, or ``to_dict()`` of kubernetes.core's
dynamic client objects), so unit tests feed recorded objects. The only function that reads is
``read_ledger``, through a reader object (``CoreV1Reader`` in _kubernetes/client.py).

kubectl sums, over the node's non-terminated pods, each pod's effective request and limit as
defined by k8s.io/component-helpers/resource (PodRequests / PodLimits, the sidecar KEP-753 formula):

* app containers are summed;
* a restartable init container (``restartPolicy: Always``, a sidecar) runs alongside them, so it
  is added to the sum; a regular init container runs alone, with the sidecars started before it;
* the pod needs max(sum of the above, the largest "init container + earlier sidecars");
* pod overhead is added to requests, and to limits that are set and non-zero.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import re
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import dra_ledger
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.quantity import as_number, parse_quantity

DEFAULT_RESOURCE_NAMES = ("nvidia.com/gpu",)

# The node labels that explain where GPU units come from: NFD's PCI label for NVIDIA (vendor 10de),
# the GPU Operator's gpu.present, and GPU Feature Discovery's labels.
GPU_LABELS = (
    "feature.node.kubernetes.io/pci-10de.present",
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/mig.strategy",
)
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"

TERMINATED_PHASES = ("Succeeded", "Failed")
# Same selector kubectl describe node uses; the API server filters, we re-check anyway.
NON_TERMINATED_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"

# GPU Operator components, recognised by the values of their app labels or by their pod names.
OPERATOR_COMPONENTS = (
    ("device_plugin", ("nvidia-device-plugin-daemonset", "nvidia-device-plugin")),
    ("gpu_feature_discovery", ("gpu-feature-discovery",)),
    ("node_feature_discovery", ("node-feature-discovery",)),
)
_APP_LABELS = ("app", "app.kubernetes.io/name")

# The fields of Node and Pod objects this file reads, for readers that can skip the rest while decoding
# (``FieldsDecoder`` in client.py says how to read these). Large fleets carry mostly what is not listed here.
_CONDITION_FIELDS = [{"type": None, "status": None, "reason": None, "message": None}]
NODE_FIELDS = {
    "metadata": {"name": None, "labels": None},
    "spec": {"unschedulable": None, "taints": [{"key": None, "value": None, "effect": None}]},
    "status": {"capacity": None, "allocatable": None, "conditions": _CONDITION_FIELDS},
}
_RESOURCES_FIELDS = {"resources": {"requests": None, "limits": None}}
POD_FIELDS = {
    "metadata": {"name": None, "namespace": None, "uid": None, "deletionTimestamp": None},
    "spec": {
        "nodeName": None, "priority": None, "priorityClassName": None, "overhead": None,
        "containers": [_RESOURCES_FIELDS],
        "initContainers": [dict(_RESOURCES_FIELDS, restartPolicy=None)],
        "resourceClaims": None,
    },
    "status": {"phase": None, "nominatedNodeName": None, "conditions": _CONDITION_FIELDS,
               "resourceClaimStatuses": None, "extendedResourceClaimStatus": None},
}
OPERATOR_POD_FIELDS = {
    "metadata": {"name": None, "labels": None},
    "spec": {"nodeName": None},
    "status": {"phase": None, "conditions": _CONDITION_FIELDS},
}


class LedgerError(Exception):
    """The ledger cannot be read for the node asked for (unknown node, no such resource)."""


def matches_any(resource_name, patterns):
    """Whether a resource name matches one of the exact names or fnmatch patterns."""
    return any(fnmatch.fnmatchcase(resource_name, pattern) for pattern in patterns)


class ResourceFilter(dict):
    """Whether a resource name matches ``patterns`` (``matches_any``), remembered per name: a fleet's
    pods name a handful of resources, and parsing only the wanted quantities saves most of the sums' time."""

    def __init__(self, patterns):
        super(ResourceFilter, self).__init__()
        self.patterns = patterns

    def __missing__(self, name):
        self[name] = matched = matches_any(name, self.patterns)
        return matched


def _quantities(resource_list, wanted=None):
    return {name: parse_quantity(value) for name, value in (resource_list or {}).items()
            if wanted is None or wanted[name]}


def _add(total, addend):
    for name, value in addend.items():
        total[name] = total.get(name, Decimal(0)) + value


def _keep_max(total, candidate):
    for name, value in candidate.items():
        if name not in total or value > total[name]:
            total[name] = value


def _container_requests(container, wanted):
    # The API server defaults a missing request to the limit; do the same for objects that were
    # never defaulted (fixtures, manifests), so a limit-only extended resource counts as requested.
    resources = container.get("resources") or {}
    requests = _quantities(resources.get("limits"), wanted)
    requests.update(_quantities(resources.get("requests"), wanted))
    return requests


def _container_limits(container, wanted):
    return _quantities((container.get("resources") or {}).get("limits"), wanted)


def _is_sidecar(init_container):
    return init_container.get("restartPolicy") == "Always"


def _aggregate_containers(spec, container_resources, wanted):
    """component-helpers' aggregateContainerResourcesByFn: containers, sidecars and init containers.

    Each resource is summed on its own: leaving out those that ``wanted`` refuses changes no other sum.
    """
    total = {}
    for container in spec.get("containers") or []:
        _add(total, container_resources(container, wanted))
    sidecars_so_far = {}
    largest_init_step = {}
    for init_container in spec.get("initContainers") or []:
        own = container_resources(init_container, wanted)
        if _is_sidecar(init_container):
            _add(total, own)
            _add(sidecars_so_far, own)
            step = dict(sidecars_so_far)
        else:
            step = dict(own)
            _add(step, sidecars_so_far)
        _keep_max(largest_init_step, step)
    _keep_max(total, largest_init_step)
    return total


def pod_requests(pod, wanted=None):
    """The pod's effective requests per resource, as the scheduler and kubectl count them.

    ``wanted``: a ``ResourceFilter``; only the resources it accepts are computed (all when None).
    """
    spec = pod.get("spec") or {}
    requests = _aggregate_containers(spec, _container_requests, wanted)
    _add(requests, _quantities(spec.get("overhead"), wanted))
    return requests


def pod_limits(pod, wanted=None):
    """The pod's effective limits per resource; overhead counts only on limits set above zero."""
    spec = pod.get("spec") or {}
    limits = _aggregate_containers(spec, _container_limits, wanted)
    for name, value in _quantities(spec.get("overhead"), wanted).items():
        if limits.get(name):
            limits[name] += value
    return limits


def _names_a_wanted_resource(spec, wanted):
    """Whether a pod spec's containers, init containers or overhead name a resource ``wanted`` accepts.

    Most pods of a fleet name none (CPU and memory only): the ledger skips them before any sum.
    """
    for containers in (spec.get("containers"), spec.get("initContainers")):
        for container in containers or ():
            resources = container.get("resources") or {}
            for resource_list in (resources.get("requests"), resources.get("limits")):
                if resource_list and any(wanted[name] for name in resource_list):
                    return True
    overhead = spec.get("overhead")
    return bool(overhead) and any(wanted[name] for name in overhead)


def is_terminated(pod):
    return (pod.get("status") or {}).get("phase") in TERMINATED_PHASES


def node_name(node):
    return node["metadata"]["name"]


def _advertised(node):
    """Names of the node's resources, in its capacity or allocatable, sorted."""
    status = node.get("status") or {}
    return sorted(set(status.get("capacity") or {}) | set(status.get("allocatable") or {}))


def advertised_resources(node, patterns):
    """Names of the node's resources that match ``patterns``, sorted."""
    return [name for name in _advertised(node) if matches_any(name, patterns)]


def missing_resources_message(node, patterns):
    """Why a node cannot be used: it advertises none of the resources asked for."""
    message = "node {0} advertises none of {1}; it advertises: {2}".format(
        node_name(node), ", ".join(patterns), ", ".join(_advertised(node)) or "nothing")
    if _labels(node).get(GPU_PRESENT_LABEL) == "true":
        message += " (it is labelled {0}=true: is the device plugin running on it?)".format(GPU_PRESENT_LABEL)
    return message


def _labels(obj):
    return (obj.get("metadata") or {}).get("labels") or {}


def _condition(obj, condition_type):
    """A Node's or Pod's first condition of ``condition_type``, {} when it has none."""
    return next((condition for condition in (obj.get("status") or {}).get("conditions") or []
                 if condition.get("type") == condition_type), {})


def _is_ready(obj):
    return _condition(obj, "Ready").get("status") == "True"


def _taints(node):
    return [
        {"key": taint.get("key"), "value": taint.get("value"), "effect": taint.get("effect")}
        for taint in (node.get("spec") or {}).get("taints") or []
    ]


def _pod_identity(pod):
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return {
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
        "phase": (pod.get("status") or {}).get("phase"),
        "priority": spec.get("priority"),
        "priority_class_name": spec.get("priorityClassName"),
    }


def _sort_key(entry):
    return (entry["namespace"] or "", entry["name"] or "")


def _resource_ledger(node, resource_name, bound_pods):
    status = node.get("status") or {}
    capacity = parse_quantity((status.get("capacity") or {}).get(resource_name, 0))
    # kubectl falls back to capacity when a node reports no allocatable at all.
    allocatable_list = status.get("allocatable") or status.get("capacity") or {}
    allocatable = parse_quantity(allocatable_list.get(resource_name, 0))
    requested = limited = Decimal(0)
    holders = []
    for pod, requests, limits in bound_pods:
        units = requests.get(resource_name, Decimal(0))
        pod_limit = limits.get(resource_name, Decimal(0))
        requested += units
        limited += pod_limit
        if units or pod_limit:
            holder = _pod_identity(pod)
            holder["units"] = as_number(units)
            holder["terminating"] = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
            holders.append(holder)
    return {
        "capacity": as_number(capacity),
        "allocatable": as_number(allocatable),
        "requested": as_number(requested),
        "limits": as_number(limited),
        "free": as_number(allocatable - requested),
        "holders": sorted(holders, key=_sort_key),
    }


def _generated_pod_name(marker):
    """Pod names a controller derives from a workload called ``marker``.

    A Helm release may prefix it, NFD adds its role, a Deployment adds a ReplicaSet hash, and every
    pod ends in five random characters: gpu-operator-node-feature-discovery-worker-9xk2m. Other
    workloads that merely start with the marker (nvidia-device-plugin-mps-control-daemon-x) do not match.
    """
    return re.compile(r"(?:^|-){0}(?:-(?:worker|master|gc|topology-updater))?(?:-[a-z0-9]{{6,10}})?-[a-z0-9]{{5}}$".format(re.escape(marker)))


_OPERATOR_POD_NAMES = tuple(
    (component, tuple(_generated_pod_name(marker) for marker in markers)) for component, markers in OPERATOR_COMPONENTS
)


def operator_component(pod):
    """Which GPU Operator component a pod is (``device_plugin``, ...), or None."""
    labels = _labels(pod)
    app_names = {labels.get(label) for label in _APP_LABELS}
    for component, markers in OPERATOR_COMPONENTS:
        if app_names.intersection(markers):
            return component
    pod_name = (pod.get("metadata") or {}).get("name") or ""
    for component, name_patterns in _OPERATOR_POD_NAMES:
        if any(pattern.search(pod_name) for pattern in name_patterns):
            return component
    return None


def summarize_operator_pods(namespace, pods):
    """GPU Operator pods of ``namespace`` that the ledger depends on, and which components run."""
    entries = [{
        "name": pod["metadata"]["name"],
        "component": component,
        "node": (pod.get("spec") or {}).get("nodeName"),
        "phase": (pod.get("status") or {}).get("phase"),
        "ready": _is_ready(pod),
    } for pod, component in ((pod, operator_component(pod)) for pod in pods) if component is not None]
    entries.sort(key=lambda entry: (entry["component"], entry["name"]))
    return {"namespace": namespace, "pods": entries, "running": _running(entries)}


def _running(entries, node=None):
    """Per GPU Operator component, whether one of its pods is Running (on ``node`` when given)."""
    return {
        component: any(entry["component"] == component and entry["phase"] == "Running"
                       and (node is None or entry["node"] == node) for entry in entries)
        for component, _markers in OPERATOR_COMPONENTS
    }


def _is_gpu_node(node, patterns, dra_nodes=()):
    return (bool(advertised_resources(node, patterns)) or _labels(node).get(GPU_PRESENT_LABEL) == "true"
            or node_name(node) in dra_nodes)


def allocation_path(resources, dra):
    """How a node's GPUs are handed out: "device_plugin" (extended resources with units), "dra" (ResourceSlice
    devices), "both", or "none"."""
    plugin = any(entry["capacity"] for entry in resources.values())
    devices = bool(dra) and any(driver["total"] for driver in dra["drivers"].values())
    return {(True, False): "device_plugin", (False, True): "dra", (True, True): "both"}.get((plugin, devices), "none")


def build_ledger(nodes, pods, patterns=DEFAULT_RESOURCE_NAMES, operator=None, dra=None):
    """The ledger of ``patterns`` resources for ``nodes``, and of their DRA devices.

    ``nodes``: Node dicts; those advertising none of the resources, not labelled ``nvidia.com/gpu.present=true``
    and named by no ResourceSlice are left out (not GPU nodes).
    ``dra``: None when DRA is not read, else ``{"slices": [...], "claims": [...], "classes": [...]}`` (ResourceSlices,
    ResourceClaims, DeviceClasses; ``dra_ledger``); each node then gets ``dra`` (None when no slice names it).
    ``pods``: Pod dicts from every namespace; terminated ones are skipped, pods bound to other
    nodes are ignored, unbound ones requesting a resource are listed under ``pending``.
    ``operator``: the result of ``summarize_operator_pods``, or None when not asked for.
    """
    dra_nodes = set(dra_ledger.dra_node_names(dra["slices"])) if dra else set()
    gpu_nodes = [node for node in nodes if _is_gpu_node(node, patterns, dra_nodes)]
    bound_pods = {node_name(node): [] for node in gpu_nodes}
    pending = []
    wanted = ResourceFilter(patterns)
    for pod in pods:
        if is_terminated(pod):
            continue
        spec = pod.get("spec") or {}
        bound_to = spec.get("nodeName")
        claims = dra is not None and dra_ledger.uses_claims(pod)
        if bound_to and bound_to not in bound_pods or not (claims or _names_a_wanted_resource(spec, wanted)):
            # Bound elsewhere, or asks for none of the resources: it neither holds units here nor waits for them.
            continue
        requests = pod_requests(pod, wanted)
        if bound_to:
            bound_pods[bound_to].append((pod, requests, pod_limits(pod, wanted)))
            continue
        pending_units = {name: as_number(units) for name, units in requests.items() if units}
        if pending_units or claims:
            entry = _pod_identity(pod)
            condition = _condition(pod, "PodScheduled")
            entry.update({
                "requests": pending_units,
                "reason": condition.get("reason"),
                "message": condition.get("message"),
                "nominated_node_name": (pod.get("status") or {}).get("nominatedNodeName"),
            })
            if dra is not None:
                entry["claims"] = [name for _namespace, name in dra_ledger.pod_claim_refs(pod)]
            pending.append(entry)

    ledger_nodes = {}
    totals = {}
    for node in gpu_nodes:
        name = node_name(node)
        resources = {
            resource: _resource_ledger(node, resource, bound_pods[name])
            for resource in advertised_resources(node, patterns)
        }
        for resource, entry in resources.items():
            total = totals.setdefault(resource, {"capacity": 0, "allocatable": 0, "requested": 0, "limits": 0, "free": 0})
            for key in total:
                total[key] += entry[key]
        labels = _labels(node)
        ledger_nodes[name] = {
            "ready": _is_ready(node),
            "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
            "labels": {label: labels[label] for label in GPU_LABELS if label in labels},
            "taints": _taints(node),
            "resources": resources,
        }
        if operator is not None:
            ledger_nodes[name]["operator_running"] = _running(operator["pods"], node=name)
        if dra is not None:
            node_dra = dra_ledger.build_node_dra(name, dra["slices"], dra["claims"], dra["classes"])
            ledger_nodes[name]["dra"] = node_dra
            ledger_nodes[name]["allocation"] = allocation_path(resources, node_dra)

    ledger = {"nodes": ledger_nodes, "totals": totals, "pending": sorted(pending, key=_sort_key)}
    if operator is not None:
        ledger["operator"] = operator
    if dra is not None:
        ledger["dra_totals"] = dra_ledger.dra_totals(ledger_nodes)
        ledger["device_classes"] = sorted((item.get("metadata") or {}).get("name") for item in dra["classes"])
    return ledger


# Read strategies (``read_ledger``). "node": per node, the node and its own non-terminated pods (field selector
# spec.nodeName, which the API server's watch cache indexes), plus the cluster's unscheduled pods: what
# ``kubectl describe node`` costs, whatever the cluster's size. "fleet": every node and one list of every pod.
STRATEGY_NODE = "node"
STRATEGY_FLEET = "fleet"
READ_STRATEGIES = ("auto", STRATEGY_NODE, STRATEGY_FLEET)
# Above this many nodes, "auto" reads the fleet. Node reads send what the nodes hold, in two requests a node (and the
# unscheduled pods once); the fleet read sends the whole cluster in one pass. The cluster's size is not known before
# reading, so the number of nodes asked for decides: 20 node reads of 5,000 nodes / 150,000 pods send ~0.1% of the
# cluster each (bench/ledger_big.py), while on a small cluster asked for most of its nodes one pass is the cheaper.
NODE_READ_MAX_NODES = 20
# Unscheduled pods (not bound to any node, not terminated: an unbound pod is always Pending until it ends).
UNSCHEDULED_FIELD_SELECTOR = "spec.nodeName=,status.phase=Pending"
# The fleet read's page size: pages are decoded one at a time and only the pods the ledger counts are kept, so
# a cluster of 150,000 pods is never held whole, raw or decoded (bench/ledger_big.py measures it).
FLEET_PAGE_SIZE = 5000


def node_pods_field_selector(node):
    """The field selector of ``node``'s non-terminated pods (kubectl describe node's)."""
    return "spec.nodeName={0},{1}".format(node, NON_TERMINATED_FIELD_SELECTOR)


def choose_read_strategy(nodes, strategy="auto"):
    """Which read ``read_ledger`` makes for ``nodes`` (a list of node names, empty for the whole fleet).

    The fleet-wide ledger is always a fleet read; a few nodes are read node by node (``NODE_READ_MAX_NODES``).
    """
    if strategy not in READ_STRATEGIES:
        raise ValueError("unknown read strategy {0!r}: one of {1}".format(strategy, ", ".join(READ_STRATEGIES)))
    if not nodes:
        return STRATEGY_FLEET
    if strategy != "auto":
        return strategy
    return STRATEGY_NODE if len(nodes) <= NODE_READ_MAX_NODES else STRATEGY_FLEET


def counted_pod(pod, wanted, claims=False):
    """Whether ``build_ledger`` would count or list ``pod``: not terminated, and naming one of the wanted resources
    (or, with ``claims``, using ResourceClaims).

    The fleet read keeps only these while it decodes page after page; most pods of a cluster name none.
    """
    return not is_terminated(pod) and (_names_a_wanted_resource(pod.get("spec") or {}, wanted)
                                       or claims and dra_ledger.uses_claims(pod))


def _node_names(node):
    return sorted(set([node] if isinstance(node, str) else node or []))


def _checked_node(reader, name, node_object, patterns, dra_nodes=None, dra_refused=None):
    """The node, or why it cannot be read: absent, or advertising none of ``patterns`` and (``dra_nodes``: the nodes
    ResourceSlices name, None when DRA is not read) having no DRA devices either. ``dra_refused``: why the DRA objects
    could not be read with these credentials, when they could not (the node may then be a DRA node)."""
    if node_object is None:
        raise LedgerError("node '{0}' not found on {1}".format(name, reader.host))
    if not advertised_resources(node_object, patterns) and name not in (dra_nodes or ()):
        message = missing_resources_message(node_object, patterns)
        if dra_refused:
            message += "; its GPUs may be published through DRA, but {0}".format(dra_refused)
        elif dra_nodes is not None:
            message += "; no ResourceSlice publishes devices on it either"
        raise LedgerError(message)
    return node_object


# The API's answer when the credentials may not make a request. An identity made before the DRA reads were granted
# (playbooks/preflight_rbac.yml grants them) still gets the device-plugin ledger, and is told what it may not read.
FORBIDDEN = 403
DRA_READS_HINT = ("Grant list on resourceslices and deviceclasses, and get and list on resourceclaims, in API group "
                  "resource.k8s.io (playbooks/preflight_rbac.yml grants them), or read without DRA (dra: false)")


def dra_refused_message(refused):
    """One sentence for the DRA reads the credentials may not make (``refused``: their errors), None when none."""
    if not refused:
        return None
    return "DRA not readable with these credentials: {0}. {1}".format("; ".join(sorted(set(refused))), DRA_READS_HINT)


def _dra_read(refused, read, *args, **kwargs):
    """One DRA read; a refusal (403) is noted in ``refused`` and read as nothing, any other failure raised."""
    try:
        return read(*args, **kwargs)
    except Exception as error:  # the reader's K8sApiError: its status says whether the credentials were refused
        if getattr(error, "status", None) != FORBIDDEN:
            raise
        refused.append(str(error))
        return None


def _read_dra_fleet(reader, refused):
    slices = _dra_read(refused, reader.list_resource_slices)
    if slices is None and not refused:
        return None
    claims = _dra_read(refused, reader.list_resource_claims) or []
    classes = _dra_read(refused, reader.list_device_classes) or []
    return None if refused else {"slices": slices, "claims": claims, "classes": classes}


def read_ledger(reader, node=None, patterns=DEFAULT_RESOURCE_NAMES, operator_namespace=None, strategy="auto", dra=False):
    """The ledger of one node, a few nodes (``node``: a name or a list of names) or the whole fleet (None).

    ``reader`` provides ``get_node(name, fields)`` (None when absent), ``list_nodes(fields)`` and
    ``list_pods(namespace=None, field_selector=None, fields=None, keep=None, page_size=None)`` returning plain
    dicts with at least ``fields`` (``NODE_FIELDS``, ``POD_FIELDS``, ``OPERATOR_POD_FIELDS``; ``keep`` drops the
    items it refuses as pages arrive), and ``host``.
    ``strategy`` (``choose_read_strategy``): "node" reads, per node, the node and its non-terminated pods, then
    the cluster's unscheduled pods once; "fleet" the nodes and every non-terminated pod in pages, keeping only
    those the ledger counts. Both give the same ledger for the same nodes. The operator namespace's pods are
    read per node too in a node read (a DaemonSet has a pod on every node).
    """
    names = _node_names(node)
    chosen = choose_read_strategy(names, strategy)
    wanted = ResourceFilter(patterns)

    def keep(pod):
        return counted_pod(pod, wanted, claims=dra)

    operator_pods = None
    dra_objects = None
    # The DRA reads the credentials may not make (their errors): then no DRA ledger, the device plugin's still.
    refused = []
    if chosen == STRATEGY_NODE:
        def read_one(name):
            node_object = reader.get_node(name, fields=NODE_FIELDS)
            if node_object is None:
                _checked_node(reader, name, node_object, patterns)
            pods = reader.list_pods(field_selector=node_pods_field_selector(name), fields=POD_FIELDS, keep=keep)
            # None when the API server does not serve resource.k8s.io/v1, or the credentials may not read the slices.
            slices = (_dra_read(refused, reader.list_resource_slices, field_selector="spec.nodeName={0}".format(name))
                      if dra else None)
            operator = (reader.list_pods(namespace=operator_namespace, field_selector="spec.nodeName={0}".format(name),
                                         fields=OPERATOR_POD_FIELDS) if operator_namespace else None)
            return node_object, pods, operator, slices

        with ThreadPoolExecutor(max_workers=min(8, len(names) + 2)) as pool:
            unscheduled = pool.submit(reader.list_pods, field_selector=UNSCHEDULED_FIELD_SELECTOR, fields=POD_FIELDS,
                                      keep=keep)
            classes = pool.submit(_dra_read, refused, reader.list_device_classes) if dra else None
            # Every claim, not only those the node's pods use: an allocated claim reserved for no pod still holds its
            # devices (claims have no field selector for the node they are allocated on).
            claims = pool.submit(_dra_read, refused, reader.list_resource_claims) if dra else None
            node_objects, node_pods, node_operator_pods, node_slices = zip(*pool.map(read_one, names))
            pods = unscheduled.result()
            classes = classes.result() if classes else None
            claims = claims.result() if claims else None
        # Checked once every read is in: a refused read of any of them means no DRA ledger for any node.
        nodes = [_checked_node(reader, name, node_object, patterns,
                               dra_ledger.dra_node_names(slices) if slices is not None and not refused else None,
                               dra_refused_message(refused))
                 for name, node_object, slices in zip(names, node_objects, node_slices)]
        if dra and classes is not None and not refused:
            dra_objects = {"slices": [item for slices in node_slices for item in slices or ()],
                           "claims": claims or [],
                           "classes": classes}
        bound = [pod for pods_of_node in node_pods for pod in pods_of_node]
        # A pod bound between the two reads would be both pending and a holder: it is a holder.
        bound_uids = set((pod.get("metadata") or {}).get("uid") for pod in bound)
        pods = [pod for pod in pods if (pod.get("metadata") or {}).get("uid") not in bound_uids] + bound
        if operator_namespace:
            operator_pods = [pod for pods_of_node in node_operator_pods for pod in pods_of_node]
    else:
        # The two lists are read at once: the API server serializes one while this process decodes the other.
        with ThreadPoolExecutor(max_workers=1) as background:
            if names and len(names) <= NODE_READ_MAX_NODES:
                listed_nodes = background.submit(lambda: [reader.get_node(name, fields=NODE_FIELDS) for name in names])
            else:
                listed_nodes = background.submit(reader.list_nodes, fields=NODE_FIELDS)
            pods = reader.list_pods(field_selector=NON_TERMINATED_FIELD_SELECTOR, fields=POD_FIELDS, keep=keep,
                                    page_size=FLEET_PAGE_SIZE)
            nodes = listed_nodes.result()
        dra_objects = _read_dra_fleet(reader, refused) if dra else None
        if names:
            by_name = dict((node_name(item), item) for item in nodes if item is not None)
            dra_nodes = dra_ledger.dra_node_names(dra_objects["slices"]) if dra_objects else None
            nodes = [_checked_node(reader, name, by_name.get(name), patterns, dra_nodes, dra_refused_message(refused))
                     for name in names]
        if operator_namespace:
            operator_pods = reader.list_pods(namespace=operator_namespace, fields=OPERATOR_POD_FIELDS)
    operator = summarize_operator_pods(operator_namespace, operator_pods) if operator_namespace else None
    ledger = build_ledger(nodes, pods, patterns, operator, dra_objects)
    if dra:
        # Whether the API serves resource.k8s.io/v1 is unknown when the credentials may not read it (403 comes first).
        ledger["dra_served"] = None if refused else dra_objects is not None
        ledger["dra_refused"] = dra_refused_message(refused)
    if names:
        # A node read lists only the nodes asked for; build_ledger leaves out a node without GPUs, which
        # _checked_node already refused.
        ledger["nodes"] = dict((name, ledger["nodes"][name]) for name in names if name in ledger["nodes"])
    return ledger
