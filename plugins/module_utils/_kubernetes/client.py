# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The one place where this collection builds a Kubernetes client.

Connection options, ``K8S_AUTH_*`` environment variables, kubeconfig and in-cluster
loading all come from kubernetes.core (``AUTH_ARG_SPEC`` and ``get_api_client``), so our
modules connect exactly like ``kubernetes.core.k8s``. On top of that this file phrases client
failures as one sentence naming the API server and what was being done (``explain_api_errors``),
and reads objects as plain API dicts, decoding only the fields a caller reads (``CoreV1Reader``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import copy
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule

from typing import Any, List, Optional, TypedDict

try:
    # Decoding pod lists is most of the ledger's cost on large fleets; orjson does it ~6x faster.
    from orjson import loads as json_loads
except ImportError:
    json_loads = json.loads

try:
    # msgspec decodes only the fields a caller asks for and skips the rest without building them:
    # ~10x faster than orjson on pod lists, and a fraction of the memory.
    import msgspec
except ImportError:
    msgspec = None

try:
    import urllib3
    from kubernetes.client import Configuration
    from kubernetes.client.rest import ApiException
    from kubernetes.config.config_exception import ConfigException
except ImportError:
    # AnsibleK8SModule reports the missing library with install instructions.
    pass

# Lists are read whole, in one request, unless a caller asks for pages: Kubernetes 1.31+ serves such a (consistent)
# list from the API server's watch cache. The fleet-wide pod list is read in pages (ledger.FLEET_PAGE_SIZE) so that
# 150,000 pods are never held at once: on 5,000 nodes it took ~17 s in pages of 5,000 against ~12 s whole, with a peak
# of ~130 MiB against ~960 MiB (bench/ledger_big.py).
DEFAULT_PAGE_SIZE = None


class K8sApiError(Exception):
    """A Kubernetes client or API failure, already phrased for the person running the play.

    ``status``: the API's HTTP status when it answered (403 when the credentials may not do it), else None.
    """

    def __init__(self, message, status=None):
        super(K8sApiError, self).__init__(message)
        self.status = status


def module_argument_spec(extra=None):
    """kubernetes.core's connection options (AUTH_ARG_SPEC) plus a module's own options."""
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(extra or {})
    return spec


def k8s_module(argument_spec=None, **kwargs):
    """An AnsibleK8SModule that accepts every connection option kubernetes.core.k8s accepts.

    ``argument_spec`` holds the module's own options; ``kwargs`` go to AnsibleModule
    (``supports_check_mode``, ``mutually_exclusive``, ...).
    """
    module = AnsibleK8SModule(argument_spec=module_argument_spec(argument_spec), **kwargs)
    unmask_kubeconfig_path(module._module.no_log_values, module.params)
    return module


class _ValidatedArguments:
    """Stands in for the AnsibleModule that AnsibleK8SModule builds (its ``module_class`` setting): arguments already
    validated, and the set of values to mask, which AnsibleK8SModule may add to."""

    def __init__(self, params, no_log_values):
        self.params = params
        self.no_log_values = no_log_values


def mask_as_kubernetes_core(no_log_values, params):
    """Add to ``no_log_values`` what kubernetes.core masks in a module's arguments beyond its spec's ``no_log``.

    Up to kubernetes.core 6.2 the ``kubeconfig`` option is ``no_log`` (the argument validator masks it); from 6.3
    on it is not, and AnsibleK8SModule's constructor adds an inline kubeconfig's credentials to its module's
    ``no_log_values`` instead. A task run without an AnsibleModule (plugin_utils/in_process.py) gets the same
    by building an AnsibleK8SModule around its validated arguments: whatever kubernetes.core's constructor
    masks, on any version, is masked. (tests/unit/plugins/plugin_utils/test_in_process.py fails if a
    kubernetes.core release masks an inline kubeconfig neither way.)
    """
    arguments = _ValidatedArguments(params, set(no_log_values))
    AnsibleK8SModule(module_class=lambda **kwargs: arguments, check_k8s=False, check_pyyaml=False)
    no_log_values.update(arguments.no_log_values)


def unmask_kubeconfig_path(no_log_values, params):
    """kubernetes.core before 6.3 marks the kubeconfig option no_log for its inline (dict) form, which holds
    credentials; a path is no secret, and masking it would hide which file an error is about: taken out of
    ``no_log_values``."""
    kubeconfig = params.get("kubeconfig")
    if isinstance(kubeconfig, str):
        no_log_values.discard(kubeconfig)


def k8s_client(params):
    """kubernetes.core's client (``K8SClient``) for a task's connection options (``params``).

    Options a task leaves unset come from the ``K8S_AUTH_*`` variables, then the kubeconfig, as in
    kubernetes.core (which also builds its lookup plugins' clients from plain options this way).
    Building it loads the kubeconfig (or in-cluster config) and, the first time a host is
    seen, runs kubernetes.core's API discovery: both can fail, and are explained here.
    """
    options = dict((name, params.get(name)) for name in AUTH_ARG_SPEC if params.get(name) is not None)
    try:
        return get_api_client(**options)
    except Exception as error:
        kubeconfig = _kubeconfig_in_use(params)
        message = api_error_message(error, "connect to the Kubernetes API", _host_in_use(params), kubeconfig)
        # Anything else at this stage (kubernetes.core's CoreException around a ConfigException,
        # a YAML or OS error while reading the kubeconfig) means the configuration is unusable.
        raise K8sApiError(message or _config_error_message(error, kubeconfig)) from error


def api_host(client):
    """The API server URL a kubernetes.core client talks to."""
    return client.configuration.host


def core_v1_api(client):
    """The core/v1 calls our modules make, on the same connection (auth, TLS, proxy) as a kubernetes.core client.

    Plain reads, writes and watches need no API discovery; see ``CoreV1Rest`` for why not ``CoreV1Api``.
    """
    return CoreV1Rest(client)


# CoreV1Api's keyword arguments, as the API's query parameters.
_QUERY_NAMES = {
    "label_selector": "labelSelector", "field_selector": "fieldSelector", "resource_version": "resourceVersion",
    "resource_version_match": "resourceVersionMatch", "watch": "watch", "timeout_seconds": "timeoutSeconds",
    "allow_watch_bookmarks": "allowWatchBookmarks", "limit": "limit", "_continue": "continue", "dry_run": "dryRun",
    "container": "container", "tail_lines": "tailLines", "timestamps": "timestamps", "since_seconds": "sinceSeconds",
    "limit_bytes": "limitBytes", "previous": "previous", "field_manager": "fieldManager",
}


# The namespaced kinds our modules write, by (apiVersion, kind): pod_admission's dry runs, report_store's ConfigMaps.
NAMESPACED_PATHS = {
    ("v1", "Pod"): "/api/v1/namespaces/{namespace}/pods",
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates",
    ("v1", "ConfigMap"): "/api/v1/namespaces/{namespace}/configmaps",
}


class CoreV1Rest:
    """The few core/v1 and coordination/v1 calls of this collection, with CoreV1Api's names and arguments.

    Requests go through kubernetes.core's DynamicClient (``client.client.request``), so they carry the
    connection's auth and TLS settings. The generated ``CoreV1Api`` is avoided on purpose: with the kubernetes
    client 35+ importing it costs about a second in every module run, more than the calls themselves. Every
    method returns the raw HTTP response (as ``_preload_content=False`` does): callers decode the JSON they need.
    """

    def __init__(self, client):
        self._dynamic = client.client
        self.api_client = client.client.client

    def _call(self, method, path, body=None, accept=None, content_type=None, **kwargs):
        query = [(_QUERY_NAMES[key], value) for key, value in kwargs.items()
                 if key in _QUERY_NAMES and value is not None]
        headers = {"Accept": accept} if accept else {}
        # serialize=False: the raw response, not a ResourceInstance. Errors arrive as ApiException subclasses.
        return self._dynamic.request(method, path, body=body, query_params=query, header_params=headers, serialize=False,
                                     _preload_content=False, _request_timeout=kwargs.get("_request_timeout"),
                                     content_type=content_type)

    def read_node(self, name, **kwargs):
        return self._call("GET", "/api/v1/nodes/%s" % name, **kwargs)

    def list_node(self, **kwargs):
        return self._call("GET", "/api/v1/nodes", **kwargs)

    def patch_node(self, name, body, content_type, **kwargs):
        """A patch of the Node (``content_type``: application/merge-patch+json, application/json-patch+json, ...)."""
        return self._call("PATCH", "/api/v1/nodes/%s" % name, body=body, content_type=content_type, **kwargs)

    def patch_node_status(self, name, body, content_type, **kwargs):
        """A patch of the Node's status subresource (conditions: application/strategic-merge-patch+json)."""
        return self._call("PATCH", "/api/v1/nodes/%s/status" % name, body=body, content_type=content_type, **kwargs)

    def create_self_subject_access_review(self, body):
        """May this identity do it? (authorization.k8s.io/v1 SelfSubjectAccessReview; any identity may ask)."""
        return self._call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=body)

    def list_pod_for_all_namespaces(self, **kwargs):
        return self._call("GET", "/api/v1/pods", **kwargs)

    def list_namespaced_pod(self, namespace, **kwargs):
        return self._call("GET", "/api/v1/namespaces/%s/pods" % namespace, **kwargs)

    def read_namespaced_pod_log(self, name, namespace, **kwargs):
        return self._call("GET", "/api/v1/namespaces/%s/pods/%s/log" % (namespace, name), accept="*/*", **kwargs)

    def list_namespaced_event(self, namespace, **kwargs):
        return self._call("GET", "/api/v1/namespaces/%s/events" % namespace, **kwargs)

    def create_event(self, namespace, body, **kwargs):
        """An events.k8s.io/v1 Event (what the verdict leaves on its Node)."""
        return self._call("POST", "/apis/events.k8s.io/v1/namespaces/%s/events" % namespace, body=body, **kwargs)

    # resource.k8s.io/v1 (Dynamic Resource Allocation): the few reads of the DRA ledger.
    def list_resource_slice(self, **kwargs):
        return self._call("GET", "/apis/resource.k8s.io/v1/resourceslices", **kwargs)

    def list_resource_claim_for_all_namespaces(self, **kwargs):
        return self._call("GET", "/apis/resource.k8s.io/v1/resourceclaims", **kwargs)

    def list_device_class(self, **kwargs):
        return self._call("GET", "/apis/resource.k8s.io/v1/deviceclasses", **kwargs)

    def namespaced(self, method, path, namespace, name=None, body=None, **kwargs):
        """GET/PUT/DELETE one (``name``), POST a new one, or GET the list of the namespaced objects at ``path``
        (NAMESPACED_PATHS' values: ``/api/v1/namespaces/{namespace}/pods``, ...); ``dry_run="All"`` asks without
        writing."""
        return self._call(method, path.format(namespace=namespace) + ("/%s" % name if name else ""), body=body, **kwargs)

    def lease(self, method, namespace, name=None, body=None, timeout=None):
        """coordination.k8s.io/v1 Leases: GET/PUT/DELETE one (``name``), or POST a new one; ``timeout``: seconds."""
        path = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % namespace
        return self._call(method, path + ("/%s" % name if name else ""), body=body, _request_timeout=timeout)


