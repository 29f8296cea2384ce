# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Where the checks page is on the controller: the collection ships docs/checks.md, so the reports, the fleet pages and
the JUnit of a run link each failed check to the page of the collection that judged it, which opens with no setting
and no network. ``gpu_demo_checks_url`` (the summary's ``checks_url``) points them at a team's own copy instead."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

try:
    from urllib.request import pathname2url
except ImportError:  # pragma: no cover - Python 2 is not supported by the collection, this keeps sanity's import test quiet
    from urllib import pathname2url

# plugins/plugin_utils/gpu_demo/ -> the collection's root.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CHECKS_PAGE = os.path.join("docs", "checks.md")


def installed_checks_url(root=None):
    """The file:// URL of docs/checks.md in the installed collection (symbolic links resolved: a checkout linked into
    a collections path gives the checkout's page), or None where the page is not there (a copy built without docs)."""
    path = os.path.realpath(os.path.join(root or COLLECTION_ROOT, CHECKS_PAGE))
    if not os.path.isfile(path):
        return None
    return "file://" + pathname2url(path)
