# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""gpu_ledger_facts: read the scheduler's ledger (see runner.py for how a task function runs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.client import CoreV1Reader, K8sApiError, k8s_client
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.ledger import (
    DEFAULT_RESOURCE_NAMES, READ_STRATEGIES, LedgerError, choose_read_strategy, read_ledger)
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed

# The module's own options; kubernetes.core's connection options come on top (_kubernetes/client.py: module_argument_spec).
OPTIONS = dict(
    node=dict(type="str"),
    nodes=dict(type="list", elements="str"),
    resource_names=dict(type="list", elements="str", default=list(DEFAULT_RESOURCE_NAMES)),
    operator_namespace=dict(type="str"),
    read_strategy=dict(type="str", choices=list(READ_STRATEGIES), default="auto"),
    dra=dict(type="bool", default=True),
)


def run(params, check_mode, warn):
    """The ledger, once, and the reads it took. Read-only: check mode changes nothing."""
    if params["node"] and params["nodes"]:
        raise TaskFailed("parameters are mutually exclusive: node|nodes")
    names = [params["node"]] if params["node"] else list(params["nodes"] or [])
    try:
        reader = CoreV1Reader(k8s_client(params))
        strategy = choose_read_strategy(names, params["read_strategy"])
        ledger = read_ledger(reader, node=names or None, patterns=params["resource_names"],
                             operator_namespace=params["operator_namespace"], strategy=strategy,
                             dra=params["dra"])
    except (K8sApiError, LedgerError) as error:
        raise TaskFailed(str(error))
    return dict(changed=False, ledger=ledger, read_strategy=strategy, api_calls=reader.calls, api_requests=reader.requests,
                api_bytes=reader.bytes_received)
