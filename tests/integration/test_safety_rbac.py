"""Least privilege: the pre-flight runs with the preflight_rbac ServiceAccount's token and nothing more.

playbooks/preflight_rbac.yml is applied as the admin; a token of the ServiceAccount (TokenRequest,
`kubectl create token`) goes into a kubeconfig of its own (server and CA from the sim's kubeconfig), and
the environment holds no other credential, so nothing can fall back to the admin. The full playbook must
pass with it; the same token must be refused (403) for everything outside the rules. Writes are asked as
server-side dry runs: the API server authorizes a dry run exactly like the real request, and nothing
changes even if the RBAC were wrong.
"""
from __future__ import annotations

import pytest

from safety_helpers import (NAMESPACE, NODE, core_api, demo_pods, ledger, new_run_id, output_of, read_report,
                            run_env, run_playbook, tail, token_kubeconfig, write_inventory)

SERVICE_ACCOUNT = "gpuops-preflight"
PRIORITY_CLASS = "gpuops-preflight-no-preempt"


@pytest.fixture(scope="module")
def identity(sim, tmp_path_factory):
    """The RBAC applied by the admin, and a kubeconfig holding only the ServiceAccount's token."""
    sim.use_topology("default")
    applied = sim.playbook("playbooks/preflight_rbac.yml")
    assert applied.returncode == 0, tail(applied)
    directory = tmp_path_factory.mktemp("rbac")
    token = sim.kubectl("-n", NAMESPACE, "create", "token", SERVICE_ACCOUNT, "--duration", "1h").stdout.strip()
    kubeconfig = token_kubeconfig(sim, token, directory / "preflight.kubeconfig")
    return {"token": token, "kubeconfig": str(kubeconfig), "dir": directory}


def api_clients(kubeconfig: str) -> dict:
    from kubernetes import client, config  # pylint: disable=import-outside-toplevel
    api_client = config.new_client_from_config(config_file=kubeconfig)
    return {"core": client.CoreV1Api(api_client), "apps": client.AppsV1Api(api_client),
            "scheduling": client.SchedulingV1Api(api_client), "rbac": client.RbacAuthorizationV1Api(api_client),
            "policy": client.PolicyV1Api(api_client), "resource": client.ResourceV1Api(api_client) if hasattr(client, "ResourceV1Api") else None}


def _claim_template(name):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}


def test_full_playbook_passes_with_only_the_service_account_token(sim, identity):
    admin = core_api(sim.kubeconfig)
    before = ledger(admin)
    # The PriorityClass comes from preflight_rbac: the ServiceAccount may read it, not create it.
    assert sim.kubectl("get", "priorityclass", PRIORITY_CLASS, "-o", "jsonpath={.preemptionPolicy}").stdout == "Never"
    run_id = new_run_id("rbac")
    inventory = write_inventory(identity["dir"] / run_id, sim, gpu_demo_kubeconfig=identity["kubeconfig"])
    env = run_env(sim, KUBECONFIG=identity["kubeconfig"], K8S_AUTH_KUBECONFIG=identity["kubeconfig"])
    run = run_playbook(inventory, env, {"gpu_demo_run_id": run_id})
    assert run.returncode == 0, tail(run)
    report = read_report(identity["dir"] / run_id / "reports", run_id)
    assert report["passed"] is True and report["failed_checks"] == [], report["failed_checks"]
    assert report["hold"]["distinct_uuids"] and report["queue"]["evidence"]["uuids"]
    assert identity["token"] not in output_of(run)
    assert demo_pods(admin) == [] and ledger(admin) == before


def test_the_walk_through_dra_passes_with_only_the_service_account_token(sim, identity):
    # The same token on a node whose GPU only DRA publishes: claim templates, claims, slices and classes are enough.
    sim.use_topology("dra")
    try:
        run_id = new_run_id("rbac-dra")
        inventory = write_inventory(identity["dir"] / run_id, sim, gpu_demo_kubeconfig=identity["kubeconfig"])
        env = run_env(sim, KUBECONFIG=identity["kubeconfig"], K8S_AUTH_KUBECONFIG=identity["kubeconfig"])
        run = run_playbook(inventory, env, {"gpu_demo_run_id": run_id})
        assert run.returncode == 0, tail(run)
        report = read_report(identity["dir"] / run_id / "reports", run_id)
        assert report["passed"] is True and report["before"]["allocation"] == "dra", report["failed_checks"]
        assert sim.kubectl("get", "resourceclaims,resourceclaimtemplates", "-n", NAMESPACE, "-o", "name").stdout == ""
    finally:
        sim.use_topology("default")


def test_a_token_without_the_rules_is_refused_before_anything_is_created(sim, identity):
    """Control: the run really uses the token it is given (another ServiceAccount's token fails with 403)."""
    admin = core_api(sim.kubeconfig)
    before = ledger(admin)
    token = sim.kubectl("-n", NAMESPACE, "create", "token", "default", "--duration", "10m").stdout.strip()
    kubeconfig = str(token_kubeconfig(sim, token, identity["dir"] / "default-sa.kubeconfig"))
    run_id = new_run_id("rbac")
    inventory = write_inventory(identity["dir"] / run_id, sim, gpu_demo_kubeconfig=kubeconfig)
    run = run_playbook(inventory, run_env(sim, KUBECONFIG=kubeconfig, K8S_AUTH_KUBECONFIG=kubeconfig), {"gpu_demo_run_id": run_id})
    assert run.returncode != 0
    report = read_report(identity["dir"] / run_id / "reports", run_id)
    message = report["failure"]["message"]   # from the node lock or the ledger read, whichever asks first
    assert "403" in message and "system:serviceaccount:gpu-operator:default" in message, message
    assert demo_pods(admin) == [] and ledger(admin) == before


