# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""pod_wait: watch pods until a condition holds, then read their logs, events and the ledger (see runner.py for how a
task function runs). Creating and deleting them is kubernetes.core.k8s's.

What the pods' states mean is decided in _kubernetes/pod_wait.py; this file makes the API calls of one pod_wait task.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import re
import time

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import (
    CoreV1Reader,
    K8sApiError,
    core_v1_api,
    explain_api_errors,
    k8s_client,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.lease import lost_lock_message, utc_now
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.label_selector import selector_matcher
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.ledger import LedgerError, read_ledger
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.pod_wait import (
    CONDITIONS,
    DEFAULT_FATAL_REASONS,
    HOPELESS,
    MET,
    WAITING,
    PodSetWatch,
    describe,
    iso,
    parse_time,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.scheduling_events import (
    event_timeline,
    parse_failed_scheduling,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.unit_claims import (
    foreign_claim,
    foreign_claim_message,
    node_allocatable,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed

try:
    from kubernetes.client.rest import ApiException
    from kubernetes.watch import Watch
except ImportError:
    # The module (k8s_module()) reports the missing library.
    pass

# The FailedScheduling event follows the pod's condition within milliseconds; do not let a lost
# event hold the GPUs for the whole timeout.
EVENT_GRACE_SECONDS = 10
# A running container prints its first lines within milliseconds: a short poll of the log costs
# less than opening a log stream per pod.
LOG_POLL_SECONDS = 0.1
# While a target waits unscheduled for a unit it should get (claim_resource), the node's pods are read this often:
# another pod that took the unit is named within about this long of its binding.
CLAIM_POLL_SECONDS = 1.0
# With a lock to keep (the lock option), the run's Lease is read at the start and at least this often: a run whose
# lock was taken over (its renewer gone, the API server away longer than the Lease) stops at its next wait.
LOCK_CHECK_SECONDS = 5.0


class WaitFailed(Exception):
    """The wait cannot succeed; the message says which pod and why."""


class PodWaiter:
    """One pod_wait call: a list and a watch, then logs, events and the ledger."""

    def __init__(self, api, params, clock=None, reader=None):
        self.api = api
        self.reader = reader
        self.params = params
        self.claim = None
        self.claim_since = parse_time(params.get("claim_since")) if params.get("claim_resource") else None
        self.clock = clock or time.time
        self.namespace = params["namespace"]
        self.names = params["names"] or []
        self.selector = ",".join(params["label_selectors"] or []) or None
        # Which of the node's pods are the wait's own (the claim check), read once; check_params refused a bad selector.
        self.selects = selector_matcher(self.selector) if self.selector and params.get("claim_resource") else None
        self.requests = 0
        self.started = self.clock()
        self.deadline = self.started + params["timeout"]
        self.tracker = PodSetWatch(
            params["condition"], names=self.names, count=params["count"], node=params["node"],
            fail_on_unschedulable=params["fail_on_unschedulable"], fatal_reasons=params["fatal_reasons"],
            record_all=bool(self.selector))
        self.failed_scheduling = None
        self.events = None
        self.ledger = None
        self.logs = {}

    @property
    def host(self):
        return getattr(self.api.api_client.configuration, "host", None)

    def remaining(self):
        return self.deadline - self.clock()

    @staticmethod
    def _raw(response):
        # CoreV1Rest answers raw responses: plain API dicts, not the client's slow model classes that rename every key.
        return json.loads(response.data)

    def targets(self):
        """The pods that must reach the condition, as last seen."""
        return [pod for pod in self.tracker.report() if not self.names or pod["name"] in self.names]

    # -- the wait -------------------------------------------------------------------------
    def _selectors(self):
        if self.selector:
            return {"label_selector": self.selector}
        if len(self.names) == 1:
            return {"field_selector": "metadata.name={0}".format(self.names[0])}
        return {}

    def list_pods(self):
        self.requests += 1
        with explain_api_errors("list pods in namespace {0}".format(self.namespace), self.host):
            listing = self._raw(self.api.list_namespaced_pod(self.namespace, **self._selectors()))
        self.tracker.load(listing.get("items") or [], self.clock())
        return (listing.get("metadata") or {}).get("resourceVersion")

    def wait(self):
        resource_version = self.list_pods()
        while True:
            state, message = self.tracker.verdict()
            if state == MET:
                return
            if state == HOPELESS:
                raise WaitFailed(message)
            remaining = self.remaining()
            if remaining <= 0:
                raise WaitFailed("timed out after {0}s waiting for {1}: {2}".format(
                    self.params["timeout"], self._what(), self._states()))
            if self.params.get("lock"):
                self.check_lock()
                remaining = min(remaining, LOCK_CHECK_SECONDS)
            if self.claim_since is not None:
                self.check_claims()
                remaining = min(remaining, CLAIM_POLL_SECONDS)
            try:
                resource_version = self._watch(resource_version, remaining)
            except ApiException as error:
                if error.status != 410:
                    raise
                # The resourceVersion is too old (compacted): list again and go on from there.
                resource_version = self.list_pods()

    @contextlib.contextmanager
    def _watching(self, list_function, seconds, **kwargs):
        """A watch of ``list_function`` in the namespace that the API server ends after ``seconds``, stopped on exit."""
        watch = Watch()
        self.requests += 1
        try:
            yield watch.stream(list_function, self.namespace, timeout_seconds=max(1, int(seconds + 0.999)),
                               deserialize=False, _request_timeout=(10, seconds + 10), **kwargs)
        finally:
            watch.stop()

    def _watch(self, resource_version, remaining):
        with self._watching(self.api.list_namespaced_pod, remaining, resource_version=resource_version,
                            allow_watch_bookmarks=True, **self._selectors()) as stream:
            for event in stream:
                pod = event.get("object") or {}
                resource_version = (pod.get("metadata") or {}).get("resourceVersion") or resource_version
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    self.tracker.apply(event["type"], pod, self.clock())
                    if self.tracker.verdict()[0] != WAITING:
                        break
                if self.remaining() <= 0:
                    break
        return resource_version

    def check_lock(self):
        """Fail when the run no longer holds its node's lock (lease.lost_lock_message says when that is)."""
        lock = self.params["lock"]
        self.requests += 1
        with explain_api_errors("read Lease {0}/{1}".format(lock["namespace"], lock["name"]), self.host):
            try:
                lease = self._raw(self.api.lease("GET", lock["namespace"], lock["name"]))
            except ApiException as error:
                if error.status != 404:
                    raise
                lease = None
        message = lost_lock_message(lease, lock, utc_now())
        if message:
            raise WaitFailed(message)

    def check_claims(self):
        """Fail at once when another pod took the unit a target waits for (unit_claims.py says when that is)."""
        waiting = [pod["name"] for pod in self.targets() if pod.get("exists") and not pod.get("node_name")]
        if not waiting or self.reader is None:
            return
        node, resource = self.params["node"], self.params["claim_resource"]
        self.requests += 2
        node_pods = self.reader.list_pods(field_selector="spec.nodeName={0}".format(node))
        allocatable = node_allocatable(self.reader.get_node(node), resource)

        def is_ours(pod):
            metadata = pod.get("metadata") or {}
            if metadata.get("namespace") != self.namespace:
                return False
            if self.selects:
                return self.selects(metadata.get("labels"))
            return metadata.get("name") in self.names

        claim = foreign_claim(node_pods, allocatable, resource, self.claim_since, is_ours)
        if claim:
            self.claim = claim
            raise WaitFailed(foreign_claim_message(claim, node, resource, ", ".join(waiting)))

    def _what(self):
        target = ", ".join(self.names) if self.names else "pods matching {0}".format(self.selector)
        return "{0} to be {1}".format(target, self.params["condition"])

    def _states(self):
        pods = self.targets()
        if not pods:
            return "no pod found"
        return "; ".join("{0}: {1}".format(pod["name"], describe(pod) if pod.get("exists") else "gone")
                         for pod in pods)

    # -- logs -----------------------------------------------------------------------------
    def _read_log(self, name):
        self.requests += 1
        with explain_api_errors("read the log of pod {0}/{1}".format(self.namespace, name), self.host):
            try:
                response = self.api.read_namespaced_pod_log(name, self.namespace,
                                                            limit_bytes=self.params["log_limit_bytes"])
            except ApiException as error:
                if error.status in (400, 404):
                    # Not started yet (400: "container is waiting to start") or gone.
                    return None
                raise
        return response.data.decode("utf-8", errors="replace")

    def collect_logs(self):
        pattern = self.params["log_ready_pattern"]
        regex = re.compile(pattern) if pattern else None
        for pod in self.targets():
            started = any(item["started_at"] for item in pod.get("containers") or [])
            if not pod.get("exists") or not (started or pod["phase"] in ("Running", "Succeeded", "Failed")):
                continue
            text = self._read_log(pod["name"])
            while regex and not (text and regex.search(text)):
                if self.remaining() <= 0:
                    raise WaitFailed("timed out after {0}s waiting for the log of pod {1} to show {2!r}; "
                                     "it shows: {3!r}".format(self.params["timeout"], pod["name"], pattern,
                                                              (text or "")[-500:]))
                time.sleep(LOG_POLL_SECONDS)
                text = self._read_log(pod["name"])
            self.logs[pod["name"]] = text

    # -- events ---------------------------------------------------------------------------
    def _list_events(self, field_selector):
        self.requests += 1
        with explain_api_errors("list events in namespace {0}".format(self.namespace), self.host):
            listing = self._raw(self.api.list_namespaced_event(self.namespace, field_selector=field_selector))
        return listing.get("items") or [], (listing.get("metadata") or {}).get("resourceVersion")

    def collect_failed_scheduling(self):
        """The latest FailedScheduling event of each target pod, waiting briefly for it if needed."""
        found = []
        for pod in self.targets():
            if not pod.get("uid"):
                continue
            selector = "involvedObject.uid={0},reason=FailedScheduling".format(pod["uid"])
            items, resource_version = self._list_events(selector)
            if not items:
                items = self._watch_first_event(selector, resource_version)
            rows = event_timeline(items)
            if rows:
                latest = rows[-1]
                entry = {"pod": pod["name"], "message": latest["message"], "source": latest["source"],
                         "count": latest["count"], "at": latest["at"], "last_at": latest["last_at"],
                         "from_event": True}
            else:
                # No event in time: the PodScheduled condition carries the same message.
                condition = next((item for item in pod["conditions"] if item["type"] == "PodScheduled"), {})
                entry = {"pod": pod["name"], "message": condition.get("message") or "",
                         "source": "PodScheduled condition", "count": 1, "at": condition.get("last_transition_time"),
                         "last_at": None, "from_event": False}
            entry["parsed"] = parse_failed_scheduling(entry["message"])
            found.append(entry)
        self.failed_scheduling = found

    def _watch_first_event(self, field_selector, resource_version):
        limit = min(self.remaining(), EVENT_GRACE_SECONDS)
        if limit <= 0:
            return []
        with explain_api_errors("watch events in namespace {0}".format(self.namespace), self.host):
            with self._watching(self.api.list_namespaced_event, limit, field_selector=field_selector,
                                resource_version=resource_version) as stream:
                for event in stream:
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        return [event["object"]]
        return []

    def collect_events(self):
        # One list per pod, by UID: the namespace keeps every pod's events for an hour (the API server's event TTL), so
        # a list of all of them grows with every node and run of that hour, and each node's wait would read them all.
        uids = [pod["uid"] for pod in self.tracker.report() if pod.get("uid")]
        uids += [uid for uid in self.params["event_pod_uids"] or [] if uid not in uids]
        items = []
        for uid in uids:
            items += self._list_events("involvedObject.uid={0}".format(uid))[0]
        self.events = event_timeline(items, pods=[{"uid": uid} for uid in uids])

    # -- ledger ---------------------------------------------------------------------------
    def collect_ledger(self):
        self.requests += 2
        try:
            # With DRA: a node whose GPUs are ResourceSlice devices has its ledger there (and is not refused).
            self.ledger = read_ledger(self.reader, node=self.params["ledger_node"],
                                      patterns=tuple(self.params["ledger_resources"]), dra=True)
        except LedgerError as error:
            raise WaitFailed("reading the ledger of node {0}: {1}".format(self.params["ledger_node"], error))

    # -- result ---------------------------------------------------------------------------
    def result(self, error=None):
        pods = self.tracker.report()
        for pod in pods:
            if pod["name"] in self.logs:
                pod["log"] = self.logs[pod["name"]]
        finished = self.clock()
        result = {
            "condition": self.params["condition"],
            "pods": pods,
            "transitions": self.tracker.transitions(),
            "exact": self.tracker.exact(),
            "started_at": iso(self.started),
            "finished_at": iso(finished),
            "elapsed": round(finished - self.started, 3),
            "api_requests": self.requests,
            "met": error is None,
            "error": error,
            "changed": False,
        }
        optional = {"failed_scheduling": self.failed_scheduling, "events": self.events, "ledger": self.ledger,
                    "foreign_claim": self.claim}
        result.update((key, value) for key, value in optional.items() if value is not None)
        return result


def wait_for(params, api, reader, warn):
    """One wait (then logs, events, ledger): (result, error message or None)."""
    waiter = PodWaiter(api, params, reader=reader)
    condition = params["condition"]
    try:
        with explain_api_errors("watch pods in namespace {0}".format(params["namespace"]), waiter.host):
            waiter.wait()
        if params["warn_gone"] and condition == "deleted":
            gone = [pod["name"] for pod in waiter.targets()]
            if gone:
                warn("{0} pod(s) in namespace {1} gone: {2}".format(len(gone), params["namespace"], ", ".join(gone)))
        if condition == "unschedulable":
            waiter.collect_failed_scheduling()
        if (params["logs"] or params["log_ready_pattern"]) and condition not in ("unschedulable", "deleted"):
            waiter.collect_logs()
        if params["ledger_node"]:
            waiter.collect_ledger()
        if params["events"]:
            waiter.collect_events()
    except (WaitFailed, K8sApiError) as error:
        if params["events"] and waiter.events is None:
            try:
                waiter.collect_events()
            except K8sApiError:
                # The wait's own failure is the news; a missing event list must not hide it.
                pass
        return waiter.result(error=str(error)), str(error)
    return waiter.result(), None


# The module's own options; kubernetes.core's connection options come on top (_kubernetes/client.py: module_argument_spec).
OPTIONS = dict(
    namespace=dict(type="str", required=True),
    names=dict(type="list", elements="str"),
    label_selectors=dict(type="list", elements="str"),
    count=dict(type="int"),
    condition=dict(type="str", required=True, choices=list(CONDITIONS)),
    node=dict(type="str"),
    timeout=dict(type="int", default=120),
    fail_on_unschedulable=dict(type="bool", default=False),
    fatal_reasons=dict(type="list", elements="str", default=list(DEFAULT_FATAL_REASONS)),
    logs=dict(type="bool", default=False),
    log_ready_pattern=dict(type="str"),
    log_limit_bytes=dict(type="int", default=65536),
    events=dict(type="bool", default=False),
    event_pod_uids=dict(type="list", elements="str", default=[]),
    ledger_node=dict(type="str"),
    ledger_resources=dict(type="list", elements="str", default=["nvidia.com/gpu"]),
    warn_gone=dict(type="bool", default=False),
    claim_resource=dict(type="str"),
    claim_since=dict(type="str"),
    lock=dict(type="dict", options=dict(namespace=dict(type="str", required=True), name=dict(type="str", required=True),
                                        holder=dict(type="str", required=True))),
)


def check_params(params):
    """Refuse, before any API call, a wait that names no pods or has an invalid selector or log pattern."""
    if not (params["names"] or params["label_selectors"]):
        raise TaskFailed("give names or label_selectors")
    if params["claim_resource"] and not (params["node"] and parse_time(params["claim_since"])):
        raise TaskFailed("claim_resource needs node (whose pods are read) and claim_since (when the unit was freed, an "
                         "RFC 3339 time), got node={0!r}, claim_since={1!r}".format(params["node"], params["claim_since"]))
    if params["claim_resource"] and params["label_selectors"]:
        # Read here too (which of the node's pods are the wait's own), so a selector this reader cannot read is refused
        # before anything is waited for.
        try:
            selector_matcher(",".join(params["label_selectors"]))
        except ValueError as error:
            raise TaskFailed("label_selectors: {0}".format(error))
    if params["log_ready_pattern"]:
        try:
            re.compile(params["log_ready_pattern"])
        except re.error as error:
            raise TaskFailed("log_ready_pattern is not a valid regular expression: {0}".format(error))


def run(params, check_mode, warn):
    """Read-only: check mode changes nothing, so the wait runs as it would."""
    del check_mode
    check_params(params)
    try:
        client = k8s_client(params)
    except K8sApiError as error:
        raise TaskFailed(str(error))
    result, error = wait_for(params, core_v1_api(client), CoreV1Reader(client), warn)
    if error:
        raise TaskFailed(error, **result)
    return result
