# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The PrometheusRule docs/evidence.md shows is one Prometheus loads: its rule groups, checked by promtool (Debian's
prometheus package, `make promtool`; GPUOPS_PROMTOOL names another)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

EVIDENCE = Path(__file__).resolve().parents[3] / "docs" / "evidence.md"
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)


def promtool():
    binary = os.environ.get("GPUOPS_PROMTOOL") or shutil.which("promtool")
    assert binary, "no promtool: `make promtool` installs Debian's prometheus package (make unit does)"
    return binary


def documented_rule():
    """The one PrometheusRule of the page (prometheus-operator's resource)."""
    rules = [document for block in YAML_BLOCK.findall(EVIDENCE.read_text(encoding="utf-8"))
             for document in yaml.safe_load_all(block)
             if isinstance(document, dict) and document.get("kind") == "PrometheusRule"]
    assert len(rules) == 1, "docs/evidence.md shows {0} PrometheusRule(s), not one".format(len(rules))
    return rules[0]


def check_rules(groups, tmp_path):
    """promtool check rules on a rule file of ``groups`` (what prometheus-operator hands Prometheus of the resource)."""
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False), encoding="utf-8")
    return subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60, check=False)


def test_the_documented_rule_groups_pass_promtool(tmp_path):
    groups = documented_rule()["spec"]["groups"]
    checked = check_rules(groups, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    count = sum(len(group["rules"]) for group in groups)
    assert "SUCCESS: {0} rules found".format(count) in checked.stdout, checked.stdout
    # What the page promises to alert on: our condition failed and missing, and the textfile's metrics.
    expressions = " ".join(rule["expr"] for group in groups for rule in group["rules"])
    assert 'condition="gpuops.scheduling/GPUPreflightPassed"' in expressions
    assert "gpuops_gpu_preflight_last_success_timestamp_seconds" in expressions


@pytest.mark.parametrize("broken", ["expression", "duration", "template"])
def test_promtool_refuses_a_broken_rule(tmp_path, broken):
    """Control: the same groups with one rule broken fail, naming what is wrong."""
    groups = documented_rule()["spec"]["groups"]
    rule = groups[0]["rules"][0]
    if broken == "expression":
        rule["expr"] = rule["expr"] + " ==="
    elif broken == "duration":
        rule["for"] = "five minutes"
    else:
        rule["annotations"]["summary"] = "{{ $labels.node "
    checked = check_rules(groups, tmp_path)
    assert checked.returncode != 0 and "FAILED" in checked.stdout + checked.stderr, checked.stdout + checked.stderr
