#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation only: the action plugin plugins/action/gpu_demo_summary.py does the work, on the controller.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_demo_summary
short_description: One summary of a gpu_demo run over many nodes (JSON, Markdown, HTML) on the controller
version_added: 1.0.0
description:
  - Collects what the P(gpuops.scheduling.gpu_demo#role) role left for each node of a run (its result, or the play's
    record of a failure before the node's report) and writes, on the controller, C(gpu-demo-fleet-<run_id>.json),
    C(.md) and C(.html) into O(dir).
  - Every node of O(hosts) gets a row, failures first, then nodes that did not run, then check-mode nodes, then
    passed nodes. A row says where the node failed (phase, check) and why, the units the hold took, the GPUs the
    pods saw, the time the GPUs were occupied, the inference server's health before and after, and memory used on
    the GPUs outside the scheduler's ledger when it was read; it links the node's own reports.
  - The HTML page is self-contained (inline CSS, SVG and a small inline script to sort and filter; it loads
    nothing). Every value that comes from the cluster is escaped.
  - Runs in the controller's process, like M(gpuops.scheduling.report_files).
  - Used by C(playbooks/gpu_demo.yml) after every node has run; a play that includes the role on many nodes can
    add the same task (see the example), since the role leaves each node's result in its C(_gpu_demo_result) fact.
author:
  - gpuops developers (@gpuops)
options:
  dir:
    description:
      - Directory of the summary on the controller (the per-node reports' directory, so that links are short).
    type: path
    required: true
  run_id:
    description:
      - Names the files, C(gpu-demo-fleet-<run_id>.*); no C(/).
    type: str
    required: true
  hosts:
    description:
      - Every inventory host the run targeted, in the play's order (C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  results:
    description:
      - Each host's result from the role (the per-node JSON report), by host. A host not given here is looked up in
        its facts (O(result_fact)); a host with neither never reached its report.
    type: dict
    default: {}
  failures:
    description:
      - Each host's failure outside the role's report, as C({task, message}), by host, for nodes that failed before
        the role's report (bad input, for one). A host not given here is looked up in its facts (O(failure_fact)).
    type: dict
    default: {}
  result_fact:
    description:
      - The fact that holds a host's result; the role sets C(_gpu_demo_result).
      - Facts are read from C(hostvars) as they are, without templating, which keeps 500 nodes' results in
        milliseconds where a Jinja expression over C(hostvars) took tens of seconds.
    type: str
    default: _gpu_demo_result
  failure_fact:
    description:
      - The fact that holds a host's failure outside the role, as C({task, message}) (a play's C(rescue) records
        C(ansible_failed_task.name) and C(ansible_failed_result.msg)); C(playbooks/gpu_demo.yml) sets
        C(_gpu_demo_play_failure).
    type: str
    default: _gpu_demo_play_failure
  mode:
    description:
      - C(serial) when the run went one node at a time and stopped at the first failed node (the nodes after it are
        C(not run), naming it); C(parallel) otherwise.
      - C(verdicts) for the fleet's summary made from the Nodes' verdicts (C(playbooks/gpu_demo_fleet_summary.yml)).
        Each row then says whether its verdict still holds (C(freshness) - V(fresh), V(stale), V(untrusted), V(failed),
        V(never), V(running), V(unreadable) or V(absent), read from O(results) and O(not_run_reasons)), in a column of its own.
    type: str
    choices: [parallel, serial, verdicts]
    default: parallel
  not_run_reasons:
    description:
      - Why each host without a result has none (never pre-flighted, a stale or interrupted verdict), shown in its row.
    type: dict
    default: {}
  report_configmaps:
    description:
      - The latest report of each host kept in the cluster, as V(<namespace>/<name>) of its ConfigMap, for hosts whose
        result names none (a summary made from the Nodes' verdicts); the pages show the C(kubectl) command that reads
        it. A value that names no ConfigMap is left out.
    type: dict
    default: {}
  nothing_tested:
    description:
      - Why the run has no node at all (a host pattern that matched no host), said in the summary when O(hosts) is
        empty. A summary of no node never passes (C(passed=false)), with or without it.
    type: str
  job:
    description:
      - The job that makes the summary (an AWX job id); each row's compact verdict in RV(verdicts) records it.
    type: str
  lang:
    description:
      - Language of the Markdown and HTML pages, of the JUnit failure messages and of the failure each failed host is
        failed with (RV(failed_hosts)). In V(zh) a failed check is said in Chinese; what Kubernetes, the kubelet or an
        API server wrote (an event, a scheduler message, an API error, a URL) is quoted as it was written.
    type: str
    choices: [en, zh]
    default: en
  checks_url:
    description:
      - The page that explains every check, as an absolute C(https://), C(http://) or C(file://) URL; each failed check
        links to V(<checks_url>#<check id>) in the pages, the JUnit, the returned summary (C(url) of each group and row
        check) and the AWX statistics. Empty for no links. The role's
        O(gpuops.scheduling.gpu_demo#role:main:gpu_demo_checks_url).
      - When not given, the C(docs/checks.md) of the installed collection on the controller, as a C(file://) URL, which
        opens with no setting and no network on the machine that ran the play.
    type: str
  write:
    description:
      - Write the files; with V(false) the summary is only returned (the role's O(gpuops.scheduling.gpu_demo#role:main:gpu_demo_write_report)).
    type: bool
    default: true
  metrics_textfile:
    description:
      - Write the run's metrics to this file in the text format of node_exporter's textfile collector (atomically;
        name it C(*.prom) in the collector's directory). Per node (label C(node)) C(gpuops_gpu_preflight_passed),
        C(_last_run_end_timestamp_seconds), C(_last_success_timestamp_seconds), C(_occupied_window_seconds) and
        C(_failed_checks); per run C(gpuops_gpu_preflight_nodes) by C(outcome).
      - A node that failed keeps the last success time the file held before.
      - Written also with O(write=false); not in check mode.
    type: path
  pushgateway_url:
    description:
      - Push each tested node's metrics to this Prometheus Pushgateway, grouped by C(job) and C(node) (a push that
        adds, so that a failed node keeps its group's last success time). Needs the Python library C(prometheus-client).
      - A push that fails is reported (C(push_error) in RV(metrics), and a warning) and never fails the task.
    type: str
  probe:
    description:
      - Write nothing; only prove that what the summary will write can be written, and fail naming the variable and
        the path of each that cannot. O(dir) (made when missing, with O(write=true)) and the folder of
        O(metrics_textfile) (which must exist) must take a probe file, written and removed; O(pushgateway_url) must be a
        well-formed C(http(s)) URL (reaching it stays best-effort).
      - C(playbooks/gpu_demo.yml) probes before the first pod, so that a run never fails after its nodes' verdicts said
        passed. In check mode the folders' permission bits are read instead, and nothing is written.
    type: bool
    default: false
  pushgateway_job:
    description: The Pushgateway's C(job) label.
    type: str
    default: gpu_preflight
attributes:
  check_mode:
    support: full
    description: Returns the summary and writes nothing.
  diff_mode:
    support: none
    description: The files are new for each run; no diff is shown.
  platform:
    support: full
    platforms: posix
    description: Always the controller.
seealso:
  - module: gpuops.scheduling.report_files
"""

EXAMPLES = r"""
- name: Write the run's summary once every node has run
  gpuops.scheduling.gpu_demo_summary:
    dir: "{{ playbook_dir }}/reports"
    run_id: "{{ awx_job_id | default('manual') }}"
    hosts: "{{ ansible_play_hosts_all }}"
  run_once: true
  delegate_to: localhost
  register: summary

- name: Hand the summary to AWX
  ansible.builtin.set_stats:
    data:
      gpu_demo_fleet: "{{ summary.summary }}"
  run_once: true
"""

RETURN = r"""
probed:
  description: With O(probe=true), the only value returned besides C(changed) - the outputs proven writable (V(null) for
    those the run does not write).
  returned: when O(probe=true)
  type: dict
  sample:
    dir: /runner/project/reports
    metrics_textfile: /var/lib/node_exporter/textfile/gpu_preflight.prom
    pushgateway_url: null
files:
  description: Absolute paths of the files written (or already as they would be written); empty in check mode or with O(write=false).
  returned: without O(probe)
  type: dict
  sample:
    json: /runner/project/reports/gpu-demo-fleet-20261130t2150-1a2b3c.json
    markdown: /runner/project/reports/gpu-demo-fleet-20261130t2150-1a2b3c.md
    html: /runner/project/reports/gpu-demo-fleet-20261130t2150-1a2b3c.html
    junit: /runner/project/reports/gpu-demo-fleet-20261130t2150-1a2b3c.junit.xml
metrics:
  description:
    - The metrics textfile written (null without O(metrics_textfile)), the nodes pushed to the Pushgateway, and why a
      push failed (null when it did not).
  returned: without O(probe)
  type: dict
  sample: {textfile: /var/lib/node_exporter/textfile/gpu_preflight.prom, pushed: [prod102], push_error: null}
job:
  description:
    - The AWX job (O(job)), else the run (O(run_id)), and the C(set_stats) keys of its own that hold its verdicts
      (C(verdicts_key), C(gpu_demo_j<job>)) and its summary (C(summary_key), C(gpu_demo_fleet_j<job>)).
  returned: without O(probe)
  type: dict
  sample: {id: "4411", verdicts_key: gpu_demo_j4411, summary_key: gpu_demo_fleet_j4411}
verdicts:
  description:
    - Each passed or failed node's compact verdict (as M(gpuops.scheduling.node_verdict) writes it on the Node), by host,
      for statistics that survive AWX's merge of sliced jobs (one top-level key per job).
  returned: without O(probe)
  type: dict
  sample:
    gpu-a4: {v: 1, state: failed, node: gpu-a4, run_id: 20261130t2150-1a2b3c, phase: preflight, reason: PreflightRefused,
             check: node_ready, failed_checks: [node_ready], detail: node gpu-a4 is not Ready}
failed_hosts:
  description: The failed nodes, by host, each with the sentence a play that fails it can say.
  returned: without O(probe)
  type: dict
  sample:
    gpu-a4: "GPU scheduling demo on gpu-a4 failed: node_ready: Refusing node gpu-a4: node gpu-a4 is not Ready"
summary:
  description:
    - The summary as the JSON file holds it.
    - C(counts) (C(nodes), C(failed), C(not_run), C(checked), C(passed)), C(by_check) (failures grouped by phase and
      check, most frequent first), C(rows) (one per node, failures first), C(run_id), C(mode), C(generated_at),
      C(started_at), C(passed) (at least one node, none failed and every node ran), C(nothing_tested) (why
      no node was tested, when there is none; else V(null)) and, with O(mode=verdicts), C(freshness) (how many nodes
      are V(fresh), V(stale), V(untrusted), V(failed), V(never), V(running), V(unreadable), V(absent); else V(null)).
    - A row has C(host), C(node), C(status) (C(failed), C(not_run), C(checked), C(passed)), C(phase), C(check),
      C(failed_checks), C(reason), C(message) (the failure's whole message), C(task), C(units), C(gpus), C(window), C(vllm), C(memory_outside_ledger),
      C(started_at), C(total_seconds), C(reports) (paths relative to O(dir)), C(checks) (the failed ones, with their
      detail), C(steps) (the walk's phases, each ok, failed or not reached), C(report_configmap) (the node's report kept
      in the cluster, V(<namespace>/<name>), or V(null)) and C(freshness) (with O(mode=verdicts), whether its verdict
      still holds; else V(null)).
  returned: without O(probe)
  type: dict
  sample:
    run_id: 20261130t2150-1a2b3c
    mode: parallel
    passed: false
    counts: {nodes: 2, failed: 1, not_run: 0, checked: 0, passed: 1}
    by_check: [{phase: preflight, check: node_ready, count: 1, nodes: [gpu-a4]}]
    rows:
      - host: gpu-a4
        status: failed
        phase: preflight
        check: node_ready
        reason: node gpu-a4 is not Ready
"""
