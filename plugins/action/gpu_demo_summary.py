# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The summary of a gpu_demo run over many nodes, written on the controller (JSON, Markdown, HTML, JUnit XML).

Thin: the rows, counts and what the pages show come from plugin_utils/_gpu_demo_fleet.py, the pages from the role's
templates fleet.md.j2 and fleet.html.j2 (plugin_utils/_report_templates.py); the files are written as report_files
writes them (atomically, nothing in check mode).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import os
import time
from collections.abc import Mapping

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_files import (
    DIR_MODE,
    ReportFilesError,
    plan_files,
    unchanged,
    write_atomically,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.verdict import job_stat_key, verdict_of_row
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.words import row_failure_sentence
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo_fleet import (
    CHECKS_URL,
    fleet_summary,
    machine_readable,
    render_json,
)
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._junit import junit_xml
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._metrics import previous_successes, push, textfile
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import fleet_html, fleet_markdown
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._outputs import refusals
# The collection's filters, imported in ansible-playbook's main process when the strategy loads this plugin (_preload.py):
# playbooks/gpu_demo.yml runs this action (its outputs probed) before the role, so every worker of the role's first tasks
# inherits them instead of compiling the filter files again, as the workers forked before the role's first in-process
# task would.
from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _preload  # noqa: F401 pylint: disable=unused-import

ARGUMENT_SPEC = dict(
    dir=dict(type="path", required=True),
    run_id=dict(type="str", required=True),
    hosts=dict(type="list", elements="str", required=True),
    results=dict(type="dict", default={}),
    failures=dict(type="dict", default={}),
    result_fact=dict(type="str", default="_gpu_demo_result"),
    failure_fact=dict(type="str", default="_gpu_demo_play_failure"),
    mode=dict(type="str", default="parallel", choices=["parallel", "serial", "verdicts"]),
    not_run_reasons=dict(type="dict", default={}),
    report_configmaps=dict(type="dict", default={}),
    job=dict(type="str"),
    lang=dict(type="str", default="en", choices=["en", "zh"]),
    write=dict(type="bool", default=True),
    # None: the installed collection's page; empty: no links.
    checks_url=dict(type="str"),
    nothing_tested=dict(type="str"),
    metrics_textfile=dict(type="path"),
    pushgateway_url=dict(type="str"),
    pushgateway_job=dict(type="str", default="gpu_preflight"),
    probe=dict(type="bool", default=False),
)
FILE_MODE = 0o644


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    @staticmethod
    def _per_host(args, task_vars):
        """Each host's result and failure: as given, else its facts, read from hostvars without templating them.

        Templating 500 results of ~35 KB each through Jinja (``map('extract', hostvars)``) took 40 s; the facts the
        role sets are plain data already.
        """
        results, failures = dict(args["results"]), dict(args["failures"])
        hostvars = task_vars.get("hostvars")
        raw_get = getattr(hostvars, "raw_get", None)
        for host in args["hosts"]:
            # A host the inventory does not have (given only through results/failures) has no facts to read.
            if host in results and host in failures or raw_get is None or host not in hostvars:
                continue
            facts = raw_get(host)
            if not isinstance(facts, Mapping):
                continue
            results.setdefault(host, facts.get(args["result_fact"]))
            failures.setdefault(host, facts.get(args["failure_fact"]))
        return results, failures

    @staticmethod
    def _metrics(args, summary, result):
        """The textfile (its failure fails the task, as a summary file's does) and the push (reported, never fatal)."""
        path = args["metrics_textfile"]
        if path:
            path = os.path.abspath(path)
            try:
                with open(path, encoding="utf-8") as earlier:
                    previous = previous_successes(earlier.read())
            except (OSError, UnicodeDecodeError):
                previous = {}
            try:
                write_atomically(path, textfile(summary, previous).encode("utf-8"), FILE_MODE)
            except OSError as error:
                raise AnsibleActionFail("cannot write the metrics textfile %s: %s" % (path, to_native(error)))
            result["metrics"]["textfile"] = path
            result["changed"] = True
        if args["pushgateway_url"]:
            pushed = push(summary, args["pushgateway_url"], job=args["pushgateway_job"])
            result["metrics"].update(pushed=pushed["pushed"], push_error=pushed["error"])
            if pushed["error"]:
                result.setdefault("warnings", []).append(pushed["error"] + "; the run's verdicts stand")

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        directory = os.path.abspath(args["dir"])
        if args["probe"]:
            # Before the first pod: every output the summary will write must be writable now, or the run stops here,
            # before any Node's verdict could say passed of a run that then fails.
            refused = refusals(directory, args["write"], args["metrics_textfile"], args["pushgateway_url"],
                               check_mode=self._task.check_mode)
            if refused:
                raise AnsibleActionFail("Refused before any pod: " + "; ".join(refused))
            result.update(changed=False, probed={"dir": directory if args["write"] else None,
                                                 "metrics_textfile": args["metrics_textfile"],
                                                 "pushgateway_url": args["pushgateway_url"]})
            return result
        run_id = args["run_id"]
        if not run_id or "/" in run_id or run_id in (".", ".."):
            raise AnsibleActionFail("run_id %r must be a non-empty name without '/'" % (run_id,))
        results, failures = self._per_host(args, task_vars or {})
        generated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            summary = fleet_summary(args["hosts"], results=results, failures=failures, run_id=run_id,
                                    mode=args["mode"], report_dir=directory, generated_at=generated, lang=args["lang"],
                                    not_run_reasons=args["not_run_reasons"],
                                    checks_url=CHECKS_URL if args["checks_url"] is None else args["checks_url"] or None,
                                    nothing_tested=args["nothing_tested"], report_configmaps=args["report_configmaps"])
            now = time.time()
            verdicts = dict((row["host"], verdict_of_row(row, now, job=args["job"]))
                            for row in summary["rows"] if row["status"] in ("passed", "failed"))
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            raise AnsibleActionFail("cannot summarise the run: %s" % to_native(error))
        base = "gpu-demo-fleet-%s" % run_id
        names = {"json": base + ".json", "markdown": base + ".md", "html": base + ".html", "junit": base + ".junit.xml"}
        # The AWX job (one per slice of a sliced job), else this run: its set_stats keys are its own.
        job_id = args["job"] or run_id
        job = {"id": job_id, "verdicts_key": job_stat_key(job_id), "summary_key": job_stat_key(job_id, "gpu_demo_fleet_j")}
        # Each failed host is failed with its sentence in the run's language.
        failed_hosts = dict((row["host"], row_failure_sentence(row, summary["lang"]))
                            for row in summary["rows"] if row["status"] == "failed")
        result.update(changed=False, files={}, summary=machine_readable(summary), verdicts=verdicts, job=job,
                      failed_hosts=failed_hosts)
        result["metrics"] = {"textfile": None, "pushed": [], "push_error": None}
        if not self._task.check_mode:
            self._metrics(args, summary, result)
        if not args["write"]:
            return result
        try:
            planned = plan_files(directory, [
                {"name": names["json"], "content": render_json(summary)},
                {"name": names["markdown"], "content": fleet_markdown(summary)},
                {"name": names["html"], "content": fleet_html(summary)},
                # For CI systems: a test suite per node, a test case per check.
                {"name": names["junit"], "content": junit_xml(summary, results)},
            ])
        except ReportFilesError as error:
            raise AnsibleActionFail(to_native(error))
        to_write = [(path, data) for path, data in planned if not unchanged(path, data, FILE_MODE)]
        # In check mode: whether the files would be written, and nothing written.
        result["changed"] = bool(to_write)
        if self._task.check_mode:
            return result
        try:
            if to_write and not os.path.isdir(directory):
                os.makedirs(directory, DIR_MODE)
            for path, data in to_write:
                write_atomically(path, data, FILE_MODE)
        except OSError as error:
            raise AnsibleActionFail("cannot write the run's summary in %s: %s" % (directory, to_native(error)))
        result["files"] = dict((kind, os.path.join(directory, name)) for kind, name in names.items())
        return result
