"""Who took the unit the hold released: another pod, bound after the release, with the node full again."""
import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import unit_claims
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.pod_wait import parse_time

SINCE = parse_time("2026-11-29T21:00:02.400Z")


def pod(name, namespace="ml", units=1, bound="2026-11-29T21:00:03Z", phase="Running", priority=1000, klass="training",
        labels=None):
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"nodeName": "prod102", "priority": priority, "priorityClassName": klass,
                     "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(units)}} if units else {}}]},
            "status": {"phase": phase, "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": bound}]}}


def ours(candidate):
    return candidate["metadata"]["namespace"] == "gpu-operator"


def claim(pods, allocatable=1):
    return unit_claims.foreign_claim(pods, allocatable, "nvidia.com/gpu", SINCE, ours)


def test_a_pod_bound_after_the_release_that_fills_the_node_took_the_unit():
    found = claim([pod("train-0"), pod("vllm", namespace="default", units=0, bound="2026-11-29T20:00:00Z")])
    assert found == {"namespace": "ml", "name": "train-0", "priority": 1000, "priority_class": "training",
                     "bound_at": "2026-11-29T21:00:03.000Z", "units": 1}
    message = unit_claims.foreign_claim_message(found, "prod102", "nvidia.com/gpu", "gpu-demo-queue")
    assert message.startswith("pod ml/train-0 (priority 1000, PriorityClass training) was bound to node prod102 at "
                              "2026-11-29T21:00:03.000Z, after the hold released nvidia.com/gpu")
    assert "gpu-demo-queue stays Pending" in message and "left alone" in message


def test_bound_in_the_second_the_unit_was_freed_counts():
    # API times have whole seconds: 21:00:02 is the second of the release (21:00:02.400).
    assert claim([pod("train-0", bound="2026-11-29T21:00:02Z")])["name"] == "train-0"


@pytest.mark.parametrize("pods, allocatable, why", [
    ([pod("train-0")], 2, "a unit is still free: the scheduler may still give it to the queue pod"),
    ([pod("train-0", bound="2026-11-29T20:59:00Z")], 1, "bound before the release: not the pod that took it"),
    ([pod("gpu-demo-queue", namespace="gpu-operator")], 1, "our own pod"),
    ([pod("train-0", phase="Succeeded")], 1, "ended: holds nothing"),
    ([pod("sidecar", units=0), pod("old", bound="2026-11-29T20:00:00Z")], 1, "asks for no GPU; the one holder is old"),
    ([], 1, "nobody on the node"),
])
def test_wrong_worlds_name_nobody(pods, allocatable, why):
    assert claim(pods, allocatable) is None, why


def test_the_first_bound_of_several_is_named():
    found = claim([pod("b", bound="2026-11-29T21:00:05Z"), pod("a", bound="2026-11-29T21:00:04Z")], allocatable=2)
    assert found["name"] == "a"


def test_allocatable_of_a_node():
    assert unit_claims.node_allocatable({"status": {"allocatable": {"nvidia.com/gpu": "4"}}}, "nvidia.com/gpu") == 4
    assert unit_claims.node_allocatable({}, "nvidia.com/gpu") == 0
