"""pod_admission against the real API server: what it admits (with the preemption policy its PriorityClass gives), what
it refuses and why, in the API server's words, the pods already there by label, and nothing ever created.

Topology: default.
"""
from __future__ import annotations

import json

import pytest
from test_modules import closed_port, kubeconfig_variant

pytestmark = pytest.mark.independent

MODULE = "gpuops.scheduling.pod_admission"
NAMESPACE = "gpu-operator"
NEVER = "gpuops-it-admission-never"
LABELS = {"app.kubernetes.io/managed-by": "gpuops.scheduling", "gpuops.scheduling/node": "prod102",
          "gpuops.scheduling/run-id": "it-admission"}
SELECTORS = ["app.kubernetes.io/managed-by=gpuops.scheduling", "gpuops.scheduling/run-id=it-admission"]


def pod(name: str, priority_class: str = NEVER, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": LABELS if labels is None else labels},
            "spec": {"priorityClassName": priority_class, "restartPolicy": "Never",
                     # Never placed: the node selector matches no node, so a pod created here only waits.
                     "nodeSelector": {"gpuops.scheduling/it": "nowhere"},
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}


TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpuops-it-admission-gpu", "labels": LABELS},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}


def names_of(sim, kind: str) -> list[str]:
    listed = json.loads(sim.kubectl("get", kind, "-n", NAMESPACE, "-l", ",".join(SELECTORS), "-o", "json").stdout)
    return sorted(item["metadata"]["name"] for item in listed["items"])


@pytest.fixture()
def cluster(sim):
    sim.use_topology("default")
    priority_class = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": NEVER},
                      "value": 0, "preemptionPolicy": "Never"}
    sim.kubectl("apply", "-f", "-", input=json.dumps(priority_class))
    yield sim
    sim.kubectl("delete", "pods", "-n", NAMESPACE, "-l", ",".join(SELECTORS), "--ignore-not-found", "--wait=false")
    sim.kubectl("delete", "priorityclass", NEVER, "--ignore-not-found")


def test_admitted_objects_say_the_policy_the_api_server_gave_and_nothing_is_created(cluster):
    args = {"namespace": NAMESPACE, "definitions": [TEMPLATE, pod("gpuops-it-admission-a")], "label_selectors": SELECTORS}
    result = cluster.ansible_module(MODULE, args)
    assert not result.get("failed"), result
    assert result["admitted"] is True and result["changed"] is False and result["existing"] == []
    template, admitted = result["objects"]
    assert (template["kind"], template["name"], template["namespace"], template["admitted"]) == (
        "ResourceClaimTemplate", "gpuops-it-admission-gpu", NAMESPACE, True)
    # The pod asked for no preemption policy: the API server's Priority admission copied the class's.
    assert admitted == {"kind": "Pod", "api_version": "v1", "name": "gpuops-it-admission-a", "namespace": NAMESPACE,
                        "admitted": True, "preemption_policy": "Never", "priority_class_name": NEVER,
                        "status": None, "reason": None, "message": None}
    assert names_of(cluster, "pods") == [] and names_of(cluster, "resourceclaimtemplates") == []
    checked = cluster.ansible_module(MODULE, args, check=True)
    assert checked["objects"] == result["objects"] and checked["changed"] is False


def test_a_missing_priority_class_and_a_missing_namespace_are_refused_in_the_api_servers_words(cluster):
    elsewhere = pod("gpuops-it-admission-c")
    elsewhere["metadata"]["namespace"] = "gpuops-it-no-such-namespace"
    result = cluster.ansible_module(MODULE, {"namespace": NAMESPACE, "definitions": [
        pod("gpuops-it-admission-b", priority_class="gpuops-it-no-such-class"), elsewhere, pod("gpuops-it-admission-d")]})
    assert not result.get("failed"), result
    missing_class, missing_namespace, admitted = result["objects"]
    assert result["admitted"] is False and admitted["admitted"] is True
    assert (missing_class["admitted"], missing_class["status"], missing_class["reason"]) == (False, 403, "Forbidden")
    assert missing_class["message"] == ('pods "gpuops-it-admission-b" is forbidden: no PriorityClass with name '
                                        'gpuops-it-no-such-class was found')
    assert missing_class["preemption_policy"] is None
    assert (missing_namespace["namespace"], missing_namespace["status"], missing_namespace["reason"]) == (
        "gpuops-it-no-such-namespace", 404, "NotFound")
    assert missing_namespace["message"] == 'namespaces "gpuops-it-no-such-namespace" not found'


def test_a_name_taken_is_refused_and_the_pod_taking_it_is_listed_by_its_labels(cluster):
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(pod("gpuops-it-admission-e")))
    # Another run's pod (another run id): not listed.
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(
        pod("gpuops-it-admission-other", labels=dict(LABELS, **{"gpuops.scheduling/run-id": "it-other"}))))
    try:
        live = json.loads(cluster.kubectl("get", "pod", "-n", NAMESPACE, "gpuops-it-admission-e", "-o", "json").stdout)
        result = cluster.ansible_module(MODULE, {"namespace": NAMESPACE, "definitions": [pod("gpuops-it-admission-e")],
                                                 "label_selectors": SELECTORS})
    finally:
        cluster.kubectl("delete", "pod", "-n", NAMESPACE, "gpuops-it-admission-other", "--ignore-not-found", "--wait=false")
    assert not result.get("failed"), result
    taken, = result["objects"]
    assert (taken["admitted"], taken["status"], taken["reason"]) == (False, 409, "AlreadyExists")
    assert taken["message"] == 'pods "gpuops-it-admission-e" already exists'
    assert result["existing"] == [{"name": "gpuops-it-admission-e", "namespace": NAMESPACE, "uid": live["metadata"]["uid"],
                                   "node_name": None, "phase": "Pending", "deletion_timestamp": None, "labels": LABELS}]


def test_a_kind_not_asked_about_fails_naming_it_before_anything_is_asked(cluster):
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gpuops-it-token"}}
    result = cluster.ansible_module(MODULE, {"namespace": NAMESPACE, "definitions": [pod("gpuops-it-admission-f"), secret]})
    assert result["failed"] is True
    assert result["msg"] == ("definitions[1] (Secret 'gpuops-it-token', apiVersion 'v1') cannot be asked about: pod_admission "
                             "asks about a Pod (v1) or ResourceClaimTemplate (resource.k8s.io/v1) only")


def test_an_api_server_that_cannot_be_reached_fails_the_task(cluster, tmp_path):
    server = "https://127.0.0.1:{0}".format(closed_port())
    result = cluster.ansible_module(MODULE, {"namespace": NAMESPACE, "definitions": [pod("gpuops-it-admission-g")],
                                             "kubeconfig": kubeconfig_variant(cluster, tmp_path, server=server)})
    assert result["failed"] is True and result["msg"].startswith("cannot reach the Kubernetes API at {0}".format(server))
