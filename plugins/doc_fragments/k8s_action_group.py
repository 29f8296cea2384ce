# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The modules of the action group `k8s` (meta/runtime.yml): they share kubernetes.core's connection options.
    DOCUMENTATION = r"""
options: {}
attributes:
  action_group:
    description: Use C(group/gpuops.scheduling.k8s) in C(module_defaults) to set the connection options once.
    support: full
    membership:
      - gpuops.scheduling.k8s
"""
