# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The gpu_demo role's messages in the run's language (gpu_demo_report_lang), as filters: PRIVATE to this collection.

The role fails with these sentences (the pre-flight's refusal, a walk that stops, the failed host); the words are
plugin_utils/gpu_demo/words.py's, unit-tested. Documentation: plugins/filter/gpu_demo_<name>.yml.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.words import LANGS, refusal, run_failure, stop


def _lang(lang):
    if lang not in LANGS:
        raise AnsibleFilterError("the report's language must be one of %s, not %r" % (", ".join(LANGS), lang))
    return lang


def gpu_demo_refusal(checks, node, lang="en"):
    """The pre-flight's refusal of ``node`` for the failed ones of ``checks``."""
    return refusal(list(checks or []), node, _lang(lang))


def gpu_demo_stop(walk, lang="en"):
    """Why the walk stops, from its judgement; "" when it goes on."""
    return stop(dict(walk or {}), _lang(lang))


def gpu_demo_run_failure(result, node=None, lang="en"):
    """The sentence the role fails its host with, from the run's result."""
    return run_failure(dict(result or {}), node, _lang(lang))


class FilterModule(object):

    def filters(self):
        return {
            "gpu_demo_refusal": gpu_demo_refusal,
            "gpu_demo_stop": gpu_demo_stop,
            "gpu_demo_run_failure": gpu_demo_run_failure,
        }
