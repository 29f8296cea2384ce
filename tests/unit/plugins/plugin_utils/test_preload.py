# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugin_utils/_preload.py: once ansible-playbook's main process has loaded one of the collection's in-process action
plugins (as the strategy does, to read its class), finding any of the collection's filters imports nothing more, so
the task workers forked after it inherit the filters instead of compiling them again."""

import subprocess
import sys
import textwrap
from pathlib import Path

from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _preload

CHECKOUT = Path(__file__).resolve().parents[4]

# The main process as the strategy leaves it: ansible's plugin loaders over the checkout's collections, one action
# plugin's class loaded. Then a filter of the collection is looked up, as a task worker does to render it.
LOOKUP = textwrap.dedent("""
    import sys
    from ansible.plugins.loader import action_loader, filter_loader, init_plugin_loader
    init_plugin_loader([sys.argv[1]])
    {load_action}
    before = set(sys.modules)
    assert filter_loader.get(sys.argv[2]) is not None, sys.argv[2]
    print(sorted(name for name in set(sys.modules) - before if name.startswith("ansible_collections.gpuops")))
""")


def imported_by_filter_lookup(filter_name, action="gpuops.scheduling.pod_wait"):
    code = LOOKUP.format(load_action="action_loader.get({0!r}, class_only=True)".format(action) if action else "")
    run = subprocess.run([sys.executable, "-c", code, str(CHECKOUT / ".collections"), filter_name],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_the_list_is_every_filter_file():
    files = sorted(path.stem for path in (CHECKOUT / "plugins" / "filter").glob("*.py"))
    assert sorted(_preload.FILTER_FILES) == files


def test_a_filter_lookup_imports_nothing_after_an_action_plugin():
    for name in ("gpuops.scheduling.gpu_demo_walk", "gpuops.scheduling.gpu_demo_refusal", "gpuops.scheduling.gpu_reconcile"):
        assert imported_by_filter_lookup(name) == "[]", name


def test_the_summarys_action_plugin_preloads_them_too():
    # playbooks/gpu_demo.yml probes the run's outputs with it before the role: the role's first workers inherit the filters.
    assert imported_by_filter_lookup("gpuops.scheduling.gpu_demo_run_id", action="gpuops.scheduling.gpu_demo_summary") == "[]"


def test_control_without_the_action_plugin_the_lookup_imports_the_filters():
    """The check above can fail: before any action plugin, the same lookup imports the filter files."""
    assert "ansible_collections.gpuops.scheduling.plugins.filter.gpu_demo" in imported_by_filter_lookup(
        "gpuops.scheduling.gpu_demo_walk", action=None)
