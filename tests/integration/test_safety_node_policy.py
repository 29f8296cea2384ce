"""The Node admission policy is an allow-list: with the pre-flight ServiceAccount's token, a change of any field of a
Node outside the verdict's own keys is refused, whichever field it is.

The fields are not a hand-picked list: they are every field of the v1 Node in the API server's own OpenAPI v3 schema
(/openapi/v3/api/v1, io.k8s.api.core.v1.Node and every schema it references), walked down through objects, maps and
list items. For each one the test builds the Node as read with that one field changed (a value of the field's type,
different from the current one, valid where the API server validates it), and sends it as a JSON patch of its
top-level part (metadata and spec to nodes, status to nodes/status), as a server-side dry run: the API server
authorizes, validates and admits a dry run exactly like the write, and nothing changes even if the policy were wrong
(an ownerReference would otherwise get the Node deleted by the garbage collector). Each change must be refused (403)
by the policy, naming our keys and the field it refused. The few fields the API server keeps to itself (it refuses
every change of them, or drops it before admission) are said so, and must not change either.

Our own changes (the label, the annotations, the condition, the gate's taints) are admitted; a change of ours carrying
one foreign change is refused. Topology: default.
"""
from __future__ import annotations

import copy
import functools
import json

import pytest

from safety_helpers import NAMESPACE, NODE, tail, token_kubeconfig, wait_until

SERVICE_ACCOUNT = "gpuops-preflight"
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
POLICY_SAYS = "may change on a Node only the label gpuops.scheduling/gpu-preflight"
LABEL = "gpuops.scheduling/gpu-preflight"
ANNOTATIONS = ("gpuops.scheduling/gpu-preflight-time", "gpuops.scheduling/gpu-preflight-report",
               "gpuops.scheduling/gpu-preflight-report-configmap")
CONDITION = "gpuops.scheduling/GPUPreflightPassed"
GATE_TAINT_KEYS = ("gpuops.scheduling/gpu-preflight-pending", "readiness.k8s.io/gpu-preflight-pending")
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
NODE_SCHEMA = "io.k8s.api.core.v1.Node"

# What the API server maintains itself, which the policy lets differ (a write's managedFields are the API server's
# record of it; resourceVersion and generation are set by it).
MAINTAINED = {"metadata.managedFields", "metadata.resourceVersion", "metadata.generation"}
# Fields no client may change: the API server refuses every change of them before admission (name: not the URL's;
# uid: the precondition fails; deletionTimestamp, deletionGracePeriodSeconds: set only by a delete; spec.externalID:
# "may not be updated"). A change the API server drops before admission (a removed feature's field such as
# spec.configSource, creationTimestamp, a cluster-scoped object's namespace) reaches the policy as no change and is
# admitted as such, for any field: the test checks that the Node the API server returns did not change.
API_SERVER_OWNS = {"metadata.name", "metadata.uid", "metadata.deletionTimestamp", "metadata.deletionGracePeriodSeconds",
                   "spec.externalID"}

