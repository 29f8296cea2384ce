# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""A label selector as the API server reads it (``key=value``, ``key==value``, ``key!=value``, ``key``, ``!key``,
``key in (a,b)``, ``key notin (a,b)``, joined by commas), matched against a pod's labels here, where the pods at hand
were listed by another selector (the node's)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_SET = re.compile(r"^([^\s!=(),]+)\s+(in|notin)\s+\(([^()]*)\)$")
_COMPARE = re.compile(r"^([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)$")
_EXISTS = re.compile(r"^(!?)\s*([^\s!=(),]+)$")


def _requirements(selector):
    """The selector's requirements: split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(selector[start:index])
            start = index + 1
    parts.append(selector[start:])
    return [part.strip() for part in parts if part.strip()]


def _test(requirement):
    """One requirement -> a function of a labels dict, as labels.Selector.Matches: != and notin match an absent key."""
    found = _SET.match(requirement)
    if found:
        key, operator, values = found.group(1), found.group(2), {value.strip() for value in found.group(3).split(",")}
        if operator == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    found = _COMPARE.match(requirement)
    if found:
        key, operator, value = found.groups()
        if operator == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    found = _EXISTS.match(requirement)
    if found:
        negated, key = found.groups()
        return lambda labels: (key in labels) != bool(negated)
    raise ValueError("{0!r} is not a label selector requirement (key=value, key!=value, key in (a,b), key or !key)"
                     .format(requirement))


def selector_matcher(selector):
    """``selector`` (a string, as sent to the API server) -> a function that says whether a labels dict matches it."""
    tests = [_test(requirement) for requirement in _requirements(selector or "")]
    return lambda labels: all(test(labels or {}) for test in tests)
