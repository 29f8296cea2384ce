# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/report-example/ shows what the current code writes (`make report-example`, tests/report_example.py).

Each example's Markdown and SVG are what today's templates write from its JSON; the fleet summary's pages are what
today's templates write from its JSON (the HTML up to the nodes' small timelines, which only the run had); every
check id an example shows is one the code still makes. tests/integration/examples.py compares a run of today with
the examples (the same checks and sections).
"""

import json
import re
from pathlib import Path

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import CHECKS
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import fleet_html, fleet_markdown, render

CHECKOUT = Path(__file__).resolve().parents[2]
EXAMPLES = CHECKOUT / "docs" / "report-example"
STALE = "docs/report-example is not what the current templates write: run `make report-example` and commit the result"
PER_NODE = sorted(EXAMPLES.glob("gpu-demo-prod102-example-*.json")) + sorted(EXAMPLES.glob("fleet/gpu-demo-[!f]*.json"))
FLEET = EXAMPLES / "fleet" / "gpu-demo-fleet-example-10"
# The drawing of each node's pods in its story: from the run's timelines, which the summary's JSON leaves out.
LANES = re.compile(r'<svg xmlns="http://www.w3.org/2000/svg" width="\d+" height="\d+" font-family="sans-serif">.*?</svg>')


def known_check_ids():
    """Every check id the code can report: the registry the judges build their checks through (and the role's
    YAML-built checks are held to by tests/unit/plugins/module_utils/gpu_demo/test_checks.py)."""
    return set(check_id for check_id, _phase, _title in CHECKS)


def test_every_example_is_there():
    names = sorted(path.name for path in PER_NODE)
    assert "gpu-demo-prod102-example-en-4gpus.json" in names and "gpu-demo-prod102-example-zh.json" in names
    # Ten hosts, one of them refused for bad input before it had a report.
    assert len([path for path in PER_NODE if path.parent.name == "fleet"]) == 9
    for path in PER_NODE:
        assert path.with_suffix(".md").exists() and path.with_suffix(".svg").exists(), path


@pytest.mark.parametrize("path", PER_NODE, ids=lambda path: path.stem)
def test_a_nodes_markdown_and_svg_are_what_the_templates_write_from_its_json(path):
    result = json.loads(path.read_text())
    lang = "zh" if path.stem.endswith("-zh") else "en"
    assert path.with_suffix(".md").read_text() == render("report.%s.md.j2" % lang, _gpu_demo_result=result), STALE
    assert path.with_suffix(".svg").read_text() == render("timeline.svg.j2", _gpu_demo_result=result), STALE


@pytest.mark.parametrize("path", PER_NODE, ids=lambda path: path.stem)
def test_an_example_shows_only_checks_the_code_still_makes(path):
    result = json.loads(path.read_text())
    unknown = sorted(set(check["id"] for check in result["checks"]) - known_check_ids())
    assert not unknown, "%s: %s (%s)" % (path.name, unknown, STALE)
    # Written by today's role: the fields it writes now.
    assert "allocation" in result and "checks_url" in result, STALE


def test_the_fleet_summary_is_what_the_templates_write_from_its_json():
    summary = json.loads(FLEET.with_suffix(".json").read_text())
    assert FLEET.with_suffix(".md").read_text() == fleet_markdown(summary), STALE
    committed = FLEET.with_suffix(".html").read_text()
    assert LANES.sub("", committed) == LANES.sub("", fleet_html(summary)), STALE
    # Each failed node's story has its drawing.
    assert len(LANES.findall(committed)) >= summary["counts"]["passed"]


def test_the_known_check_ids_are_read_from_the_code():
    ids = known_check_ids()
    assert {"node_found", "node_ready", "hold_running", "queue_ran_on_node", "verdict_permitted", "run_pods_gone"} <= ids
