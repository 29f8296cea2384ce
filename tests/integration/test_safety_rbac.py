"""Least privilege: the pre-flight runs with the preflight_rbac ServiceAccount's token and nothing more.

playbooks/preflight_rbac.yml is applied as the admin; a token of the ServiceAccount (TokenRequest,
`kubectl create token`) goes into a kubeconfig of its own (server and CA from the sim's kubeconfig), and
the environment holds no other credential, so nothing can fall back to the admin. The full playbook must
pass with it, and write its verdict on the Node; the same token must be refused (403) for everything outside the
rules, including any Node write beyond the verdict's own keys (RBAC's "patch on nodes" allows them all; the
ValidatingAdmissionPolicy preflight_rbac ships refuses them). Writes are asked as server-side dry runs: the API server
authorizes and admits a dry run exactly like the real request, and nothing changes even if the rules were wrong.
An identity without the node rules is refused by the pre-flight, naming the missing rule and the option that turns
the verdict off, and passes with that option. Topology: default.
"""
from __future__ import annotations

import datetime
import json

import pytest

from safety_helpers import (NAMESPACE, NODE, core_api, demo_pods, ledger, new_run_id, output_of, read_report,
                            run_env, run_playbook, tail, token_kubeconfig, wait_until, write_inventory)

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
    # The API server enforces a new admission policy once it has read and type-checked it: wait for that.
    wait_until(lambda: _refused(lambda: api_clients(str(kubeconfig))["core"].patch_node(
        NODE, {"spec": {"unschedulable": True}}, dry_run="All")), 30, "the node-writes policy to be enforced")
    return {"token": token, "kubeconfig": str(kubeconfig), "dir": directory}


def _refused(call) -> bool:
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    try:
        call()
    except ApiException as error:
        return error.status == 403
    return False


def api_clients(kubeconfig: str) -> dict:
    from kubernetes import client, config  # pylint: disable=import-outside-toplevel
    api_client = config.new_client_from_config(config_file=kubeconfig)
    return {"core": client.CoreV1Api(api_client), "apps": client.AppsV1Api(api_client),
            "scheduling": client.SchedulingV1Api(api_client), "rbac": client.RbacAuthorizationV1Api(api_client),
            "policy": client.PolicyV1Api(api_client),
            "coordination": client.CoordinationV1Api(api_client), "events": client.EventsV1Api(api_client),
            "resource": client.ResourceV1Api(api_client) if hasattr(client, "ResourceV1Api") else None}


OURS = {"app.kubernetes.io/managed-by": "gpuops.scheduling"}


def _claim_template(name, labels=None, claim_labels=None):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"metadata": {"labels": claim_labels or {}},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}


def _lease(name, labels=None):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"holderIdentity": "gpuops-it", "leaseDurationSeconds": 10}}


def _configmap(name, labels=None):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {}},
            "data": {"report.json": "{}"}}


# Objects in the demo namespace that are not the pre-flight's (another tool's lock, claim and template), and a lock of
# its own: the token may write its own, never these.
FOREIGN = {"lease": "gpuops-it-other-lock", "claim": "gpuops-it-other-claim", "template": "gpuops-it-other-template",
           "our_lease": "gpuops-preflight-gpuops-it", "configmap": "gpuops-it-other-config",
           "our_configmap": "gpu-preflight-report-gpuops-it"}


@pytest.fixture(scope="module")
def foreign(sim, identity):  # pylint: disable=unused-argument
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": FOREIGN["claim"], "namespace": NAMESPACE},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    objects = [dict(_lease(FOREIGN["lease"]), metadata={"name": FOREIGN["lease"], "namespace": NAMESPACE}),
               dict(_lease(FOREIGN["our_lease"]), metadata={"name": FOREIGN["our_lease"], "namespace": NAMESPACE, "labels": OURS}),
               claim, dict(_claim_template(FOREIGN["template"]), metadata={"name": FOREIGN["template"], "namespace": NAMESPACE}),
               _configmap(FOREIGN["configmap"], {"gpuops.scheduling/report": "gpu-preflight"}),
               _configmap(FOREIGN["our_configmap"], dict(OURS, **{"gpuops.scheduling/report": "gpu-preflight"}))]
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    sim.kubectl("apply", "-f", "-", input=listed)
    yield FOREIGN
    sim.kubectl("delete", "-f", "-", "--ignore-not-found", input=listed)


