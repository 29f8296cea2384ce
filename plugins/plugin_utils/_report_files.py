# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Report files written on the controller, atomically: by the report_files action (a node's reports) and the
gpu_demo_summary action (a run's summary)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes, to_native

DIR_MODE = 0o755


class ReportFilesError(ValueError):
    """Input that names no writable report file."""


def parse_mode(mode):
    """'0644' -> 0o644; anything but an octal permission is refused, naming the value."""
    text = to_native(mode).strip()
    try:
        value = int(text, 8)
    except ValueError:
        value = -1
    if not 0 <= value <= 0o7777:
        raise ReportFilesError("mode %r is not an octal file mode such as '0644'" % (mode,))
    return value


def file_bytes(name, content):
    """The bytes written for one file. A mapping or list is written as JSON (keys sorted, 2-space indent): an
    older ansible-core may hand a rendered JSON template over as data rather than text."""
    if isinstance(content, str):
        return to_bytes(content, errors="surrogate_or_strict")
    if isinstance(content, (dict, list)):
        return to_bytes(json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    raise ReportFilesError("files[%s].content must be text, a mapping or a list, not %s" % (name, type(content).__name__))


def plan_files(directory, files):
    """Validate every name before anything is written: [(absolute path, bytes)]."""
    if not directory:
        raise ReportFilesError("dir must name a directory")
    seen = set()
    planned = []
    for entry in files:
        name = entry["name"]
        if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise ReportFilesError("files[].name %r must be a plain file name inside dir (no path separators)" % (name,))
        if name in seen:
            raise ReportFilesError("files[].name %r is given twice" % (name,))
        seen.add(name)
        planned.append((os.path.join(directory, name), file_bytes(name, entry["content"])))
    return planned


def unchanged(path, data, mode):
    try:
        with open(path, "rb") as existing:
            same = existing.read() == data
        return same and (os.stat(path).st_mode & 0o7777) == mode
    except OSError:
        return False


def write_atomically(path, data, mode):
    """A reader never sees half a report: write a temporary file beside it, then rename it into place."""
    directory = os.path.dirname(path)
    handle, temporary = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
