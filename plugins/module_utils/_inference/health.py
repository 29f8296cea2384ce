# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Health checks of an inference server (vLLM ``/health``, optionally ``/v1/models``).

HTTP goes through ``ansible.module_utils.urls.Request`` (proxies, TLS, CA bundle handled there);
this file only decides what an answer means and phrases failures.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client
import json
import socket
import time
import urllib.error

from ansible.module_utils.urls import ConnectionError as UrlsConnectionError

# Enough of a body to recognise an error page without flooding AWX job output.
BODY_LIMIT = 200


def _shorten(text, limit=BODY_LIMIT):
    return text if len(text) <= limit else text[:limit] + "..."


def _failure_reason(error):
    """A short, human reason for a failed request, without the exception class noise."""
    reason = getattr(error, "reason", error)
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    return str(reason) or type(reason).__name__


def http_get(request, url):
    """GET ``url`` with a configured ``Request``; never raises for network or HTTP failures.

    Returns ``{status, body, latency_ms, error}``: ``status`` is None and ``error`` says why when
    no HTTP answer came; an HTTP error status is an answer, not an error.
    """
    started = time.monotonic()
    try:
        response = request.get(url)
        status, body = response.getcode(), response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read() or b""
    except (urllib.error.URLError, UrlsConnectionError, http.client.HTTPException, OSError) as error:
        return {"status": None, "body": "", "latency_ms": None, "error": _failure_reason(error)}
    latency_ms = round((time.monotonic() - started) * 1000, 1)
    return {"status": status, "body": body.decode("utf-8", errors="replace"), "latency_ms": latency_ms, "error": None}


def model_ids(body):
    """Model ids of an OpenAI-style ``/v1/models`` answer (``{"data": [{"id": ...}]}``)."""
    try:
        return [str(model["id"]) for model in json.loads(body)["data"]]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError("not an OpenAI model list: {0}".format(_shorten(body) or type(error).__name__)) from error


def _answer_error(url, answer, expected_status):
    """Why an ``http_get`` answer is not one of ``expected_status``; None when it is."""
    if answer["error"]:
        return "GET {0} failed: {1}".format(url, answer["error"])
    if answer["status"] not in expected_status:
        expected = " or ".join(str(status) for status in expected_status)
        return "GET {0} answered {1}, expected {2}".format(url, answer["status"], expected)
    return None


def _check_once(request, url, expected_status, models_url):
    """One attempt: the health URL, then the models URL when asked and health is fine."""
    health = http_get(request, url)
    body = _shorten(health["body"])
    error = _answer_error(url, health, expected_status)
    models = []
    if error and body:  # an unexpected status; a request that failed has no body
        error += ": " + body
    elif not error and models_url:
        answer = http_get(request, models_url)
        error = _answer_error(models_url, answer, (200,))
        if not error:
            try:
                models = model_ids(answer["body"])
            except ValueError as exc:
                error = "GET {0}: {1}".format(models_url, exc)
    return dict(status=health["status"], latency_ms=health["latency_ms"], body=body, models=models, error=error)


def check_health(request, url, expected_status=(200,), models_url=None, retries=0, delay=1.0, sleep=time.sleep):
    """Probe ``url`` (and ``models_url``) up to ``retries + 1`` times, ``delay`` seconds apart.

    Returns the module's result: ``url``, ``status``, ``latency_ms``, ``body``, ``models``,
    ``attempts``, ``healthy`` and ``error`` (why the last attempt was unhealthy, else None).
    """
    attempts = 0
    while True:
        attempts += 1
        outcome = _check_once(request, url, expected_status, models_url)
        if outcome["error"] is None or attempts > retries:
            break
        sleep(delay)
    outcome.update({"url": url, "attempts": attempts, "healthy": outcome["error"] is None})
    if outcome["error"] and attempts > 1:
        outcome["error"] += " (after {0} attempts)".format(attempts)
    return outcome
