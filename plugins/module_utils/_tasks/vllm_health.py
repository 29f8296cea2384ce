# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""vllm_health: ask an inference server whether it is healthy (see runner.py for how a task function runs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.urls import Request

from ansible_collections.gpuops.scheduling.plugins.module_utils._inference.health import check_health
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import TaskFailed

OPTIONS = dict(
    url=dict(type="str", required=True),
    models_url=dict(type="str"),
    expected_status=dict(type="list", elements="int", default=[200]),
    timeout=dict(type="float", default=10),
    retries=dict(type="int", default=0),
    delay=dict(type="float", default=2),
    headers=dict(type="dict", default={}),
    bearer_token=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", default=True),
    ca_path=dict(type="path"),
    use_proxy=dict(type="bool", default=True),
    fail_on_unhealthy=dict(type="bool", default=True),
)


def run(params, check_mode, warn):
    """One health check (with its retries). Read-only: check mode changes nothing."""
    headers = dict(params["headers"])
    if params["bearer_token"]:
        headers["Authorization"] = "Bearer {0}".format(params["bearer_token"])
    connection = {name: params[name] for name in ("timeout", "validate_certs", "ca_path", "use_proxy")}
    request = Request(headers=headers, http_agent="gpuops.scheduling.vllm_health", **connection)
    probe = {name: params[name] for name in ("expected_status", "models_url", "retries", "delay")}
    result = check_health(request, params["url"], **probe)
    if not result["healthy"] and params["fail_on_unhealthy"]:
        raise TaskFailed(result["error"], **result)
    return dict(result, changed=False)
