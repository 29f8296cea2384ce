# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Every report this collection writes is one of these Jinja2 templates (roles/gpu_demo/templates/), rendered here.

Why one way, and this one: a report is data prepared in Python (pure functions of plugin_utils/_gpu_demo/, unit-tested:
report.py for a node, fleet.py for a run) put on a page by a template. A change to what a report shows is then made in
a template, and a change to what is known in Python; neither holds the other's work. The pages are rendered by a
Jinja2 environment of our own rather than by ansible-core's templar because ansible-core's ignores autoescape: here
every value placed in an HTML or SVG template is escaped unless the template marks it safe, so escaping is never a
choice made (or forgotten) at each value. Jinja2 ships with ansible-core; the reports are written on the controller,
where it is.

Markdown templates are not escaped (a Markdown table cell's pipes are escaped by the ``md`` filter, the one rule
Markdown has for them); JSON reports are the data itself, written as JSON by the action that writes the files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import hashlib
import json
import os
import posixpath
from collections.abc import Mapping

from jinja2 import ChainableUndefined, Environment, FileSystemBytecodeCache, FileSystemLoader, StrictUndefined

from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _gpu_demo_fleet as fleet
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo import words

# plugins/plugin_utils/ -> the collection's root -> the role's templates, where the per-node and the fleet reports are.
TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "roles", "gpu_demo", "templates")
ESCAPED = (".html.j2", ".svg.j2")


def plain(value):
    """Mappings, lists and strings as plain dict, list and str (ansible-core hands filters its own lazy and tagged
    containers, which are for its templar, not this one)."""
    if isinstance(value, Mapping):
        return dict((plain(key), plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, str):
        return str(value)
    return value


def _combine(base, *others, **options):
    """Ansible's combine filter, for the reports' use: dicts merged left to right, recursively with recursive=true."""
    result = dict(base)
    for other in others:
        for key, value in other.items():
            if options.get("recursive") and isinstance(result.get(key), Mapping) and isinstance(value, Mapping):
                result[key] = _combine(result[key], value, recursive=True)
            else:
                result[key] = value
    return result


def _md(value):
    """A Markdown table cell: one line, pipes and backslashes escaped."""
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip()


FILTERS = {
    "to_json": json.dumps,
    "to_nice_json": lambda value, indent=4: json.dumps(value, indent=indent, sort_keys=True, separators=(",", ": "),
                                                       ensure_ascii=False),
    "combine": _combine,
    "basename": lambda path: posixpath.basename(path or ""),
    "zip": lambda *lists: list(zip(*lists)),
    "difference": lambda first, second: [item for item in first if item not in second],
    "md": _md,
}


# What each check proves, in one Chinese line: the zh report's check table shows it beside the check's message, which
# stays the code's English original (docs/checks.md quotes it, so that a reader can find the entry by its words).
CHECK_TITLES_ZH = dict((check_id, sentences["zh"]) for check_id, sentences in words.CHECK_SENTENCES.items())


class ReportUndefined(ChainableUndefined, StrictUndefined):
    """As ansible-core's undefined: ``a.b.c | default(x)`` is x when ``a`` has no ``b``; printing or testing what is
    not there is an error, not an empty string in a report."""


def _finalize(value):
    # As ansible-core prints it: nothing for None.
    return "" if value is None else value


def _bytecode_cache():
    """Jinja2's cache of compiled templates in its own folder of the temporary directory (created 0700, refused when
    another user owns it); none where that folder cannot be had: the templates are then compiled in each process.

    Jinja2 keys a compiled template by its name and source only; how it was compiled (autoescape, trim_blocks) is said
    here, so the file names carry a digest of this file too: another version of the collection compiles its own."""
    with open(__file__, "rb") as source:
        digest = hashlib.sha256(source.read()).hexdigest()[:16]
    try:
        return FileSystemBytecodeCache(pattern="gpuops-scheduling-" + digest + "-%s.cache")
    except (OSError, RuntimeError):
        return None


# One environment per process. ansible-playbook renders each node's reports in a task worker it forks for that task
# alone, so what a worker compiles dies with it: compiling the three report templates again for every node was about
# 0.5 CPU-s of a node's run. The compiled templates are kept on disk instead (Jinja2's bytecode cache, in a folder of
# the temporary directory that only this user may use, keyed by each template's source): every worker after the first
# loads them.
@functools.lru_cache(maxsize=None)
def _environment():
    environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=lambda name: (name or "").endswith(ESCAPED),
                              undefined=ReportUndefined, trim_blocks=True, keep_trailing_newline=True,
                              finalize=_finalize, bytecode_cache=_bytecode_cache())
    environment.filters.update(FILTERS)
    environment.globals["check_titles_zh"] = CHECK_TITLES_ZH
    # A failed check, and what ended the run, in the report's language (words.py).
    environment.globals["check_text"] = words.check_text
    environment.globals["failure_text"] = words.failure_message
    return environment


def render(name, **data):
    """The text of template ``name`` with ``data`` (made plain) as its variables."""
    return _environment().get_template(name).render(**plain(data))


# A node's reports by kind; the Markdown's template is the report's language's.
NODE_REPORTS = {"json": "report.json.j2", "markdown": "report.{lang}.md.j2", "svg": "timeline.svg.j2"}


class ReportTemplateError(Exception):
    """A report template that could not be rendered (missing, or a value it cannot print): names the template."""


def node_reports(result, lang, kinds):
    """A node's result -> the texts of its reports ``kinds`` (NODE_REPORTS) in ``lang``, the result made plain once for
    all of them."""
    data = {"_gpu_demo_result": plain(result)}
    texts = {}
    for kind in kinds:
        template = NODE_REPORTS[kind].format(lang=lang)
        try:
            texts[kind] = _environment().get_template(template).render(**data)
        except Exception as error:  # pylint: disable=broad-except
            raise ReportTemplateError("{0}: {1}".format(template, error)) from error
    return texts


def fleet_markdown(summary):
    """A run's summary (plugin_utils/_gpu_demo_fleet.py fleet_summary) as Markdown."""
    return render("fleet.md.j2", page=fleet.page(summary))


def fleet_html(summary):
    """A run's summary as one self-contained HTML page."""
    return render("fleet.html.j2", page=fleet.page(summary))
