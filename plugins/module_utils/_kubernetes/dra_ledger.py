# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The DRA ledger: a node's devices (ResourceSlices) and who holds them (ResourceClaims), resource.k8s.io/v1.

Pure functions over plain API dicts (``kubectl get resourceslices,resourceclaims,deviceclasses -o json``).

* A node's devices are those of the ResourceSlices whose ``spec.nodeName`` is the node, per driver and pool. When a
  pool was republished, only the slices of its newest generation count (as the scheduler does).
* A device is allocated when a claim's ``status.allocation.devices.results`` names its driver, pool and device;
  the claim's holders are the pods in its ``status.reservedFor``. As the scheduler counts it, a claim holds its devices
  once however many pods share it, and an allocated claim reserved for no pod still holds them. A result with
  ``adminAccess: true`` holds nothing (it watches a device that stays allocatable). Claims the scheduler made for a
  plain extended resource request (annotation ``resource.kubernetes.io/extended-resource-claim``) count the same way.
* The DeviceClasses a device belongs to come from the classes' CEL selectors. Only the selectors the NVIDIA chart
  writes (conjunctions of ``device.driver == '...'`` and ``device.attributes['...'].name == '...'``) are evaluated
  here; a class with any other selector is reported with ``evaluated: false``: its counts are unknown (null), and the
  devices it may select (``maybe_classes``: those no term of the selector that can be read here rules out) are named.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.quantity import as_number, parse_quantity

EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"

_DRIVER_TERM = re.compile(r"""^device\.driver\s*==\s*(['"])([^'"]+)\1$""")
_ATTRIBUTE_TERM = re.compile(r"""^device\.attributes\[(['"])([^'"]+)\1\]\.([A-Za-z0-9_]+)\s*==\s*(?:(['"])([^'"]*)\4|(\d+))$""")


def _metadata(obj):
    return obj.get("metadata") or {}


def _spec(obj):
    return obj.get("spec") or {}


def _value(attribute):
    """A device attribute's value (its one typed field: string, int, bool or version)."""
    for kind in ("string", "int", "bool", "version"):
        if kind in (attribute or {}):
            return attribute[kind]
    return None


def device_attribute(device, driver, name):
    """The value of attribute ``name`` of a published device; unqualified names belong to the driver's domain."""
    attributes = device.get("attributes") or {}
    for key in (name, "{0}/{1}".format(driver, name)):
        if key in attributes:
            return _value(attributes[key])
    return None


def compile_selector(expression):
    """A CEL selector of the NVIDIA chart's kind, as a list of terms: ("driver", d) or ("attribute", domain, name,
    value). None when the expression is anything else (this collection does not evaluate CEL in general)."""
    terms = []
    for part in expression.split("&&"):
        part = part.strip()
        while part.startswith("(") and part.endswith(")"):
            part = part[1:-1].strip()
        driver = _DRIVER_TERM.match(part)
        if driver:
            terms.append(("driver", driver.group(2)))
            continue
        attribute = _ATTRIBUTE_TERM.match(part)
        if attribute:
            value = attribute.group(5) if attribute.group(6) is None else int(attribute.group(6))
            terms.append(("attribute", attribute.group(2), attribute.group(3), value))
            continue
        return None
    return terms or None


def known_terms(expression):
    """The terms of a CEL selector that this collection can read, when the selector is a plain conjunction (no ``||``,
    ``?`` or ``!``) of which only some parts are of the NVIDIA chart's kind: a device that fails one of them is
    certainly not selected. [] when nothing can be read (then any device may be selected)."""
    if any(token in expression for token in ("||", "?", "!")) or expression.count("(") != expression.count(")"):
        return []
    return [terms[0] for terms in (compile_selector(part) for part in expression.split("&&")) if terms]


def compile_class(device_class):
    """A DeviceClass as (name, list of selectors' terms or None when a selector cannot be evaluated here, the terms
    that can be read of the selectors that cannot)."""
    selectors, partial, evaluated = [], [], True
    for selector in _spec(device_class).get("selectors") or []:
        expression = ((selector or {}).get("cel") or {}).get("expression") or ""
        terms = compile_selector(expression)
        if terms is None:
            evaluated = False
            partial.append(known_terms(expression))
        else:
            selectors.append(terms)
            partial.append(terms)
    return _metadata(device_class).get("name"), selectors if evaluated else None, partial


