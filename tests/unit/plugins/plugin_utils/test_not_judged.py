# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A check that could not be judged (passed None: no device health reported on this request path) is never a pass: the
summary's row counts it, the JUnit XML skips it with its reason, the metrics count it."""

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo_fleet import fleet_summary
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._junit import junit_xml
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._metrics import textfile

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_demo_results"
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
WHY = "not judged: the kubelet writes no device health into the status of gpu-demo-hold (...)"


def without_device_health():
    result = copy.deepcopy(PASSED)
    result["checks"] = [check for check in result["checks"] if check["id"] != "hold_devices_healthy"] + [
        {"id": "hold_devices_healthy", "phase": "queue", "passed": None, "detail": WHY}]
    return result


def test_a_check_not_judged_is_skipped_in_junit_and_counted_in_the_metrics_never_passed():
    results = {"gpu-a2": without_device_health()}
    summary = fleet_summary(["gpu-a2"], results=results, run_id="r1")
    row = summary["rows"][0]
    assert row["status"] == "passed" and row["not_judged"] == ["hold_devices_healthy"] and row["failed_checks"] == []
    suite = ET.fromstring(junit_xml(summary, results)).find("testsuite")
    case = next(case for case in suite.findall("testcase") if case.get("name") == "hold_devices_healthy")
    assert case.find("skipped").get("message") == WHY and case.find("failure") is None
    assert (suite.get("skipped"), suite.get("failures")) == ("1", "0")
    metrics = textfile(summary)
    assert 'gpuops_gpu_preflight_not_judged_checks{node="gpu-a2"} 1.0' in metrics
    assert 'gpuops_gpu_preflight_failed_checks{node="gpu-a2"} 0.0' in metrics
