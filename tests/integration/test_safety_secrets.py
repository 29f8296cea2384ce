"""Secrets never appear in output: not in stdout/stderr at -vvv, not in any report file.

The secrets: a ServiceAccount token (TokenRequest) given the way AWX injects it (K8S_AUTH_API_KEY with
K8S_AUTH_HOST and K8S_AUTH_SSL_CA_CERT, no kubeconfig at all) or inside an inline kubeconfig, and the
vLLM bearer token (gpu_demo_vllm_bearer_token) on a topology whose fake vLLM really checks it
(tests/sim/topologies/vllm-api-key.yaml: /v1/models answers 401 without it). Each run is searched for the
whole token and for each part of the JWT that is unique to it (payload, signature).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from safety_helpers import (CHECKOUT, NAMESPACE, ansible_module, ca_file, core_api, demo_pods, new_run_id, read_report,
                            run_env, run_playbook, sim_kubeconfig, tail, write_inventory)

TOPOLOGY = "vllm-api-key"
VLLM_TOKEN = yaml.safe_load((CHECKOUT / "tests" / "sim" / "topologies" / f"{TOPOLOGY}.yaml").read_text())["vllm"]["api_key"]


@pytest.fixture(scope="module")
def secrets(sim, tmp_path_factory):
    sim.use_topology(TOPOLOGY)
    applied = sim.playbook("playbooks/preflight_rbac.yml")
    assert applied.returncode == 0, tail(applied)
    token = sim.kubectl("-n", NAMESPACE, "create", "token", "gpuops-preflight", "--duration", "1h").stdout.strip()
    directory = tmp_path_factory.mktemp("secrets")
    yield {"token": token, "dir": directory, "ca": ca_file(sim, directory)}
    sim.use_topology("default")


def leaks(secret_values: dict, process, report_dir: Path) -> list:
    """Where any of the secrets (or a JWT part of one) shows: ['<secret> in <place>', ...]."""
    needles = {}
    for name, value in secret_values.items():
        needles[name] = value
        parts = value.split(".")
        if len(parts) == 3:   # a JWT: its header is common to every token, payload and signature are not
            needles[name + " (payload)"], needles[name + " (signature)"] = parts[1], parts[2]
    places = {"stdout": process.stdout, "stderr": process.stderr}
    files = sorted(path for path in report_dir.rglob("*") if path.is_file()) if report_dir.exists() else []
    places.update({str(path.relative_to(report_dir)): path.read_text(errors="replace") for path in files})
    assert files, "the run wrote no report file to search"
    return [f"{name} in {place}" for name, needle in needles.items() for place, text in places.items() if needle in text]


def test_vllm_server_really_checks_the_bearer_token(sim, secrets):
    """Control: without the right token /v1/models is refused, so a passing run below did send it."""
    env = run_env(sim)
    arguments = {"url": sim.health_url, "models_url": sim.models_url, "retries": 0}
    refused = ansible_module(sim, "gpuops.scheduling.vllm_health", {**arguments, "bearer_token": "not-the-key"}, env)
    accepted = ansible_module(sim, "gpuops.scheduling.vllm_health", {**arguments, "bearer_token": VLLM_TOKEN}, env)
    assert refused["healthy"] is False and "401" in refused["error"], refused
    assert accepted["healthy"] is True and accepted["models"], accepted
    assert VLLM_TOKEN not in str(refused) + str(accepted)


def test_env_credentials_and_vllm_token_never_appear_at_vvv(sim, secrets):
    run_id = new_run_id("secret")
    directory = secrets["dir"] / run_id
    inventory = write_inventory(directory, sim)   # no kubeconfig anywhere: the K8S_AUTH_* variables only
    env = run_env(sim, K8S_AUTH_HOST=sim.api_url, K8S_AUTH_API_KEY=secrets["token"], K8S_AUTH_SSL_CA_CERT=secrets["ca"])
    run = run_playbook(inventory, env, {"gpu_demo_run_id": run_id, "gpu_demo_vllm_bearer_token": VLLM_TOKEN,
                                        "gpu_demo_vllm_models_url": sim.models_url}, args=("-vvv",))
    assert run.returncode == 0, tail(run)
    report = read_report(directory / "reports", run_id)
    assert report["passed"] is True, report["failed_checks"]
    # healthy needs the model list, which the server gives only for the right token
    assert report["before"]["vllm"]["healthy"] is True and report["after"]["vllm"]["healthy"] is True
    assert "Qwen/Qwen2.5-7B-Instruct" in run.stdout   # -vvv shows the health task's result
    # The role's API and health tasks (lock, ledger, health, dry run, walk, health, unlock) ran in the controller's
    # process, with the K8S_AUTH_* credentials of its environment (plugins/plugin_utils/in_process.py).
    assert run.stdout.count(": running in the controller's process") == 7, tail(run)
    assert ": running as a module" not in run.stdout
    assert leaks({"K8S_AUTH_API_KEY": secrets["token"], "vLLM token": VLLM_TOKEN}, run, directory / "reports") == []
    assert demo_pods(core_api(sim.kubeconfig)) == []


def test_inline_kubeconfig_credentials_never_appear_at_vvv(sim, secrets):
    run_id = new_run_id("secret")
    directory = secrets["dir"] / run_id
    kubeconfig = sim_kubeconfig(sim)
    cluster = kubeconfig["clusters"][0]["cluster"]
    inline = {"apiVersion": "v1", "kind": "Config", "current-context": "gpuops-preflight@sim",
              "clusters": [{"name": "gpuops-sim-cluster", "cluster": cluster}],
              "users": [{"name": "gpuops-preflight-user", "user": {"token": secrets["token"]}}],
              "contexts": [{"name": "gpuops-preflight@sim",
                            "context": {"cluster": "gpuops-sim-cluster", "user": "gpuops-preflight-user"}}]}
    inventory = write_inventory(directory, sim)
    run = run_playbook(inventory, run_env(sim), {"gpu_demo_run_id": run_id, "gpu_demo_kubeconfig": inline,
                                                 "gpu_demo_vllm_bearer_token": VLLM_TOKEN,
                                                 "gpu_demo_vllm_models_url": sim.models_url}, args=("-vvv",))
    assert run.returncode == 0, tail(run)
    assert read_report(directory / "reports", run_id)["passed"] is True
    assert leaks({"kubeconfig token": secrets["token"], "vLLM token": VLLM_TOKEN}, run, directory / "reports") == []


def test_a_failing_run_does_not_leak_the_credentials_either(sim, secrets):
    """Error paths (401 from the API server, 401 from vLLM) are where tokens usually slip out."""
    run_id = new_run_id("secret")
    directory = secrets["dir"] / run_id
    payload, signature = secrets["token"].split(".")[1:]
    forged = ".".join(["eyJhbGciOiJSUzI1NiJ9", payload[::-1], signature[::-1]])   # same shape, not valid
    wrong_vllm = "sk-sim-wrong-" + VLLM_TOKEN[::-1]
    env = run_env(sim, K8S_AUTH_HOST=sim.api_url, K8S_AUTH_API_KEY=forged, K8S_AUTH_SSL_CA_CERT=secrets["ca"])
    run = run_playbook(write_inventory(directory, sim), env,
                       {"gpu_demo_run_id": run_id, "gpu_demo_vllm_bearer_token": wrong_vllm,
                        "gpu_demo_vllm_models_url": sim.models_url}, args=("-vvv",))
    assert run.returncode != 0
    report = read_report(directory / "reports", run_id)
    assert "401" in report["failure"]["message"] or "Unauthorized" in report["failure"]["message"], report["failure"]
    assert leaks({"forged API key": forged, "wrong vLLM token": wrong_vllm}, run, directory / "reports") == []
