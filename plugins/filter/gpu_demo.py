# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The gpu_demo role's own judgements and report helpers, as filters: PRIVATE to this collection.

They exist so that roles/gpu_demo can call unit-tested Python (plugin_utils/_gpu_demo/) from its tasks; their
inputs are the role's registered results and settings, and they change with the role. They are not
general-purpose filters: use them only through the role. Documentation: plugins/filter/gpu_demo_<name>.yml.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import posixpath

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import link_failed_checks
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.dra import choose_allocation, judge_claims_gone, run_objects
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.cleanup import judge_cleanup
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.report import (
    demo_timeline,
    hold_evidence,
)
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.preflight import (
    judge_admission, judge_node, verdict_access_check)
from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.report_store import ReportStoreError, configmap
from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.verdict import fleet_inputs, freshness, report_configmaps, run_id
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.result import assemble
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.walk import PHASES, judge_walk, reached_phase
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._demo_manifests import demo_manifests
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import NODE_REPORTS, ReportTemplateError, node_reports


def _require_settings(name, required, settings):
    """A judgement filter refuses to guess a setting the role always passes."""
    missing = sorted(set(required) - set(settings))
    if missing:
        raise AnsibleFilterError("{0}: missing setting(s) {1}".format(name, ", ".join(missing)))


