"""The per-node lock's decisions: who holds it, when it expires, what acquiring does."""
import datetime

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import lease as _lease

NOW = datetime.datetime(2026, 11, 29, 21, 0, 0, tzinfo=datetime.timezone.utc)


def lease(holder="run-a", renewed="2026-11-29T20:59:00.000000Z", duration=120, acquired="2026-11-29T20:58:00.000000Z"):
    return {"metadata": {"name": "gpuops-preflight-prod102", "namespace": "gpu-operator", "resourceVersion": "7"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "acquireTime": acquired, "renewTime": renewed}}


@pytest.mark.parametrize("current, holder, expected", [
    (None, "run-b", "create"),
    (lease(), "run-a", "renew"),
    (lease(), "run-b", "refuse"),
    (lease(renewed="2026-11-29T20:57:59.999999Z"), "run-b", "take_over"),   # expired 1 us ago
    (lease(renewed="2026-11-29T20:58:00Z"), "run-b", "take_over"),          # expires exactly now
    (lease(holder=""), "run-b", "take_over"),                               # released holder
    (lease(renewed=None, acquired=None), "run-b", "take_over"),
])
def test_decide(current, holder, expected):
    assert _lease.decide(current, holder, NOW) == expected


def test_describe_reports_expiry():
    state = _lease.describe(lease(), NOW)
    assert state == {"holder": "run-a", "acquired": "2026-11-29T20:58:00.000000Z", "renewed": "2026-11-29T20:59:00.000000Z",
                     "duration_seconds": 120, "transitions": 0, "expires": "2026-11-29T21:01:00.000000Z", "expired": False}


def test_refusal_names_the_holder_since_when_and_the_lease():
    message = _lease.refusal_message("prod102", lease(), NOW)
    assert "holder 'run-a' since 2026-11-29T20:58:00.000000Z (120s ago)" in message
    assert "expires at 2026-11-29T21:01:00.000000Z" in message
    assert "gpu-operator/gpuops-preflight-prod102" in message


def test_lease_body_keeps_acquire_time_and_sets_resource_version_for_take_over():
    acquired = NOW - datetime.timedelta(minutes=5)
    body = _lease.lease_body("l", "ns", "run-a", 60, NOW, {"a": "b"}, acquired=acquired, resource_version="7")
    assert body["metadata"] == {"name": "l", "namespace": "ns", "labels": {"a": "b"}, "resourceVersion": "7"}
    assert body["spec"] == {"holderIdentity": "run-a", "leaseDurationSeconds": 60,
                            "acquireTime": "2026-11-29T20:55:00.000000Z", "renewTime": "2026-11-29T21:00:00.000000Z",
                            "leaseTransitions": 0}
    assert _lease.lease_body("l", "ns", "run-b", 15, NOW, transitions=3)["spec"]["leaseTransitions"] == 3


def test_micro_time_round_trip_with_and_without_fraction():
    assert _lease.parse_micro_time("2026-11-29T21:00:00Z") == NOW
    assert _lease.format_micro_time(_lease.parse_micro_time("2026-11-29T21:00:00.500000Z")) == "2026-11-29T21:00:00.500000Z"
    assert _lease.parse_micro_time(None) is None


def test_a_short_lease_of_a_live_holder_is_refused_until_it_stops_renewing():
    """A 15 s Lease renewed 2 s ago is live; the same Lease not renewed for 15 s is a dead run's."""
    live = lease(holder="run-a on ctl pid 7", duration=15, renewed="2026-11-29T20:59:58.000000Z")
    assert _lease.decide(live, "run-b on ctl pid 9", NOW) == "refuse"
    dead = lease(holder="run-a on ctl pid 7", duration=15, renewed="2026-11-29T20:59:45.000000Z")
    assert _lease.decide(dead, "run-b on ctl pid 9", NOW) == "take_over"
    # The same run id from another process is another holder: it never renews a lock it does not keep.
    assert _lease.decide(live, "run-a on ctl pid 8", NOW) == "refuse"


