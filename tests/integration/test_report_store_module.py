"""report_store against the real API server: a node's report kept, only its newest `keep` left and never another
node's or another tool's ConfigMap, check mode as a dry run, a re-run idempotent, and refusals (a quota, an admission
policy on delete) failing the task in the API server's words. (test_report_store.py: the role's use of it.)

Topology: default.
"""
from __future__ import annotations

import json
import time

import pytest

pytestmark = pytest.mark.independent

MODULE = "gpuops.scheduling.report_store"
NAMESPACE = "gpu-operator"
PREFIX = "gpu-preflight-report-"
OURS = {"app.kubernetes.io/managed-by": "gpuops.scheduling", "gpuops.scheduling/report": "gpu-preflight"}


def selector(node: str) -> str:
    return ",".join("{0}={1}".format(*item) for item in dict(OURS, **{"gpuops.scheduling/node": node}).items())


def report(node: str, run_id: str, second: int) -> dict:
    """A report ConfigMap as the gpu_demo_report_configmap filter builds it."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{PREFIX}{node}-{run_id}", "namespace": NAMESPACE,
                         "labels": dict(OURS, **{"gpuops.scheduling/node": node, "gpuops.scheduling/run-id": run_id}),
                         "annotations": {"gpuops.scheduling/written-at": f"2026-12-04T10:00:{second:02d}.000000Z"}},
            "data": {"report.json": json.dumps({"node": node, "run_id": run_id})}}


def stored(sim) -> list[str]:
    listed = json.loads(sim.kubectl("get", "configmaps", "-n", NAMESPACE, "-l", ",".join(f"{k}={v}" for k, v in OURS.items()),
                                    "-o", "json").stdout)
    return sorted(item["metadata"]["name"] for item in listed["items"])


def store(sim, definition: dict, keep: int = 2, check: bool = False, node: str = "prod102") -> dict:
    return sim.ansible_module(MODULE, {"definition": definition, "keep": keep, "keep_selector": selector(node)}, check=check)


@pytest.fixture()
def reports(sim):
    """Three older reports of prod102, and one of prod103 older than all of them."""
    sim.use_topology("default")
    sim.kubectl("delete", "configmaps", "-n", NAMESPACE, "-l", ",".join(f"{k}={v}" for k, v in OURS.items()), "--ignore-not-found")
    for definition in [report("prod102", "r1", 1), report("prod102", "r2", 2), report("prod102", "r3", 3),
                       report("prod103", "r0", 0)]:
        sim.kubectl("create", "-f", "-", input=json.dumps(definition))
    yield sim
    sim.kubectl("delete", "configmaps", "-n", NAMESPACE, "-l", ",".join(f"{k}={v}" for k, v in OURS.items()), "--ignore-not-found")


def test_keep_two_of_four_deletes_the_two_oldest_of_the_node_only_and_check_mode_writes_nothing(reports):
    before = stored(reports)
    newest = report("prod102", "r4", 4)
    checked = store(reports, newest, check=True)
    assert not checked.get("failed"), checked
    assert checked["changed"] is True and checked["created"] is True and checked["kept"] is False
    assert checked["pruned"] == [f"{PREFIX}prod102-r1", f"{PREFIX}prod102-r2"]
    assert stored(reports) == before

    result = store(reports, newest)
    assert not result.get("failed"), result
    assert result == dict(result, changed=True, created=True, kept=True, pruned=[f"{PREFIX}prod102-r1", f"{PREFIX}prod102-r2"],
                          configmap={"namespace": NAMESPACE, "name": f"{PREFIX}prod102-r4"})
    assert stored(reports) == [f"{PREFIX}prod102-r3", f"{PREFIX}prod102-r4", f"{PREFIX}prod103-r0"]
    kept = json.loads(reports.kubectl("get", "configmap", "-n", NAMESPACE, f"{PREFIX}prod102-r4", "-o", "json",
                                      "--show-managed-fields").stdout)
    assert kept["data"] == newest["data"]
    assert any(entry.get("manager") == "gpuops.scheduling" for entry in kept["metadata"]["managedFields"])


def test_a_rerun_of_the_same_run_replaces_its_report_and_the_same_report_again_changes_nothing(reports):
    first = report("prod102", "r3", 3)
    first["data"]["report.json"] = "{\"rerun\": true}"
    replaced = store(reports, first, keep=5)
    assert not replaced.get("failed"), replaced
    assert (replaced["created"], replaced["changed"], replaced["pruned"]) == (False, True, [])
    assert json.loads(reports.kubectl("get", "configmap", "-n", NAMESPACE, f"{PREFIX}prod102-r3", "-o", "json").stdout)[
        "data"] == first["data"]
    again = store(reports, first, keep=5)
    assert (again["created"], again["changed"], again["kept"]) == (False, False, True)
    assert store(reports, first, keep=5, check=True)["changed"] is False


def test_a_quota_that_allows_no_configmap_fails_the_task_naming_the_report(reports):
    quota = {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": "gpuops-it-no-configmaps", "namespace": NAMESPACE}, "spec": {"hard": {"configmaps": "0"}}}
    reports.kubectl("apply", "-f", "-", input=json.dumps(quota))
    try:
        # Enforced once the quota controller has counted the namespace.
        deadline = time.monotonic() + 30
        while "configmaps" not in json.loads(reports.kubectl("get", "resourcequota", "-n", NAMESPACE, "gpuops-it-no-configmaps",
                                                             "-o", "json").stdout).get("status", {}).get("used", {}):
            assert time.monotonic() < deadline, "the quota controller never counted the namespace"
            time.sleep(0.5)
        before = stored(reports)
        checked = store(reports, report("prod102", "r4", 4), check=True)
        result = store(reports, report("prod102", "r4", 4))
    finally:
        reports.kubectl("delete", "resourcequota", "-n", NAMESPACE, "gpuops-it-no-configmaps", "--ignore-not-found")
    for answer in (checked, result):
        assert answer["failed"] is True and answer["kept"] is False and answer["pruned"] == [], answer
        assert answer["msg"].startswith(f"cannot keep the report {PREFIX}prod102-r4 in namespace {NAMESPACE}: "
                                        f'configmaps "{PREFIX}prod102-r4" is forbidden: exceeded quota: gpuops-it-no-configmaps')
        assert answer["msg"].endswith(f"(403 Forbidden from the Kubernetes API at {reports.api_url})")
    assert stored(reports) == before   # nothing written, nothing pruned


def test_an_old_report_that_may_not_be_deleted_fails_the_task_naming_it_and_the_report_stays(reports):
    protected = f"{PREFIX}prod102-r1"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "gpuops-it-keep-r1"},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                                                               "resources": ["configmaps"]}]},
                       "validations": [{"expression": f"oldObject.metadata.name != '{protected}'",
                                        "message": "this report is kept by the auditors"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": "gpuops-it-keep-r1"},
               "spec": {"policyName": "gpuops-it-keep-r1", "validationActions": ["Deny"]}}
    reports.kubectl("apply", "-f", "-", input=json.dumps(policy))
    reports.kubectl("apply", "-f", "-", input=json.dumps(binding))
    try:
        deadline = time.monotonic() + 30
        # In force once a server-side dry run of the delete is refused.
        while reports.kubectl("delete", "configmap", "-n", NAMESPACE, protected, "--dry-run=server", check=False).returncode == 0:
            assert time.monotonic() < deadline, "the admission policy never came into force"
            time.sleep(0.5)
        result = store(reports, report("prod102", "r4", 4))
    finally:
        reports.kubectl("delete", "validatingadmissionpolicybinding", "gpuops-it-keep-r1", "--ignore-not-found")
        reports.kubectl("delete", "validatingadmissionpolicy", "gpuops-it-keep-r1", "--ignore-not-found")
        # The API server drops the policy a moment after it is deleted: the fixture's cleanup deletes that report too.
        deadline = time.monotonic() + 30
        while reports.kubectl("delete", "configmap", "-n", NAMESPACE, protected, "--dry-run=server", check=False).returncode != 0:
            assert time.monotonic() < deadline, "the admission policy stayed in force after it was deleted"
            time.sleep(0.5)
    assert result["failed"] is True and result["kept"] is True and result["created"] is True, result
    assert result["pruned"] == [f"{PREFIX}prod102-r2"]
    assert result["msg"].startswith(f"the report {PREFIX}prod102-r4 is kept in namespace {NAMESPACE}, but older reports beyond "
                                    f"keep=2 could not be deleted: cannot delete the old report {protected} in namespace {NAMESPACE}: ")
    assert "this report is kept by the auditors" in result["msg"]
    assert stored(reports) == [protected, f"{PREFIX}prod102-r3", f"{PREFIX}prod102-r4", f"{PREFIX}prod103-r0"]


def test_a_selector_that_does_not_select_the_report_is_refused_before_anything_is_written(reports):
    before = stored(reports)
    result = store(reports, report("prod102", "r4", 4), node="prod103")
    assert result["failed"] is True and "does not select the report gpu-preflight-report-prod102-r4 itself" in result["msg"]
    assert stored(reports) == before
