"""node_lock's acquire against a scripted Lease store: a take-over looks twice, so a skewed clock never takes a live lock."""
import json

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks import node_lock


def stored(holder, renewed, version="7"):
    return {"metadata": {"name": "gpuops-preflight-prod102", "namespace": "gpu-operator", "resourceVersion": version, "uid": "u1",
                         "labels": {"gpuops.scheduling/run-id": "dead"}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "acquireTime": renewed, "renewTime": renewed,
                     "leaseTransitions": 2}}


class Response:
    def __init__(self, body):
        self.data = json.dumps(body).encode()


class LeaseStore:
    """GET answers ``reads`` in turn; PUT/POST are recorded."""

    def __init__(self, reads):
        self.reads, self.writes = list(reads), []

    def lease(self, method, namespace, name=None, body=None, timeout=None):
        if method == "GET":
            current = self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]
            if current is None:
                raise ApiException(status=404)
            return Response(current)
        self.writes.append((method, body))
        return Response(dict(body, metadata=dict(body["metadata"], resourceVersion="9")))


def lock(store):
    waits = []
    locked = node_lock.NodeLock.__new__(node_lock.NodeLock)
    locked.api, locked.host, locked.node, locked.namespace = store, "https://127.0.0.1:6443", "prod102", "gpu-operator"
    locked.name, locked.holder, locked.sleep = "gpuops-preflight-prod102", "run-b on ctl pid 9", waits.append
    return locked, waits


OLD = "2020-01-01T00:00:00.000000Z"


def test_an_expired_lock_that_stays_still_is_taken_over_with_one_more_transition():
    store = LeaseStore([stored("run-a on ctl pid 7", OLD)])
    locked, waits = lock(store)
    result, _written = locked.acquire(15, {}, check_mode=False)
    assert waits == [4.0]   # one renewal period (3 s of 15) and a second
    assert result["outcome"] == "took_over" and result["previous_holder"] == "run-a on ctl pid 7"
    assert "took over the lock of node prod102 from 'run-a on ctl pid 7'" in result["previous"]["message"]
    method, body = store.writes[0]
    assert method == "PUT" and body["spec"]["leaseTransitions"] == 3 and body["metadata"]["uid"] == "u1"


def test_a_lock_that_only_looks_expired_but_is_renewed_meanwhile_is_refused():
    """Wrong world: this controller's clock is ahead; the holder renewed between the two reads."""
    store = LeaseStore([stored("run-a on ctl pid 7", OLD), stored("run-a on ctl pid 7", OLD, version="8")])
    locked, _waits = lock(store)
    with pytest.raises(node_lock.LockHeld, match="renewed while this run looked"):
        locked.acquire(15, {}, check_mode=False)
    assert store.writes == []


def test_a_lock_released_meanwhile_is_created_afresh():
    store = LeaseStore([stored("run-a on ctl pid 7", OLD), None])
    locked, _waits = lock(store)
    result, _written = locked.acquire(15, {}, check_mode=False)
    assert result["outcome"] == "created" and store.writes[0][0] == "POST"


def test_a_missing_namespace_is_named_and_nothing_written():
    class NoNamespace(LeaseStore):
        def lease(self, method, namespace, name=None, body=None, timeout=None):
            if method == "POST":
                error = ApiException(status=404)
                error.body = json.dumps({"kind": "Status", "details": {"name": "no-such-ns", "kind": "namespaces"}})
                raise error
            return super().lease(method, namespace, name, body, timeout)
    locked, _waits = lock(NoNamespace([None]))
    locked.namespace = "no-such-ns"
    with pytest.raises(node_lock.NamespaceMissing, match=r"namespace no-such-ns does not exist.*kubectl create namespace no-such-ns"):
        locked.acquire(15, {}, check_mode=False)


def test_a_missing_lease_in_an_existing_namespace_is_no_missing_namespace():
    error = ApiException(status=404)
    error.body = json.dumps({"kind": "Status", "details": {"name": "gpuops-preflight-prod102", "kind": "leases"}})
    assert not node_lock.missing_namespace(error)


def test_renew_needs_the_controller_process():
    params = dict(node="prod102", namespace="gpu-operator", holder="run", state="present", duration_seconds=15, renew=True, labels={})
    with pytest.raises(node_lock.TaskFailed, match="renew=true keeps the lock while the controller"):
        node_lock.run(params, False, print)