# Valid values for fields the API server validates (a generic string would be refused before admission).
VALUES = {
    "metadata.finalizers[]": "gpuops.example.com/it",
    "metadata.ownerReferences[].uid": "00000000-0000-4000-8000-000000000001",
    "metadata.ownerReferences[].apiVersion": "v1",
    "metadata.ownerReferences[].kind": "ConfigMap",
    "spec.podCIDR": "10.244.99.0/24",
    "spec.podCIDRs[]": "10.244.99.0/24",
    "spec.providerID": "gpuops-it://node",
    "spec.taints[].effect": "PreferNoSchedule",
    "status.addresses[].type": "ExternalIP",
    "status.addresses[].address": "10.9.9.9",
    "status.conditions[].status": "Unknown",
    "status.phase": "Terminated",
    # Sorted, UpperCamelCase: first in the list whether it replaces the first item or is added in front.
    "status.declaredFeatures[]": "AaaGpuopsIt",
}
# A valid new item of a list, where the list is empty on the Node as read (then one field of it is changed).
ITEMS = {
    "metadata.ownerReferences": {"apiVersion": "v1", "kind": "ConfigMap", "name": "gpuops-it",
                                 "uid": "00000000-0000-4000-8000-000000000001"},
    "spec.taints": {"key": "gpuops-it", "value": "x", "effect": "NoSchedule"},
    "status.addresses": {"type": "InternalIP", "address": "10.9.9.8"},
    "status.conditions": {"type": "GpuopsIt", "status": "True", "reason": "GpuopsIt", "message": "it",
                          "lastHeartbeatTime": "2026-12-01T00:00:00Z", "lastTransitionTime": "2026-12-01T00:00:00Z"},
    "status.images": {"names": ["registry.example/gpuops-it:1"], "sizeBytes": 1024},
    "status.volumesAttached": {"name": "kubernetes.io/csi/gpuops-it^vol", "devicePath": "/dev/gpuops-it"},
    "status.runtimeHandlers": {"name": "gpuops-it", "features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}},
}
# A map's new key, where the API server validates keys (resource names, label and annotation keys).
MAP_KEYS = {"status.capacity": "gpuops.example.com/it", "status.allocatable": "gpuops.example.com/it"}
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME = ("io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime")


@pytest.fixture(scope="module")
def identity(sim, tmp_path_factory):
    """The RBAC applied by the admin, a kubeconfig holding only the ServiceAccount's token, and both clients."""
    from kubernetes import client, config  # pylint: disable=import-outside-toplevel
    sim.use_topology("default")
    applied = sim.playbook("playbooks/preflight_rbac.yml")
    assert applied.returncode == 0, tail(applied)
    directory = tmp_path_factory.mktemp("node-policy")
    token = sim.kubectl("-n", NAMESPACE, "create", "token", SERVICE_ACCOUNT, "--duration", "1h").stdout.strip()
    kubeconfig = token_kubeconfig(sim, token, directory / "preflight.kubeconfig")
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    # The API server enforces a new admission policy once it has read and type-checked it: wait for that.
    wait_until(lambda: outcome(api, "/spec/unschedulable", True, "spec")[0] == "refused", 30,
               "the node-writes policy to be enforced")
    return {"api": api, "sim": sim, "dir": directory}


def raw(sim, path: str) -> dict:
    """A GET of the admin, as the API server serves it (JSON, every field)."""
    return json.loads(sim.kubectl("get", "--raw", path).stdout)


def node_as_read(identity) -> dict:
    return raw(identity["sim"], f"/api/v1/nodes/{NODE}")


def outcome(api, pointer: str, value, part: str, content_type: str = JSON_PATCH, body=None):
    """Send one change as a dry run -> ("refused", message) | ("admitted", the Node as the API server returned it) |
    ("error", "<status>: message") for a refusal that is not the policy's."""
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    call = api.patch_node_status if part == "status" else api.patch_node
    body = body if body is not None else [{"op": "add", "path": pointer, "value": value}]
    try:
        response = call(NODE, body, dry_run="All", _content_type=content_type, _preload_content=False)
    except ApiException as error:
        message = json.loads(error.body).get("message", error.body) if error.body else str(error)
        if error.status == 403 and ACCOUNT in message and POLICY_SAYS in message:
            return "refused", message
        return "error", f"{error.status}: {message}"
    return "admitted", json.loads(response.data)


# -- The fields, from the API server's OpenAPI v3 schema ------------------------------------------------------------

def resolve(schemas: dict, schema: dict) -> tuple[dict, str]:
    """A property's schema with $ref / allOf[$ref] followed -> (schema, the referenced name or '')."""
    name = ""
    while True:
        ref = schema.get("$ref") or next((part.get("$ref") for part in schema.get("allOf", []) if "$ref" in part), None)
        if not ref:
            return schema, name
        name = ref.rsplit("/", 1)[-1]
        schema = schemas[name]


def fields(schemas: dict, schema: dict, path: str = "", depth: int = 0) -> dict:
    """Every field below ``schema`` -> {path: (schema, referenced name)}; a list's items are 'name[]', a map's values
    'name{}'. Objects are walked into; a map or a list is a field itself and so is each field of its items."""
    found = {}
    for name, prop in (schema.get("properties") or {}).items():
        child, ref = resolve(schemas, prop)
        here = f"{path}.{name}" if path else name
        found[here] = (child, ref)
        if depth > 8:
            continue
        if child.get("properties"):
            found.update(fields(schemas, child, here, depth + 1))
        elif child.get("type") == "array":
            item, item_ref = resolve(schemas, child.get("items") or {})
            if item.get("properties"):
                found.update(fields(schemas, item, here + "[]", depth + 1))
            else:
                found[here + "[]"] = (item, item_ref)
    return found


def node_fields(identity) -> dict:
    document = raw(identity["sim"], "/openapi/v3/api/v1")
    schemas = document["components"]["schemas"]
    return fields(schemas, schemas[NODE_SCHEMA])


def new_value(path: str, schema: dict, ref: str, current):
    """A value of the field's type that differs from ``current``."""
    if path in VALUES and VALUES[path] != current:
        return VALUES[path]
    if ref in TIME or schema.get("format") == "date-time":
        return "2026-12-01T00:00:01Z" if current != "2026-12-01T00:00:01Z" else "2026-12-01T00:00:02Z"
    if ref == QUANTITY:
        return "7" if current != "7" else "8"
    kind = schema.get("type")
    if kind == "boolean":
        return not current
    if kind == "integer":
        return (current or 0) + 7
    if kind == "number":
        return (current or 0) + 1.5
    if kind == "array":
        return [new_value(path + "[]", schema.get("items") or {}, "", None)] + list(current or [])
    if kind == "object" and schema.get("additionalProperties") is not None:
        extra, extra_ref = schema["additionalProperties"], ""
        key = MAP_KEYS.get(path, "gpuops.example.com/it")
        if "$ref" in extra or "allOf" in extra:
            extra_ref = (extra.get("$ref") or extra["allOf"][0]["$ref"]).rsplit("/", 1)[-1]
        return dict(current or {}, **{key: new_value(path + "{}", extra, extra_ref, None)})
    if kind == "object":
        return {"gpuops-it": "x"} if current != {"gpuops-it": "x"} else {}
    return "gpuops-it" if current != "gpuops-it" else "gpuops-it-2"


def value_at(holder, at):
    return holder.get(at) if isinstance(holder, dict) else holder[at]


def changed(node: dict, path: str, schema: dict, ref: str) -> tuple[str, str, object]:
    """The Node's top-level part, the JSON pointer of the field's second-level ancestor, and that ancestor's new value,
    with only ``path`` changed: through the first item of each list on the way (a valid new one where it is empty)."""
    tokens = path.replace("[]", ".[]").split(".")
    edited = copy.deepcopy(node)
    container, key, prefix = edited, tokens[0], tokens[0]
    for position, token in enumerate(tokens[1:], start=1):
        if token == "[]":
            if not value_at(container, key):
                last = position == len(tokens) - 1
                assert last or prefix in ITEMS, f"no valid item for the empty list {prefix} (add one to ITEMS)"
                container[key] = [None if last else copy.deepcopy(ITEMS[prefix])]
            container, key, prefix = container[key], 0, prefix + "[]"
        else:
            if value_at(container, key) is None:
                container[key] = {}
            container, key, prefix = container[key], token, prefix + "." + token
    current = value_at(container, key)
    if schema.get("type") == "array" and path in ITEMS:
        value = list(current or []) + [copy.deepcopy(ITEMS[path])]
    else:
        value = new_value(path, schema, ref, current)
    assert value != current, path
    container[key] = value
    return tokens[0], f"/{tokens[0]}/{tokens[1]}", edited[tokens[0]][tokens[1]]


def test_every_node_field_outside_ours_is_refused(identity):
    every = node_fields(identity)
    node = node_as_read(identity)
    ours = {"metadata.labels", "metadata.annotations", "spec.taints", "status.conditions"}
    refused, dropped, kept, failures = [], [], {}, []
    for path, (schema, ref) in sorted(every.items()):
        if "." not in path or path in MAINTAINED or path.startswith("metadata.managedFields") or schema.get("properties"):
            continue   # apiVersion and kind; what the API server maintains; an object (each of its fields is one)
        part, pointer, value = changed(node, path, schema, ref)
        result, said = outcome(identity["api"], pointer, value, part)
        field = pointer[1:].replace("/", ".")
        if result == "refused":
            # The policy names the field it refused (maps and lists of ours: the foreign key or item).
            named = field if field not in ours else {"metadata.labels": "metadata.labels.",
                                                     "metadata.annotations": "metadata.annotations.",
                                                     "spec.taints": "spec.taints (a taint not ours)",
                                                     "status.conditions": "status.conditions (a condition not ours)"}[field]
            if named not in said.split("refused, a change of: ", 1)[-1]:
                failures.append(f"{path}: refused, but not naming {named}: {said}")
            refused.append(path)
        elif result == "admitted" and said.get(part, {}).get(pointer.split("/")[2]) == node.get(part, {}).get(pointer.split("/")[2]):
            dropped.append(path)   # admitted as no change: the API server dropped it before admission
        elif result == "error" and path in API_SERVER_OWNS:
            kept[path] = said
        elif result == "error":
            failures.append(f"{path}: refused before the policy, so not tested (make the value valid): {said}")
        else:
            failures.append(f"{path}: ADMITTED: {json.dumps(value)[:300]}")
    print(f"{len(every)} Node fields in the schema; {len(refused)} changes refused by the policy; refused by the API "
          f"server itself: {sorted(kept)}; dropped by the API server (no change): {sorted(dropped)}")
    assert not failures, "\n".join(failures)
    # The schema walk found the Node's fields (a broken walk would test nothing), the four among them.
    assert len(refused) >= 60, sorted(refused)
    for must in ("metadata.ownerReferences[].uid", "metadata.finalizers[]", "status.addresses[].address",
                 "spec.providerID", "spec.unschedulable", "status.capacity", "metadata.labels"):
        assert must in refused, must


def test_an_owner_reference_applied_server_side_is_refused(identity):
    """The issue's own write: a server-side apply adding an ownerReference (the garbage collector would delete the
    Node), as kubectl apply --server-side would send it."""
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "gpuops-it", "uid": "00000000-0000-4000-8000-000000000001"}]}}
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    with pytest.raises(ApiException) as raised:
        identity["api"].patch_node(NODE, body, dry_run="All", field_manager="gpuops-it", force=True,
                                   _content_type="application/apply-patch+yaml")
    assert raised.value.status == 403 and POLICY_SAYS in raised.value.body, raised.value.body
    assert "refused, a change of: metadata.ownerReferences" in raised.value.body


