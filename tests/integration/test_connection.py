"""The role's connection, said once (module_defaults in roles/gpu_demo/tasks/main.yml): however it is given, it
reaches every Kubernetes task of a run, the in-process ones included, and a wrong one fails at once, naming the
API server it could not reach, with nothing left behind.

Each run has only the connection it tests: no KUBECONFIG / K8S_AUTH_* unless named, and HOME a fresh folder, so no
~/.kube/config can stand in for a task the connection did not reach. A task it did not reach fails the run: it has
nothing else to talk to (or, with a second context, talks to a dead port).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from safety_helpers import (NAMESPACE, NODE, closed_loopback_port, demo_pods, core_api, ledger, new_run_id,
                            read_report, run_env, run_playbook, sim_kubeconfig, tail, write_inventory)

pytestmark = pytest.mark.independent

LEASE = "gpuops-preflight-" + NODE
GOOD_CONTEXT = "gpuops-sim"
DEAD_CONTEXT = "nowhere"


def two_contexts(sim, path: Path, dead_port: int) -> Path:
    """A copy of the sim's kubeconfig with a second context, current, whose API server is a closed loopback port."""
    config = sim_kubeconfig(sim)
    cluster = config["clusters"][0]
    user = config["users"][0]
    dead_cluster = dict(cluster["cluster"], server=f"https://127.0.0.1:{dead_port}")
    config.update(
        clusters=[cluster, {"name": "dead-cluster", "cluster": dead_cluster}],
        contexts=[{"name": GOOD_CONTEXT, "context": {"cluster": cluster["name"], "user": user["name"]}},
                  {"name": DEAD_CONTEXT, "context": {"cluster": "dead-cluster", "user": user["name"]}}],
        **{"current-context": DEAD_CONTEXT})
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path


def walk(sim, directory: Path, env: dict, topology: str = "default", **group_vars):
    """One run of playbooks/gpu_demo.yml with only the given connection; (process, report, run_id), after checking
    that the node ended as it began and that no pod or lock of the run is left."""
    sim.use_topology(topology)
    core = core_api(sim.kubeconfig)
    before = ledger(core)
    run_id = new_run_id("conn")
    inventory = write_inventory(directory, sim, gpu_demo_run_id=run_id, **group_vars)
    home = directory / "home"
    home.mkdir(parents=True, exist_ok=True)
    process = run_playbook(inventory, run_env(sim, HOME=home, **env))
    assert demo_pods(core) == [], "a pod of the run remains"
    assert ledger(core) == before, "the node did not end as it began"
    lease = sim.kubectl("-n", NAMESPACE, "get", "lease", LEASE, "-o", "json", check=False)
    holder = json.loads(lease.stdout)["spec"].get("holderIdentity", "") if lease.returncode == 0 else ""
    assert run_id not in holder, "the run's lock was not released"
    return process, read_report(directory / "reports", run_id), run_id


def assert_passed(process, report) -> None:
    assert process.returncode == 0, tail(process)
    assert report and report["passed"] is True, report and report["failed_checks"]


def test_only_k8s_auth_kubeconfig_in_the_environment(sim, tmp_path):
    # As AWX injects a credential. The probe's tasks too (gpu_demo_bypass_probe).
    process, report, _run_id = walk(sim, tmp_path, {"K8S_AUTH_KUBECONFIG": sim.kubeconfig}, gpu_demo_bypass_probe=True)
    assert_passed(process, report)
    assert report["probe"]["ran"] is True


def test_only_gpu_demo_kubeconfig(sim, tmp_path):
    process, report, run_id = walk(sim, tmp_path, {}, gpu_demo_kubeconfig=sim.kubeconfig)
    assert_passed(process, report)
    # The verdict's tasks reached the node too.
    labels = json.loads(sim.kubectl("get", "node", NODE, "-o", "json").stdout)["metadata"]["labels"]
    assert labels.get("gpuops.scheduling/gpu-preflight") == "passed"
    annotations = json.loads(sim.kubectl("get", "node", NODE, "-o", "json").stdout)["metadata"]["annotations"]
    assert run_id in annotations.get("gpuops.scheduling/gpu-preflight-report", ""), annotations


def test_a_context_that_is_not_the_current_one(sim, tmp_path):
    # Through DRA: the claim templates' and the claims' tasks get the context as well.
    kubeconfig = two_contexts(sim, tmp_path / "kubeconfig", closed_loopback_port())
    process, report, _run_id = walk(sim, tmp_path, {}, topology="dra", gpu_demo_kubeconfig=str(kubeconfig),
                                    gpu_demo_context=GOOD_CONTEXT)
    assert_passed(process, report)
    assert report["before"]["allocation"] == "dra"
    left = sim.kubectl("get", "resourceclaims,resourceclaimtemplates", "-n", NAMESPACE,
                       "-l", "app.kubernetes.io/managed-by=gpuops.scheduling", "-o", "name").stdout.split()
    assert left == []


def test_a_context_whose_api_server_is_unreachable_fails_naming_it(sim, tmp_path):
    port = closed_loopback_port()
    kubeconfig = two_contexts(sim, tmp_path / "kubeconfig", port)
    # The right kubeconfig in the environment must not rescue a wrong context given to the role.
    process, report, run_id = walk(sim, tmp_path, {"K8S_AUTH_KUBECONFIG": sim.kubeconfig},
                                   gpu_demo_kubeconfig=str(kubeconfig), gpu_demo_context=DEAD_CONTEXT)
    assert process.returncode != 0
    assert report["passed"] is False and report["failed_checks"] == ["node_found"], report["failed_checks"]
    detail = next(check["detail"] for check in report["checks"] if check["id"] == "node_found")
    assert f"cannot reach the Kubernetes API at https://127.0.0.1:{port}" in detail, detail
    assert f"127.0.0.1:{port}" in tail(process)
    # Nothing was written: no pod, no lock (walk() checked), no verdict of this run on the node.
    annotations = json.loads(sim.kubectl("get", "node", NODE, "-o", "json").stdout)["metadata"]["annotations"]
    assert run_id not in annotations.get("gpuops.scheduling/gpu-preflight-report", "")


def test_the_read_only_entry_point_gets_the_connection_too(sim, tmp_path):
    # tasks_from: preflight (a provisioning play's read-only gate) is not wrapped by main.yml: its own block says it.
    sim.use_topology("default")
    kubeconfig = two_contexts(sim, tmp_path / "kubeconfig", closed_loopback_port())
    playbook = tmp_path / "gate.yml"
    include = {"name": "gpuops.scheduling.gpu_demo", "tasks_from": "preflight"}
    playbook.write_text(json.dumps([{"hosts": "gpu_nodes", "gather_facts": False,
                                     "tasks": [{"name": "Pre-flight only", "ansible.builtin.include_role": include}]}]))
    inventory = write_inventory(tmp_path, sim, gpu_demo_kubeconfig=str(kubeconfig), gpu_demo_context=GOOD_CONTEXT)
    home = tmp_path / "home"
    home.mkdir()
    process = run_playbook(inventory, run_env(sim, HOME=home), playbook=str(playbook))
    assert process.returncode == 0, tail(process)
    assert "ok=" in tail(process) and "failed=0" in tail(process)
