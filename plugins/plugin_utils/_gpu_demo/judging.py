# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""What the gpu_demo judgements (preflight.py, walk.py, cleanup.py beside this file) share: reading registered results,
and phrasing lists the way the role's reports always have (Jinja's join, unique and int)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.dra import class_entry


def reason(result):
    """Why a call or step failed: its error, else its msg (None when it says neither)."""
    return result["error"] if "error" in result else result.get("msg")


def k8s_objects(result):
    """The objects a kubernetes.core.k8s task returned: one (``result``), several (``result.results``) or none."""
    if not isinstance(result, dict) or result.get("skipped") or "result" not in result:
        return []
    body = result.get("result") or {}
    items = body["results"] if isinstance(body, dict) and "results" in body else [result]
    return [item for item in items if isinstance(item, dict) and item.get("result")]


def k8s_deleted(result):
    """Names of the objects a kubernetes.core.k8s ``state: absent`` task deleted."""
    return [((item["result"].get("metadata") or {}).get("name")) for item in k8s_objects(result) if item.get("changed")]


def resource_entry(ledger, node, resource):
    """gpu_ledger_facts' entry for one node's resource ({} when the ledger does not have it). A DeviceClass name
    (``gpu.nvidia.com``) reads the node's DRA devices of that class in the same shape (dra.class_entry)."""
    node_entry = (ledger.get("nodes") or {}).get(node) or {}
    return (node_entry.get("resources") or {}).get(resource) or class_entry(node_entry, resource)


def pod_ids(pods):
    """namespace/name of each pod, in order."""
    return ["{0}/{1}".format(pod.get("namespace"), pod.get("name")) for pod in pods]


def unique(values):
    """The values in the order first seen, each once."""
    return list(dict.fromkeys(values))


def joined(values, empty):
    """", "-joined text of the values (None as "None", as Jinja's join writes it), or ``empty`` for none."""
    return ", ".join(str(value) for value in values) or empty


def as_int(value):
    """Jinja's int filter: 0 for what is no number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
