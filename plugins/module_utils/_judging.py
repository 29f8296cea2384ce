# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the gpu_demo judgements (_preflight.py, _walk.py, _cleanup.py) share: reading registered results,
and phrasing lists the way the role's reports always have (Jinja's join, unique and int)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def reason(result):
    """Why a call or step failed: its error, else its msg (None when it says neither)."""
    return result["error"] if "error" in result else result.get("msg")


def steps_by_name(result):
    """pod_wait's steps, by step name."""
    return dict((step.get("name"), step) for step in result.get("steps") or [])


def resource_entry(ledger, node, resource):
    """gpu_ledger_facts' entry for one node's resource ({} when the ledger does not have it)."""
    return ((ledger.get("nodes") or {}).get(node) or {}).get("resources", {}).get(resource) or {}


def pod_ids(pods):
    """namespace/name of each pod, in order."""
    return ["{0}/{1}".format(pod.get("namespace"), pod.get("name")) for pod in pods]


def unique(values):
    """The values in the order first seen, each once."""
    seen = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def joined(values, empty):
    """", "-joined text of the values (None as "None", as Jinja's join writes it), or ``empty`` for none."""
    return ", ".join(str(value) for value in values) or empty


def as_int(value):
    """Jinja's int filter: 0 for what is no number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
