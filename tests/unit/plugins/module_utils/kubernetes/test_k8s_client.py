"""CoreV1Reader's paging: every page read once, in order, the next fetched while one is decoded."""
import json
import threading
from pathlib import Path

import pytest
from select_fields import select_fields

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import client as _k8s_client


class Response:
    def __init__(self, data):
        self.data = data


def pages(count, per_page=3, token_in_head=True):
    """List responses as the API server writes them (metadata before items), chained by continue tokens."""
    result = {}
    for index in range(count):
        token = "page-%d" % (index + 1) if index + 1 < count else None
        metadata = {"resourceVersion": "42"}
        if token:
            metadata["continue"] = token
        items = [{"metadata": {"name": "pod-%d-%d" % (index, item)}} for item in range(per_page)]
        body = {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items} if token_in_head else \
            {"items": items, "kind": "PodList", "metadata": metadata}
        result[None if index == 0 else "page-%d" % index] = json.dumps(body).encode()
    return result


class FakeApi:
    def __init__(self, responses):
        self.responses = responses
        self.asked = []
        self.limits = []

    def list_pod_for_all_namespaces(self, limit=None, _continue=None, _preload_content=True, field_selector=None):
        self.asked.append(_continue)
        self.limits.append(limit)
        return Response(self.responses[_continue])


def reader_over(api):
    reader = _k8s_client.CoreV1Reader.__new__(_k8s_client.CoreV1Reader)
    reader._api, reader._page_size, reader.host, reader.calls, reader.requests = api, 3, "https://127.0.0.1:16443", 0, 0
    reader.bytes_received = 0
    reader._counting = threading.Lock()
    return reader


@pytest.mark.parametrize("token_in_head", [True, False])
def test_every_page_once_in_order(token_in_head):
    api = FakeApi(pages(4, token_in_head=token_in_head))
    reader = reader_over(api)
    items = reader.list_pods()
    assert [item["metadata"]["name"] for item in items] == ["pod-%d-%d" % (p, i) for p in range(4) for i in range(3)]
    assert api.asked == [None, "page-1", "page-2", "page-3"]
    assert (reader.calls, reader.requests) == (1, 4)
    assert reader.bytes_received == sum(len(raw) for raw in api.responses.values())


def test_keep_drops_items_page_by_page_and_page_size_is_per_call():
    api = FakeApi(pages(3))
    reader = reader_over(api)
    items = reader.list_pods(keep=lambda item: item["metadata"]["name"].endswith("-1"), page_size=1000)
    assert [item["metadata"]["name"] for item in items] == ["pod-0-1", "pod-1-1", "pod-2-1"]
    assert api.limits == [1000, 1000, 1000]


def test_leading_continue_token_reads_only_the_head():
    raw = pages(2)[None]
    assert _k8s_client.leading_continue_token(raw) == "page-1"
    assert _k8s_client.leading_continue_token(pages(1)[None]) is None
    assert _k8s_client.leading_continue_token(b'{"items": [], "metadata": {"continue": "x"}}') is None
    assert _k8s_client.leading_continue_token(b"not json") is None


FIXTURE_PODS = (Path(__file__).resolve().parents[3] / "fixtures" / "ledger" / "pods.json").read_text()
POD_LIST = ('{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"next"},"items":%s}'
            % FIXTURE_PODS).encode()
FIELDS = {"metadata": {"name": None, "deletionTimestamp": None},
          "spec": {"nodeName": None, "containers": [{"resources": {"requests": None}}], "initContainers": [{"restartPolicy": None}]},
          "status": {"conditions": [{"type": None}]}}


def test_select_fields():
    containers = [{"name": "c", "resources": {"requests": {"x": "1"}, "limits": {}}}]
    pod = {"metadata": {"name": "a", "uid": "u"}, "spec": {"containers": containers, "initContainers": None}, "status": "odd"}
    assert select_fields(pod, FIELDS) == {
        "metadata": {"name": "a"}, "spec": {"containers": [{"resources": {"requests": {"x": "1"}}}], "initContainers": None},
        "status": "odd"}
    assert select_fields(pod, None) is pod


def test_fields_decoder_returns_the_selected_fields():
    pytest.importorskip("msgspec")
    decoded = _k8s_client.FieldsDecoder(FIELDS, in_list=True).decode(POD_LIST)
    expected = json.loads(POD_LIST)
    expected["metadata"] = {"resourceVersion": "7", "continue": "next"}
    expected["items"] = [select_fields(item, FIELDS) for item in expected["items"]]
    del expected["kind"], expected["apiVersion"]
    assert decoded == expected
    node = b'{"kind":"Node","metadata":{"name":"n","uid":"u"},"spec":{},"status":{"conditions":null}}'
    assert _k8s_client.FieldsDecoder(FIELDS, in_list=False).decode(node) == {"metadata": {"name": "n"}, "spec": {}, "status": {"conditions": None}}


def test_fields_decoder_decodes_everything_without_msgspec_or_for_an_unexpected_shape(monkeypatch):
    pytest.importorskip("msgspec")
    odd = b'{"metadata":{"name":"a"},"spec":{"containers":{"not":"a list"}},"status":{}}'
    assert _k8s_client.FieldsDecoder(FIELDS, in_list=False).decode(odd) == json.loads(odd)
    monkeypatch.setattr(_k8s_client, "msgspec", None)
    assert _k8s_client.FieldsDecoder(FIELDS, in_list=True).decode(POD_LIST) == json.loads(POD_LIST)


def test_list_with_fields_pages_through_the_selected_fields():
    pytest.importorskip("msgspec")
    api = FakeApi(pages(3))
    items = reader_over(api).list_pods(fields={"metadata": {"name": None}})
    assert items == [{"metadata": {"name": "pod-%d-%d" % (p, i)}} for p in range(3) for i in range(3)]
    assert api.asked == [None, "page-1", "page-2"]


@pytest.mark.parametrize("status", [403, 404, 500])
def test_an_api_error_keeps_its_status_so_callers_can_tell_a_refusal(status):
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    error = ApiException(status=status, reason="Forbidden")
    error.body = json.dumps({"kind": "Status", "message": "resourceslices.resource.k8s.io is forbidden"})
    with pytest.raises(_k8s_client.K8sApiError) as raised:
        with _k8s_client.explain_api_errors("list resourceslices", "https://127.0.0.1:16443"):
            raise error
    assert raised.value.status == status
    assert "resourceslices.resource.k8s.io is forbidden" in str(raised.value)


def test_a_transport_failure_has_no_status():
    import urllib3  # pylint: disable=import-outside-toplevel
    with pytest.raises(_k8s_client.K8sApiError) as raised:
        with _k8s_client.explain_api_errors("list nodes", "https://127.0.0.1:16443"):
            raise urllib3.exceptions.ProtocolError("connection reset")
    assert raised.value.status is None
