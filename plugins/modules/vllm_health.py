#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vllm_health
short_description: Check the health endpoint of an inference server such as vLLM
version_added: 1.0.0
description:
  - Sends C(GET) to a health URL (vLLM serves C(/health)) and checks the answer's status, with retries.
  - Optionally reads an OpenAI-compatible model list (vLLM serves C(/v1/models)) and returns the model ids.
  - Fails with a message naming the URL when the server cannot be reached, times out or answers another
    status, unless O(fail_on_unhealthy=false).
  - Meant to be run before, during and after disturbing a GPU node, to show the server kept serving.
author:
  - gpuops developers (@gpuops)
options:
  url:
    description:
      - The health URL, for example V(http://127.0.0.1:8000/health).
    type: str
    required: true
  models_url:
    description:
      - An OpenAI-compatible model list URL, for example V(http://127.0.0.1:8000/v1/models).
      - When set, an attempt is healthy only when this URL also answers 200 with a model list;
        it is read after the health URL answered as expected.
    type: str
  expected_status:
    description:
      - HTTP status codes that mean healthy.
    type: list
    elements: int
    default: [200]
  timeout:
    description:
      - Seconds to wait for each request to connect and answer.
    type: float
    default: 10
  retries:
    description:
      - How many more times to try when an attempt is unhealthy (0 tries once).
    type: int
    default: 0
  delay:
    description:
      - Seconds to wait between attempts.
    type: float
    default: 2
  headers:
    description:
      - Extra HTTP headers to send with every request.
    type: dict
    default: {}
  bearer_token:
    description:
      - "Token sent as C(Authorization: Bearer <token>) (vLLM C(--api-key)). Overrides an
        C(Authorization) entry of O(headers)."
    type: str
  validate_certs:
    description:
      - Whether to verify the server's TLS certificate for C(https) URLs.
    type: bool
    default: true
  ca_path:
    description:
      - PEM file of the CA certificates to verify the server's certificate with.
    type: path
  use_proxy:
    description:
      - Whether to use the proxy set in the environment (C(http_proxy), C(https_proxy), C(no_proxy)).
    type: bool
    default: true
  fail_on_unhealthy:
    description:
      - Whether to fail when the last attempt is unhealthy.
      - When V(false), the module returns RV(healthy=false) and the reason in RV(error) instead.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuops.scheduling.in_process
attributes:
  check_mode:
    support: full
    details:
      - The module only reads, so it runs and returns the same result in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Runs on the host it is assigned to; delegate it to a host that can reach the URL.
seealso:
  - module: ansible.builtin.uri
"""

EXAMPLES = r"""
- name: Check that vLLM answers before touching the node
  gpuops.scheduling.vllm_health:
    url: http://127.0.0.1:8000/health
    models_url: http://127.0.0.1:8000/v1/models
    retries: 3
    delay: 2
  register: vllm_before

- name: Record the health during the demo without failing the play
  gpuops.scheduling.vllm_health:
    url: https://vllm.example.internal/health
    bearer_token: "{{ vllm_api_key }}"
    ca_path: /etc/pki/ca-trust/source/anchors/internal-ca.pem
    timeout: 5
    fail_on_unhealthy: false
  register: vllm_during

- name: Show how the server did
  ansible.builtin.debug:
    msg: "{{ vllm_during.url }}: {{ vllm_during.status }} in {{ vllm_during.latency_ms }} ms, healthy={{ vllm_during.healthy }}"
"""

RETURN = r"""
url:
  description: The health URL checked.
  returned: always
  type: str
  sample: http://127.0.0.1:8000/health
healthy:
  description: Whether the last attempt got an expected status (and, with O(models_url), a model list).
  returned: always
  type: bool
  sample: true
status:
  description: HTTP status of the last health request; null when no answer came (refused, timed out).
  returned: always
  type: int
  sample: 200
latency_ms:
  description: Milliseconds the last health request took to answer; null when no answer came.
  returned: always
  type: float
  sample: 3.2
body:
  description: Start of the last health answer's body (at most 200 characters, then C(...)); empty when none.
  returned: always
  type: str
  sample: ""
attempts:
  description: Number of attempts made.
  returned: always
  type: int
  sample: 1
models:
  description: Model ids listed by O(models_url); empty when O(models_url) is not set or could not be read.
  returned: always
  type: list
  elements: str
  sample: ["Qwen/Qwen2.5-7B-Instruct"]
error:
  description: Why the last attempt was unhealthy, naming the URL; null when healthy.
  returned: always
  type: str
  sample: "GET http://127.0.0.1:8000/health answered 503, expected 200 (after 4 attempts)"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.runner import run_module
from ansible_collections.gpuops.scheduling.plugins.module_utils._tasks.vllm_health import OPTIONS, run


def main():
    # The logic is in module_utils/_tasks/vllm_health.py, shared with the action plugin that runs it in the
    # controller's process when the task runs on the controller.
    run_module(AnsibleModule(argument_spec=OPTIONS, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
