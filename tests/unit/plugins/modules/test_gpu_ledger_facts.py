# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_ledger_facts run as Ansible runs it (a separate Python process with an arguments file),
against a small fake Kubernetes API on 127.0.0.1 serving the recorded ledger fixtures.

Checks the connection path through kubernetes.core (options and K8S_AUTH_* variables), pagination
and the number of reads, and the messages for every failure the module explains.
"""

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[4]
FIXTURES = CHECKOUT / "tests" / "unit" / "fixtures" / "ledger"
NODES = json.loads((FIXTURES / "nodes.json").read_text())
PODS = json.loads((FIXTURES / "pods.json").read_text())
TOKEN = "unit-test-token"
OPERATOR_PODS = [
    {"metadata": {"name": "nvidia-device-plugin-daemonset-7xk2p", "namespace": "gpu-operator", "labels": {"app": "nvidia-device-plugin-daemonset"}},
     "spec": {"nodeName": "ledger-fixture-a"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
]


def status(code, reason, message):
    return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code}


def selected(pod, selector):
    """The API server's field selectors on spec.nodeName and status.phase (= and !=, comma is and)."""
    values = {"spec.nodeName": pod["spec"].get("nodeName") or "", "status.phase": pod["status"].get("phase") or ""}
    for term in filter(None, selector.split(",")):
        field, negated, value = term.partition("!=") if "!=" in term else term.partition("=")
        if (values[field] == value) == (negated == "!="):
            return False
    return True


