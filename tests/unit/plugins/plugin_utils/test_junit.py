# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run as JUnit XML (plugin_utils/_junit.py), from real per-node results, parsed back with an XML parser and
validated by lxml against the JUnit schema Jenkins reads: junit-10.xsd of Jenkins' xUnit plugin (by Gregory Boissinot,
MIT), which pytest validates its own ``junit_family=xunit2`` output against. The schema is someone else's file, so it is
not committed: it is taken from pytest's source distribution on PyPI (pip download) at set-up, once, into
~/.cache/pytest-<version>/, and its digest is checked."""

import copy
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from chinese_prose import english_prose
from lxml import etree

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo_fleet import fleet_summary
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._junit import junit_xml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_demo_results"
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
NOT_READY = json.loads((FIXTURES / "gpu-a4-not-ready.json").read_text())

# Where the schema comes from, and the digest of the file as pytest 8.3.5 ships it.
SCHEMA_PACKAGE, SCHEMA_VERSION = "pytest", "8.3.5"
SCHEMA_MEMBER = "pytest-8.3.5/testing/example_scripts/junit-10.xsd"
SCHEMA_SHA256 = "a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6"
SCHEMA_CACHE = Path.home() / ".cache" / "{0}-{1}".format(SCHEMA_PACKAGE, SCHEMA_VERSION)


def _download_schema(target):
    """pip download of the source distribution, the schema taken out of it and moved into place in one step (parallel
    test workers may fetch it at once)."""
    SCHEMA_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=str(SCHEMA_CACHE)) as work:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                   "{0}=={1}".format(SCHEMA_PACKAGE, SCHEMA_VERSION), "-d", work]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode:
            pytest.fail("cannot fetch the JUnit schema: `{0}` said: {1}".format(" ".join(command), done.stderr[-2000:]))
        with tarfile.open(os.path.join(work, "{0}-{1}.tar.gz".format(SCHEMA_PACKAGE, SCHEMA_VERSION))) as sdist:
            data = sdist.extractfile(SCHEMA_MEMBER).read()
        partial = os.path.join(work, "junit-10.xsd")
        with open(partial, "wb") as handle:
            handle.write(data)
        os.replace(partial, str(target))


@pytest.fixture(scope="session")
def schema():
    target = SCHEMA_CACHE / "junit-10.xsd"
    if not target.exists():
        _download_schema(target)
    data = target.read_bytes()
    assert hashlib.sha256(data).hexdigest() == SCHEMA_SHA256, "{0} is not the schema pytest {1} ships".format(
        target, SCHEMA_VERSION)
    return etree.XMLSchema(etree.fromstring(data))


def conforms(schema, text):
    """The schema's verdict, then what no schema says: each suite's counts are its cases'. Returns the suites."""
    document = etree.fromstring(text.encode("utf-8"))
    schema.assertValid(document)
    root = ET.fromstring(text.encode("utf-8"))
    suites = root.findall("testsuite")
    for index, suite in enumerate(suites):
        cases = suite.findall("testcase")
        counted = {tag: sum(1 for case in cases if case.find(tag) is not None) for tag in ("failure", "error", "skipped")}
        assert int(suite.get("id")) == index and int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == counted["failure"] and int(suite.get("errors")) == counted["error"]
        assert int(suite.get("skipped", "0")) == counted["skipped"]
        assert all(len(list(case)) <= 1 for case in cases), "a case has one outcome at most"
    return suites


def run(schema, results, hosts=None, failures=None, lang="en"):
    hosts = hosts or list(results)
    summary = fleet_summary(hosts, results=results, failures=failures or {}, run_id="r1", generated_at="2026-12-02T10:00:00Z",
                            lang=lang)
    return conforms(schema, junit_xml(summary, results))


def test_a_suite_per_node_a_case_per_check_and_a_failed_checks_detail_is_its_failure_message(schema):
    wrong = copy.deepcopy(PASSED)
    wrong["checks"] = wrong["checks"] + [{"id": "hold_one_gpu_per_unit", "phase": "hold", "passed": False,
                                          "detail": "2 unit(s) held but 1 distinct GPU(s) seen:\nGPU-x \x01"}]
    wrong["passed"], wrong["failed_checks"], wrong["node"] = False, ["hold_one_gpu_per_unit"], "gpu-bad"
    suites = run(schema, {"gpu-a2": PASSED, "gpu-bad": wrong, "gpu-a4": NOT_READY})
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


def test_a_node_that_failed_outside_its_checks_is_an_error_and_one_not_run_is_skipped(schema):
    suites = run(schema, {"gpu-a2": PASSED}, hosts=["gpu-a2", "broken", "later"],
                 failures={"broken": {"task": "Check the input", "message": "gpu_demo_timeout must be a number"}})
    by_name = {suite.get("name"): suite for suite in suites}
    error = by_name["broken"].find("testcase/error")
    assert error.get("message") == "gpu_demo_timeout must be a number" and by_name["broken"].get("errors") == "1"
    assert by_name["later"].find("testcase/skipped") is not None and by_name["later"].get("skipped") == "1"


def test_in_chinese_each_failure_message_is_said_in_chinese_with_the_original_quoted(schema):
    suites = run(schema, {"gpu-a2": PASSED, "gpu-a4": NOT_READY}, hosts=["gpu-a2", "gpu-a4", "broken", "later"],
                 failures={"broken": {"task": "Check the input", "message": "gpu_demo_timeout must be a number"}}, lang="zh")
    by_name = {suite.get("name"): suite for suite in suites}
    failure = by_name["gpu-a4"].find("testcase/failure")
    assert failure.get("message").startswith("节点 `gpu-a4` 不是 Ready：") and failure.get("type") == "preflight"
    assert failure.text.startswith(failure.get("message") + "\n") and failure.text.endswith("#node_ready")
    error = by_name["broken"].find("testcase/error")
    assert error.get("message") == "任务 `Check the input` 出错，原文：`gpu_demo_timeout must be a number`"
    texts = [failure.get("message"), error.get("message"), by_name["later"].find("testcase/skipped").get("message"),
             by_name["gpu-a4"].find("system-out").text]
    assert all(english_prose(text) == [] for text in texts), texts
    # Control: in English, the check's own detail.
    english = run(schema, {"gpu-a4": NOT_READY})[0].find("testcase/failure").get("message")
    assert english == next(check["detail"] for check in NOT_READY["checks"] if check["passed"] is False)


@pytest.mark.parametrize("broken", ["case without a name", "suite without its test count", "element unknown to the schema",
                                    "time that is no number of seconds"])
def test_the_schema_refuses_a_wrong_document(schema, broken):
    """Control: the schema, as fetched, refuses what Jenkins would not read."""
    summary = fleet_summary(["gpu-a2"], results={"gpu-a2": PASSED}, run_id="r1", generated_at="2026-12-02T10:00:00Z")
    root = etree.fromstring(junit_xml(summary, {"gpu-a2": PASSED}).encode("utf-8"))
    suite = root.find("testsuite")
    assert schema.validate(root)
    if broken == "case without a name":
        del suite.find("testcase").attrib["name"]
    elif broken == "suite without its test count":
        del suite.attrib["tests"]
    elif broken == "element unknown to the schema":
        etree.SubElement(suite.find("testcase"), "outcome")
    else:
        suite.set("time", "1.5 s")
    assert not schema.validate(root)
    with pytest.raises(etree.DocumentInvalid):
        conforms(schema, etree.tostring(root, encoding="unicode"))
