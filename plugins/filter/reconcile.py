# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_reconcile filter (documented in gpu_reconcile.yml beside this file)."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.scheduling.plugins.module_utils._node import reconcile as _reconcile


def gpu_reconcile(node_facts, ledger_node=None, min_unattributed_bytes=_reconcile.DEFAULT_MIN_UNATTRIBUTED_BYTES):
    """gpu_process_facts of a node (+ its gpu_ledger_facts entry) -> per-GPU ledger vs real use."""
    if not isinstance(node_facts, Mapping):
        raise AnsibleFilterError("gpu_reconcile expects the gpu_process_facts dict, got %s" % type(node_facts).__name__)
    if ledger_node is not None and not isinstance(ledger_node, Mapping):
        raise AnsibleFilterError("gpu_reconcile: ledger_node must be the node's gpu_ledger_facts entry (a dict), got %s" % type(ledger_node).__name__)
    try:
        return _reconcile.reconcile(node_facts, ledger_node, int(min_unattributed_bytes))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("gpu_reconcile: unexpected input: %s" % exc)


class FilterModule:
    """gpuops.scheduling reconciliation filter."""

    def filters(self):
        return {"gpu_reconcile": gpu_reconcile}
