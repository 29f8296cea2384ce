# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role's messages as filters (plugins/filter/gpu_demo_words.py): the words are words.py's, the language checked."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.scheduling.plugins.filter.gpu_demo_words import FilterModule

FILTERS = FilterModule().filters()
REFUSED = {"id": "node_ready", "phase": "preflight", "passed": False,
           "detail": "node prod102 is not Ready: the scheduler places nothing there until its kubelet reports Ready."}
PASSED = {"id": "node_found", "phase": "preflight", "passed": True, "detail": "node prod102"}


def test_the_refusal_the_stop_and_the_run_failure_in_each_language():
    assert FILTERS["gpu_demo_refusal"]([PASSED, REFUSED], "prod102") == "Refusing node prod102: " + REFUSED["detail"]
    assert FILTERS["gpu_demo_refusal"]([PASSED, REFUSED], "prod102", "zh").startswith("拒绝节点 `prod102`：node_ready：节点 ")
    walk = {"stop": REFUSED["detail"], "checks": [PASSED, REFUSED]}
    assert FILTERS["gpu_demo_stop"](walk, "en") == REFUSED["detail"]
    assert FILTERS["gpu_demo_stop"](walk, "zh").startswith("node_ready：节点 `prod102` 不是 Ready：")
    assert FILTERS["gpu_demo_stop"]({"stop": "", "checks": [PASSED]}, "zh") == ""
    result = {"node": "prod102", "checks": [PASSED, REFUSED], "failure": {"task": "t", "message": "Refusing node prod102: x"}}
    assert FILTERS["gpu_demo_run_failure"](result, "prod102") == "GPU scheduling demo on prod102 failed: node_ready: Refusing node prod102: x"
    assert FILTERS["gpu_demo_run_failure"](result, lang="zh").startswith("节点 `prod102` 上的 GPU 调度演示未通过：node_ready：拒绝节点")


@pytest.mark.parametrize("name, args", [("gpu_demo_refusal", ([REFUSED], "prod102")), ("gpu_demo_stop", ({},)),
                                        ("gpu_demo_run_failure", ({}, "prod102"))])
def test_a_language_that_is_not_there_is_refused(name, args):
    with pytest.raises(AnsibleFilterError, match="must be one of en, zh, not 'fr'"):
        FILTERS[name](*args, lang="fr")
