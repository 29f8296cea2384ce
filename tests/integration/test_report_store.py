"""The report kept in the cluster: each run's per-node report in a ConfigMap of the demo namespace, the same JSON as the
report directory's, named by the Node's annotation and by the run's summary; a node's oldest reports beyond
gpu_demo_reports_kept deleted by the run, another tool's ConfigMaps left alone; nothing kept without the verdict.

Topology: default.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from test_gpu_demo import run_demo

pytestmark = pytest.mark.independent

NAMESPACE = "gpu-operator"
SELECTOR = "app.kubernetes.io/managed-by=gpuops.scheduling,gpuops.scheduling/report=gpu-preflight,gpuops.scheduling/node=prod102"
ANNOTATION = "gpuops.scheduling/gpu-preflight-report-configmap"
# Another tool's ConfigMap that carries the node's and the report's labels, but not ours: never deleted by a run.
FOREIGN = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "gpuops-it-foreign-report", "namespace": NAMESPACE,
                        "labels": {"gpuops.scheduling/report": "gpu-preflight", "gpuops.scheduling/node": "prod102"}},
           "data": {"report.json": "{}"}}


def kept(sim) -> dict:
    listed = json.loads(sim.kubectl("get", "configmaps", "-n", NAMESPACE, "-l", SELECTOR, "-o", "json").stdout)
    return {item["metadata"]["name"]: item for item in listed["items"]}


@pytest.fixture()
def clean(sim):
    sim.use_topology("default")
    sim.kubectl("delete", "configmaps", "-n", NAMESPACE, "-l", SELECTOR, "--ignore-not-found")
    sim.kubectl("apply", "-f", "-", input=json.dumps(FOREIGN))
    yield
    sim.kubectl("delete", "configmaps", "-n", NAMESPACE, "-l", SELECTOR, "--ignore-not-found")
    sim.kubectl("delete", "configmap", "-n", NAMESPACE, FOREIGN["metadata"]["name"], "--ignore-not-found")


def test_each_run_keeps_its_report_and_the_fourth_with_three_kept_leaves_the_three_newest(sim, clean, tmp_path):
    runs = []
    for index in range(4):
        extra = {"gpu_demo_reports_kept": 3} if index == 3 else {}
        (tmp_path / str(index)).mkdir()
        run = run_demo(sim, tmp_path / str(index), extra_vars=extra)
        assert run.rc == 0 and run.result["passed"] is True, run.output[-3000:]
        runs.append(run)
        name = run.result["report_configmap"]["name"]
        stored = kept(sim)[name]
        # The same JSON as the report directory's, byte for byte, and the Markdown beside it.
        assert stored["data"]["report.json"] == (tmp_path / str(index) / f"gpu-demo-prod102-{run.result['run_id']}.json").read_text()
        assert stored["data"]["report.en.md"] == run.markdown.read_text()
        assert stored["metadata"]["labels"]["gpuops.scheduling/run-id"] == run.result["run_id"]
        assert "gpuops.scheduling/report-cut" not in stored["metadata"]["annotations"]
        node = json.loads(sim.kubectl("get", "node", "prod102", "-o", "json").stdout)
        assert node["metadata"]["annotations"][ANNOTATION] == f"{NAMESPACE}/{name}"
        if index < 3:
            assert len(kept(sim)) == index + 1
    names = [run.result["report_configmap"]["name"] for run in runs]
    assert sorted(kept(sim)) == sorted(names[1:]), "the oldest report should be the one deleted"
    assert sim.kubectl("get", "configmap", "-n", NAMESPACE, FOREIGN["metadata"]["name"], check=False).returncode == 0
    # The run's summary names the node's report in the cluster.
    summary = json.loads((tmp_path / "3" / f"gpu-demo-fleet-{runs[3].result['run_id']}.json").read_text())
    row, = [row for row in summary["rows"] if row["node"] == "prod102"]
    assert row["report_configmap"] == f"{NAMESPACE}/{names[3]}"
    assert f"kubectl get configmap -n {NAMESPACE} {names[3]} -o yaml" in (
        tmp_path / "3" / f"gpu-demo-fleet-{runs[3].result['run_id']}.md").read_text()
    # Beside it, the run as JUnit XML: the node's suite, a case per check of its report.
    junit = ET.parse(tmp_path / "3" / f"gpu-demo-fleet-{runs[3].result['run_id']}.junit.xml").getroot()
    suite, = junit.findall("testsuite")
    assert suite.get("name") == "prod102" and suite.get("failures") == "0"
    assert [case.get("name") for case in suite.findall("testcase")] == [check["id"] for check in runs[3].result["checks"]]


def test_without_the_verdict_nothing_is_kept_in_the_cluster(sim, clean, tmp_path):
    run = run_demo(sim, tmp_path, extra_vars={"gpu_demo_verdict": False})
    assert run.rc == 0 and run.result["passed"] is True, run.output[-3000:]
    assert run.result["report_configmap"] is None
    assert kept(sim) == {}


def test_a_report_the_cluster_refused_to_keep_fails_the_run_and_is_named_nowhere(sim, clean, tmp_path):
    (tmp_path / "kept").mkdir()
    first = run_demo(sim, tmp_path / "kept")
    assert first.rc == 0 and first.result["passed"] is True, first.output[-3000:]
    node = json.loads(sim.kubectl("get", "node", "prod102", "-o", "json").stdout)
    assert node["metadata"]["annotations"][ANNOTATION] == f"{NAMESPACE}/{first.result['report_configmap']['name']}"
    # The namespace's quota then allows no ConfigMap: the API server refuses the next run's report.
    quota = {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": "gpuops-it-no-configmaps", "namespace": NAMESPACE}, "spec": {"hard": {"configmaps": "0"}}}
    sim.kubectl("apply", "-f", "-", input=json.dumps(quota))
    try:
        (tmp_path / "refused").mkdir()
        second = run_demo(sim, tmp_path / "refused")
    finally:
        sim.kubectl("delete", "resourcequota", "-n", NAMESPACE, "gpuops-it-no-configmaps", "--ignore-not-found")
    assert second.rc != 0 and second.result is not None, second.output[-3000:]
    run_id = second.result["run_id"]
    node = json.loads(sim.kubectl("get", "node", "prod102", "-o", "json").stdout)
    annotations = node["metadata"]["annotations"]
    verdict = json.loads(annotations["gpuops.scheduling/gpu-preflight-report"])
    assert verdict["state"] == "failed" and verdict["run_id"] == run_id, verdict
    # The first run's report is still kept, but it is not this verdict's: the Node names none rather than that one.
    assert ANNOTATION not in annotations, annotations[ANNOTATION]
    assert first.result["report_configmap"]["name"] in kept(sim)
    summary = json.loads((tmp_path / "refused" / f"gpu-demo-fleet-{run_id}.json").read_text())
    row, = [row for row in summary["rows"] if row["node"] == "prod102"]
    assert row["report_configmap"] is None and row["status"] == "failed", row
