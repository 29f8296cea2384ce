"""A verdict is believed only when the collection wrote it, on real kubelets and the API server's own managedFields
(topology trio: three plain GPU nodes that pass). One verdict's report annotation is rewritten with kubectl annotate (a
plausible JSON, dated now), another re-dated 30 days ahead under the collection's own field manager: the fleet's summary
(JSON, Markdown, HTML) reads both as not trusted, naming the writer and the dates; the revalidation walks exactly those
two nodes and leaves the third alone; afterwards all three are fresh again.
"""
from __future__ import annotations

import datetime
import json
import uuid

import pytest
import yaml

pytestmark = pytest.mark.independent

NODES = ("gpu-t1", "gpu-t2", "gpu-t3")
REPORT = "gpuops.scheduling/gpu-preflight-report"


def node(sim, name: str) -> dict:
    return json.loads(sim.kubectl("get", "node", name, "-o", "json", "--show-managed-fields").stdout)


def report(sim, name: str) -> dict:
    return json.loads(node(sim, name)["metadata"]["annotations"][REPORT])


def stamp(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def inventory(sim, directory, run_id) -> str:
    path = directory / "trio.yml"
    path.write_text(yaml.safe_dump({"gpu_nodes": {"hosts": {name: None for name in NODES}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "gpu_demo_kubeconfig": sim.kubeconfig, "gpu_demo_vllm_health_url": sim.health_url,
        "gpu_demo_report_dir": str(directory / "reports"), "gpu_demo_run_id": run_id, "gpu_demo_timeout": 30}}}))
    return str(path)


def summary(sim, directory, inventory_path) -> tuple[dict, str, str]:
    """The fleet's summary read from the cluster: its JSON, Markdown and HTML."""
    run_id = "read-" + uuid.uuid4().hex[:6]
    process = sim.playbook("playbooks/gpu_demo_fleet_summary.yml", inventory=inventory_path,
                           extra_vars={"gpu_demo_run_id": run_id, "gpu_demo_fleet_source": "cluster",
                                       "gpu_demo_report_dir": str(directory / "reports")})
    assert process.returncode in (0, 2), process.stdout[-3000:]
    base = directory / "reports" / f"gpu-demo-fleet-{run_id}"
    return (json.loads(base.with_suffix(".json").read_text()), base.with_suffix(".md").read_text(),
            base.with_suffix(".html").read_text())


def test_a_verdict_rewritten_by_hand_or_dated_ahead_is_not_trusted_and_walked_again(sim, tmp_path):
    sim.use_topology("trio")
    first = "trust-" + uuid.uuid4().hex[:6]
    hosts = inventory(sim, tmp_path, first)
    run = sim.playbook("playbooks/gpu_demo.yml", inventory=hosts, extra_vars={"gpu_demo_parallel": True})
    assert run.returncode == 0, run.stdout[-3000:]
    assert {name: report(sim, name)["state"] for name in NODES} == dict.fromkeys(NODES, "passed")
    # Written by the collection's field manager: the control, read as fresh.
    found, _markdown, _html = summary(sim, tmp_path, hosts)
    assert {row["host"]: row["freshness"] for row in found["rows"]} == dict.fromkeys(NODES, "fresh"), found["rows"]

    # gpu-t2: someone with patch on nodes writes a plausible verdict of their own, dated now.
    now = datetime.datetime.now(datetime.timezone.utc)
    forged = dict(report(sim, "gpu-t2"), at=stamp(now), run_id="by-hand")
    sim.kubectl("annotate", "node", "gpu-t2", "--overwrite", f"{REPORT}={json.dumps(forged, separators=(',', ':'))}")
    # gpu-t3: the verdict re-dated 30 days ahead, under the collection's own field manager's name.
    ahead = dict(report(sim, "gpu-t3"), at=stamp(now + datetime.timedelta(days=30)))
    sim.kubectl("annotate", "node", "gpu-t3", "--overwrite", "--field-manager=gpuops.scheduling",
                f"{REPORT}={json.dumps(ahead, separators=(',', ':'))}")
    managers = [entry["manager"] for entry in node(sim, "gpu-t2")["metadata"]["managedFields"]
                if f"f:{REPORT}" in ((entry["fieldsV1"].get("f:metadata") or {}).get("f:annotations") or {})]
    assert managers == ["kubectl-annotate"], managers

    found, markdown, html = summary(sim, tmp_path, hosts)
    rows = {row["host"]: row for row in found["rows"]}
    assert {name: rows[name]["freshness"] for name in NODES} == {
        "gpu-t1": "fresh", "gpu-t2": "untrusted", "gpu-t3": "untrusted"}, found["rows"]
    assert rows["gpu-t2"]["status"] == "not_run" and rows["gpu-t3"]["status"] == "not_run"
    assert "its report annotation was written by kubectl-annotate at 20" in rows["gpu-t2"]["reason"], rows["gpu-t2"]
    assert rows["gpu-t2"]["reason"].endswith(", not by a pre-flight: not trusted"), rows["gpu-t2"]
    assert "dated 30 days ahead of the API server's record of the write (" in rows["gpu-t3"]["reason"], rows["gpu-t3"]
    assert found["freshness"]["untrusted"] == 2 and found["passed"] is False
    for page in (markdown, html):
        assert "written by kubectl-annotate at" in page and "dated 30 days ahead" in page and "not trusted" in page

    # The revalidation walks exactly the two untrusted nodes.
    second = "revalidate-" + uuid.uuid4().hex[:6]
    hosts = inventory(sim, tmp_path, second)
    kept = report(sim, "gpu-t1")
    again = sim.playbook("playbooks/gpu_demo_revalidate.yml", inventory=hosts)
    assert again.returncode == 0, again.stdout[-3000:]
    walked = json.loads((tmp_path / "reports" / f"gpu-demo-fleet-{second}.json").read_text())
    assert sorted(row["host"] for row in walked["rows"]) == ["gpu-t2", "gpu-t3"], walked["rows"]
    assert report(sim, "gpu-t1") == kept
    assert {name: report(sim, name)["run_id"] for name in ("gpu-t2", "gpu-t3")} == dict.fromkeys(("gpu-t2", "gpu-t3"), second)
    found, _markdown, _html = summary(sim, tmp_path, hosts)
    assert {row["host"]: row["freshness"] for row in found["rows"]} == dict.fromkeys(NODES, "fresh"), found["rows"]
