# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The collection's filter plugins, imported once in ansible-playbook's main process for its task workers to inherit.

Each task runs in a new fork of the main process, and ansible-core compiles a collection's Python from its source on
every import (it writes no .pyc for it). The main process loads only the action plugins (the strategy imports each
task's action plugin to read its class); so every worker that rendered one of the role's filters imported, compiled
and set up all of the collection's filter files and the judges behind them again: about 0.2 CPU-s a node
(docs/development.md, "A fleet's cost"). The in-process action plugins' base (_in_process.py) imports this module,
so the main process imports the filters with the first of those plugins, and ansible-core's filter loader then finds
them already imported, in every worker after it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib

# Every Python file of plugins/filter (a unit test keeps the list whole): ansible-core imports them all to find one
# of the collection's filters by name.
FILTER_FILES = ("gpu_demo", "gpu_demo_words", "nvidia_smi", "reconcile", "scheduling")

for _name in FILTER_FILES:
    importlib.import_module("ansible_collections.gpuops.scheduling.plugins.filter." + _name)
