#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation only: the action plugin plugins/action/report_files.py does the work, on the controller.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: report_files
short_description: Write report files on the Ansible controller, without running a module
version_added: 1.0.0
description:
  - Writes several files into one directory of the Ansible controller, each atomically (a temporary file
    renamed into place), creating the directory (mode C(0755)) when it is missing.
  - Runs inside the controller's own process, whatever the host or C(delegate_to), because reports are
    controller artifacts, like the files M(ansible.builtin.fetch) writes. One task
    costs milliseconds where M(ansible.builtin.template) runs two modules per file.
  - Every name is checked before anything is written; a file whose content and mode are already as given is
    left alone.
  - Content given as a mapping or list is written as JSON (keys sorted, two-space indent).
author:
  - gpuops developers (@gpuops)
options:
  dir:
    description:
      - Directory of the files on the controller. A relative path is relative to the directory
        C(ansible-playbook) was started in.
    type: path
    required: true
  files:
    description:
      - The files to write.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - File name inside O(dir), without any path separator.
        type: str
        required: true
      content:
        description:
          - The file's text, or a mapping or list to write as JSON.
        type: raw
        required: true
  mode:
    description:
      - Permissions of the files, as an octal string.
    type: str
    default: "0644"
attributes:
  check_mode:
    support: full
    description: Reports what would change and writes nothing.
  diff_mode:
    support: none
    description: Reports are new files each run; no diff is shown.
  platform:
    support: full
    platforms: posix
    description: Always the controller.
notes:
  - The role M(gpuops.scheduling.gpu_demo) writes its JSON, Markdown and SVG reports with it.
seealso:
  - module: ansible.builtin.template
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Write the run's reports beside the playbook
  gpuops.scheduling.report_files:
    dir: "{{ playbook_dir }}/reports"
    files:
      - name: "gpu-demo-{{ inventory_hostname }}.md"
        content: "{{ lookup('ansible.builtin.template', 'report.en.md.j2') }}"
      - name: "gpu-demo-{{ inventory_hostname }}.json"
        content: "{{ result }}"
"""

RETURN = r"""
dir:
  description: Absolute path of the directory.
  returned: always
  type: str
  sample: /runner/project/reports
files:
  description: Absolute paths of the files, in the order given (written, or already as given).
  returned: always
  type: list
  elements: str
  sample: [/runner/project/reports/gpu-demo-prod102-20261129t2055.json]
"""