@contextlib.contextmanager
def explain_api_errors(action, host=None, kubeconfig=None):
    """Re-raise Kubernetes client failures inside the block as ``K8sApiError``.

    ``action`` says what was being done, as a verb phrase ("list pods in all namespaces");
    ``host`` is the API server URL when known; ``kubeconfig`` the file(s) being loaded.
    Other exceptions pass through untouched.
    """
    try:
        yield
    except Exception as error:
        message = api_error_message(error, action, host, kubeconfig)
        if message is None:
            raise
        status = error.status if isinstance(error, ApiException) else None
        raise K8sApiError(message, status=status) from error


def api_error_message(error, action, host=None, kubeconfig=None):
    """One sentence explaining a Kubernetes client failure, or None for any other exception."""
    if isinstance(error, ApiException):
        return _api_exception_message(error, action, host)
    if isinstance(error, urllib3.exceptions.HTTPError):
        return _transport_error_message(error, action, host)
    if isinstance(error, ConfigException):
        return _config_error_message(error, kubeconfig)
    return None


def _api_name(host):
    return "the Kubernetes API at {0}".format(host) if host else "the Kubernetes API"


def _status_message(error):
    """The human part of an API error: the ``message`` of the Status object in the body."""
    try:
        return json.loads(error.body)["message"]
    except (TypeError, ValueError, KeyError):
        return (error.body or "").strip() or error.reason or ""


