"""The run's metrics: the summary's node_exporter textfile read with Prometheus' own text parser, and a real
Pushgateway (Debian's prometheus-pushgateway, `make pushgateway`) started here on 127.0.0.1 holding the pushed series
grouped by node; a Pushgateway that is down leaves the run's verdict as it was and the run says so.

Topology: default.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_gpu_demo import run_demo

pytestmark = pytest.mark.independent

PASSED = "gpuops_gpu_preflight_passed"
SUCCESS = "gpuops_gpu_preflight_last_success_timestamp_seconds"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def samples(text: str) -> dict:
    """{(metric, sorted labels): value}, through prometheus_client's parser."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


@pytest.fixture()
def pushgateway(tmp_path):
    binary = os.environ.get("GPUOPS_PUSHGATEWAY") or shutil.which("prometheus-pushgateway") or shutil.which("pushgateway")
    assert binary, "no prometheus-pushgateway: `make pushgateway` installs Debian's (make integration does)"
    port = free_port()
    log = (tmp_path / "pushgateway.log").open("w")
    process = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise AssertionError("the Pushgateway did not start: " + (tmp_path / "pushgateway.log").read_text())
            time.sleep(0.2)
    yield url
    process.terminate()
    process.wait(timeout=10)
    log.close()


def test_the_textfile_and_the_pushgateway_hold_the_nodes_metrics(sim, pushgateway, tmp_path):
    sim.use_topology("default")
    textfile = tmp_path / "metrics" / "gpu_preflight.prom"
    textfile.parent.mkdir()
    run = run_demo(sim, tmp_path, extra_vars={"gpu_demo_metrics_textfile": str(textfile), "gpu_demo_pushgateway_url": pushgateway})
    assert run.rc == 0 and run.result["passed"] is True, run.output[-3000:]
    node = (("node", "prod102"),)
    written = samples(textfile.read_text())
    assert written[(PASSED, node)] == 1.0 and written[("gpuops_gpu_preflight_failed_checks", node)] == 0.0
    assert written[("gpuops_gpu_preflight_occupied_window_seconds", node)] == pytest.approx(
        run.result["durations"]["occupied_window"])
    assert written[("gpuops_gpu_preflight_nodes", (("outcome", "passed"),))] == 1.0
    assert abs(written[(SUCCESS, node)] - time.time()) < 120
    with urllib.request.urlopen(pushgateway + "/metrics", timeout=5) as answer:
        held = samples(answer.read().decode())
    group = (("instance", ""), ("job", "gpu_preflight"), ("node", "prod102"))
    assert held[(PASSED, group)] == 1.0
    assert held[(SUCCESS, group)] == written[(SUCCESS, node)]


def test_a_pushgateway_that_is_down_leaves_the_verdict_and_is_reported(sim, tmp_path):
    sim.use_topology("default")
    down = f"http://127.0.0.1:{free_port()}"
    run = run_demo(sim, tmp_path, extra_vars={"gpu_demo_pushgateway_url": down})
    assert run.rc == 0 and run.result["passed"] is True, run.output[-3000:]
    assert "push to the Pushgateway " + down in run.output and "the run's verdicts stand" in run.output
