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

As in Kubernetes' leader election (client-go tools/leaderelection: a 15 s Lease renewed every 2 s), the
Lease is short and its holder renews it while it lives (_tasks/lease_renewer.py), so that a dead holder
loses it within seconds and a live one never does. ``leaseTransitions`` counts the take-overs.
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


def holder_identity(holder, controller_host=None, controller_pid=None):
    """The Lease's holderIdentity: the run (``holder``), then the controller host and the process that keeps it.

    A person reading a refusal can trace the lock to a machine and a process, and see whether it still runs.
    """
    if not controller_host and not controller_pid:
        return holder
    return "{0} on {1} pid {2}".format(holder, controller_host or "?", controller_pid or "?")


def renew_period(duration_seconds):
    """Seconds between renewals: a fifth of the Lease (client-go: 2 s of 15 s), so that four renewals in a row
    may fail (an API server restarting, a loaded controller) before a live holder's Lease expires."""
    return max(1.0, int(duration_seconds) / 5.0)


def lease_body(name, namespace, holder, duration_seconds, now, labels=None, acquired=None, resource_version=None,
               transitions=0, uid=None):
    """The Lease object claiming the node for ``holder`` from ``now`` on."""
    metadata = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if resource_version:
        # Optimistic concurrency: a take-over fails with 409 if anyone changed the Lease meanwhile (or deleted it:
        # the uid, see renewed_body).
        metadata["resourceVersion"] = resource_version
    if uid:
        metadata["uid"] = uid
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": int(duration_seconds),
            "acquireTime": format_micro_time(acquired or now),
            "renewTime": format_micro_time(now),
            "leaseTransitions": int(transitions),
        },
    }


def renewed_body(lease, now):
    """``lease`` (as last written by its holder) renewed at ``now``; its resourceVersion makes the write fail (409)
    if anyone changed the Lease meanwhile, so that a renewal never overwrites a take-over or a release. Its uid too:
    the API server creates a Lease on update when it does not exist (even with a resourceVersion), so without the
    uid precondition a renewal just after the run's release would bring the released lock back."""
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": dict((key, value) for key, value in (lease.get("metadata") or {}).items()
                             if key in ("name", "namespace", "uid", "labels", "annotations", "resourceVersion")),
            "spec": dict(lease.get("spec") or {})}
    body["spec"]["renewTime"] = format_micro_time(now)
    return body


def renewed_meanwhile(first, second):
    """Whether a Lease read twice was written in between (renewed, taken over or released and taken again)."""
    return second is not None and _version(first) != _version(second)


def _version(lease):
    return ((lease or {}).get("metadata") or {}).get("resourceVersion")


def renewal_outcome(current, holder):
    """After a renewal was refused (409): 'retry' when the Lease is still ``holder``'s (another write of the same
    holder), 'released' when it is gone or has no holder, 'lost' when another run holds it."""
    if current is None:
        return "released"
    held_by = ((current.get("spec") or {}).get("holderIdentity")) or ""
    if held_by == holder:
        return "retry"
    return "lost" if held_by else "released"


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
        "transitions": int(spec.get("leaseTransitions") or 0),
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


def _ago(moment, now):
    return " ({0:.0f}s ago)".format((now - moment).total_seconds()) if moment else ""


def refusal_message(node, lease, now):
    state = describe(lease, now)
    renewed = parse_micro_time(state["renewed"])
    return ("node {0} is locked by another pre-flight run: holder {1!r} since {2}{3}, last renewed {4}{5}; the lock "
            "(Lease {7}/{8}) expires at {6} unless renewed. A live run renews it every few seconds: wait for that run to end. A run that "
            "died stops renewing, and the next run after {6} takes the node over and removes its pods.").format(
        node, state["holder"], state["acquired"], _ago(parse_micro_time(state["acquired"]), now),
        state["renewed"], _ago(renewed, now), state["expires"],
        (lease.get("metadata") or {}).get("namespace"), (lease.get("metadata") or {}).get("name"))


def take_over_message(node, previous, now):
    """The warning of a run that took over the expired lock of a run that died."""
    state = describe(previous, now)
    return ("took over the lock of node {0} from {1!r}, which stopped renewing it at {2} (expired at {3}): that run "
            "died; its pods on the node are removed before this run starts").format(
        node, state["holder"], state["renewed"], state["expires"])


def lost_lock_message(lease, lock, now):
    """Why a run no longer holds its lock (``lock``: namespace, name, holder), or None while it does.

    A waiting run checks this: a Lease gone, expired, or held by another run means the node may be another run's
    by now, and the walk must stop rather than share the node.
    """
    where = "Lease {0}/{1}".format(lock["namespace"], lock["name"])
    if lease is None:
        why = "{0} is gone".format(where)
    else:
        state = describe(lease, now)
        if state["holder"] != lock["holder"]:
            why = "{0} is held by {1!r} since {2}".format(where, state["holder"] or "nobody", state["acquired"])
        elif state["expired"]:
            why = "{0} expired at {1}: its renewals stopped".format(where, state["expires"])
        else:
            return None
    return ("this run no longer holds the node's lock ({0}); it stops here so that two runs never share the node, and "
            "removes its own pods").format(why)