def _refusing(name, *errors):
    """A filter whose input errors (``errors``) are AnsibleFilterErrors that name it, so that a failed task says which
    of the role's judgements refused what."""
    def decorate(function):
        @functools.wraps(function)
        def refusing(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except errors as error:
                raise AnsibleFilterError("{0}: {1}".format(name, error)) from error
        return refusing
    return decorate


# pod_wait results -> pod lanes and the node's free units over time (what the SVG draws).
gpu_demo_timeline = _refusing("gpu_demo_timeline", TypeError, ValueError, KeyError)(demo_timeline)
# A demo pod's log -> GPUs from nvidia-smi -L, NVIDIA_VISIBLE_DEVICES, memory per GPU.
gpu_demo_evidence = _refusing("gpu_demo_evidence", TypeError, ValueError)(hold_evidence)
# ResourceClaims / ResourceClaimTemplates -> the names of those of the run (its labels, or owned by its pods).
gpu_demo_run_claims = _refusing("gpu_demo_run_claims", TypeError, AttributeError)(run_objects)
# The registered lists of the run's ResourceClaims and ResourceClaimTemplates -> the cleanup's claims_gone check.
gpu_demo_claims_gone = _refusing("gpu_demo_claims_gone", TypeError, AttributeError)(judge_claims_gone)


def gpu_demo_preflight(ledger_result, vllm_result, verdict_access=None, **settings):
    """gpu_ledger_facts' and vllm_health's results -> the node's before-state, the hold's plan, the pre-flight checks;
    with node_verdict's access answer (``verdict_access``), whether the verdict can be written is one of them.

    Given ``device_class`` and ``extended_resource`` rather than ``allocation`` and ``resource``, the walk's way is
    chosen here (dra.choose_allocation: gpu_demo_allocation, and for auto the node's own) and the before-state says it."""
    if not isinstance(ledger_result, dict) or not isinstance(vllm_result, dict):
        raise AnsibleFilterError("gpu_demo_preflight: expects the registered results of gpu_ledger_facts and vllm_health (dicts)")
    if "allocation" not in settings and "device_class" in settings and "extended_resource" in settings:
        node = ((ledger_result.get("ledger") or {}).get("nodes") or {}).get(settings.get("node"))
        allocation = choose_allocation(settings.get("allocation_wanted", "auto"), node, settings["extended_resource"])
        settings = dict(settings, allocation=allocation,
                        resource=settings["device_class"] if allocation == "dra" else settings["extended_resource"])
    _require_settings("gpu_demo_preflight", PREFLIGHT_SETTINGS, settings)
    try:
        judged = judge_node(ledger_result, vllm_result, settings)
        permitted = verdict_access_check(settings["node"], verdict_access)
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise AnsibleFilterError("gpu_demo_preflight: {0}".format(error)) from error
    return dict(judged, checks=judged["checks"] + [permitted]) if permitted else judged


PREFLIGHT_SETTINGS = ("node", "resource", "namespace", "pod_names", "hold_mode", "hold_seconds", "timeout",
                      "allow_busy_node", "vllm_url", "vllm_require_healthy")


@_refusing("gpu_demo_admission", TypeError, ValueError, KeyError, AttributeError)
def gpu_demo_admission(admission_result, priority_class, create_priority_class, leftovers=None):
    """The pre-flight's dry run (pod_admission's result) -> whether the PriorityClass is missing, the checks; names taken
    by ``leftovers`` (the pods an earlier run left, removed before the walk) are no refusal."""
    if not isinstance(admission_result, dict) or not isinstance(leftovers or [], list):
        raise AnsibleFilterError("gpu_demo_admission: expects the registered result of the pre-flight's pod_admission "
                                 "(a dict) and the names of the pods an earlier run left (a list)")
    return judge_admission(admission_result, priority_class, create_priority_class, leftovers or [])


@_refusing("gpu_demo_walk", TypeError, ValueError, KeyError, AttributeError)
def gpu_demo_walk(waits, manifests, plan, hold_removal=None, started=None, **settings):
    """The walk's registered results -> each step's result, the hold's and the queue's evidence, the walk's checks.

    ``started``: the registered results of each phase's first step (the hold's creation, the queue's, the hold's
    deletion), in that order: the walk is judged through the last phase that started (walk.reached_phase); without
    it, every phase."""
    _require_settings("gpu_demo_walk", WALK_SETTINGS, settings)
    if not all(isinstance(value, dict) for value in (waits, manifests, plan, hold_removal or {})):
        raise AnsibleFilterError("gpu_demo_walk: expects the walk's registered pod_wait results by step name, the rendered "
                                 "manifests, the pre-flight's plan and the hold's registered kubernetes.core.k8s deletion (dicts)")
    if started is not None and not isinstance(started, list):
        raise AnsibleFilterError("gpu_demo_walk: started must be the list of each phase's first registered step")
    through = PHASES[-1] if started is None else reached_phase(started)
    return judge_walk(waits, manifests, plan, settings, hold_removal, through)


WALK_SETTINGS = ("node", "resource", "namespace", "queue_name")


def gpu_demo_phase(steps):
    """[[phase, registered result of a step that may begin it], ...] in the run's order -> the phase the run reached
    (walk.reached_phase): a failure belongs to it, whatever its task is called; "run" when no phase began."""
    if not isinstance(steps, list) or not all(isinstance(step, (list, tuple)) and len(step) == 2 for step in steps):
        raise AnsibleFilterError("gpu_demo_phase: expects [phase, registered result] pairs")
    return reached_phase([result for _phase, result in steps], [phase for phase, _result in steps]) or "run"


@_refusing("gpu_demo_cleanup", TypeError, ValueError, KeyError, AttributeError)
def gpu_demo_cleanup(final_result, before, vllm_after, **settings):
    """The last delete's pod_wait result -> the node's after-state and the cleanup checks."""
    _require_settings("gpu_demo_cleanup", CLEANUP_SETTINGS, settings)
    if not all(isinstance(value, dict) for value in (final_result, before, vllm_after)):
        raise AnsibleFilterError("gpu_demo_cleanup: expects the last delete's registered pod_wait result, the pre-flight's "
                                 "before-state and the registered vllm_health result after the demo (dicts)")
    return judge_cleanup(final_result, before, vllm_after, settings)


CLEANUP_SETTINGS = ("node", "resource", "run_id", "vllm_url")


def gpu_demo_fleet_verdicts(nodes, verdicts=None, hosts=None, max_age=86400, max_running=900, pods=None, slices=None):
    """The Nodes as read (None when the cluster could not be read), the jobs' verdicts, the device plugins' pods and the
    ResourceSlices (each None when not read) -> the summary's inputs, each node's freshness (fresh, failed, stale,
    never...) and its latest report kept in the cluster."""
    if nodes is not None and not isinstance(nodes, list):
        raise AnsibleFilterError("gpu_demo_fleet_verdicts: expects the Nodes as read (a list), or None when they could not be")
    if (not isinstance(verdicts or {}, dict) or not isinstance(hosts or [], list) or not isinstance(pods or [], list)
            or not isinstance(slices or [], list)):
        raise AnsibleFilterError("gpu_demo_fleet_verdicts: verdicts must be a dict by node, hosts a list of node names, "
                                 "pods a list of pods, slices a list of ResourceSlices")
    try:
        names, results, reasons = fleet_inputs(nodes, verdicts=verdicts, hosts=hosts, max_age=float(max_age),
                                               max_running=float(max_running), pods=pods, slices=slices)
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise AnsibleFilterError("gpu_demo_fleet_verdicts: {0}".format(error)) from error
    return {"hosts": names, "results": results, "not_run_reasons": reasons,
            "freshness": freshness(names, results, reasons), "report_configmaps": report_configmaps(nodes)}


def gpu_demo_check_links(checks, base):
    """The run's checks -> the same, each failed one with the URL of its entry on the checks page."""
    if not isinstance(checks, list) or base is not None and not isinstance(base, str):
        raise AnsibleFilterError("gpu_demo_check_links: expects the run's checks (a list) and the checks page's URL (a string)")
    return link_failed_checks(checks, base)


def _node_reports(name, result, lang, kinds):
    """The run's result -> the texts of its reports ``kinds`` (plugin_utils/_report_templates.py renders them from one
    plain copy of the result: ansible-core hands a filter its lazy containers, and reading one through them costs more
    than rendering a report)."""
    if not isinstance(result, dict):
        raise AnsibleFilterError("{0}: expects the run's result (a dict)".format(name))
    try:
        return node_reports(result, lang, kinds)
    except ReportTemplateError as error:
        raise AnsibleFilterError("{0}: cannot render {1}".format(name, error)) from error


def gpu_demo_report_files(result, lang="en"):
    """The run's result -> its report files for report_files: the JSON, the Markdown in ``lang`` and the SVG timeline,
    named as the result's ``report_files`` says."""
    paths = (result.get("report_files") if isinstance(result, dict) else None) or {}
    kinds = [kind for kind in NODE_REPORTS if paths.get(kind)]
    texts = _node_reports("gpu_demo_report_files", result, lang, kinds)
    return [{"name": posixpath.basename(paths[kind]), "content": texts[kind]} for kind in kinds]


def gpu_demo_manifests(plan, settings):
    """The hold's plan and the role's pod settings -> the demo pods and claim templates (plugin_utils/_demo_manifests.py)."""
    if not isinstance(plan, dict) or not isinstance(settings, dict):
        raise AnsibleFilterError("gpu_demo_manifests: expects the hold's plan and the role's pod settings (dicts)")
    try:
        return demo_manifests(plan, settings)
    except Exception as error:  # pylint: disable=broad-except
        # A template's error (a setting it reads that was not given, a value it cannot print) or YAML it did not make.
        raise AnsibleFilterError("gpu_demo_manifests: cannot render the demo pods: {0}".format(error)) from error


@_refusing("gpu_demo_result", TypeError, ValueError, KeyError, AttributeError)
def gpu_demo_result(judged, waits, settings):
    """The run's judged pieces (the run's state), its registered waits by step and its settings -> the run's result."""
    if not all(isinstance(value, dict) for value in (judged, waits, settings)):
        raise AnsibleFilterError("gpu_demo_result: expects the run's judged pieces, its registered waits by step and its "
                                 "settings (dicts)")
    return assemble(judged, waits, settings)


def gpu_demo_run_id(given=None):
    """gpu_demo_run_id -> the run's id: as given, else a new one (verdict.run_id)."""
    return run_id(given)


@_refusing("gpu_demo_report_configmap", ReportStoreError, TypeError, AttributeError)
def gpu_demo_report_configmap(result, name, lang="en", written_at=""):
    """The run's result -> the ConfigMap that keeps its JSON and Markdown reports in the cluster: the same texts as
    the report files (gpu_demo_report_files), rendered from the same result."""
    texts = _node_reports("gpu_demo_report_configmap", result, lang, ("json", "markdown"))
    return configmap(result, name, texts["json"], texts["markdown"], lang=lang, written_at=written_at)


class FilterModule(object):
    """The gpu_demo role's private filters."""

    def filters(self):
        return {
            "gpu_demo_timeline": gpu_demo_timeline,
            "gpu_demo_evidence": gpu_demo_evidence,
            "gpu_demo_preflight": gpu_demo_preflight,
            "gpu_demo_admission": gpu_demo_admission,
            "gpu_demo_walk": gpu_demo_walk,
            "gpu_demo_phase": gpu_demo_phase,
            "gpu_demo_cleanup": gpu_demo_cleanup,
            "gpu_demo_run_claims": gpu_demo_run_claims,
            "gpu_demo_claims_gone": gpu_demo_claims_gone,
            "gpu_demo_fleet_verdicts": gpu_demo_fleet_verdicts,
            "gpu_demo_check_links": gpu_demo_check_links,
            "gpu_demo_report_files": gpu_demo_report_files,
            "gpu_demo_manifests": gpu_demo_manifests,
            "gpu_demo_run_id": gpu_demo_run_id,
            "gpu_demo_report_configmap": gpu_demo_report_configmap,
            "gpu_demo_result": gpu_demo_result,
        }
