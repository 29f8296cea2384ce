"""Secrets never appear in output: not in stdout/stderr at -vvv, not in any report file.

The secrets: a ServiceAccount token (TokenRequest) given the way AWX injects it (K8S_AUTH_API_KEY with
K8S_AUTH_HOST and K8S_AUTH_SSL_CA_CERT, no kubeconfig at all) or inside an inline kubeconfig, and the
vLLM bearer token (gpu_demo_vllm_bearer_token) on a topology whose fake vLLM really checks it
(tests/sim/topologies/vllm-api-key.yaml: /v1/models answers 401 without it). Each run is searched for the
whole token and for each part of the JWT that is unique to it (payload, signature). Every API module of the
collection is also run with an inline kubeconfig holding the admin's client key, in the controller's process
and shipped as a module (kubernetes.core >= 6.3 masks an inline kubeconfig in AnsibleK8SModule, not through
the argument spec).
"""
from __future__ import annotations

import base64
import json
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from safety_helpers import (CHECKOUT, NAMESPACE, NODE, ansible_module, ca_file, core_api, demo_pods, new_run_id,
                            read_report, run_env, run_playbook, sim_kubeconfig, tail, write_inventory)

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


# A passing run's own API and health tasks: the lock, the ledger, health, whether the verdict may be written, the
# verdict "running", the walk's four waits, health, the unlock, the verdict.
IN_PROCESS_ON_A_PASS = ["node_lock", "gpu_ledger_facts", "vllm_health", "node_verdict", "node_verdict", "pod_admission",
                        "pod_wait", "pod_wait", "pod_wait", "pod_wait", "vllm_health", "node_lock", "node_verdict",
                        "report_store"]


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
    # The role's own API and health tasks ran in the controller's process, with the K8S_AUTH_* credentials of its
    # environment (plugins/plugin_utils/_in_process.py), the dry run and the report kept in the cluster among them;
    # kubernetes.core.k8s runs the card's four steps, with the same credentials, as modules of their own: the hold and
    # the queue created, the hold and then the demo pods deleted.
    in_process = re.findall(r"gpuops\.scheduling\.(\w+): running in the controller's process", run.stdout)
    assert sorted(in_process) == sorted(IN_PROCESS_ON_A_PASS), in_process
    assert len(set(re.findall(r"(ansible-tmp-[^/\s'\"]+)/AnsiballZ_k8s\.py", run.stdout))) == 4
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
    # Results with the tasks' arguments, as always up to ansible-core 2.20 (2.21: on request).
    run = run_playbook(inventory, run_env(sim, ANSIBLE_INJECT_INVOCATION="true"),
                       {"gpu_demo_run_id": run_id, "gpu_demo_kubeconfig": inline, "gpu_demo_vllm_bearer_token": VLLM_TOKEN,
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


MODULES_PLAYBOOK = textwrap.dedent("""\
    - name: Every API module of gpuops.scheduling with an inline kubeconfig, as in issue 12
      hosts: gpu_nodes
      gather_facts: false
      tasks:
        - name: Lock the node
          gpuops.scheduling.node_lock:
            kubeconfig: "{{ inline_kubeconfig }}"
            node: "{{ inventory_hostname }}"
            namespace: gpu-operator
            holder: "{{ run_id }}"
            duration_seconds: 60
            # A shipped module cannot see the ansible-playbook process that a renewer would follow.
            renew: false
          register: lock

        - name: Read the ledger
          gpuops.scheduling.gpu_ledger_facts:
            kubeconfig: "{{ inline_kubeconfig }}"
            validate_certs: false
            node: "{{ inventory_hostname }}"
          register: ledger

        - name: Wait for the device plugin's pod
          gpuops.scheduling.pod_wait:
            kubeconfig: "{{ inline_kubeconfig }}"
            namespace: gpu-operator
            names: [nvidia-device-plugin-daemonset-7xk2p]
            condition: running
            timeout: 30
          register: pods

        - name: Ask vLLM with its bearer token
          gpuops.scheduling.vllm_health:
            url: "{{ health_url }}"
            models_url: "{{ models_url }}"
            bearer_token: "{{ vllm_token }}"
          register: health

        - name: Release the node
          gpuops.scheduling.node_lock:
            kubeconfig: "{{ inline_kubeconfig }}"
            node: "{{ inventory_hostname }}"
            namespace: gpu-operator
            holder: "{{ run_id }}"
            state: absent
          register: unlock

        - name: Show every registered result
          ansible.builtin.debug:
            msg: "{{ lookup('ansible.builtin.vars', item) }}"
          loop: [lock, ledger, pods, health, unlock]

        - name: Write the registered results as a report
          gpuops.scheduling.report_files:
            dir: "{{ report_dir }}"
            files:
              - name: results.json
                content: {lock: "{{ lock }}", ledger: "{{ ledger }}", pods: "{{ pods }}", health: "{{ health }}", unlock: "{{ unlock }}"}
    """)


def inline_admin_kubeconfig(sim) -> dict:
    """The sim's admin kubeconfig with its CA, client certificate and client key inlined as *-data."""
    kubeconfig = sim_kubeconfig(sim)

    def inline(entry: dict, *keys: str) -> dict:
        entry = dict(entry)
        for key in keys:
            if key in entry:
                entry[key + "-data"] = base64.b64encode(Path(entry.pop(key)).read_bytes()).decode()
        return entry

    kubeconfig["clusters"] = [dict(item, cluster=inline(item["cluster"], "certificate-authority")) for item in kubeconfig["clusters"]]
    kubeconfig["users"] = [dict(item, user=inline(item["user"], "client-certificate", "client-key")) for item in kubeconfig["users"]]
    return kubeconfig


def venv_python_elsewhere(directory: Path) -> str:
    """The test's virtualenv under another path: its pyvenv.cfg beside links to its Python and its lib/."""
    clone = directory / "venv-elsewhere"
    (clone / "bin").mkdir(parents=True)
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", clone / "pyvenv.cfg")
    (clone / "lib").symlink_to(Path(sys.prefix) / "lib")
    (clone / "bin" / "python").symlink_to(sys.executable)
    return str(clone / "bin" / "python")


@pytest.mark.parametrize("where", ["in process", "as a module"])
def test_inline_kubeconfig_client_key_never_appears_in_any_module_result(sim, secrets, where):
    run_id = new_run_id("secret")
    directory = secrets["dir"] / run_id
    kubeconfig = inline_admin_kubeconfig(sim)
    key_data = kubeconfig["users"][0]["user"]["client-key-data"]
    key_pem = base64.b64decode(key_data).decode().splitlines()
    playbook = directory / "modules.yml"
    inventory = write_inventory(directory, sim)
    playbook.write_text(MODULES_PLAYBOOK)
    extra_vars = {"inline_kubeconfig": kubeconfig, "run_id": run_id, "vllm_token": VLLM_TOKEN, "health_url": sim.health_url,
                  "models_url": sim.models_url, "report_dir": str(directory / "reports")}
    if where == "as a module":
        # The action plugin cannot tell this Python is the controller's, so it ships the module
        # (plugin_utils/_in_process.py: why_not_in_process). Async would too, but its results lack the invocation.
        extra_vars["ansible_python_interpreter"] = venv_python_elsewhere(directory)
    # The results carry each task's arguments (always up to ansible-core 2.20, on request from 2.21 on).
    run = run_playbook(inventory, run_env(sim, ANSIBLE_INJECT_INVOCATION="true"), extra_vars, args=("-vvv",),
                       playbook=str(playbook))
    assert run.returncode == 0, tail(run)
    marker = ": running in the controller's process" if where == "in process" else ": running as a module: ansible_python_interpreter"
    assert run.stdout.count(marker) == 5, tail(run)
    # The modules did their work with that kubeconfig (the environment has no other), and vLLM saw the token.
    results = json.loads((directory / "reports" / "results.json").read_text())
    assert results["lock"]["outcome"] == "created" and results["unlock"]["outcome"] == "released", results
    assert NODE in results["ledger"]["ledger"]["nodes"]
    assert results["pods"]["pods"][0]["phase"] == "Running"
    assert results["health"]["healthy"] is True and results["health"]["models"]
    secret_values = {"client-key-data": key_data, "vLLM token": VLLM_TOKEN,
                     # the key's PEM body, line by line, should anything print it decoded
                     **{f"client key line {number}": line for number, line in enumerate(key_pem[1:-1], 1) if len(line) > 20}}
    assert leaks(secret_values, run, directory / "reports") == []
    # Not vacuous: each Kubernetes task's arguments are in the output, with the key masked; from ansible-core 2.21
    # on the registered results (so the debug output and the report) hold them too.
    assert run.stdout.count("client-key-data: VALUE_SPECIFIED_IN_NO_LOG_PARAMETER") >= 4, tail(run)
    shown = [results[name]["invocation"]["module_args"]["kubeconfig"]["users"][0]["user"]
             for name in ("lock", "ledger", "pods", "unlock") if "invocation" in results[name]]
    assert all(user["client-key-data"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" for user in shown), shown