def _create_deployment(api):
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gpuops-it-deploy"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    return api["apps"].create_namespaced_deployment(NAMESPACE, body, dry_run="All")


def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}


def _evict(api):
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "vllm-h20", "namespace": "default"},
            "deleteOptions": {"dryRun": ["All"]}}
    return api["core"].create_namespaced_pod_eviction("vllm-h20", "default", body)


def _device_plugin_pod(api) -> str:
    pods = api["core"].list_namespaced_pod(NAMESPACE, label_selector="app=nvidia-device-plugin-daemonset").items
    return pods[0].metadata.name


FORBIDDEN = {
    "create-deployment-in-gpu-operator": _create_deployment,
    "create-configmap-in-gpu-operator": lambda api: api["core"].create_namespaced_config_map(
        NAMESPACE, {"metadata": {"name": "gpuops-it"}, "data": {"a": "b"}}, dry_run="All"),
    "create-pod-in-default": lambda api: api["core"].create_namespaced_pod("default", _pod("gpuops-it"), dry_run="All"),
    "delete-pod-in-default-vllm": lambda api: api["core"].delete_namespaced_pod("vllm-h20", "default", dry_run="All"),
    "evict-pod-vllm": _evict,
    "patch-pod-device-plugin": lambda api: api["core"].patch_namespaced_pod(
        _device_plugin_pod(api), NAMESPACE, {"metadata": {"labels": {"gpuops-it": "x"}}}, dry_run="All"),
    "delete-node-prod102": lambda api: api["core"].delete_node(NODE, dry_run="All"),
    "patch-node-prod102-cordon": lambda api: api["core"].patch_node(NODE, {"spec": {"unschedulable": True}}, dry_run="All"),
    "patch-node-status-prod102": lambda api: api["core"].patch_node_status(
        NODE, {"status": {"capacity": {"nvidia.com/gpu": "8"}}}, dry_run="All"),
    "create-priorityclass": lambda api: api["scheduling"].create_priority_class(
        {"metadata": {"name": "gpuops-it-high"}, "value": 1000000}, dry_run="All"),
    "delete-priorityclass-no-preempt": lambda api: api["scheduling"].delete_priority_class(PRIORITY_CLASS, dry_run="All"),
    "list-secrets-in-gpu-operator": lambda api: api["core"].list_namespaced_secret(NAMESPACE),
    "list-secrets-everywhere": lambda api: api["core"].list_secret_for_all_namespaces(),
    "create-rolebinding-in-gpu-operator": lambda api: api["rbac"].create_namespaced_role_binding(NAMESPACE, {
        "metadata": {"name": "gpuops-it"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]}, dry_run="All"),
    "create-serviceaccount-token-for-other-sa": lambda api: api["core"].create_namespaced_service_account_token(
        "default", NAMESPACE, {"spec": {"audiences": []}}, dry_run="All"),
    # DRA: templates only in the demo namespace, no DeviceClass or ResourceSlice written, no claim deleted elsewhere.
    "create-resourceclaimtemplate-in-default": lambda api: api["resource"].create_namespaced_resource_claim_template(
        "default", _claim_template("gpuops-it"), dry_run="All"),
    "create-deviceclass": lambda api: api["resource"].create_device_class(
        {"metadata": {"name": "gpuops-it.example.com"}, "spec": {}}, dry_run="All"),
    "delete-resourceslices": lambda api: api["resource"].delete_collection_resource_slice(dry_run="All"),
    "delete-resourceclaims-in-default": lambda api: api["resource"].delete_collection_namespaced_resource_claim(
        "default", dry_run="All"),
}


@pytest.mark.parametrize("action", sorted(FORBIDDEN))
def test_the_token_is_refused_outside_its_rules(identity, action):
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    api = api_clients(identity["kubeconfig"])
    with pytest.raises(ApiException) as raised:
        FORBIDDEN[action](api)
    assert raised.value.status == 403, f"{action}: expected 403 Forbidden, got {raised.value.status}: {raised.value.body}"
    assert "system:serviceaccount:gpu-operator:gpuops-preflight" in raised.value.body


ALLOWED = {
    "create-pod-in-gpu-operator": lambda api: api["core"].create_namespaced_pod(NAMESPACE, _pod("gpuops-it"), dry_run="All"),
    "list-nodes": lambda api: api["core"].list_node(),
    "list-pods-everywhere": lambda api: api["core"].list_pod_for_all_namespaces(),
    "list-events-in-gpu-operator": lambda api: api["core"].list_namespaced_event(NAMESPACE),
    "read-priorityclass": lambda api: api["scheduling"].read_priority_class(PRIORITY_CLASS),
    "create-resourceclaimtemplate-in-gpu-operator": lambda api: api["resource"].create_namespaced_resource_claim_template(
        NAMESPACE, _claim_template("gpuops-it"), dry_run="All"),
    "list-resourceslices": lambda api: api["resource"].list_resource_slice(),
    "list-deviceclasses": lambda api: api["resource"].list_device_class(),
    "list-resourceclaims-everywhere": lambda api: api["resource"].list_resource_claim_for_all_namespaces(),
}


@pytest.mark.parametrize("action", sorted(ALLOWED))
def test_the_token_is_allowed_what_the_run_needs(identity, action):
    """Control for the 403s above: the token is valid, and these are what the pre-flight uses."""
    ALLOWED[action](api_clients(identity["kubeconfig"]))
