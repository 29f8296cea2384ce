"""A Node as the API server returns it after node_verdict's two patches: the labels, annotations and condition merged,
and metadata.managedFields recording who wrote them and when, as kube-apiserver records an Update (shape taken from the
simulated cluster's kube-apiserver: one entry for the Node, one for its status subresource)."""
import json
import time

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo import verdict


def stamp(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epoch)))


def managed_fields(manager, at, annotations=(), labels=(), condition=False):
    """The managedFields entries of one writer: the Node's keys it wrote and, with ``condition``, our condition."""
    entries = []
    metadata = {}
    if annotations:
        metadata["f:annotations"] = dict(("f:" + key, {}) for key in annotations)
    if labels:
        metadata["f:labels"] = dict(("f:" + key, {}) for key in labels)
    if metadata:
        entries.append({"apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": metadata},
                        "manager": manager, "operation": "Update", "time": stamp(at)})
    if condition:
        key = "k:" + json.dumps({"type": verdict.CONDITION_TYPE}, separators=(",", ":"))
        fields = dict(("f:" + name, {}) for name in ("lastHeartbeatTime", "lastTransitionTime", "message", "reason",
                                                     "status", "type"))
        entries.append({"apiVersion": "v1", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:status": {"f:conditions": {key: dict(fields, **{".": {}})}}},
                        "manager": manager, "operation": "Update", "subresource": "status", "time": stamp(at)})
    return entries


def apply_writes(node, writes, at, manager=verdict.FIELD_MANAGER):
    """``node`` with node_verdict's ``writes`` (verdict.node_writes) applied by ``manager`` at ``at``, in place."""
    metadata = node.setdefault("metadata", {})
    labels = writes["metadata"]["metadata"]["labels"]
    annotations = writes["metadata"]["metadata"]["annotations"]
    metadata.setdefault("labels", {}).update(labels)
    metadata.setdefault("annotations", {}).update(annotations)
    conditions = node.setdefault("status", {}).setdefault("conditions", [])
    conditions[:] = [entry for entry in conditions if entry.get("type") != verdict.CONDITION_TYPE]
    conditions += writes["status"]["status"]["conditions"]
    metadata["managedFields"] = [entry for entry in metadata.get("managedFields") or [] if entry["manager"] != manager]
    metadata["managedFields"] += managed_fields(manager, at, annotations=annotations, labels=labels, condition=True)
    return node


def rewrite_annotation(node, key, value, manager, at):
    """Another writer (kubectl annotate: manager kubectl-annotate) sets one annotation: the API server moves that key's
    ownership to it."""
    node["metadata"]["annotations"][key] = value
    for entry in node["metadata"]["managedFields"]:
        ((entry["fieldsV1"].get("f:metadata") or {}).get("f:annotations") or {}).pop("f:" + key, None)
    node["metadata"]["managedFields"] += managed_fields(manager, at, annotations=[key])
    return node
