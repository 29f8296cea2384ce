# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The run as JUnit XML, for CI systems (GitLab, Jenkins, Tekton): a test suite per node, a test case per check, a failed
check's detail as its failure message, in the summary's language (gpu_demo/words.py). Controller only; written beside
the summary by the gpu_demo_summary action.

The shape is the Ant JUnit schema's (the one Jenkins and GitLab read): ``testsuites`` without attributes; each
``testsuite`` with name, timestamp (no time zone), hostname, tests, failures, errors, skipped, time, package and id
(0, 1, ...), then ``properties``, the test cases, ``system-out`` and ``system-err``; each test case with name, classname
and time, and at most one of ``skipped``, ``error`` or ``failure`` (type required).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import xml.etree.ElementTree as ET

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.words import check_text, row_reason

# What XML 1.0 cannot hold (a check's detail may quote a pod's log).
NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value):
    return NOT_XML.sub("?", "" if value is None else str(value))


def _timestamp(text):
    """RFC 3339 (UTC, 'Z') -> the schema's local form, seconds only and no zone."""
    match = re.match(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})", text or "")
    return match.group(1) if match else None


def _suite(index, row, result, run_id, generated_at, lang="en"):
    node = row.get("node") or row["host"]
    suite = ET.Element("testsuite")
    properties = ET.SubElement(suite, "properties")
    for name, value in (("run_id", run_id), ("status", row.get("status")), ("resource", row.get("resource")),
                        ("allocation", row.get("allocation")), ("report_configmap", row.get("report_configmap"))):
        if value:
            ET.SubElement(properties, "property", {"name": name, "value": _text(value)})
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    checks = (result or {}).get("checks") or [] if isinstance(result, dict) else []
    for check in checks:
        case = ET.SubElement(suite, "testcase", {"name": _text(check.get("id")),
                                                 "classname": "%s.%s" % (node, check.get("phase") or "run"), "time": "0"})
        if check.get("passed") is None:
            # Not judged (what it reads was not there, or it follows from an earlier failure): never a pass.
            ET.SubElement(case, "skipped", {"message": _text(check.get("detail") or "not judged")})
            counts["skipped"] += 1
        elif not check.get("passed"):
            counts["failures"] += 1
            # In the summary's language; in Chinese the English original stays quoted in the sentence.
            detail = _text(check_text(check, lang) or "failed")
            failure = ET.SubElement(case, "failure", {"message": detail, "type": _text(check.get("phase") or "check")})
            failure.text = detail + ("\n" + check["url"] if check.get("url") else "")
    # What no check says: the run stopped on an error, or the node was not run at all.
    if row.get("status") == "failed" and not counts["failures"]:
        case = ET.SubElement(suite, "testcase", {"name": "run", "classname": "%s.%s" % (node, row.get("phase") or "run"),
                                                 "time": "%.3f" % (row.get("total_seconds") or 0)})
        message = _text((row_reason(row, lang) if lang != "en" else row.get("message") or row.get("reason")) or "error")
        error = ET.SubElement(case, "error", {"message": message, "type": _text(row.get("task") or "error")})
        error.text = message
        counts["errors"] += 1
    elif row.get("status") == "not_run" or not checks:
        case = ET.SubElement(suite, "testcase", {"name": "run", "classname": "%s.run" % node, "time": "0"})
        ET.SubElement(case, "skipped", {"message": _text(row_reason(row, lang) or row.get("status"))})
        counts["skipped"] += 1
    counts["tests"] = len(suite.findall("testcase"))
    ET.SubElement(suite, "system-out").text = _text(row_reason(row, lang) or "")
    ET.SubElement(suite, "system-err")
    suite.attrib.update({"name": _text(node), "package": "gpu_preflight.%s" % _text(node), "id": str(index),
                         "timestamp": _timestamp(row.get("started_at")) or _timestamp(generated_at) or "1970-01-01T00:00:00",
                         "hostname": _text(node), "time": "%.3f" % (row.get("total_seconds") or 0)})
    suite.attrib.update((key, str(value)) for key, value in counts.items())
    # The schema's order of attributes does not matter; its order of elements does: properties, cases, out, err.
    return suite


def junit_xml(summary, results):
    """The run's summary (gpu_demo_fleet.fleet_summary) and each host's result (every check) -> JUnit XML text."""
    root = ET.Element("testsuites")
    for index, row in enumerate(summary["rows"]):
        root.append(_suite(index, row, (results or {}).get(row["host"]), summary.get("run_id"), summary.get("generated_at"),
                           lang=summary.get("lang") or "en"))
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
