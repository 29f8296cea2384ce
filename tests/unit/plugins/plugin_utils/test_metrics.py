# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's metrics (plugin_utils/_metrics.py) from real per-node results, read back with prometheus_client's own text
parser; a failed node keeps the last success an earlier file held; a push to nothing is reported, not raised."""

import copy
import json
import math
import socket
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _metrics as metrics
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo_fleet import fleet_summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_demo_results"
PASSED = json.loads((FIXTURES / "gpu-a2-passed.json").read_text())
NOT_READY = json.loads((FIXTURES / "gpu-a4-not-ready.json").read_text())


def parsed(text):
    """{metric family name: {(sorted label items): value}} through the Prometheus text parser."""
    return {family.name: {tuple(sorted(sample.labels.items())): sample.value for sample in family.samples}
            for family in text_string_to_metric_families(text)}


def summary_of(results, hosts=None):
    return fleet_summary(hosts or list(results), results=results, run_id="r1", generated_at="2026-12-02T10:00:00Z")


def test_each_node_and_the_run_in_the_textfile_format():
    families = parsed(metrics.textfile(summary_of({"a2": PASSED, "a4": NOT_READY}, hosts=["a2", "a4", "later"])))
    p = "gpuops_gpu_preflight_"
    a2, a4 = (("node", PASSED["node"]),), (("node", NOT_READY["node"]),)
    assert families[p + "passed"] == {a2: 1.0, a4: 0.0}
    ended = families[p + "last_run_end_timestamp_seconds"][a2]
    assert families[p + "last_success_timestamp_seconds"] == {a2: ended}, "only a node that passed has a success"
    assert families[p + "occupied_window_seconds"][a2] == PASSED["durations"]["occupied_window"]
    # Refused before its hold ran, a4 held no GPU: no window (NaN), not a window of 0 s.
    assert NOT_READY["durations"]["occupied_window"] is None and math.isnan(families[p + "occupied_window_seconds"][a4])
    assert families[p + "failed_checks"] == {a2: 0.0, a4: float(len(NOT_READY["failed_checks"]))}
    assert families[p + "nodes"] == {(("outcome", "passed"),): 1.0, (("outcome", "failed"),): 1.0,
                                     (("outcome", "not_run"),): 1.0, (("outcome", "checked"),): 0.0}


def test_the_end_time_is_the_start_plus_the_run():
    import calendar
    import time
    families = parsed(metrics.textfile(summary_of({"a2": PASSED})))
    start = calendar.timegm(time.strptime(PASSED["started_at"], "%Y-%m-%dT%H:%M:%SZ"))
    ended = families["gpuops_gpu_preflight_last_run_end_timestamp_seconds"][(("node", PASSED["node"]),)]
    assert abs(ended - (start + float(PASSED["durations"]["total"]))) < 0.01


def test_a_failed_node_keeps_the_last_success_an_earlier_file_held():
    first = metrics.textfile(summary_of({"a2": PASSED}))
    failed = copy.deepcopy(PASSED)
    failed["checks"] = failed["checks"] + [{"id": "hold_one_gpu_per_unit", "phase": "hold", "passed": False, "detail": "x"}]
    failed["passed"], failed["failed_checks"] = False, ["hold_one_gpu_per_unit"]
    second = metrics.textfile(summary_of({"a2": failed}), metrics.previous_successes(first))
    node = (("node", PASSED["node"]),)
    assert parsed(second)["gpuops_gpu_preflight_passed"][node] == 0.0
    assert (parsed(second)["gpuops_gpu_preflight_last_success_timestamp_seconds"][node]
            == parsed(first)["gpuops_gpu_preflight_last_success_timestamp_seconds"][node])
    # Without the earlier file, no success is claimed.
    assert "gpuops_gpu_preflight_last_success_timestamp_seconds" not in {
        name for name, samples in parsed(metrics.textfile(summary_of({"a2": failed}))).items() if samples}


def test_a_push_to_a_port_nobody_listens_on_is_reported_not_raised():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = metrics.push(summary_of({"a2": PASSED}), "http://127.0.0.1:%d" % port, timeout=2)
    assert outcome["pushed"] == [] and "127.0.0.1:%d" % port in outcome["error"] and PASSED["node"] in outcome["error"]
