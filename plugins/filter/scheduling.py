# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters over what the scheduler and the kubelet say: FailedScheduling messages and pod events.

Documentation of each filter: plugins/filter/<filter name>.yml.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.scheduling_events import (
    event_timeline,
    parse_failed_scheduling,
)


def failed_scheduling(message):
    """A FailedScheduling event message -> nodes_total, reasons, insufficient, preemption, ..."""
    try:
        return parse_failed_scheduling(message)
    except TypeError as error:
        raise AnsibleFilterError("failed_scheduling: {0}".format(error)) from error


def scheduling_event_timeline(events, pods=None, since=None):
    """core/v1 Events -> time-ordered rows like the Events table of ``kubectl describe pod``."""
    try:
        return event_timeline(events, pods=pods, since=since)
    except (TypeError, ValueError, AttributeError) as error:
        raise AnsibleFilterError("scheduling_event_timeline: {0}".format(error)) from error


class FilterModule(object):
    """gpuops.scheduling filters about scheduling events."""

    def filters(self):
        return {
            "failed_scheduling": failed_scheduling,
            "scheduling_event_timeline": scheduling_event_timeline,
        }