class FakeKubeApi(http.server.ThreadingHTTPServer):
    """Enough of kube-apiserver for the module: discovery, nodes, pods, Status errors, pages of ``page_size``."""

    daemon_threads = True

    def __init__(self, page_size=3, forbid_pods=False):
        self.page_size, self.forbid_pods, self.requests = page_size, forbid_pods, []
        super().__init__(("127.0.0.1", 0), _KubeHandler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:{0}".format(self.server_address[1])

    def answer(self, path, query, authorization):
        if authorization != "Bearer " + TOKEN:
            return status(401, "Unauthorized", "Unauthorized")
        if path == "/version":
            return 200, {"major": "1", "minor": "36", "gitVersion": "v1.36.3"}
        if path == "/apis":
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
        if path.startswith("/api/v1/nodes/"):
            name = path.rsplit("/", 1)[1]
            node = next((item for item in NODES if item["metadata"]["name"] == name), None)
            return (200, node) if node else status(404, "NotFound", 'nodes "{0}" not found'.format(name))
        if path == "/api/v1/nodes":
            return self.page("NodeList", NODES, query)
        if path == "/api/v1/pods":
            if self.forbid_pods:
                return status(403, "Forbidden", 'pods is forbidden: User "system:serviceaccount:awx:runner" cannot list resource "pods" '
                                                'in API group "" at the cluster scope')
            selector = query.get("fieldSelector", [""])[0]
            return self.page("PodList", [pod for pod in PODS if selected(pod, selector)], query)
        if path == "/api/v1/namespaces/gpu-operator/pods":
            return self.page("PodList", OPERATOR_PODS, query)
        return status(404, "NotFound", "the server could not find the requested resource")

    def page(self, kind, items, query):
        """Pages of at most page_size items (a server may return fewer than the client's limit)."""
        start = int(query.get("continue", ["0"])[0])
        end = start + self.page_size
        metadata = {"resourceVersion": "42"}
        if end < len(items):
            metadata["continue"] = str(end)
        return 200, {"kind": kind, "apiVersion": "v1", "metadata": metadata, "items": items[start:end]}


class _KubeHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 - http.server's naming
        parsed = urllib.parse.urlsplit(self.path)
        self.server.requests.append(self.path)
        code, body = self.server.answer(parsed.path, urllib.parse.parse_qs(parsed.query), self.headers.get("Authorization"))
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def api():
    server = FakeKubeApi()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture()
def run_module(tmp_path):
    """Run gpu_ledger_facts with ``args`` in a clean environment; returns its JSON result."""

    def run(args, check_mode=False, env=None):
        args_file = tmp_path / "args.json"
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": check_mode}}))
        clean = {key: value for key, value in os.environ.items()
                 if not key.startswith("K8S_AUTH_") and key not in ("KUBECONFIG",) and not key.lower().endswith("_proxy")}
        # HOME: no ~/.kube/config to fall back to; TMPDIR: kubernetes.core's discovery cache.
        clean.update(HOME=str(tmp_path), TMPDIR=str(tmp_path), PYTHONPATH=str(CHECKOUT / ".collections"), **(env or {}))
        process = subprocess.run([sys.executable, "-m", "ansible_collections.gpuops.scheduling.plugins.modules.gpu_ledger_facts", str(args_file)],
                                 capture_output=True, text=True, env=clean, timeout=60, check=False)
        try:
            return json.loads(process.stdout)
        except ValueError as error:
            raise AssertionError("no JSON from the module: {0}\n{1}".format(process.stdout, process.stderr)) from error

    return run


def connection(api):
    return {"host": api.url, "api_key": TOKEN}


def test_one_node(api, run_module):
    # The device-plugin reads only (dra: false); test_dra_reads_on_an_api_server_without_resource_v1 counts the others.
    result = run_module({"node": "ledger-fixture-a", "dra": False, **connection(api)})
    assert result["changed"] is False and "failed" not in result
    gpu = result["ledger"]["nodes"]["ledger-fixture-a"]["resources"]["nvidia.com/gpu"]
    assert (gpu["allocatable"], gpu["requested"], gpu["free"]) == (7, 15, -8)
    assert "ansible_facts" not in result  # the ledger is returned once, as ledger
    assert [entry["name"] for entry in result["ledger"]["pending"]] == ["waiting"]
    # One GET for the node, the node's non-terminated pods (10, in pages of 3), the unscheduled pods (1).
    assert (result["read_strategy"], result["api_calls"], result["api_requests"]) == ("node", 3, 6)
    assert result["api_bytes"] > 0
    reads = sorted(path for path in api.requests if path.startswith("/api/v1/"))
    assert "/api/v1/nodes/ledger-fixture-a" in reads
    pod_reads = [path for path in reads if path.startswith("/api/v1/pods")]
    assert sum("fieldSelector=spec.nodeName%3Dledger-fixture-a%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed" in path
               for path in pod_reads) == 4
    assert sum("fieldSelector=spec.nodeName%3D%2Cstatus.phase%3DPending" in path for path in pod_reads) == 1


def test_one_node_read_as_the_fleet(api, run_module):
    by_node = run_module({"node": "ledger-fixture-a", **connection(api)})
    by_fleet = run_module({"node": "ledger-fixture-a", "read_strategy": "fleet", **connection(api)})
    assert by_fleet["read_strategy"] == "fleet"
    assert by_node["ledger"] == by_fleet["ledger"]


def test_fleet_with_operator_pods_takes_three_reads(api, run_module):
    result = run_module({"operator_namespace": "gpu-operator", "dra": False, **connection(api)})
    assert sorted(result["ledger"]["nodes"]) == ["ledger-fixture-a", "ledger-fixture-b"]
    assert result["ledger"]["operator"]["running"]["device_plugin"] is True
    assert result["ledger"]["nodes"]["ledger-fixture-a"]["operator_running"]["device_plugin"] is True
    assert result["ledger"]["nodes"]["ledger-fixture-b"]["operator_running"]["device_plugin"] is False
    assert result["api_calls"] == 3


def test_runs_in_check_mode(api, run_module):
    result = run_module({"node": "ledger-fixture-b", **connection(api)}, check_mode=True)
    assert result["changed"] is False
    assert result["ledger"]["nodes"]["ledger-fixture-b"]["resources"]["nvidia.com/gpu"]["free"] == 0


def test_a_few_nodes(api, run_module):
    result = run_module({"nodes": ["ledger-fixture-b", "ledger-fixture-a"], "dra": False, **connection(api)})
    assert "failed" not in result, result.get("msg")
    whole = run_module({"dra": False, **connection(api)})
    assert sorted(result["ledger"]["nodes"]) == ["ledger-fixture-a", "ledger-fixture-b"]
    assert result["ledger"]["nodes"] == whole["ledger"]["nodes"] and result["ledger"]["pending"] == whole["ledger"]["pending"]
    # Two GETs, two node pod lists, the unscheduled pods; the fleet read: the node list and one pod list.
    assert (result["read_strategy"], result["api_calls"]) == ("node", 5)
    assert (whole["read_strategy"], whole["api_calls"]) == ("fleet", 2)


def test_node_and_nodes_are_exclusive(api, run_module):
    result = run_module({"node": "ledger-fixture-a", "nodes": ["ledger-fixture-b"], **connection(api)})
    assert result["failed"] is True
    assert result["msg"] == "parameters are mutually exclusive: node|nodes"


def test_connection_from_k8s_auth_environment(api, run_module):
    result = run_module({"node": "ledger-fixture-b"}, env={"K8S_AUTH_HOST": api.url, "K8S_AUTH_API_KEY": TOKEN})
    assert result["ledger"]["nodes"]["ledger-fixture-b"]["resources"]["nvidia.com/gpu"]["requested"] == 2


def test_connection_from_a_kubeconfig(api, run_module, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": api.url}}],
        "users": [{"name": "fake", "user": {"token": TOKEN}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}))
    result = run_module({"node": "ledger-fixture-b", "kubeconfig": str(kubeconfig), "dra": False})
    assert result["api_calls"] == 3


def test_dra_reads_on_an_api_server_without_resource_v1(api, run_module):
    # This fake API server serves no resource.k8s.io/v1: the slices list answers 404, and the ledger is the
    # device plugin's alone. A node read adds the node's slices, the DeviceClasses and the claims (read beside them:
    # a claim reserved for no pod holds its devices too); the fleet read the slices and the classes (the claims are
    # not asked for once the slices are not served).
    node = run_module({"node": "ledger-fixture-a", **connection(api)})
    fleet = run_module(connection(api))
    assert node["ledger"]["dra_served"] is False and fleet["ledger"]["dra_served"] is False
    assert "dra" not in node["ledger"]["nodes"]["ledger-fixture-a"]
    assert (node["api_calls"], fleet["api_calls"]) == (6, 3)


def test_unknown_node(api, run_module):
    result = run_module({"node": "prod999", **connection(api)})
    assert result["failed"] is True
    assert result["msg"] == "node 'prod999' not found on {0}".format(api.url)


def test_node_without_the_resource(api, run_module):
    result = run_module({"node": "ledger-fixture-b", "resource_names": ["nvidia.com/mig-*"], **connection(api)})
    assert result["msg"] == ("node ledger-fixture-b advertises none of nvidia.com/mig-*; it advertises: "
                             "cpu, memory, nvidia.com/gpu, pods (it is labelled nvidia.com/gpu.present=true: is the device plugin running on it?)")


def test_invalid_token(api, run_module):
    result = run_module({"node": "ledger-fixture-a", "host": api.url, "api_key": "stale-token"})
    assert result["msg"] == ("the Kubernetes API at {0} rejected the credentials (401 Unauthorized) when trying to connect to the "
                             "Kubernetes API: the token or client certificate is missing, invalid or expired").format(api.url)


def test_forbidden_names_the_verb_and_resource(run_module):
    server = FakeKubeApi(forbid_pods=True)
    try:
        result = run_module({"node": "ledger-fixture-a", **connection(server)})
    finally:
        server.shutdown()
        server.server_close()
    assert result["msg"] == ('forbidden (403) to list pods in all namespaces on the Kubernetes API at {0}: pods is forbidden: '
                             'User "system:serviceaccount:awx:runner" cannot list resource "pods" in API group "" at the cluster scope').format(server.url)


def test_unreachable_api(run_module):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = "http://127.0.0.1:{0}".format(probe.getsockname()[1])
    result = run_module({"node": "prod102", "host": url, "api_key": TOKEN})
    assert result["msg"] == "cannot reach the Kubernetes API at {0} (connection refused) when trying to connect to the Kubernetes API".format(url)


def test_missing_kubeconfig(run_module, tmp_path):
    missing = str(tmp_path / "no-such-kubeconfig")
    result = run_module({"node": "prod102", "kubeconfig": missing})
    assert result["failed"] is True
    assert result["msg"].startswith("could not load the Kubernetes client configuration: ")
    assert result["msg"].endswith("(kubeconfig file not found: {0})".format(missing))


def test_api_key_is_not_logged(api, run_module):
    result = run_module({"node": "ledger-fixture-b", **connection(api)})
    assert TOKEN not in json.dumps(result)
