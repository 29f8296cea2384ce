# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A Chinese report is Chinese throughout: no prose line of it is an English sentence.

Read: the Chinese example report of docs/report-example/ and the Chinese renders of the unit fixtures (a device plugin
run that passed, one refused before anything was created, and a DRA run on an H200). What may stay English is what a
reader types or searches for: code blocks, what is quoted in backticks (identifiers, kubectl commands, and the English
originals of check messages, task names and Kubernetes' event messages, which docs/checks.md and kubectl show in those
words), names made of separators (pods, nodes, resources, paths) and links' targets.
"""

import json
from pathlib import Path

import pytest
from chinese_prose import english_prose

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import CHECKS
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import CHECK_TITLES_ZH, render

CHECKOUT = Path(__file__).resolve().parents[3]
FIXTURES = CHECKOUT / "tests" / "unit" / "fixtures" / "gpu_demo_results"
EXAMPLES = sorted((CHECKOUT / "docs" / "report-example").glob("**/*-zh.md"))


def zh_render(name):
    return render("report.zh.md.j2", _gpu_demo_result=json.loads((FIXTURES / name).read_text()))


def test_the_detector_finds_the_english_sentences_once_seen_in_a_chinese_report():
    seen = ("**注意**：GPU 0 GPU-c4a36e9e-b12e-ae04-21f0-6dc4ff6d2da6 (NVIDIA H200) is free in the ledger but 8.6 GiB "
            "of its memory is in use: host 8.6 GiB (pid 553 python3)")
    assert english_prose(seen)
    assert english_prose("GPU Operator 的程序在这个节点上：device plugin Running，gpu feature discovery Running。")
    assert not english_prose("节点的 ResourceSlice 发布了 1 个 DeviceClass `gpu.nvidia.com` 的设备（`kubectl get "
                             "resourceslices --field-selector spec.nodeName=prod102`）：`gpu-0` 已分配给 claim "
                             "gpu-operator/gpu-demo-hold-xfzjv，预留给 gpu-demo-hold。")


@pytest.mark.parametrize("source", ["gpu-a2-passed.json", "gpu-a4-not-ready.json", "h200-dra-passed.json"])
def test_a_chinese_report_of_each_kind_of_run_has_no_english_prose(source):
    assert english_prose(zh_render(source)) == []


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_the_chinese_example_reports_have_no_english_prose(example):
    assert english_prose(example.read_text(encoding="utf-8")) == []


def test_there_is_a_chinese_example_report():
    assert EXAMPLES


def test_every_check_says_what_it_proves_in_chinese():
    assert sorted(CHECK_TITLES_ZH) == sorted(check_id for check_id, _phase, _title in CHECKS)