def _api_exception_message(error, action, host):
    api = _api_name(host)
    detail = _status_message(error)
    if error.status == 401:
        return ("{0} rejected the credentials (401 Unauthorized) when trying to {1}: "
                "the token or client certificate is missing, invalid or expired").format(api, action)
    if error.status == 403:
        return "forbidden (403) to {0} on {1}: {2}".format(action, api, detail)
    if error.status == 404:
        return "not found (404) when trying to {0} on {1}: {2}".format(action, api, detail)
    if not error.status:
        # The REST layer reports TLS failures as status 0.
        return "could not {0} on {1}: {2}".format(action, api, " ".join(str(error.reason).split()))
    return "{0} answered {1} {2} when trying to {3}: {4}".format(api, error.status, error.reason, action, detail)


def _endpoint_of(error):
    """scheme://host:port of the connection pool a urllib3 error came from, if it says."""
    pool = getattr(error, "pool", None)
    if pool is None or not getattr(pool, "host", None):
        return None
    return "{0}://{1}:{2}".format(pool.scheme, pool.host, pool.port)


def _transport_error_message(error, action, host):
    api = _api_name(host or _endpoint_of(error))
    reason = getattr(error, "reason", None) or error
    if isinstance(reason, urllib3.exceptions.SSLError):
        return ("TLS verification failed for {0} when trying to {1}: {2} "
                "(set ca_cert to the cluster CA, or validate_certs=false)").format(api, action, reason)
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        cause = "connection refused" if "refused" in str(reason).lower() else str(reason)
        return "cannot reach {0} ({1}) when trying to {2}".format(api, cause, action)
    if isinstance(reason, urllib3.exceptions.TimeoutError):
        return "timed out talking to {0} when trying to {1}".format(api, action)
    return "cannot reach {0} when trying to {1}: {2}".format(api, action, reason)


