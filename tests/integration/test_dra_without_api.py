"""An API server that does not serve resource.k8s.io/v1 (Dynamic Resource Allocation): kube-apiserver restarted with
--runtime-config=resource.k8s.io/v1=false (simctl.py apiserver-flags), then as it was.

It restarts its own worker's API server only (each worker has a cluster of its own), so it runs beside the other
tests; it ends by checking that the API server serves resource.k8s.io/v1 again, so a failed restore fails here,
named, rather than in the tests after it on that cluster.
"""
from __future__ import annotations

from test_dra import MANAGED, run_demo


def test_an_api_server_without_resource_v1_walks_the_device_plugin_and_refuses_a_walk_through_dra(sim, tmp_path):
    sim.use_topology("default")
    sim._simctl("apiserver-flags", "--add=--runtime-config=resource.k8s.io/v1=false")
    try:
        # The world is as the test says: the API server serves no resource.k8s.io/v1 resource.
        served = sim.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout
        assert "resourceslices" not in served and "deviceclasses" not in served, served
        run = run_demo(sim, tmp_path)
        assert run.rc == 0, run.output[-3000:]
        assert all(check["passed"] for check in run.result["checks"]), [check for check in run.result["checks"] if not check["passed"]]
        before = run.result["before"]
        assert (before["allocation"], before["dra_served"], before["dra_refused"]) == ("device_plugin", False, None)
        assert "the API server does not serve resource.k8s.io/v1" in run.check("node_found")["detail"]
        assert run.result["queue"]["failed_scheduling"]["parsed"]["insufficient"] == ["nvidia.com/gpu"]
        assert "does not serve Dynamic Resource Allocation (resource.k8s.io/v1)" in run.markdown.read_text()
        # Told to walk through DRA: refused in the pre-flight, before any pod or template is created.
        run = run_demo(sim, tmp_path, gpu_demo_allocation="dra")
        assert run.rc != 0
        found = run.check("node_found")
        assert found["passed"] is False
        assert found["detail"].startswith("the API server does not serve resource.k8s.io/v1"), found
        assert run.result["failure"]["task"].startswith("Preflight | Refuse")
        assert not run.result["hold"].get("pods")
        assert sim.kubectl("get", "pods", "-A", "-l", MANAGED, "-o", "name").stdout == ""
    finally:
        sim._simctl("apiserver-flags")
    served = sim.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout
    assert "resourceslices" in served
