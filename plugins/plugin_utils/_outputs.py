# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""What a run writes on the controller after its nodes' verdicts (the report folder, the metrics textfile) and where
it pushes them, checked before the first pod: a run that could only find out after the verdicts were written would end
"failed" while the Nodes say "passed".

``refusals`` returns one sentence per output that cannot be written, naming the variable and the path: a folder is
proven writable by writing a probe file in it and removing it (the permission bits do not say it: root ignores them, a
read-only mount does not show in them). The Pushgateway is only checked to be a well-formed URL: reaching it stays
best-effort, as the push itself is.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile

try:
    from urllib.parse import urlparse
except ImportError:  # pragma: no cover - Python 2 is not supported by the collection, this keeps sanity's import test quiet
    from urlparse import urlparse

REPORT_DIR_VARIABLE = "gpu_demo_report_dir"
TEXTFILE_VARIABLE = "gpu_demo_metrics_textfile"
PUSHGATEWAY_VARIABLE = "gpu_demo_pushgateway_url"
PROBE_PREFIX = ".gpuops-probe-"


def _cannot_write(folder):
    """Why a file cannot be written in ``folder`` (an OS error's words), or None: a probe file written and removed."""
    try:
        handle, path = tempfile.mkstemp(prefix=PROBE_PREFIX, dir=folder)
    except OSError as error:
        return error.strerror or str(error)
    os.close(handle)
    os.unlink(path)
    return None


def _existing_parent(path):
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def report_dir_refusal(directory, check_mode=False):
    """Why the report folder cannot hold the reports (it is made when missing, as the run would make it), or None."""
    directory = os.path.abspath(directory)
    if os.path.exists(directory) and not os.path.isdir(directory):
        return "{0}={1} is not a folder: the reports cannot be written there".format(REPORT_DIR_VARIABLE, directory)
    if check_mode:
        # Nothing is written in check mode: the permission bits are all there is to read.
        found = _existing_parent(directory)
        return None if os.access(found, os.W_OK) else "{0}={1}: {2} is not writable".format(REPORT_DIR_VARIABLE, directory, found)
    try:
        os.makedirs(directory, 0o755)
    except OSError as error:
        if not os.path.isdir(directory):
            return "{0}={1}: the folder cannot be made ({2})".format(REPORT_DIR_VARIABLE, directory, error.strerror or error)
    why = _cannot_write(directory)
    return "{0}={1}: a file cannot be written in it ({2})".format(REPORT_DIR_VARIABLE, directory, why) if why else None


def textfile_refusal(path, check_mode=False):
    """Why the metrics textfile cannot be written (its folder must exist, as node_exporter's collector folder does), or
    None."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        return "{0}={1} is a folder, not a file".format(TEXTFILE_VARIABLE, path)
    if not os.path.isdir(folder):
        return "{0}={1}: its folder {2} does not exist (the textfile collector's folder, made where node_exporter " \
               "reads it)".format(TEXTFILE_VARIABLE, path, folder)
    if check_mode:
        return None if os.access(folder, os.W_OK) else "{0}={1}: its folder {2} is not writable".format(
            TEXTFILE_VARIABLE, path, folder)
    why = _cannot_write(folder)
    return "{0}={1}: a file cannot be written in its folder {2} ({3})".format(TEXTFILE_VARIABLE, path, folder, why) \
        if why else None


def pushgateway_refusal(url):
    """Why ``url`` names no Pushgateway (an http or https URL with a host), or None."""
    parsed = urlparse(str(url))
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "{0}={1} is not a Pushgateway URL: give http(s)://host:port".format(PUSHGATEWAY_VARIABLE, url)
    try:
        parsed.port
    except ValueError:
        return "{0}={1} is not a Pushgateway URL: its port is not a number from 0 to 65535".format(PUSHGATEWAY_VARIABLE, url)
    return None


def refusals(report_dir=None, write=True, metrics_textfile=None, pushgateway_url=None, check_mode=False):
    """Every output of the run that cannot be written, one sentence each (empty when all can)."""
    found = []
    if write and report_dir:
        found.append(report_dir_refusal(report_dir, check_mode))
    if metrics_textfile:
        found.append(textfile_refusal(metrics_textfile, check_mode))
    if pushgateway_url:
        found.append(pushgateway_refusal(pushgateway_url))
    return [sentence for sentence in found if sentence]
