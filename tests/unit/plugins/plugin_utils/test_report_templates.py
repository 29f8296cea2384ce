# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every report is a template rendered one way (plugin_utils/_report_templates.py): escaped where it is HTML or SVG,
failed checks linked to their entry on the checks page, the allocation path said."""

import copy
import json
import os
import subprocess
import sys
import urllib.parse
import xml.dom.minidom
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import check_url, link_failed_checks
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.checks_page import installed_checks_url
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo_fleet import CHECKS_URL
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import TEMPLATES, render

CHECKOUT = Path(__file__).resolve().parents[4]
FIXTURES = CHECKOUT / "tests" / "unit" / "fixtures" / "gpu_demo_results"
NOT_READY = json.loads((FIXTURES / "gpu-a4-not-ready.json").read_text())
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
BASE = "https://docs.example.invalid/gpuops/checks.md"
HOSTILE = '<script>alert("x")</script> & \'q\''


def failed(result, base=BASE):
    result = copy.deepcopy(result)
    result["checks"] = link_failed_checks(result["checks"], base)
    return result


def test_the_templates_are_the_roles():
    assert Path(TEMPLATES).resolve() == CHECKOUT / "roles" / "gpu_demo" / "templates"
    for name in ("report.json.j2", "report.en.md.j2", "report.zh.md.j2", "timeline.svg.j2", "fleet.md.j2", "fleet.html.j2"):
        assert (Path(TEMPLATES) / name).is_file()


def test_only_failed_checks_get_a_link_and_only_to_an_http_or_file_page():
    checks = link_failed_checks(NOT_READY["checks"], BASE)
    assert [check["url"] for check in checks if not check["passed"]] == [BASE + "#node_ready"]
    assert all("url" not in check for check in checks if check["passed"])
    assert link_failed_checks(NOT_READY["checks"], None) == NOT_READY["checks"]
    assert check_url("javascript:alert(1)", "node_ready") is None and check_url(BASE, "") is None
    assert check_url("data:text/html,x", "node_ready") is None
    assert check_url("file:///opt/collections/docs/checks.md", "node_ready") == "file:///opt/collections/docs/checks.md#node_ready"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_markdown_links_each_failed_check_to_its_entry(lang):
    text = render("report.%s.md.j2" % lang, _gpu_demo_result=failed(NOT_READY))
    link = "[node_ready](%s#node_ready)" % BASE
    # In the verdict line at the top and in the checks table.
    assert text.count(link) == 2, text
    assert "| %s | %s |" % (link, "**FAIL**" if lang == "en" else "**未通过**") in text
    # A passed check is not linked.
    assert "| node_name_valid |" in text


def test_the_json_carries_each_failed_checks_url():
    data = json.loads(render("report.json.j2", _gpu_demo_result=failed(NOT_READY)))
    assert [check.get("url") for check in data["checks"] if not check["passed"]] == [BASE + "#node_ready"]


def test_svg_values_are_escaped_markdown_ones_are_not():
    result = copy.deepcopy(PASSED)
    result["node"] = HOSTILE
    result["timeline"]["lanes"][0]["pod"] = HOSTILE
    svg = render("timeline.svg.j2", _gpu_demo_result=result)
    xml.dom.minidom.parseString(svg)   # still well-formed XML
    assert "<script>" not in svg and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#39;q&#39;" in svg
    markdown = render("report.en.md.j2", _gpu_demo_result=result)
    assert "# Walking nvidia.com/gpu through the scheduler on " + HOSTILE in markdown


@pytest.mark.parametrize("path, words", [
    ("device_plugin", ("GPUs through the device plugin", None)),
    ("dra", ("GPUs through DRA (ResourceClaims of the run)", None)),
    ("dra_extended_resource", ("GPUs through DRA (an extended resource: ResourceClaims made by the scheduler)",
                               "which the class serves (extendedResourceName): the scheduler makes their ResourceClaims")),
])
def test_the_allocation_path_is_said(path, words):
    result = copy.deepcopy(PASSED)
    result["allocation"] = path
    if path != "device_plugin":
        result["before"]["dra"] = {"device_class": "gpu.nvidia.com", "drivers": ["gpu.nvidia.com"], "pools": ["prod102"],
                                   "devices": [], "extended_resource_name": "nvidia.com/gpu"}
    assert words[0] in render("timeline.svg.j2", _gpu_demo_result=result)
    markdown = render("report.en.md.j2", _gpu_demo_result=result)
    if words[1]:
        assert words[1] in markdown
    elif path == "dra":
        assert "the pods get their GPUs through ResourceClaims of their own |" in markdown
    else:
        assert "| Allocation | device plugin:" in markdown


def test_a_missing_value_is_an_error_not_an_empty_report():
    result = copy.deepcopy(PASSED)
    del result["node"]
    with pytest.raises(Exception, match="node"):
        render("timeline.svg.j2", _gpu_demo_result=result)


def test_the_default_checks_link_is_the_installed_collections_page_which_opens():
    """Not a placeholder host: the page inside the collection that judged the run, on the controller."""
    assert CHECKS_URL == installed_checks_url() == (CHECKOUT / "docs" / "checks.md").as_uri()
    link = check_url(CHECKS_URL, "node_ready")
    assert Path(urllib.parse.urlsplit(link).path).read_text(encoding="utf-8").count("\n### node_ready\n") == 1
    # The role's default is that page, through the lookup; the summary's too, when it is not given.
    defaults = yaml.safe_load((CHECKOUT / "roles" / "gpu_demo" / "defaults" / "main.yml").read_text())
    assert defaults["gpu_demo_checks_url"] == "{{ lookup('gpuops.scheduling.gpu_demo_checks_page') }}"
    from ansible_collections.gpuops.scheduling.plugins.lookup.gpu_demo_checks_page import LookupModule  # pylint: disable=import-outside-toplevel
    assert LookupModule().run([], {}) == [CHECKS_URL]
    specs = yaml.safe_load((CHECKOUT / "roles" / "gpu_demo" / "meta" / "argument_specs.yml").read_text())
    assert "default" not in specs["argument_specs"]["main"]["options"]["gpu_demo_checks_url"]
    from ansible_collections.gpuops.scheduling.plugins.modules import gpu_demo_summary  # pylint: disable=import-outside-toplevel
    assert "default" not in yaml.safe_load(gpu_demo_summary.DOCUMENTATION)["options"]["checks_url"]


def test_a_collection_built_without_its_docs_links_nothing(tmp_path):
    assert installed_checks_url(str(tmp_path)) is None
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "checks.md").write_text("# The checks\n")
    assert installed_checks_url(str(tmp_path)) == (tmp_path / "docs" / "checks.md").resolve().as_uri()


# A run through NVIDIA's DRA driver on the H200 (docs/evidence/h200-nvidia-both): a DRA node advertises no allocatable
# for its GPUs and `kubectl describe node` shows no row for them, so the report speaks of devices and claims.
DRA_PASSED = json.loads((FIXTURES / "h200-dra-passed.json").read_text())


@pytest.mark.parametrize("lang, device_words", [
    ("en", ("device(s) free for the demo", "allocated to claim gpu-operator/", "device(s), 1 allocated: **free 0**")),
    ("zh", ("可供演示使用的空闲设备", "已分配给 claim gpu-operator/", "设备 1 个，已分配 1 个")),
])
def test_a_dra_report_speaks_of_devices_and_claims_not_allocatable(lang, device_words):
    markdown = render("report.{0}.md.j2".format(lang), _gpu_demo_result=DRA_PASSED)
    assert "allocatable gpu.nvidia.com" not in markdown and "describe node" not in markdown
    assert "可分配数量" not in markdown and "Requests" not in markdown
    # Nor in the summary block of the zh report, nor the device plugin's hand-over in its chain of steps.
    assert "allocatable=" not in markdown and "设备插件填入" not in markdown
    for words in device_words:
        assert words in markdown


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_device_plugin_report_keeps_the_nodes_allocated_resources(lang):
    markdown = render("report.{0}.md.j2".format(lang), _gpu_demo_result=PASSED)
    assert "kubectl describe node" in markdown and "Requests" in markdown


def test_a_dra_timeline_counts_the_devices_of_the_class_not_the_scheduler_s_units():
    svg = render("timeline.svg.j2", _gpu_demo_result=DRA_PASSED)
    assert "free devices of DeviceClass gpu.nvidia.com on prod102 (its ResourceSlices" in svg
    assert "free gpu.nvidia.com on" not in svg and "the scheduler&#39;s ledger" not in svg


@pytest.mark.parametrize("lang, none_held", [
    ("en", "| GPUs held (occupied window) | none: no demo pod ever ran on the node, so no GPU was held |"),
    ("zh", "| GPU 被占用的时间 | 无：没有演示 Pod 在节点上运行过，没有占用任何 GPU |"),
])
def test_a_run_whose_hold_never_ran_says_no_gpu_was_held(lang, none_held):
    result = copy.deepcopy(DRA_PASSED)
    result["timeline"]["held"], result["timeline"]["window"] = False, None
    result["durations"]["occupied_window"] = None
    markdown = render("report.{0}.md.j2".format(lang), _gpu_demo_result=result)
    assert none_held in markdown
    assert "no GPU held (no demo pod ran on the node)" in render("timeline.svg.j2", _gpu_demo_result=result)
    assert render("report.{0}.md.j2".format(lang), _gpu_demo_result=DRA_PASSED).count("8.70") == 2


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_whole_second_events_show_no_milliseconds_they_do_not_have(lang):
    """The kubelet's events carry whole seconds: "Pulling" read 16:43:46.000, 0.39 s before the "Scheduled" it follows."""
    result = copy.deepcopy(DRA_PASSED)
    for event in result["events"]:
        event["precise"] = event["reason"] in ("Scheduled", "FailedScheduling")
        event["placed_epoch"] = event["at_epoch"]
    result["events"][1]["placed_epoch"] = result["events"][0]["at_epoch"]   # Pulling, placed after Scheduled
    markdown = render("report.{0}.md.j2".format(lang), _gpu_demo_result=result)
    assert "| 16:43:46.391 | 0.39 | Normal | Scheduled |" in markdown
    assert "| 16:43:46 | ≈0 | Normal | Pulling |" in markdown
    assert "16:43:46.000" not in markdown and "| 0.00 |" not in markdown
    assert ("whole seconds" if lang == "en" else "整秒") in markdown


