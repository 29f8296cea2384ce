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
                     "duration_seconds": 120, "expires": "2026-11-29T21:01:00.000000Z", "expired": False}


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
                            "acquireTime": "2026-11-29T20:55:00.000000Z", "renewTime": "2026-11-29T21:00:00.000000Z"}


def test_micro_time_round_trip_with_and_without_fraction():
    assert _lease.parse_micro_time("2026-11-29T21:00:00Z") == NOW
    assert _lease.format_micro_time(_lease.parse_micro_time("2026-11-29T21:00:00.500000Z")) == "2026-11-29T21:00:00.500000Z"
    assert _lease.parse_micro_time(None) is None