def run_as(sim, directory, kubeconfig, extra_vars=None, prefix="rbac"):
    """The demo playbook run with only ``kubeconfig``'s identity -> (run id, the run, its report or None)."""
    run_id = new_run_id(prefix)
    inventory = write_inventory(directory / run_id, sim, gpu_demo_kubeconfig=kubeconfig)
    run = run_playbook(inventory, run_env(sim, KUBECONFIG=kubeconfig, K8S_AUTH_KUBECONFIG=kubeconfig),
                       {"gpu_demo_run_id": run_id, **(extra_vars or {})})
    return run_id, run, read_report(directory / run_id / "reports", run_id)


def test_full_playbook_passes_with_only_the_service_account_token(sim, identity):
    admin = core_api(sim.kubeconfig)
    before = ledger(admin)
    # The PriorityClass comes from preflight_rbac: the ServiceAccount may read it, not create it.
    assert sim.kubectl("get", "priorityclass", PRIORITY_CLASS, "-o", "jsonpath={.preemptionPolicy}").stdout == "Never"
    run_id, run, report = run_as(sim, identity["dir"], identity["kubeconfig"])
    assert run.returncode == 0, tail(run)
    assert report["passed"] is True and report["failed_checks"] == [], report["failed_checks"]
    assert report["hold"]["distinct_uuids"] and report["queue"]["evidence"]["uuids"]
    assert identity["token"] not in output_of(run)
    assert demo_pods(admin) == [] and ledger(admin) == before
    # Its verdict is on the Node, written by this identity (the policy let exactly these writes through).
    node = admin.read_node(NODE)
    assert node.metadata.labels["gpuops.scheduling/gpu-preflight"] == "passed"
    condition, = [c for c in node.status.conditions if c.type == "gpuops.scheduling/GPUPreflightPassed"]
    assert (condition.status, condition.reason) == ("True", "PreflightPassed") and run_id in condition.message
    # And its Event, created by this identity where kubectl events --for node/NAME finds it.
    listed = sim.kubectl("events", "--for", f"node/{NODE}").stdout
    assert "GPUPreflightPassed" in listed and run_id in listed, listed
    assert "may not" not in output_of(run) and "forbidden" not in output_of(run).lower(), tail(run)
    # Its report is kept in the demo namespace, created by this identity, and the Node names it.
    stored = node.metadata.annotations["gpuops.scheduling/gpu-preflight-report-configmap"]
    assert stored == f"{NAMESPACE}/{report['report_configmap']['name']}" and run_id in stored
    kept = admin.read_namespaced_config_map(report["report_configmap"]["name"], NAMESPACE)
    assert json.loads(kept.data["report.json"]) == report


@pytest.mark.parametrize("dra_request", ["auto", "claim"])
def test_the_walk_through_dra_passes_with_only_the_service_account_token(sim, identity, dra_request):
    # The same token on a node whose GPU only DRA publishes: claim templates, claims, slices and classes are enough, for
    # plain nvidia.com/gpu requests (auto: the class serves them) and for the run's own claims alike.
    sim.use_topology("dra")
    try:
        _run_id, run, report = run_as(sim, identity["dir"], identity["kubeconfig"], {"gpu_demo_dra_request": dra_request},
                                      prefix="rbac-dra")
        assert run.returncode == 0, tail(run)
        assert report["passed"] is True and report["before"]["allocation"] == "dra", report["failed_checks"]
        assert report["plan"]["dra_request"] == {"auto": "extended_resource"}.get(dra_request, dra_request)
        assert sim.kubectl("get", "resourceclaims,resourceclaimtemplates", "-n", NAMESPACE, "-o", "name").stdout == ""
    finally:
        sim.use_topology("default")