def class_matches(selectors, driver, device):
    for terms in selectors:
        for term in terms:
            if term[0] == "driver" and term[1] != driver:
                return False
            if term[0] == "attribute":
                _kind, domain, name, wanted = term
                attributes = device.get("attributes") or {}
                key = name if domain == driver else "{0}/{1}".format(domain, name)
                found = _value(attributes.get(key))
                if found is None or found != wanted:
                    return False
    return True


# Taint effects that keep the scheduler from allocating a device to a claim that does not tolerate them (None, and any
# effect this collection does not know, only inform: Kubernetes tells consumers to treat unknown effects like None).
BLOCKING_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


def device_taints(device):
    """A published device's taints, as ``key=value:Effect`` texts sorted."""
    return sorted("{0}{1}:{2}".format(taint.get("key"), "=" + taint["value"] if taint.get("value") else "", taint.get("effect"))
                  for taint in device.get("taints") or [])


def is_blocked(device):
    """Whether a taint keeps the scheduler from allocating the device (to the demo's claims, which tolerate none)."""
    return any((taint or {}).get("effect") in BLOCKING_TAINT_EFFECTS for taint in device.get("taints") or [])


def _pool(item):
    """A slice's ((driver, pool name), pool generation)."""
    pool = _spec(item).get("pool") or {}
    return (_spec(item).get("driver"), pool.get("name")), pool.get("generation") or 0


def _newest_slices(slices):
    """Per (driver, pool), only the slices of the pool's newest generation."""
    newest = {}
    for key, generation in map(_pool, slices):
        newest[key] = max(newest.get(key, 0), generation)
    return [item for item in slices if _pool(item)[1] == newest[_pool(item)[0]]]


def node_slices(slices, node):
    return [item for item in slices if _spec(item).get("nodeName") == node]


def _claim_identity(claim):
    metadata = _metadata(claim)
    annotations = metadata.get("annotations") or {}
    return {
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
        "extended_resource": annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true",
    }


def _holders(claim):
    namespace = _metadata(claim).get("namespace")
    return sorted(
        ({"namespace": namespace, "name": entry.get("name"), "uid": entry.get("uid"), "resource": entry.get("resource")}
         for entry in (claim.get("status") or {}).get("reservedFor") or []),
        key=lambda holder: (holder["name"] or ""))


def allocations(claims):
    """{(driver, pool, device): (claim, request)} for every device ``claims`` hold. An admin-access result holds no
    device (the scheduler still allocates it to other claims), so it is left out."""
    allocated = {}
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("adminAccess"):
                continue
            allocated[(result.get("driver"), result.get("pool"), result.get("device"))] = (claim, result.get("request"))
    return allocated


