"""A DRA node's verdict is proven against the devices its ResourceSlices publish, on real kubelets (topology dra-fleet:
prod102's two H20 published by our DRA driver gpu.nvidia.com): the verdict records them; the fleet's summary read from
the cluster calls it fresh and names the node's latest report kept in the cluster; once the driver, restarted, publishes
one GPU fewer (a GPU lost from the node), the summary calls the verdict stale naming the device that went, and fresh
again when it is back. The maximum age is gpu_demo_verdict_max_age, and its earlier name still counts.
"""
from __future__ import annotations

import json
import uuid

import pytest
from safety_helpers import wait_until
from test_gpu_demo import run_demo

pytestmark = pytest.mark.independent

NODE = "prod102"
REPORT = "gpuops.scheduling/gpu-preflight-report"
REPORT_CONFIGMAP = "gpuops.scheduling/gpu-preflight-report-configmap"
BOTH = ["gpu.nvidia.com/prod102/gpu-0", "gpu.nvidia.com/prod102/gpu-1"]


def annotations(sim) -> dict:
    return json.loads(sim.kubectl("get", "node", NODE, "-o", "json").stdout)["metadata"]["annotations"]


def published(sim) -> list:
    """driver/pool/device of every device the ResourceSlices publish for the node, as kubectl lists them."""
    items = json.loads(sim.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    return sorted(f"{item['spec']['driver']}/{item['spec']['pool']['name']}/{device['name']}"
                  for item in items if item["spec"].get("nodeName") == NODE for device in item["spec"].get("devices") or [])


def summary(sim, directory, **extra) -> dict:
    """The fleet's summary from the cluster: the node's row."""
    run_id = "read-" + uuid.uuid4().hex[:6]
    process = sim.playbook("playbooks/gpu_demo_fleet_summary.yml", extra_vars={
        "gpu_demo_run_id": run_id, "gpu_demo_fleet_source": "cluster", "gpu_demo_kubeconfig": sim.kubeconfig,
        "gpu_demo_report_dir": str(directory / "reports"), **extra})
    written = directory / "reports" / f"gpu-demo-fleet-{run_id}.json"
    assert process.returncode in (0, 2) and written.exists(), process.stdout[-3000:]
    found = json.loads(written.read_text())
    markdown = (directory / "reports" / f"gpu-demo-fleet-{run_id}.md").read_text()
    row, = [row for row in found["rows"] if row["host"] == NODE]
    return dict(row, markdown=markdown)


def driver_config(sim):
    return sim.dir.run / "nodes" / NODE / "dra-driver.json"


def publish_gpus(sim, gpus: list) -> None:
    """Restart the node's DRA driver seeing ``gpus`` (its config's entries), as after a GPU fell off the bus (and back)."""
    config = json.loads(driver_config(sim).read_text())
    config["gpus"] = gpus
    driver_config(sim).write_text(json.dumps(config, indent=1))
    sim._simctl("stop", f"dra-{NODE}")
    sim._simctl("start", f"dra-{NODE}")
    wait_until(lambda: len(published(sim)) == len(gpus), 60, f"the driver to publish {len(gpus)} device(s)")


def test_a_dra_nodes_verdict_goes_stale_when_its_devices_change(sim, tmp_path):
    sim.use_topology("dra-fleet")
    assert published(sim) == BOTH
    run = run_demo(sim, tmp_path)
    assert run.rc == 0 and run.result["before"]["allocation"] == "dra", run.output[-3000:]
    written = annotations(sim)
    assert json.loads(written[REPORT])["basis"]["dra_devices"] == BOTH
    kept = written[REPORT_CONFIGMAP]
    read = summary(sim, tmp_path)
    assert (read["status"], read["freshness"], read["report_configmap"]) == ("passed", "fresh", kept), read
    namespace, name = kept.split("/")
    assert f"`kubectl get configmap -n {namespace} {name} -o yaml`" in read["markdown"]

    every_gpu = json.loads(driver_config(sim).read_text())["gpus"]
    try:
        publish_gpus(sim, every_gpu[:1])
        read = summary(sim, tmp_path)
        assert (read["status"], read["freshness"]) == ("not_run", "stale"), read
        assert read["reason"].endswith(": the node's DRA devices changed 2 -> 1 (gone: gpu.nvidia.com/prod102/gpu-1)"), read
        # The report the stale verdict rests on is still named: what a person reads to see what was proven.
        assert read["report_configmap"] == kept
        assert "| prod102 | not run | stale |" in read["markdown"]
    finally:
        publish_gpus(sim, every_gpu)
    assert summary(sim, tmp_path)["freshness"] == "fresh"

    # Older than the maximum age, under its name and its earlier one; the name wins over the earlier one.
    for extra in ({"gpu_demo_verdict_max_age": 1}, {"gpu_demo_fleet_max_age_seconds": 1}):
        read = summary(sim, tmp_path, **extra)
        assert read["freshness"] == "stale" and read["reason"].endswith(
            ": older than 1 s (gpu_demo_verdict_max_age)"), (extra, read)
    read = summary(sim, tmp_path, gpu_demo_verdict_max_age=86400, gpu_demo_fleet_max_age_seconds=1)
    assert read["freshness"] == "fresh", read