def _condition(kind: str, status: str = "True") -> dict:
    return {"type": kind, "status": status, "reason": "GpuopsIt", "message": "it",
            "lastHeartbeatTime": "2026-12-01T00:00:00Z", "lastTransitionTime": "2026-12-01T00:00:00Z"}


def _taints(node: dict, *extra) -> list:
    return list((node.get("spec") or {}).get("taints") or []) + list(extra)


def _gate_taint_added(key: str, node: dict) -> tuple:
    return ("spec", MERGE, {"spec": {"taints": _taints(node, {"key": key, "value": "pending", "effect": "NoSchedule"})}})


OURS = {
    "label-set": lambda n: ("metadata", MERGE, {"metadata": {"labels": {LABEL: "running"}}}),
    "label-removed": lambda n: ("metadata", MERGE, {"metadata": {"labels": {LABEL: None}}}),
    "annotations-set": lambda n: ("metadata", MERGE, {"metadata": {"annotations": {key: "x" for key in ANNOTATIONS}}}),
    "annotations-removed": lambda n: ("metadata", MERGE, {"metadata": {"annotations": {key: None for key in ANNOTATIONS}}}),
    # The report kept in the cluster, named alone (as node_verdict writes it with the other two).
    "report-configmap-annotation-set": lambda n: ("metadata", MERGE, {"metadata": {"annotations": {
        "gpuops.scheduling/gpu-preflight-report-configmap": "gpu-operator/gpu-preflight-report-prod102-r1"}}}),
    "condition-set": lambda n: ("status", STRATEGIC, {"status": {"conditions": [_condition(CONDITION, "Unknown")]}}),
    "condition-failed": lambda n: ("status", STRATEGIC, {"status": {"conditions": [_condition(CONDITION, "False")]}}),
    **{f"gate-taint-added-{key}": functools.partial(_gate_taint_added, key) for key in GATE_TAINT_KEYS},
}


