# -*- coding: utf-8 -*-
# Copyright (c) gpuops developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that read NVIDIA tool output, e.g. a hold pod's log. Documented in the .yml files beside this one."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.scheduling.plugins.module_utils._node import nvidia_smi as _nvidia_smi


def _text(value, filter_name):
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        # `kubectl logs` / k8s_log results often come as a list of lines.
        return "\n".join(to_text(line) for line in value)
    if not isinstance(value, (str, bytes)):
        raise AnsibleFilterError("%s expects text or a list of lines, got %s" % (filter_name, type(value).__name__))
    return to_text(value)


def nvidia_smi_gpus(text):
    """``nvidia-smi -L`` output (or a log containing it) -> list of GPUs with their MIG devices."""
    return _nvidia_smi.parse_gpu_list(_text(text, "nvidia_smi_gpus"))


def nvidia_smi_query(text, fields=None):
    """``nvidia-smi --query-*=... --format=csv`` output -> list of dicts, memory in bytes."""
    try:
        return _nvidia_smi.parse_query_csv(_text(text, "nvidia_smi_query"), fields)
    except ValueError as exc:
        raise AnsibleFilterError("nvidia_smi_query: %s" % exc)


def nvidia_visible_devices(value, from_text=False):
    """An NVIDIA_VISIBLE_DEVICES value (None when unset), or with from_text=true a log / `env` output."""
    if from_text:
        return _nvidia_smi.visible_devices_from_env(_text(value, "nvidia_visible_devices"))
    if value is not None and not isinstance(value, (str, bytes)):
        raise AnsibleFilterError("nvidia_visible_devices expects the variable's value (a string) or null, got %s" % type(value).__name__)
    return _nvidia_smi.parse_visible_devices(None if value is None else to_text(value))


class FilterModule:
    """gpuops.scheduling filters over nvidia-smi output."""

    def filters(self):
        return {
            "nvidia_smi_gpus": nvidia_smi_gpus,
            "nvidia_smi_query": nvidia_smi_query,
            "nvidia_visible_devices": nvidia_visible_devices,
        }
