# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Kubernetes quantities ("1", "500m", "16Gi", "1e3") as exact numbers: shared by the device-plugin ledger and the
DRA ledger."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from decimal import Decimal

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")
_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(quantity):
    """A Kubernetes quantity ("1", "2", "1k", "500m", "16Gi", "1e3") as an exact Decimal."""
    match = _QUANTITY.match(str(quantity).strip())
    if not match:
        raise ValueError("not a Kubernetes quantity: {0!r}".format(quantity))
    number, suffix = Decimal(match.group(1)), match.group(2)
    if not suffix:
        return number
    if suffix in _BINARY_SUFFIXES:
        return number * (Decimal(1024) ** _BINARY_SUFFIXES[suffix])
    if suffix in _DECIMAL_SUFFIXES:
        return number.scaleb(_DECIMAL_SUFFIXES[suffix])
    return number.scaleb(int(suffix[1:]))


def as_number(value):
    """A Decimal as int when whole (extended resources always are), else float."""
    if value == value.to_integral_value():
        return int(value)
    return float(value)
