"""The lock's renewer: renews while the controller lives, stops the moment it is gone, a release or a take-over."""
import json
import subprocess
import sys
import time

from kubernetes.client.rest import ApiException

from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks import lease_renewer


def lease(holder="run-a on ctl pid 7", version="1", duration=15):
    return {"metadata": {"name": "gpuops-preflight-prod102", "namespace": "gpu-operator", "resourceVersion": version, "uid": "u1"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": "2026-11-29T20:58:00.000000Z",
                     "renewTime": "2026-11-29T20:58:00.000000Z", "leaseTransitions": 0}}


class Response:
    def __init__(self, body):
        self.data = json.dumps(body).encode()


class FakeLeaseApi:
    """A Lease store with optimistic concurrency, as the API server has; ``script`` changes it between renewals."""

    def __init__(self, stored, script=None):
        self.stored = stored
        self.script = list(script or [])
        self.puts = 0

    def lease(self, method, namespace, name, body=None, timeout=None):
        assert timeout == 3.0   # a fifth of the 15 s Lease: a hung request never outlives the controller
        if method == "GET":
            if self.stored is None:
                raise ApiException(status=404)
            return Response(self.stored)
        assert method == "PUT"
        if self.script:
            self.script.pop(0)(self)
        if self.stored is None:
            # The API server would create the Lease on update, but the uid precondition fails: 409.
            if body["metadata"].get("uid"):
                raise ApiException(status=409)
            self.stored = body
            raise AssertionError("a renewal re-created a released Lease")
        if body["metadata"]["resourceVersion"] != self.stored["metadata"]["resourceVersion"]:
            raise ApiException(status=409)
        self.puts += 1
        self.stored = json.loads(json.dumps(body))
        self.stored["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        return Response(self.stored)


class Alive:
    """The controller lives for ``periods`` waits."""

    def __init__(self, periods):
        self.periods = periods
        self.waited = []

    def wait(self, timeout):
        self.waited.append(timeout)
        self.periods -= 1
        return self.periods >= 0


def test_renews_every_fifth_of_the_lease_while_the_controller_lives_and_never_after():
    api = FakeLeaseApi(lease())
    assert lease_renewer.renew_until_gone(api, lease(), Alive(3)) == "controller gone"
    assert api.puts == 3
    assert api.stored["metadata"]["resourceVersion"] == "4"
    assert lease_renewer.renew_until_gone(api, api.stored, Alive(0)) == "controller gone"
    assert api.puts == 3   # gone before the first period: not one more renewal


def test_stops_at_the_release_and_never_brings_the_lease_back():
    def release(api):
        api.stored = None
    api = FakeLeaseApi(lease(), script=[lambda api: None, release])
    assert lease_renewer.renew_until_gone(api, lease(), Alive(10)) == "released"
    assert api.puts == 1 and api.stored is None


def test_a_take_over_is_never_overwritten():
    def take_over(api):
        api.stored = lease(holder="run-b on other pid 9", version="5")
    api = FakeLeaseApi(lease(), script=[take_over])
    assert lease_renewer.renew_until_gone(api, lease(), Alive(10)) == "lost"
    assert api.stored["spec"]["holderIdentity"] == "run-b on other pid 9"
    assert api.puts == 0


def test_a_write_of_its_own_holder_is_adopted_and_renewal_goes_on():
    def own_write(api):
        api.stored = lease(version="3")
    api = FakeLeaseApi(lease(), script=[own_write])
    assert lease_renewer.renew_until_gone(api, lease(), Alive(3)) == "controller gone"
    assert api.puts == 2 and api.stored["metadata"]["resourceVersion"] == "5"


def test_api_server_away_is_retried_not_a_reason_to_stop():
    class Away(FakeLeaseApi):
        def lease(self, method, namespace, name, body=None, timeout=None):
            if self.script:
                self.script.pop(0)
                raise OSError("connection refused")
            return super().lease(method, namespace, name, body, timeout)
    api = Away(lease(), script=[1, 2])
    assert lease_renewer.renew_until_gone(api, lease(), Alive(3)) == "controller gone"
    assert api.puts == 1


def test_process_watch_sees_a_process_end_at_once():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    watch = lease_renewer.ProcessWatch(child.pid)
    try:
        assert watch.wait(0.05) is True
        started = time.monotonic()
        child.kill()
        assert watch.wait(10) is False
        assert time.monotonic() - started < 2
    finally:
        child.kill()
        child.wait()
        watch.close()


def test_process_watch_without_pidfd_polls_the_pid():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    watch = lease_renewer.ProcessWatch(child.pid)
    watch.close()   # the fallback of systems without pidfds
    try:
        assert watch.wait(0.05) is True
        child.kill()
        child.wait()
        assert watch.wait(5) is False
    finally:
        child.kill()