def test_holder_identity_names_run_host_and_process():
    assert _lease.holder_identity("run-1 awx-job-4", "awx-ee", 4711) == "run-1 awx-job-4 on awx-ee pid 4711"
    assert _lease.holder_identity("run-1") == "run-1"


@pytest.mark.parametrize("duration, period", [(15, 3.0), (5, 1.0), (2, 1.0), (60, 12.0)])
def test_renew_period_leaves_four_renewals_before_expiry(duration, period):
    assert _lease.renew_period(duration) == period


def test_renewed_body_moves_only_the_renew_time_and_keeps_the_version():
    current = lease(duration=15)
    current["metadata"]["uid"] = "u"
    current["spec"]["leaseTransitions"] = 2
    body = _lease.renewed_body(current, NOW)
    # The uid: a renewal must not re-create a Lease the run released (the API server creates Leases on update).
    assert body["metadata"] == {"name": "gpuops-preflight-prod102", "namespace": "gpu-operator", "resourceVersion": "7",
                                "uid": "u"}
    assert body["spec"] == dict(current["spec"], renewTime="2026-11-29T21:00:00.000000Z")
    assert current["spec"]["renewTime"] == "2026-11-29T20:59:00.000000Z"   # not changed in place


@pytest.mark.parametrize("current, expected", [
    (lease(holder="run-a"), "retry"),     # our own other write (a second renewer, the role renewing)
    (lease(holder="run-b"), "lost"),      # taken over: stop, the run's next wait sees it
    (lease(holder=""), "released"),
    (None, "released"),
])
def test_renewal_outcome_after_a_conflict(current, expected):
    assert _lease.renewal_outcome(current, "run-a") == expected


def test_refusal_says_when_renewed_and_what_a_dead_run_means():
    message = _lease.refusal_message("prod102", lease(duration=15, renewed="2026-11-29T20:59:58.000000Z"), NOW)
    assert "last renewed 2026-11-29T20:59:58.000000Z (2s ago)" in message
    assert "expires at 2026-11-29T21:00:13.000000Z unless renewed" in message
    assert "takes the node over and removes its pods" in message


def test_take_over_message_names_the_dead_holder_and_its_expiry():
    message = _lease.take_over_message("prod102", lease(holder="run-a on ctl pid 7", duration=15), NOW)
    assert "from 'run-a on ctl pid 7'" in message and "expired at 2026-11-29T20:59:15.000000Z" in message


LOCK = {"namespace": "gpu-operator", "name": "gpuops-preflight-prod102", "holder": "run-a on ctl pid 7"}


def test_a_run_holding_its_live_lock_goes_on():
    assert _lease.lost_lock_message(lease(holder="run-a on ctl pid 7", duration=15, renewed="2026-11-29T20:59:58Z"), LOCK, NOW) is None


@pytest.mark.parametrize("current, says", [
    (None, "Lease gpu-operator/gpuops-preflight-prod102 is gone"),
    (lease(holder="run-b on other pid 9", duration=15, renewed="2026-11-29T20:59:58Z"), "is held by 'run-b on other pid 9'"),
    (lease(holder="", duration=15), "is held by 'nobody'"),
    (lease(holder="run-a on ctl pid 7", duration=15, renewed="2026-11-29T20:59:40Z"), "expired at 2026-11-29T20:59:55.000000Z"),
])
def test_a_run_that_lost_its_lock_is_told_to_stop(current, says):
    message = _lease.lost_lock_message(current, LOCK, NOW)
    assert says in message and "two runs never share the node" in message


def test_a_lease_written_between_two_reads_was_renewed():
    first = lease()
    assert not _lease.renewed_meanwhile(first, lease())
    second = lease()
    second["metadata"]["resourceVersion"] = "8"
    assert _lease.renewed_meanwhile(first, second)
    assert not _lease.renewed_meanwhile(first, None)
