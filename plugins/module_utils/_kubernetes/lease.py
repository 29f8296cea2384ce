# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""A per-node lock on a coordination.k8s.io Lease: pure decisions, no API calls.

Two pre-flights on one node would fight over its GPUs (the second's hold pods queue behind the
first's). The Lease says who holds the node and since when; it expires by itself
(``renewTime + leaseDurationSeconds``) so a killed run cannot block the node for ever.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

MICRO_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
LEASE_PREFIX = "gpuops-preflight-"


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


def format_micro_time(moment):
    return moment.astimezone(datetime.timezone.utc).strftime(MICRO_TIME_FORMAT)


def parse_micro_time(text):
    """A Lease's MicroTime ("2026-11-29T20:55:00.123456Z"; the fraction may be absent)."""
    if not text:
        return None
    text = text.rstrip("Z")
    layout = "%Y-%m-%dT%H:%M:%S.%f" if "." in text else "%Y-%m-%dT%H:%M:%S"
    return datetime.datetime.strptime(text, layout).replace(tzinfo=datetime.timezone.utc)


def lease_name(node):
    return LEASE_PREFIX + node


def lease_body(name, namespace, holder, duration_seconds, now, labels=None, acquired=None, resource_version=None):
    """The Lease object claiming the node for ``holder`` from ``now`` on."""
    metadata = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if resource_version:
        # Optimistic concurrency: a take-over fails with 409 if anyone changed the Lease meanwhile.
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": int(duration_seconds),
            "acquireTime": format_micro_time(acquired or now),
            "renewTime": format_micro_time(now),
        },
    }


def describe(lease, now):
    """Who holds a Lease, since when, until when, and whether it has expired."""
    spec = (lease or {}).get("spec") or {}
    acquired = parse_micro_time(spec.get("acquireTime"))
    renewed = parse_micro_time(spec.get("renewTime")) or acquired
    duration = int(spec.get("leaseDurationSeconds") or 0)
    expires = renewed + datetime.timedelta(seconds=duration) if renewed else None
    holder = spec.get("holderIdentity") or ""
    return {
        "holder": holder,
        "acquired": spec.get("acquireTime"),
        "renewed": spec.get("renewTime"),
        "duration_seconds": duration,
        "expires": format_micro_time(expires) if expires else None,
        # A Lease without a holder or a renew time is free: it was released or never claimed.
        "expired": not holder or expires is None or expires <= now,
    }


def decide(lease, holder, now):
    """What acquiring means now: 'create', 'renew' (ours), 'take_over' (expired) or 'refuse'."""
    if lease is None:
        return "create"
    state = describe(lease, now)
    if state["holder"] == holder:
        return "renew"
    if state["expired"]:
        return "take_over"
    return "refuse"


def refusal_message(node, lease, now):
    state = describe(lease, now)
    age = ""
    acquired = parse_micro_time(state["acquired"])
    if acquired:
        age = " ({0:.0f}s ago)".format((now - acquired).total_seconds())
    return ("node {0} is locked by another pre-flight run: holder {1!r} since {2}{3}; the lock expires at {4} "
            "unless renewed. Wait for that run, or remove Lease {5}/{6} if it is known to be dead.").format(
        node, state["holder"], state["acquired"], age, state["expires"],
        (lease.get("metadata") or {}).get("namespace"), (lease.get("metadata") or {}).get("name"))