def test_the_gate_with_only_the_service_account_token_lifts_its_taint_and_nothing_else(sim, identity):
    """Gate mode with the same token: the Node writes the policy admits are exactly the gate's. A node with the startup
    taint beside another tool's passes and loses only the startup taint; a node whose taint node-readiness-controller
    owns gets the verdict and keeps its taint."""
    sim.use_topology("gate")
    try:
        directory = identity["dir"] / new_run_id("rbac-gate")
        directory.mkdir(parents=True)
        inventory = directory / "hosts.yml"
        inventory.write_text(json.dumps({"new_gpu_nodes": {"hosts": {
            "gate-a": None, "gate-b": {"gpu_demo_gate_taint_key": "readiness.k8s.io/gpu-preflight-pending",
                                       "gpu_demo_gate_remove_taint": False}},
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                     "gpu_demo_kubeconfig": identity["kubeconfig"], "gpu_demo_vllm_health_url": sim.health_url,
                     "gpu_demo_report_dir": str(directory / "reports"), "gpu_demo_timeout": 30}}}))
        env = run_env(sim, KUBECONFIG=identity["kubeconfig"], K8S_AUTH_KUBECONFIG=identity["kubeconfig"])
        run = run_playbook(inventory, env, playbook="playbooks/gpu_preflight_gate.yml")
        assert run.returncode == 0, tail(run)
        admin = core_api(sim.kubeconfig)
        for name, kept in (("gate-a", [("nvidia.com/gpu", "present", "NoSchedule")]),
                           ("gate-b", [("readiness.k8s.io/gpu-preflight-pending", "pending", "NoSchedule")])):
            node = admin.read_node(name)
            assert [(taint.key, taint.value, taint.effect) for taint in node.spec.taints or []] == kept, node.spec.taints
            assert node.metadata.labels["gpuops.scheduling/gpu-preflight"] == "passed" and not node.spec.unschedulable
            condition, = [c for c in node.status.conditions if c.type == CONDITION]
            assert condition.status == "True", condition
    finally:
        sim.use_topology("default")


def test_a_token_without_the_rules_is_refused_before_anything_is_created(sim, identity):
    """Control: the run really uses the token it is given (another ServiceAccount's token fails with 403)."""
    admin = core_api(sim.kubeconfig)
    before = ledger(admin)
    token = sim.kubectl("-n", NAMESPACE, "create", "token", "default", "--duration", "10m").stdout.strip()
    kubeconfig = str(token_kubeconfig(sim, token, identity["dir"] / "default-sa.kubeconfig"))
    _run_id, run, report = run_as(sim, identity["dir"], kubeconfig)
    assert run.returncode != 0
    message = report["failure"]["message"]   # from the node lock or the ledger read, whichever asks first
    assert "403" in message and "system:serviceaccount:gpu-operator:default" in message, message
    assert demo_pods(admin) == [] and ledger(admin) == before


