"""The per-node pre-flight lock against the real API server: one winner, clear refusals, expiry."""
from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def lock_args(holder: str, **extra) -> dict:
    # The Lease's own rules (no renewer): an ad-hoc ansible command ends with its task, so renew would end with it.
    return {"node": "prod102", "namespace": "gpu-operator", "holder": holder, "renew": False, **extra}


def start(sim, args: dict) -> subprocess.Popen:
    return subprocess.Popen([str(VENV_BIN / "ansible"), "localhost", "-m", "gpuops.scheduling.node_lock", "-a", json.dumps(args)],
                            cwd=CHECKOUT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**sim.env, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"})


def result(proc: subprocess.Popen) -> dict:
    output, _errors = proc.communicate(timeout=120)
    return json.loads(output)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_two_runs_at_once_exactly_one_gets_the_node(sim):
    sim.kubectl("-n", "gpu-operator", "delete", "lease", "gpuops-preflight-prod102", "--ignore-not-found")
    first, second = start(sim, lock_args("run-a")), start(sim, lock_args("run-b"))
    outcomes = [result(first), result(second)]
    winners = [o for o in outcomes if not o.get("failed")]
    losers = [o for o in outcomes if o.get("failed")]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    winner = winners[0]["lease"]["holder"]
    assert winners[0]["outcome"] == "created"
    assert f"locked by another pre-flight run: holder '{winner}' since " in losers[0]["msg"]
    assert losers[0]["locked"] is True

    # The holder renews; a release by someone else leaves it alone; the holder's release frees it.
    assert sim.ansible_module("gpuops.scheduling.node_lock", lock_args(winner))["outcome"] == "renewed"
    other = "run-b" if winner == "run-a" else "run-a"
    assert sim.ansible_module("gpuops.scheduling.node_lock", lock_args(other, state="absent"))["outcome"] == "not_held"
    released = sim.ansible_module("gpuops.scheduling.node_lock", lock_args(winner, state="absent"))
    assert released["outcome"] == "released" and released["changed"]
    assert sim.kubectl("-n", "gpu-operator", "get", "lease", "gpuops-preflight-prod102", check=False).returncode != 0


def test_a_lock_whose_holder_died_is_taken_over_after_expiry(sim):
    """The holder is an ad-hoc `ansible` run with the default lock (15 s, renewed while it lives): it ends with its
    task, as a killed run would, and its renewer stops renewing the moment it is gone."""
    sim.kubectl("-n", "gpu-operator", "delete", "lease", "gpuops-preflight-prod102", "--ignore-not-found")
    dead = sim.ansible_module("gpuops.scheduling.node_lock", lock_args("killed-run", renew=True))
    assert dead["outcome"] == "created" and dead["lease"]["holder"].startswith("killed-run on ")
    assert dead["renewer"]["every_seconds"] == 3.0
    refused = sim.ansible_module("gpuops.scheduling.node_lock", lock_args("next-run"))
    assert refused["failed"] and "killed-run on " in refused["msg"]
    lease = json.loads(sim.kubectl("-n", "gpu-operator", "get", "lease", "gpuops-preflight-prod102", "-o", "json").stdout)
    renewed = datetime.datetime.strptime(lease["spec"]["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    # Not renewed once its ansible process had ended (a renewal is at most 3 s after the lock was taken).
    assert renewed <= datetime.datetime.strptime(lease["spec"]["acquireTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=4)
    time.sleep(max(0.0, (renewed + datetime.timedelta(seconds=15.5) - datetime.datetime.now(datetime.timezone.utc)).total_seconds()))
    check = sim.ansible_module("gpuops.scheduling.node_lock", lock_args("next-run"), check=True)
    assert check["outcome"] == "took_over" and check["changed"]
    assert json.loads(sim.kubectl("-n", "gpu-operator", "get", "lease", "gpuops-preflight-prod102", "-o", "json").stdout)[
        "spec"]["holderIdentity"] == dead["lease"]["holder"]   # check mode wrote nothing
    taken = sim.ansible_module("gpuops.scheduling.node_lock", lock_args("next-run"))
    assert taken["outcome"] == "took_over" and taken["previous_holder"] == dead["lease"]["holder"]
    assert taken["lease"]["transitions"] == 1
    assert "took over the lock of node prod102 from 'killed-run on " in " ".join(taken.get("warnings", []))
    sim.ansible_module("gpuops.scheduling.node_lock", lock_args("next-run", state="absent"))