@pytest.mark.parametrize("change", sorted(OURS))
def test_each_change_of_ours_is_admitted_and_with_a_foreign_one_refused(identity, change):
    node = node_as_read(identity)
    part, content_type, body = OURS[change](node)
    result, said = outcome(identity["api"], "", None, part, content_type, body)
    assert result == "admitted", said
    # Ours is no way through for anything else: the same write plus one foreign label is refused.
    foreign = copy.deepcopy(body)
    foreign.setdefault("metadata", {}).setdefault("labels", {})["gpuops-it"] = "x"
    result, said = outcome(identity["api"], "", None, part, content_type, foreign)
    assert result == "refused" and "metadata.labels.gpuops-it" in said, said


def test_the_gate_taint_is_removed_and_nothing_else_is(identity, sim):
    """The gate's removal as node_verdict sends it (a JSON patch of the taints), on a Node that carries the gate's
    taint beside another tool's; removing the other tool's taint is refused."""
    other = {"key": "example.com/other-tool", "value": "x", "effect": "NoSchedule"}
    gate = {"key": GATE_TAINT_KEYS[0], "value": "pending", "effect": "NoSchedule"}
    sim.kubectl("taint", "node", NODE, f"{other['key']}={other['value']}:NoSchedule", f"{gate['key']}={gate['value']}:NoSchedule")
    try:
        taints = node_as_read(identity)["spec"]["taints"]
        index = taints.index(next(taint for taint in taints if taint["key"] == gate["key"]))
        body = [{"op": "test", "path": f"/spec/taints/{index}/key", "value": gate["key"]},
                {"op": "remove", "path": f"/spec/taints/{index}"}]
        result, said = outcome(identity["api"], "", None, "spec", JSON_PATCH, body)
        assert result == "admitted", said
        assert [taint["key"] for taint in said["spec"]["taints"]] == [taint["key"] for taint in taints if taint["key"] != gate["key"]]
        index = taints.index(next(taint for taint in taints if taint["key"] == other["key"]))
        result, said = outcome(identity["api"], "", None, "spec", JSON_PATCH, [{"op": "remove", "path": f"/spec/taints/{index}"}])
        assert result == "refused" and "spec.taints (a taint not ours)" in said, said
    finally:
        sim.kubectl("taint", "node", NODE, f"{other['key']}:NoSchedule-", f"{gate['key']}:NoSchedule-", check=False)