def test_an_identity_without_the_node_rules_is_refused_naming_them_and_passes_without_the_verdict(sim, identity):
    """The pre-flight asks first (SelfSubjectAccessReview): refused before any pod, the missing rules and the option
    named; with gpu_demo_verdict false the same identity runs the whole demo and writes nothing on the Node."""
    admin = core_api(sim.kubeconfig)
    account = "gpuops-preflight-no-verdict"
    sim.kubectl("-n", NAMESPACE, "create", "serviceaccount", account)
    sim.kubectl("-n", NAMESPACE, "create", "rolebinding", account, "--role", SERVICE_ACCOUNT,
                "--serviceaccount", f"{NAMESPACE}:{account}")
    # The cluster-wide reads of preflight_rbac's ClusterRole, without patch on nodes and nodes/status.
    sim.kubectl("create", "clusterrole", account, "--verb=get,list", "--resource=nodes")
    sim.kubectl("create", "clusterrolebinding", account, "--clusterrole", account, "--serviceaccount", f"{NAMESPACE}:{account}")
    reads = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": account + "-reads"},
             "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                       {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get"]},
                       {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "deviceclasses"], "verbs": ["list"]},
                       {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list"]}]}
    sim.kubectl("apply", "-f", "-", input=json.dumps(reads))
    sim.kubectl("create", "clusterrolebinding", account + "-reads", "--clusterrole", account + "-reads",
                "--serviceaccount", f"{NAMESPACE}:{account}")
    try:
        token = sim.kubectl("-n", NAMESPACE, "create", "token", account, "--duration", "10m").stdout.strip()
        kubeconfig = str(token_kubeconfig(sim, token, identity["dir"] / "no-verdict.kubeconfig"))
        refused_id, run, report = run_as(sim, identity["dir"], kubeconfig)
        assert run.returncode != 0, tail(run)
        assert report["failed_checks"] == ["verdict_permitted"], report["failed_checks"]
        message = report["failure"]["message"]
        assert "patch on nodes/status (the condition)" in message and "patch on nodes (the label" in message, message
        assert "gpu_demo_verdict: false" in message and "playbooks/preflight_rbac.yml" in message, message
        assert demo_pods(admin) == [] and report["hold"] == {}
        run_id, run, report = run_as(sim, identity["dir"], kubeconfig, {"gpu_demo_verdict": False})
        assert run.returncode == 0, tail(run)
        assert report["passed"] is True
        # Nothing of either run on the Node: the first was refused before writing, the second writes no verdict.
        annotations = admin.read_node(NODE).metadata.annotations or {}
        written = annotations.get("gpuops.scheduling/gpu-preflight-report", "")
        assert run_id not in written and refused_id not in written, written
    finally:
        for kind, name in (("clusterrolebinding", account), ("clusterrolebinding", account + "-reads"),
                           ("clusterrole", account), ("clusterrole", account + "-reads")):
            sim.kubectl("delete", kind, name, "--ignore-not-found")
        sim.kubectl("-n", NAMESPACE, "delete", "rolebinding,serviceaccount", account, "--ignore-not-found")


# What the pre-flight needed before it read DRA (resource.k8s.io): an identity bound then, and never re-bound.
RULES_BEFORE_DRA = {
    "namespace": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "get", "list", "watch"]},
                  {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
                  {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
                  {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "delete", "get", "update"]}],
    "cluster": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get"]}],
}


def test_an_identity_made_before_the_dra_reads_walks_a_device_plugin_node_and_is_refused_a_walk_through_dra(sim, identity):
    """The ledger reads DRA by default; an identity without those reads (403 on ResourceSlices) still walks the device
    plugin's node, told that DRA was not readable, and a walk through DRA is refused naming the missing permission."""
    admin = core_api(sim.kubeconfig)
    before = ledger(admin)
    account = "gpuops-preflight-before-dra"
    subject = {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": account, "namespace": NAMESPACE},
         "rules": RULES_BEFORE_DRA["namespace"]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": account, "namespace": NAMESPACE},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account}, "subjects": [subject]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": account},
         "rules": RULES_BEFORE_DRA["cluster"]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": account},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account}, "subjects": [subject]},
    ]
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    sim.kubectl("apply", "-f", "-", input=listed)
    try:
        token = sim.kubectl("-n", NAMESPACE, "create", "token", account, "--duration", "10m").stdout.strip()
        kubeconfig = str(token_kubeconfig(sim, token, identity["dir"] / "before-dra.kubeconfig"))
        # The verdict's Node writes are not part of this identity either (another test covers them).
        run_id, run, report = run_as(sim, identity["dir"], kubeconfig, {"gpu_demo_verdict": False}, prefix="rbac-old")
        assert run.returncode == 0, tail(run)
        assert report["passed"] is True and report["failed_checks"] == [], report["failed_checks"]
        assert report["before"]["allocation"] == "device_plugin" and report["before"]["allocatable"] == 1
        refused = report["before"]["dra_refused"]
        assert refused.startswith("DRA not readable with these credentials: forbidden (403) to list "), refused
        for resource in ("resourceslices", "deviceclasses"):   # both fleet-wide reads of a node read, named
            assert f'User "system:serviceaccount:{NAMESPACE}:{account}" cannot list resource "{resource}"' in refused
        assert "playbooks/preflight_rbac.yml grants them" in refused
        found, = [check for check in report["checks"] if check["id"] == "node_found"]
        assert found["detail"].startswith(f"node {NODE} advertises nvidia.com/gpu (walked through the device plugin; DRA not")
        markdown = (identity["dir"] / run_id / "reports" / f"gpu-demo-{NODE}-{run_id}.md").read_text()
        assert "DRA not readable with these credentials" in markdown
        assert demo_pods(admin) == [] and ledger(admin) == before
        # Told to walk through DRA, the same identity is refused before anything is created.
        _run_id, run, report = run_as(sim, identity["dir"], kubeconfig, {"gpu_demo_verdict": False, "gpu_demo_allocation": "dra"},
                                      prefix="rbac-old-dra")
        assert run.returncode != 0
        assert report["failed_checks"] == ["node_found"], report["failed_checks"]
        message = report["failure"]["message"]
        assert message.startswith(f"Refusing node {NODE}: node {NODE} cannot be walked through DRA: DRA not readable with these "
                                  "credentials: forbidden (403) to list "), message
        assert 'cannot list resource "resourceslices"' in message
        assert "playbooks/preflight_rbac.yml grants them" in message
        assert demo_pods(admin) == [] and report["hold"] == {} and ledger(admin) == before
    finally:
        sim.kubectl("delete", "-f", "-", "--ignore-not-found", input=listed)