def build_node_dra(node, slices, claims, device_classes):
    """The DRA ledger of one node: ``{"drivers": {driver: {...}}}``, or None when no slice names the node.

    Per driver: its pools, every device (name, pool, uuid, product, type, memory in bytes, the classes it belongs
    to and those whose selector could not be evaluated here that may select it, its taints, and when allocated the
    claim, the request and the pods holding it), and the counts total / allocated / tainted / free (a device with a NoSchedule or NoExecute taint is not free),
    also per DeviceClass (with the extended resource the class serves, its ``extendedResourceName``, or None).
    ``claims`` may hold claims of other nodes: only results naming this node's devices count.
    """
    mine = _newest_slices(node_slices(slices, node))
    if not mine:
        return None
    compiled = [compile_class(item) for item in device_classes]
    # A class with extendedResourceName serves plain requests of that resource (nvidia.com/gpu) through DRA.
    extended = dict((_metadata(item).get("name"), _spec(item).get("extendedResourceName")) for item in device_classes)
    allocated = allocations(claims)
    drivers = {}
    for item in mine:
        spec = _spec(item)
        driver, pool = spec.get("driver"), (spec.get("pool") or {}).get("name")
        entry = drivers.setdefault(driver, {"pools": [], "devices": [], "classes": {}})
        if pool not in entry["pools"]:
            entry["pools"].append(pool)
        for device in spec.get("devices") or []:
            memory = ((device.get("capacity") or {}).get("memory") or {}).get("value")
            classes = sorted(name for name, selectors, _partial in compiled
                             if selectors is not None and class_matches(selectors, driver, device))
            maybe = sorted(name for name, selectors, partial in compiled
                           if selectors is None and class_matches(partial, driver, device))
            record = {
                "name": device.get("name"),
                "pool": pool,
                "uuid": device_attribute(device, driver, "uuid"),
                "product": device_attribute(device, driver, "productName"),
                "type": device_attribute(device, driver, "type"),
                "memory": as_number(parse_quantity(memory)) if memory is not None else None,
                "classes": classes,
                "maybe_classes": maybe,
                "taints": device_taints(device),
                "tainted": is_blocked(device),
                "allocated": False,
                "claim": None,
                "request": None,
                "holders": [],
            }
            holder = allocated.get((driver, pool, device.get("name")))
            if holder:
                claim, request = holder
                record.update({"allocated": True, "claim": _claim_identity(claim), "request": request,
                               "holders": _holders(claim)})
            entry["devices"].append(record)
    for driver, entry in drivers.items():
        entry["pools"].sort()
        entry["devices"].sort(key=lambda record: (record["pool"] or "", _natural(record["name"])))
        entry.update(_counts(entry["devices"]))
        for name, selectors, _partial in compiled:
            in_class = [record for record in entry["devices"] if name in record["classes"]]
            maybe = [record for record in entry["devices"] if name in record["maybe_classes"]]
            if in_class:
                entry["classes"][name] = dict(_counts(in_class), evaluated=True, extended_resource_name=extended.get(name))
            elif selectors is None and maybe:
                # Not established here: the counts are unknown, not 0; ``candidates`` is how many devices it may select.
                entry["classes"][name] = dict(dict.fromkeys(("total", "allocated", "tainted", "free")), evaluated=False,
                                              candidates=len(maybe), extended_resource_name=extended.get(name))
    return {"drivers": drivers}


def _natural(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name or "")]


def _counts(devices):
    """total, allocated, tainted (a NoSchedule or NoExecute taint: not allocatable to a claim that does not tolerate it)
    and free (neither allocated nor tainted)."""
    allocated = sum(1 for record in devices if record["allocated"])
    tainted = sum(1 for record in devices if record.get("tainted"))
    blocked = sum(1 for record in devices if record.get("tainted") and not record["allocated"])
    return {"total": len(devices), "allocated": allocated, "tainted": tainted, "free": len(devices) - allocated - blocked}


def dra_totals(ledger_nodes):
    """Per driver, the sums over the nodes of total, allocated, tainted and free devices."""
    totals = {}
    for entry in ledger_nodes.values():
        for driver, counts in ((entry.get("dra") or {}).get("drivers") or {}).items():
            total = totals.setdefault(driver, {"total": 0, "allocated": 0, "tainted": 0, "free": 0})
            for key in total:
                total[key] += counts[key]
    return totals


def dra_node_names(slices):
    """The nodes some ResourceSlice publishes devices for."""
    return sorted(set(_spec(item).get("nodeName") for item in slices
                      if _spec(item).get("nodeName") and _spec(item).get("devices")))


def published_devices(slices, node):
    """Every device the ResourceSlices publish for ``node`` (the newest generation of each pool, as the scheduler reads
    them), as sorted ``driver/pool/device`` names: [] when no slice names the node."""
    return sorted("{0}/{1}/{2}".format(_spec(item).get("driver"), (_spec(item).get("pool") or {}).get("name"), device.get("name"))
                  for item in _newest_slices(node_slices(slices, node)) for device in _spec(item).get("devices") or [])


def pod_claim_refs(pod):
    """(namespace, claim name) of every ResourceClaim a pod uses: its pod claims as resolved in
    ``status.resourceClaimStatuses`` (or named directly in the spec), and the scheduler's extended-resource claim."""
    namespace = _metadata(pod).get("namespace")
    status = pod.get("status") or {}
    entries = ((_spec(pod).get("resourceClaims") or []) + (status.get("resourceClaimStatuses") or [])
               + [status.get("extendedResourceClaimStatus") or {}])
    return sorted(set((namespace, entry["resourceClaimName"]) for entry in entries if entry.get("resourceClaimName")))


def uses_claims(pod):
    """Whether a pod asks for devices through DRA (pod claims or an extended-resource claim)."""
    return bool(_spec(pod).get("resourceClaims")) or bool(
        ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName"))