def _host_in_use(params):
    """The API server kubernetes.core was connecting to, for error messages.

    An explicit ``host`` (option or K8S_AUTH_HOST) wins, as in kubernetes.core; otherwise loading
    the kubeconfig left it in the client's default configuration.
    """
    host = params.get("host") or os.environ.get("K8S_AUTH_HOST")
    return host or Configuration.get_default_copy().host


def _kubeconfig_in_use(params):
    """The kubeconfig kubernetes.core will load, in its order of precedence, for error messages."""
    return (params.get("kubeconfig") or os.environ.get("K8S_AUTH_KUBECONFIG")
            or os.environ.get("KUBECONFIG") or "~/.kube/config")


def _config_error_message(error, kubeconfig):
    message = "could not load the Kubernetes client configuration: {0}".format(error)
    if isinstance(kubeconfig, str):
        paths = [os.path.expanduser(path) for path in kubeconfig.split(os.pathsep) if path]
        missing = [path for path in paths if not os.path.exists(path)]
        if missing:
            message += " (kubeconfig file not found: {0})".format(", ".join(missing))
    return message


class CoreV1Reader:
    """Reads core/v1 objects as the plain dicts the API sends (what ``kubectl get -o json`` prints).

    Skipping the client's model classes keeps large pod lists fast. ``calls`` counts logical
    reads (a paginated list is one call); ``requests`` counts HTTP requests (pages); ``bytes_received``
    the bytes of the responses' bodies. Reads may run in several threads at once.
    """

    def __init__(self, client, page_size=DEFAULT_PAGE_SIZE):
        self._api = core_v1_api(client)
        self._page_size = page_size
        self._counting = threading.Lock()
        self.host = api_host(client)
        self.calls = 0
        self.requests = 0
        self.bytes_received = 0   # the bodies of the responses, as read

    def _count(self, calls=0, requests=0, received=0):
        with self._counting:
            self.calls += calls
            self.requests += requests
            self.bytes_received += received

    def get_node(self, name, fields=None):
        """The Node called ``name``, or None when the API says it does not exist.

        ``fields``, here and in the list methods, names the fields the caller reads (see ``FieldsDecoder``).
        """
        self._count(calls=1, requests=1)
        with explain_api_errors("get node {0}".format(name), self.host):
            try:
                raw = self._api.read_node(name, _preload_content=False).data
                self._count(received=len(raw))
                return FieldsDecoder.of(fields).decode(raw)
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

    def list_nodes(self, fields=None):
        return self._list("list nodes", self._api.list_node, fields=fields)

    def list_resource_slices(self, field_selector=None):
        """ResourceSlices (resource.k8s.io/v1), or None when the API server does not serve that API."""
        return self._list_if_served("list resourceslices", self._api.list_resource_slice,
                                    field_selector=field_selector)

    def list_resource_claims(self):
        return self._list_if_served("list resourceclaims in all namespaces",
                                    self._api.list_resource_claim_for_all_namespaces)

    def list_device_classes(self):
        return self._list_if_served("list deviceclasses", self._api.list_device_class)

    def _list_if_served(self, action, list_function, **kwargs):
        try:
            return self._list(action, list_function, **kwargs)
        except K8sApiError as error:
            if isinstance(error.__cause__, ApiException) and error.__cause__.status == 404:
                return None
            raise

    def list_pods(self, namespace=None, field_selector=None, fields=None, keep=None, page_size=None):
        """Pods of one namespace, or of all namespaces when ``namespace`` is None.

        ``keep``: a predicate; items it refuses are dropped as each page is decoded, so a list of many pages is
        never held whole. ``page_size``: items per request (the reader's default when None: one request).
        """
        if namespace:
            return self._list("list pods in namespace {0}".format(namespace), self._api.list_namespaced_pod,
                              namespace, field_selector=field_selector, fields=fields, keep=keep, page_size=page_size)
        return self._list("list pods in all namespaces", self._api.list_pod_for_all_namespaces,
                          field_selector=field_selector, fields=fields, keep=keep, page_size=page_size)

    def _list(self, action, list_function, *args, **kwargs):
        """Every page of a list. The next page is fetched while this one is decoded: the API server
        serializes one page while we parse the other. Only one raw page and one decoded page are held at a time."""
        self._count(calls=1)
        decoder = FieldsDecoder.of(kwargs.pop("fields", None), in_list=True)
        keep = kwargs.pop("keep", None)
        page_size = kwargs.pop("page_size", None) or self._page_size
        items = []

        def fetch(continue_token):
            return list_function(*args, limit=page_size, _continue=continue_token,
                                 _preload_content=False, **kwargs).data

        with explain_api_errors(action, self.host), ThreadPoolExecutor(max_workers=1) as prefetcher:
            pending = prefetcher.submit(fetch, None)
            while True:
                raw = pending.result()
                self._count(requests=1, received=len(raw))
                continue_token = leading_continue_token(raw)
                if continue_token:
                    pending = prefetcher.submit(fetch, continue_token)
                page = decoder.decode(raw)
                del raw
                page_items = page.get("items") or []
                items.extend(page_items if keep is None else [item for item in page_items if keep(item)])
                listed_token = (page.get("metadata") or {}).get("continue")
                del page, page_items
                if listed_token != continue_token:
                    # The cheap look-ahead misread the token: fall back to the decoded one.
                    if continue_token:
                        pending.result()
                    if not listed_token:
                        return items
                    pending = prefetcher.submit(fetch, listed_token)
                elif not continue_token:
                    return items