def _create_deployment(api):
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gpuops-it-deploy"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    return api["apps"].create_namespaced_deployment(NAMESPACE, body, dry_run="All")


def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}


def _our_pod(name: str, **spec) -> dict:
    """A pod as the pre-flight makes it (pod.yaml.j2): its label, the no-preemption class, no token; ``spec`` changed."""
    pod = _pod(name)
    pod["metadata"]["labels"] = dict(OURS)
    pod["spec"].update({"priorityClassName": PRIORITY_CLASS, "automountServiceAccountToken": False, "restartPolicy": "Never"})
    pod["spec"].update(spec)
    return {**pod, "spec": {key: value for key, value in pod["spec"].items() if value is not None}}


def _update_lease(api, name, spec=None, labels=None):
    """An update (PUT, as node_lock renews and takes over: the Role has update, not patch) of the Lease as read."""
    lease = api["coordination"].read_namespaced_lease(name, NAMESPACE)
    if labels is not None:
        lease.metadata.labels = labels
    for key, value in (spec or {}).items():
        setattr(lease.spec, {"holderIdentity": "holder_identity"}[key], value)
    return api["coordination"].replace_namespaced_lease(name, NAMESPACE, lease, dry_run="All")


def _create_pod(api, body):
    return api["core"].create_namespaced_pod(NAMESPACE, body, dry_run="All")


def _evict(api):
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "vllm-h20", "namespace": "default"},
            "deleteOptions": {"dryRun": ["All"]}}
    return api["core"].create_namespaced_pod_eviction("vllm-h20", "default", body)


def _device_plugin_pod(api) -> str:
    pods = api["core"].list_namespaced_pod(NAMESPACE, label_selector="app=nvidia-device-plugin-daemonset").items
    return pods[0].metadata.name


STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
CONDITION = "gpuops.scheduling/GPUPreflightPassed"
GATE_TAINT = {"key": "gpuops.scheduling/gpu-preflight-pending", "effect": "NoSchedule"}


def _node_event(labels=None, controller="gpuops.scheduling/preflight", regarding=None) -> dict:
    """A verdict's Event as gpuops.scheduling.node_verdict creates it, or changed by the arguments."""
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{NODE}.gpuops-it", "labels": OURS if labels is None else labels},
            "regarding": regarding or {"apiVersion": "v1", "kind": "Node", "name": NODE},
            # A datetime with microseconds: the client sends it as the MicroTime the API server parses.
            "eventTime": datetime.datetime(2026, 12, 1, 9, 0, 0, 1, tzinfo=datetime.timezone.utc),
            "reportingController": controller,
            "reportingInstance": "gpuops-it", "action": "Preflight", "reason": "GPUPreflightPassed", "type": "Normal",
            "note": "GPU pre-flight passed"}


def _create_event(api, namespace="default", **changes):
    return api["events"].create_namespaced_event(namespace, _node_event(**changes), dry_run="All")


def _patch_node(api, body, content_type=MERGE, status=False):
    call = api["core"].patch_node_status if status else api["core"].patch_node
    return call(NODE, body, dry_run="All", _content_type=content_type)


def _condition(kind: str, status: str = "True") -> dict:
    return {"status": {"conditions": [{"type": kind, "status": status, "reason": "GpuopsIt", "message": "it",
                                       "lastHeartbeatTime": "2026-12-01T00:00:00Z",
                                       "lastTransitionTime": "2026-12-01T00:00:00Z"}]}}


