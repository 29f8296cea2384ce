# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: gpu_demo_checks_page
short_description: Where the installed collection's checks page is on the controller
version_added: 1.1.0
author:
  - gpuops developers (@gpuops)
description:
  - Private to the P(gpuops.scheduling.gpu_demo#role) role, not a general-purpose lookup.
  - Returns the C(file://) URL of C(docs/checks.md) in the collection installed on the controller, the default of the
    role's O(gpuops.scheduling.gpu_demo#role:main:gpu_demo_checks_url). Each failed check of a report links to its
    entry there, which opens on the controller that ran the play with no setting and no network.
  - An empty string where the collection was built without its C(docs/) (the reports then carry no link).
options: {}
"""

EXAMPLES = r"""
- name: Where the checks page is
  ansible.builtin.debug:
    msg: "{{ lookup('gpuops.scheduling.gpu_demo_checks_page') }}"
"""

RETURN = r"""
_raw:
  description: One URL, C(file:///<collections path>/ansible_collections/gpuops/scheduling/docs/checks.md), or an empty string.
  type: list
  elements: str
"""

from ansible.plugins.lookup import LookupBase

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.checks_page import installed_checks_url


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return [installed_checks_url() or ""]