class FieldsDecoder:
    """Decodes an API response keeping only ``fields``, or all of it without msgspec.

    ``fields`` is None for a whole value, a dict ``{key: fields of that key}`` for an object (other keys are
    dropped, absent ones stay absent), or a one-element list ``[fields of each item]`` for an array.
    Without msgspec, or for a response whose shape differs from ``fields`` (msgspec then refuses it), the
    whole response is decoded: callers get at least the fields they asked for either way.
    """

    _cache = {}

    def __init__(self, fields, in_list):
        self._typed = None
        if msgspec is not None and fields is not None:
            schema = _schema(fields, "Item")
            if in_list:
                list_metadata = TypedDict("ListMeta", {"continue": Any, "resourceVersion": Any}, total=False)
                schema = TypedDict("List", {"metadata": Optional[list_metadata], "items": Optional[List[schema]]}, total=False)
            self._typed = msgspec.json.Decoder(schema)

    @classmethod
    def of(cls, fields, in_list=False):
        """One decoder per field list, built once per process (building one costs more than a small decode)."""
        key = (json.dumps(fields, sort_keys=True), in_list)
        if key not in cls._cache:
            cls._cache[key] = cls(fields, in_list)
        return cls._cache[key]

    def decode(self, raw):
        if self._typed is not None:
            try:
                return self._typed.decode(raw)
            except msgspec.ValidationError:
                pass
        return json_loads(raw)


def _schema(fields, name):
    """The msgspec type for ``fields``: TypedDicts (plain dicts once decoded) that ignore unknown keys."""
    if fields is None:
        return Any
    if isinstance(fields, list):
        return Optional[List[_schema(fields[0], name + "Item")]]
    members = {key: _schema(sub_fields, name + "_" + key) for key, sub_fields in fields.items()}
    return Optional[TypedDict(name, members, total=False)]


def leading_continue_token(raw):
    """The ``metadata.continue`` of a list response, read from its first bytes without decoding the items.

    The API server writes ``kind``, ``apiVersion`` and ``metadata`` before ``items``; None when absent or
    when the head does not look like that (the caller then uses the decoded value).
    """
    head = raw[:8192].decode("utf-8", "ignore")
    start = head.find('"metadata":')
    items_at = head.find('"items"')
    if start < 0 or 0 <= items_at < start:
        return None
    try:
        value_at = start + len('"metadata":')
        value_at += len(head[value_at:]) - len(head[value_at:].lstrip())
        metadata, _end = json.JSONDecoder().raw_decode(head, value_at)
    except ValueError:
        return None
    return metadata.get("continue") or None if isinstance(metadata, dict) else None