def _taints(api, *extra) -> dict:
    """The node's taints plus ``extra`` (a merge patch replaces the whole list)."""
    current = [taint.to_dict() for taint in api["core"].read_node(NODE).spec.taints or []]
    return {"spec": {"taints": [{k: v for k, v in taint.items() if v is not None} for taint in current] + list(extra)}}


FORBIDDEN = {
    # RBAC lets these through (patch on nodes and nodes/status, for the verdict); the node-writes policy refuses them.
    "patch-node-prod102-other-label": lambda api: _patch_node(api, {"metadata": {"labels": {"gpuops-it": "x"}}}),
    "patch-node-prod102-nvidia-label": lambda api: _patch_node(api, {"metadata": {"labels": {"nvidia.com/gpu.present": "false"}}}),
    "patch-node-prod102-remove-label": lambda api: _patch_node(api, {"metadata": {"labels": {"nvidia.com/gpu.present": None}}}),
    "patch-node-prod102-other-annotation": lambda api: _patch_node(api, {"metadata": {"annotations": {"gpuops-it": "x"}}}),
    "patch-node-prod102-other-taint": lambda api: _patch_node(api, _taints(api, {"key": "gpuops-it", "effect": "NoSchedule"})),
    "patch-node-prod102-gate-taint-noexecute": lambda api: _patch_node(api, _taints(api, dict(GATE_TAINT, effect="NoExecute"))),
    "patch-node-status-prod102-ready-condition": lambda api: _patch_node(api, _condition("Ready", "False"), STRATEGIC, status=True),
    "patch-node-status-prod102-other-condition": lambda api: _patch_node(api, _condition("GpuopsIt"), STRATEGIC, status=True),
    "create-deployment-in-gpu-operator": _create_deployment,
    "create-configmap-in-gpu-operator": lambda api: api["core"].create_namespaced_config_map(
        NAMESPACE, {"metadata": {"name": "gpuops-it"}, "data": {"a": "b"}}, dry_run="All"),
    # The reports kept in the cluster: only its own ConfigMaps, only created and deleted, only in the demo namespace.
    "create-configmap-in-default": lambda api: api["core"].create_namespaced_config_map(
        "default", _configmap("gpuops-it", OURS), dry_run="All"),
    "update-configmap-ours": lambda api: api["core"].patch_namespaced_config_map(
        FOREIGN["our_configmap"], NAMESPACE, {"data": {"report.json": "[]"}}, dry_run="All"),
    "delete-configmap-not-ours": lambda api: api["core"].delete_namespaced_config_map(
        FOREIGN["configmap"], NAMESPACE, dry_run="All"),
    "delete-configmap-kube-root-ca": lambda api: api["core"].delete_namespaced_config_map(
        "kube-root-ca.crt", NAMESPACE, dry_run="All"),
    "list-configmaps-everywhere": lambda api: api["core"].list_config_map_for_all_namespaces(),
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
        "default", _claim_template("gpuops-it", OURS, OURS), dry_run="All"),
    # In the demo namespace, where the Role allows writes: the object-writes policy keeps them to the pre-flight's own.
    "create-pod-in-gpu-operator-not-labelled": lambda api: _create_pod(api, dict(_pod("gpuops-it"), spec=dict(
        _our_pod("x")["spec"]))),
    "create-pod-ours-that-preempts": lambda api: _create_pod(api, _our_pod("gpuops-it", priorityClassName=None)),
    "create-pod-ours-on-a-node-name": lambda api: _create_pod(api, _our_pod("gpuops-it", nodeName=NODE)),
    "create-pod-ours-mounting-a-host-path": lambda api: _create_pod(api, _our_pod(
        "gpuops-it", volumes=[{"name": "root", "hostPath": {"path": "/"}}])),
    "create-pod-ours-with-the-account-token": lambda api: _create_pod(api, _our_pod("gpuops-it", automountServiceAccountToken=True)),
    "create-pod-ours-as-another-account": lambda api: _create_pod(api, _our_pod("gpuops-it", serviceAccountName=SERVICE_ACCOUNT)),
    "create-pod-ours-on-the-host-network": lambda api: _create_pod(api, _our_pod("gpuops-it", hostNetwork=True)),
    "delete-pod-device-plugin": lambda api: api["core"].delete_namespaced_pod(_device_plugin_pod(api), NAMESPACE, dry_run="All"),
    "create-lease-not-labelled": lambda api: api["coordination"].create_namespaced_lease(
        NAMESPACE, _lease("gpuops-preflight-gpuops-it-2"), dry_run="All"),
    "create-lease-ours-not-a-node-lock": lambda api: api["coordination"].create_namespaced_lease(
        NAMESPACE, _lease("gpuops-it-lock", OURS), dry_run="All"),
    "update-lease-not-ours": lambda api: _update_lease(api, FOREIGN["lease"], spec={"holderIdentity": "gpuops-preflight"}),
    "update-lease-ours-dropping-the-label": lambda api: _update_lease(api, FOREIGN["our_lease"], labels={}),
    "delete-lease-not-ours": lambda api: api["coordination"].delete_namespaced_lease(FOREIGN["lease"], NAMESPACE, dry_run="All"),
    "create-resourceclaimtemplate-not-labelled": lambda api: api["resource"].create_namespaced_resource_claim_template(
        NAMESPACE, _claim_template("gpuops-it", claim_labels=OURS), dry_run="All"),
    "create-resourceclaimtemplate-whose-claims-are-not-labelled": lambda api: api["resource"].create_namespaced_resource_claim_template(
        NAMESPACE, _claim_template("gpuops-it", OURS), dry_run="All"),
    "delete-resourceclaimtemplate-not-ours": lambda api: api["resource"].delete_namespaced_resource_claim_template(
        FOREIGN["template"], NAMESPACE, dry_run="All"),
    "delete-resourceclaim-not-ours": lambda api: api["resource"].delete_namespaced_resource_claim(
        FOREIGN["claim"], NAMESPACE, dry_run="All"),
    "create-deviceclass": lambda api: api["resource"].create_device_class(
        {"metadata": {"name": "gpuops-it.example.com"}, "spec": {}}, dry_run="All"),
    "delete-resourceslices": lambda api: api["resource"].delete_collection_resource_slice(dry_run="All"),
    "delete-resourceclaims-in-default": lambda api: api["resource"].delete_collection_namespaced_resource_claim(
        "default", dry_run="All"),
    # Events: created in default only, never changed or deleted, never through core/v1; the policy keeps those it may
    # create to the verdict's own (labelled, reported by the pre-flight, regarding a Node).
    "create-event-in-gpu-operator": lambda api: _create_event(api, NAMESPACE),
    "create-event-in-kube-system": lambda api: _create_event(api, "kube-system"),
    "create-core-event-in-default": lambda api: api["core"].create_namespaced_event("default", {
        "metadata": {"name": "gpuops-it", "labels": OURS}, "involvedObject": {"kind": "Node", "name": NODE},
        "reason": "GPUPreflightPassed", "message": "x", "type": "Normal"}, dry_run="All"),
    "delete-events-in-default": lambda api: api["events"].delete_collection_namespaced_event("default", dry_run="All"),
    "list-events-in-default": lambda api: api["events"].list_namespaced_event("default"),
    "create-event-ours-not-labelled": lambda api: _create_event(api, labels={}),
    "create-event-ours-of-another-controller": lambda api: _create_event(api, controller="kubelet"),
    "create-event-ours-regarding-a-pod": lambda api: _create_event(api, regarding={
        "apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "vllm-h20"}),
}


POLICY_REFUSES = {action for action in FORBIDDEN if action.startswith((
    "patch-node-", "create-pod-in-gpu-operator", "create-pod-ours", "delete-pod-device-plugin", "create-lease", "update-lease",
    "delete-lease", "delete-resourceclaim-not-ours", "delete-resourceclaimtemplate-not-ours", "create-resourceclaimtemplate-not",
    "create-resourceclaimtemplate-whose", "create-event-ours", "create-configmap-in-gpu-operator",
    "delete-configmap"))}


@pytest.mark.parametrize("action", sorted(FORBIDDEN))
def test_the_token_is_refused_outside_its_rules(identity, foreign, action):  # pylint: disable=unused-argument
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    api = api_clients(identity["kubeconfig"])
    with pytest.raises(ApiException) as raised:
        FORBIDDEN[action](api)
    assert raised.value.status == 403, f"{action}: expected 403 Forbidden, got {raised.value.status}: {raised.value.body}"
    assert "system:serviceaccount:gpu-operator:gpuops-preflight" in raised.value.body
    # What RBAC allows and the admission policies refuse is refused by them (a 403 of RBAC would test nothing).
    if action in POLICY_REFUSES:
        policy = "node-writes" if action.startswith("patch-node-") else "object-writes"
        assert f"ValidatingAdmissionPolicy 'gpuops-preflight-{policy}'" in raised.value.body, raised.value.body


ALLOWED = {
    "create-pod-in-gpu-operator": lambda api: _create_pod(api, _our_pod("gpuops-it")),
    "create-lease-ours": lambda api: api["coordination"].create_namespaced_lease(
        NAMESPACE, _lease("gpuops-preflight-gpuops-it-2", OURS), dry_run="All"),
    "update-lease-ours": lambda api: _update_lease(api, FOREIGN["our_lease"], spec={"holderIdentity": "gpuops-it-2"}),
    "delete-lease-ours": lambda api: api["coordination"].delete_namespaced_lease(FOREIGN["our_lease"], NAMESPACE, dry_run="All"),
    "list-nodes": lambda api: api["core"].list_node(),
    "list-pods-everywhere": lambda api: api["core"].list_pod_for_all_namespaces(),
    "list-events-in-gpu-operator": lambda api: api["core"].list_namespaced_event(NAMESPACE),
    "read-priorityclass": lambda api: api["scheduling"].read_priority_class(PRIORITY_CLASS),
    "create-resourceclaimtemplate-in-gpu-operator": lambda api: api["resource"].create_namespaced_resource_claim_template(
        NAMESPACE, _claim_template("gpuops-it", OURS, OURS), dry_run="All"),
    "list-resourceslices": lambda api: api["resource"].list_resource_slice(),
    "list-deviceclasses": lambda api: api["resource"].list_device_class(),
    "list-resourceclaims-everywhere": lambda api: api["resource"].list_resource_claim_for_all_namespaces(),
    # The verdict's own writes, as gpuops.scheduling.node_verdict makes them.
    "patch-node-prod102-verdict-label": lambda api: _patch_node(api, {"metadata": {
        "labels": {"gpuops.scheduling/gpu-preflight": "running"},
        "annotations": {"gpuops.scheduling/gpu-preflight-time": "2026-12-01T00:00:00Z"}}}),
    "patch-node-status-prod102-verdict-condition": lambda api: _patch_node(
        api, _condition(CONDITION, "Unknown"), STRATEGIC, status=True),
    "patch-node-prod102-gate-taint": lambda api: _patch_node(api, _taints(api, GATE_TAINT)),
    "create-event-on-the-node-in-default": _create_event,
    "create-configmap-ours": lambda api: api["core"].create_namespaced_config_map(
        NAMESPACE, _configmap("gpu-preflight-report-gpuops-it-2", OURS), dry_run="All"),
    "delete-configmap-ours": lambda api: api["core"].delete_namespaced_config_map(
        FOREIGN["our_configmap"], NAMESPACE, dry_run="All"),
    "list-configmaps-in-gpu-operator": lambda api: api["core"].list_namespaced_config_map(
        NAMESPACE, label_selector="gpuops.scheduling/report=gpu-preflight"),
    "patch-node-prod102-report-configmap-annotation": lambda api: _patch_node(api, {"metadata": {"annotations": {
        "gpuops.scheduling/gpu-preflight-report-configmap": "gpu-operator/gpu-preflight-report-gpuops-it"}}}),
}


@pytest.mark.parametrize("action", sorted(ALLOWED))
def test_the_token_is_allowed_what_the_run_needs(identity, foreign, action):  # pylint: disable=unused-argument
    """Control for the 403s above: the token is valid, and these are what the pre-flight uses."""
    ALLOWED[action](api_clients(identity["kubeconfig"]))