RENDER_IN_A_NEW_PROCESS = """
import json, sys
from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _report_templates as templates
result = json.loads(sys.stdin.read())
print(json.dumps([templates.render(name, _gpu_demo_result=result) for name in ("report.en.md.j2", "timeline.svg.j2")]))
"""


def test_a_new_process_renders_the_same_reports_from_the_compiled_templates_another_left(tmp_path):
    # As ansible-playbook's task workers do: each a new process, the first compiles, the next load what it kept.
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}

    def render_in_a_new_process():
        process = subprocess.run([sys.executable, "-c", RENDER_IN_A_NEW_PROCESS], input=json.dumps(PASSED), env=env,
                                 capture_output=True, text=True, check=True)
        return json.loads(process.stdout)

    first = render_in_a_new_process()
    kept = sorted(path.name for path in tmp_path.glob("_jinja2-cache-*/gpuops-scheduling-*.cache"))
    assert len(kept) == 2, kept
    assert (tmp_path / f"_jinja2-cache-{os.getuid()}").stat().st_mode & 0o777 == 0o700
    assert render_in_a_new_process() == first == [render(name, _gpu_demo_result=PASSED) for name in ("report.en.md.j2", "timeline.svg.j2")]
    assert sorted(path.name for path in tmp_path.glob("_jinja2-cache-*/gpuops-scheduling-*.cache")) == kept
