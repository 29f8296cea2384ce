# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run as JUnit XML (plugin_utils/junit.py), from real per-node results, parsed back with an XML parser and held to
the Ant JUnit schema that Jenkins and GitLab read (windyroad/JUnit-Schema JUnit.xsd): its elements, their order, the
attributes each requires and allows, their types. The schema file itself is not shipped here; ``conforms`` states its
rules."""

import copy
import json
import re
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path

import pytest

from ansible_collections.gpuops.scheduling.plugins.plugin_utils.gpu_demo_fleet import fleet_summary
from ansible_collections.gpuops.scheduling.plugins.plugin_utils.junit import junit_xml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_demo_results"
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
NOT_READY = json.loads((FIXTURES / "gpu-a4-not-ready.json").read_text())

SUITE_REQUIRED = {"name", "timestamp", "hostname", "tests", "failures", "errors", "time", "package", "id"}
SUITE_ALLOWED = SUITE_REQUIRED | {"skipped"}
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")


def _int(value):
    assert re.match(r"^-?\d+$", value), value
    return int(value)


def conforms(root):
    """The Ant JUnit schema's rules, one by one; returns the suites."""
    assert root.tag == "testsuites" and root.attrib == {}, "testsuites has no attributes in the schema"
    suites = list(root)
    for index, suite in enumerate(suites):
        assert suite.tag == "testsuite"
        assert SUITE_REQUIRED <= set(suite.attrib) <= SUITE_ALLOWED, set(suite.attrib) ^ SUITE_REQUIRED
        assert suite.get("name").strip() and suite.get("hostname").strip() and suite.get("package").strip()
        assert TIMESTAMP.match(suite.get("timestamp")), suite.get("timestamp")
        assert _int(suite.get("id")) == index
        Decimal(suite.get("time"))
        children = [child.tag for child in suite]
        assert children[0] == "properties" and children[-2:] == ["system-out", "system-err"], children
        assert set(children[1:-2]) <= {"testcase"}, children
        for prop in suite.find("properties"):
            assert prop.tag == "property" and set(prop.attrib) == {"name", "value"} and prop.get("name").strip()
        cases = suite.findall("testcase")
        for case in cases:
            assert set(case.attrib) == {"name", "classname", "time"}, case.attrib
            assert case.get("name").strip() and case.get("classname").strip()
            Decimal(case.get("time"))
            outcome = list(case)
            assert len(outcome) <= 1 and all(child.tag in ("skipped", "error", "failure") for child in outcome)
            for child in outcome:
                if child.tag != "skipped":
                    assert "type" in child.attrib and set(child.attrib) <= {"type", "message"}
        counted = {tag: sum(1 for case in cases if case.find(tag) is not None) for tag in ("failure", "error", "skipped")}
        assert _int(suite.get("tests")) == len(cases)
        assert _int(suite.get("failures")) == counted["failure"] and _int(suite.get("errors")) == counted["error"]
        assert _int(suite.get("skipped", "0")) == counted["skipped"]
    return suites


def run(results, hosts=None, failures=None):
    hosts = hosts or list(results)
    summary = fleet_summary(hosts, results=results, failures=failures or {}, run_id="r1", generated_at="2026-12-02T10:00:00Z")
    return conforms(ET.fromstring(junit_xml(summary, results).encode("utf-8")))


def test_a_suite_per_node_a_case_per_check_and_a_failed_checks_detail_is_its_failure_message():
    wrong = copy.deepcopy(PASSED)
    wrong["checks"] = wrong["checks"] + [{"id": "hold_one_gpu_per_unit", "phase": "hold", "passed": False,
                                          "detail": "2 unit(s) held but 1 distinct GPU(s) seen:\nGPU-x \x01"}]
    wrong["passed"], wrong["failed_checks"], wrong["node"] = False, ["hold_one_gpu_per_unit"], "gpu-bad"
    suites = run({"gpu-a2": PASSED, "gpu-bad": wrong, "gpu-a4": NOT_READY})
    by_name = {suite.get("name"): suite for suite in suites}
    passed = by_name[PASSED["node"]]
    assert [case.get("name") for case in passed.findall("testcase")] == [check["id"] for check in PASSED["checks"]]
    assert passed.get("failures") == "0" and passed.get("timestamp") == PASSED["started_at"].rstrip("Z")
    bad = by_name["gpu-bad"]
    failure, = [case.find("failure") for case in bad.findall("testcase") if case.find("failure") is not None]
    assert failure.get("message").startswith("2 unit(s) held but 1 distinct GPU(s) seen") and failure.get("type") == "hold"
    not_ready = [suite for suite in suites if suite.get("name") == NOT_READY["node"]][0]
    failed_ids = [case.get("name") for case in not_ready.findall("testcase") if case.find("failure") is not None]
    assert failed_ids == [check["id"] for check in NOT_READY["checks"] if not check["passed"]] and failed_ids


def test_a_node_that_failed_outside_its_checks_is_an_error_and_one_not_run_is_skipped():
    suites = run({"gpu-a2": PASSED}, hosts=["gpu-a2", "broken", "later"],
                 failures={"broken": {"task": "Check the input", "message": "gpu_demo_timeout must be a number"}})
    by_name = {suite.get("name"): suite for suite in suites}
    error = by_name["broken"].find("testcase/error")
    assert error.get("message") == "gpu_demo_timeout must be a number" and by_name["broken"].get("errors") == "1"
    assert by_name["later"].find("testcase/skipped") is not None and by_name["later"].get("skipped") == "1"


@pytest.mark.parametrize("broken", ["attribute on testsuites", "suite without properties", "case with two outcomes"])
def test_the_schema_rules_catch_a_wrong_document(broken):
    """Control: the rules above fail on documents the schema refuses."""
    summary = fleet_summary(["gpu-a2"], results={"gpu-a2": PASSED}, run_id="r1", generated_at="2026-12-02T10:00:00Z")
    root = ET.fromstring(junit_xml(summary, {"gpu-a2": PASSED}).encode("utf-8"))
    suite = root.find("testsuite")
    if broken == "attribute on testsuites":
        root.set("tests", "1")
    elif broken == "suite without properties":
        suite.remove(suite.find("properties"))
    else:
        case = suite.find("testcase")
        ET.SubElement(case, "failure", {"type": "x"})
        ET.SubElement(case, "skipped")
    with pytest.raises(AssertionError):
        conforms(root)
