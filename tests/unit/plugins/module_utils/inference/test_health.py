# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Health checks through ansible.module_utils.urls against a small HTTP(S) server on 127.0.0.1."""

import datetime
import http.server
import ipaddress
import json
import socket
import ssl
import threading
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ansible.module_utils.urls import Request
from ansible_collections.gpuops.scheduling.plugins.module_utils._inference import health

MODELS = {"object": "list", "data": [{"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model"}, {"id": "BAAI/bge-m3", "object": "model"}]}


class FakeInferenceServer(http.server.ThreadingHTTPServer):
    """Answers /health with the next status of ``statuses`` (the last one repeats) and /v1/models."""

    daemon_threads = True

    def __init__(self, statuses=(200,), health_body=b"", models="default", delay=0.0, token=None):
        self.statuses, self.health_body = list(statuses), health_body
        self.models = MODELS if models == "default" else models
        self.delay, self.token, self.seen = delay, token, []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def base(self):
        return "http://127.0.0.1:{0}".format(self.server_address[1])


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 - http.server's naming
        server = self.server
        server.seen.append((self.path, dict(self.headers)))
        time.sleep(server.delay)
        if server.token and self.headers.get("Authorization") != "Bearer " + server.token:
            return self._answer(401, b'{"error": "Unauthorized"}')
        if self.path == "/health":
            status = server.statuses.pop(0) if len(server.statuses) > 1 else server.statuses[0]
            return self._answer(status, server.health_body)
        if self.path == "/v1/models" and server.models is not None:
            body = server.models if isinstance(server.models, bytes) else json.dumps(server.models).encode()
            return self._answer(200, body)
        return self._answer(404, b"not found")

    def _answer(self, status, body):
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)


@pytest.fixture()
def serve():
    servers = []

    def start(server):
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def request(**options):
    return Request(use_proxy=False, **{"timeout": 5, **options})


def no_sleep(seconds):
    assert seconds >= 0


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_healthy_server(serve):
    server = serve(FakeInferenceServer())
    result = health.check_health(request(), server.base + "/health")
    assert result["healthy"] is True and result["error"] is None
    assert (result["status"], result["attempts"], result["body"], result["models"]) == (200, 1, "", [])
    assert result["url"] == server.base + "/health"
    assert 0 <= result["latency_ms"] < 5000


def test_models_are_listed(serve):
    server = serve(FakeInferenceServer())
    result = health.check_health(request(), server.base + "/health", models_url=server.base + "/v1/models")
    assert result["healthy"] is True
    assert result["models"] == ["Qwen/Qwen2.5-7B-Instruct", "BAAI/bge-m3"]


def test_unexpected_status_names_the_url(serve):
    server = serve(FakeInferenceServer(statuses=(503,), health_body=b"engine dead"))
    result = health.check_health(request(), server.base + "/health")
    assert result["healthy"] is False
    assert (result["status"], result["body"]) == (503, "engine dead")
    assert result["error"] == "GET {0}/health answered 503, expected 200: engine dead".format(server.base)


def test_retries_until_healthy(serve):
    server = serve(FakeInferenceServer(statuses=(503, 503, 200)))
    delays = []
    result = health.check_health(request(), server.base + "/health", retries=5, delay=1.5, sleep=delays.append)
    assert (result["healthy"], result["attempts"], result["status"]) == (True, 3, 200)
    assert delays == [1.5, 1.5]


def test_gives_up_after_the_retries(serve):
    server = serve(FakeInferenceServer(statuses=(503,)))
    result = health.check_health(request(), server.base + "/health", retries=2, sleep=no_sleep)
    assert (result["healthy"], result["attempts"]) == (False, 3)
    assert result["error"] == "GET {0}/health answered 503, expected 200 (after 3 attempts)".format(server.base)


def test_other_expected_statuses(serve):
    server = serve(FakeInferenceServer(statuses=(204,)))
    assert health.check_health(request(), server.base + "/health", expected_status=[200, 204])["healthy"] is True
    result = health.check_health(request(), server.base + "/health")
    assert result["error"].endswith("answered 204, expected 200")


def test_unreachable_server():
    url = "http://127.0.0.1:{0}/health".format(closed_port())
    result = health.check_health(request(), url)
    assert (result["healthy"], result["status"], result["latency_ms"]) == (False, None, None)
    assert result["error"] == "GET {0} failed: connection refused".format(url)


def test_timeout(serve):
    server = serve(FakeInferenceServer(delay=1.0))
    result = health.check_health(request(timeout=0.2), server.base + "/health")
    assert result["healthy"] is False
    assert result["error"] == "GET {0}/health failed: timed out".format(server.base)


def test_bearer_token_is_sent(serve):
    server = serve(FakeInferenceServer(token="s3cret"))
    assert health.check_health(request(), server.base + "/health")["status"] == 401
    result = health.check_health(request(headers={"Authorization": "Bearer s3cret"}), server.base + "/health",
                                 models_url=server.base + "/v1/models")
    assert result["healthy"] is True and len(result["models"]) == 2
    assert server.seen[-1][1]["Authorization"] == "Bearer s3cret"


def test_long_bodies_are_cut(serve):
    server = serve(FakeInferenceServer(statuses=(500,), health_body=b"x" * 5000))
    body = health.check_health(request(), server.base + "/health")["body"]
    assert body == "x" * health.BODY_LIMIT + "..."


@pytest.mark.parametrize("models, error", [
    (b"<html>oops</html>", "not an OpenAI model list: <html>oops</html>"),
    ({"models": []}, 'not an OpenAI model list: {"models": []}'),
    (None, "answered 404, expected 200"),
])
def test_a_broken_model_list_is_unhealthy(serve, models, error):
    server = serve(FakeInferenceServer(models=models))
    result = health.check_health(request(), server.base + "/health", models_url=server.base + "/v1/models")
    assert result["healthy"] is False and result["status"] == 200
    assert result["error"].startswith("GET {0}/v1/models".format(server.base))
    assert result["error"].endswith(error)


def test_models_are_not_read_when_health_fails(serve):
    server = serve(FakeInferenceServer(statuses=(503,)))
    health.check_health(request(), server.base + "/health", models_url=server.base + "/v1/models")
    assert [path for path, _headers in server.seen] == ["/health"]


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A CA and a certificate for 127.0.0.1 signed by it, with the key usages and key identifiers that Python 3.13's
    strict verification (VERIFY_X509_STRICT) requires."""
    folder = tmp_path_factory.mktemp("tls")
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuops test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return folder


@pytest.fixture()
def tls_server(serve, tls_files):
    server = FakeInferenceServer()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls_files / "server.pem"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    serve(server)
    return "https://127.0.0.1:{0}/health".format(server.server_address[1])


def test_tls_is_verified_by_default(tls_server):
    result = health.check_health(request(), tls_server)
    assert result["healthy"] is False
    assert "CERTIFICATE_VERIFY_FAILED" in result["error"] and tls_server in result["error"]


def test_tls_with_the_ca(tls_server, tls_files):
    assert health.check_health(request(ca_path=str(tls_files / "ca.pem")), tls_server)["healthy"] is True


def test_tls_without_verification(tls_server):
    assert health.check_health(request(validate_certs=False), tls_server)["healthy"] is True
