# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vllm_health run as Ansible runs it (a separate Python process) against a tiny server on 127.0.0.1."""

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[4]
TOKEN = "vllm-unit-token"


class FakeVllm(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, health_status=200, token=None):
        self.health_status, self.token, self.authorizations = health_status, token, []
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    @property
    def base(self):
        return "http://127.0.0.1:{0}".format(self.server_address[1])


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.server.authorizations.append(self.headers.get("Authorization"))
        if self.server.token and self.headers.get("Authorization") != "Bearer " + self.server.token:
            code, body = 401, b'{"error": "Unauthorized"}'
        elif self.path == "/health":
            code, body = self.server.health_status, b""
        else:
            code, body = 200, json.dumps({"object": "list", "data": [{"id": "Qwen/Qwen2.5-7B-Instruct"}]}).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def vllm():
    servers = []

    def start(**options):
        servers.append(FakeVllm(**options))
        return servers[-1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def run_module(tmp_path):
    def run(args, check_mode=False):
        args_file = tmp_path / "args.json"
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": check_mode}}))
        env = {key: value for key, value in os.environ.items() if not key.lower().endswith("_proxy")}
        env["PYTHONPATH"] = str(CHECKOUT / ".collections")
        process = subprocess.run([sys.executable, "-m", "ansible_collections.gpuops.scheduling.plugins.modules.vllm_health", str(args_file)],
                                 capture_output=True, text=True, env=env, timeout=60, check=False)
        try:
            return json.loads(process.stdout)
        except ValueError as error:
            raise AssertionError("no JSON from the module: {0}\n{1}".format(process.stdout, process.stderr)) from error

    return run


def test_healthy_with_models(vllm, run_module):
    server = vllm()
    result = run_module({"url": server.base + "/health", "models_url": server.base + "/v1/models"})
    assert "failed" not in result and result["changed"] is False
    assert (result["healthy"], result["status"], result["attempts"], result["models"]) == (True, 200, 1, ["Qwen/Qwen2.5-7B-Instruct"])
    assert isinstance(result["latency_ms"], float)


def test_unhealthy_fails_naming_the_url(vllm, run_module):
    server = vllm(health_status=503)
    result = run_module({"url": server.base + "/health", "retries": 1, "delay": 0})
    assert result["failed"] is True
    assert result["msg"] == "GET {0}/health answered 503, expected 200 (after 2 attempts)".format(server.base)
    assert (result["healthy"], result["status"], result["attempts"]) == (False, 503, 2)


def test_unhealthy_is_reported_when_told_not_to_fail(vllm, run_module):
    server = vllm(health_status=503)
    result = run_module({"url": server.base + "/health", "fail_on_unhealthy": False})
    assert "failed" not in result
    assert (result["healthy"], result["status"]) == (False, 503)
    assert result["error"].startswith("GET {0}/health answered 503".format(server.base))


def test_unreachable(run_module):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = "http://127.0.0.1:{0}/health".format(probe.getsockname()[1])
    result = run_module({"url": url, "timeout": 2})
    assert result["failed"] is True
    assert result["msg"] == "GET {0} failed: connection refused".format(url)


def test_runs_in_check_mode(vllm, run_module):
    server = vllm()
    result = run_module({"url": server.base + "/health"}, check_mode=True)
    assert (result["changed"], result["healthy"]) == (False, True)


def test_bearer_token_is_sent_and_not_logged(vllm, run_module):
    server = vllm(token=TOKEN)
    result = run_module({"url": server.base + "/health", "bearer_token": TOKEN, "models_url": server.base + "/v1/models"})
    assert result["healthy"] is True
    assert server.authorizations == ["Bearer " + TOKEN] * 2
    assert TOKEN not in json.dumps(result)


def test_missing_token_is_a_clear_failure(vllm, run_module):
    server = vllm(token=TOKEN)
    result = run_module({"url": server.base + "/health"})
    assert result["msg"] == 'GET {0}/health answered 401, expected 200: {{"error": "Unauthorized"}}'.format(server.base)
