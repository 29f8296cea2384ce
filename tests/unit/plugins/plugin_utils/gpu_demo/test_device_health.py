# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The devices' health as the kubelet writes it into pod status (plugin_utils/_gpu_demo/device_health.py), on pods
shaped as a v1.36 kubelet writes them: through a device plugin, and through a DRA driver."""

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.device_health import (
    add_queue_pod_health,
    device_name,
    judge_hold_health,
    pod_device_health,
    pods_device_health,
)
from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.pod_wait import summarize

UUID = "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
OTHER = "GPU-11111111-2222-3333-4444-555555555555"
CLAIM_UID = "5b0c0e5e-9c1f-4c57-9d0e-0d4c0d9a6f11"


def api_pod(name, statuses, container="smi"):
    """A Pod as the API server returns it; ``statuses`` is the container's allocatedResourcesStatus (None: absent)."""
    container_status = {"name": container, "ready": True, "state": {"running": {"startedAt": "2026-12-02T16:00:00Z"}}}
    if statuses is not None:
        container_status["allocatedResourcesStatus"] = statuses
    return {"metadata": {"name": name, "namespace": "gpu-operator"}, "spec": {"nodeName": "prod102"},
            "status": {"phase": "Running", "containerStatuses": [container_status]}}


def plugin_status(*devices):
    return [{"name": "nvidia.com/gpu", "resources": [{"resourceID": uuid, "health": health} for uuid, health in devices]}]


def claim_status(device, health, message=None, request="gpu"):
    entry = {"resourceID": "k8s.gpu.nvidia.com/claim={0}-{1}".format(CLAIM_UID, device), "health": health}
    if message:
        entry["message"] = message
    return [{"name": "claim:gpu/{0}".format(request), "resources": [entry]}]


def waited(pod, **changes):
    """The pod as pod_wait returns it (its summary), with the wait's own keys."""
    return dict(summarize(pod), exists=True, **changes)


def test_devices_are_named_as_a_person_names_them():
    assert device_name("nvidia.com/gpu", UUID) == UUID
    assert device_name("nvidia.com/gpu", UUID + "::3") == UUID + "::3"
    assert device_name("claim:gpu/gpu", "k8s.gpu.nvidia.com/claim={0}-gpu-0".format(CLAIM_UID)) == "gpu-0"
    assert device_name("claim:gpu/gpu", "k8s.gpu.nvidia.com/claim={0}-gpu-2-mig-1g10gb-19-0".format(CLAIM_UID)) == \
        "gpu-2-mig-1g10gb-19-0"
    # Without a CDI device ID the kubelet names it <driver>/<pool>/<device>.
    assert device_name("claim:gpu/gpu", "gpu.nvidia.com/prod102/gpu-1") == "gpu-1"
    assert device_name("claim:gpu/gpu", "vendor.example/device=other") == "other"


def test_pod_waits_summary_reads_the_health_the_api_pod_carries():
    pod = api_pod("gpu-demo-hold", plugin_status((UUID, "Healthy")))
    expected = {"pod": "gpu-demo-hold", "reported": True, "devices": [
        {"container": "smi", "resource": "nvidia.com/gpu", "device": UUID, "resource_id": UUID, "health": "Healthy",
         "message": None}]}
    assert pod_device_health(waited(pod)) == expected


def test_a_healthy_hold_passes_naming_every_device():
    pods = [waited(api_pod("gpu-demo-hold-0", plugin_status((UUID, "Healthy")))),
            waited(api_pod("gpu-demo-hold-1", plugin_status((OTHER, "Healthy"))))]
    health, check = judge_hold_health([pods], ["gpu-demo-hold-0", "gpu-demo-hold-1"])
    assert check["id"] == "hold_devices_healthy" and check["phase"] == "queue" and check["passed"]
    assert check["detail"] == "Healthy: {0} in pod gpu-demo-hold-0, {1} in pod gpu-demo-hold-1".format(UUID, OTHER)
    assert [device["health"] for pod in health for device in pod["devices"]] == ["Healthy", "Healthy"]


def test_a_gpu_that_turns_unhealthy_while_held_fails_naming_the_device_and_the_pod():
    hold = [waited(api_pod("gpu-demo-hold", plugin_status((UUID, "Healthy"))))]
    queue = [waited(api_pod("gpu-demo-hold", plugin_status((UUID, "Unhealthy")))), {"name": "gpu-demo-queue", "exists": True}]
    health, check = judge_hold_health([hold, queue], ["gpu-demo-hold"])
    assert not check["passed"]
    assert check["detail"] == "the kubelet reports Unhealthy: {0} in pod gpu-demo-hold".format(UUID)
    assert health[0]["devices"][0]["health"] == "Unhealthy"


def test_unhealthy_once_stays_unhealthy_though_it_reads_healthy_later():
    hold = [waited(api_pod("gpu-demo-hold", plugin_status((UUID, "Unhealthy"))))]
    queue = [waited(api_pod("gpu-demo-hold", plugin_status((UUID, "Healthy"))))]
    assert not judge_hold_health([hold, queue], ["gpu-demo-hold"])[1]["passed"]
    # A pod gone from the later snapshot keeps what the earlier one said.
    assert not judge_hold_health([hold, [{"name": "gpu-demo-hold", "exists": False}]], ["gpu-demo-hold"])[1]["passed"]


def test_an_unhealthy_dra_device_names_the_device_the_claim_and_the_drivers_message():
    pods = [waited(api_pod("gpu-demo-hold-0", claim_status("gpu-1", "Unhealthy", "critical XID 79 reported by NVML"))),
            waited(api_pod("gpu-demo-hold-1", claim_status("gpu-0", "Healthy")))]
    _health, check = judge_hold_health([pods], ["gpu-demo-hold-0", "gpu-demo-hold-1"])
    assert not check["passed"]
    assert check["detail"] == ("the kubelet reports Unhealthy: gpu-1 in pod gpu-demo-hold-0 (claim:gpu/gpu): critical XID 79 "
                               "reported by NVML; Healthy: gpu-0 in pod gpu-demo-hold-1 (claim:gpu/gpu)")


def test_unknown_alone_is_not_judged_never_passed():
    # A DRA driver that serves no health: the kubelet reports its devices Unknown.
    pods = [waited(api_pod("gpu-demo-hold", claim_status("gpu-0", "Unknown")))]
    _health, check = judge_hold_health([pods], ["gpu-demo-hold"])
    assert check["passed"] is None
    assert check["detail"] == "not judged: Unknown (reported, not failed): gpu-0 in pod gpu-demo-hold (claim:gpu/gpu)"
    # An entry without a health is Unknown, as the API documents.
    pods = [waited(api_pod("gpu-demo-hold", [{"name": "nvidia.com/gpu", "resources": [{"resourceID": UUID}]}]))]
    assert judge_hold_health([pods], ["gpu-demo-hold"])[1]["detail"] == \
        "not judged: Unknown (reported, not failed): {0} in pod gpu-demo-hold".format(UUID)
    # Beside a Healthy device, Unknown is said and the check passes on what was read.
    pods = [waited(api_pod("gpu-demo-hold-0", claim_status("gpu-0", "Unknown"))),
            waited(api_pod("gpu-demo-hold-1", claim_status("gpu-1", "Healthy")))]
    assert judge_hold_health([pods], ["gpu-demo-hold-0", "gpu-demo-hold-1"])[1]["passed"] is True


def test_an_older_kubelet_that_writes_nothing_is_not_judged_never_passed():
    pods = [waited(api_pod("gpu-demo-hold", None))]
    health, check = judge_hold_health([pods], ["gpu-demo-hold"])
    assert check["passed"] is None and not health[0]["reported"]
    assert check["detail"] == ("not judged: the kubelet writes no device health into the status of gpu-demo-hold (Kubernetes before "
                               "1.36, its ResourceHealthStatus feature gate off, or GPUs that DRA serves for a plain "
                               "extended-resource request, whose health the kubelet does not report)")
    # A pod the waits never saw is said the same way.
    assert judge_hold_health([[]], ["gpu-demo-hold"])[1]["passed"] is None


def test_an_empty_report_is_told_apart_from_none():
    pods = [waited(api_pod("gpu-demo-hold", []))]
    health, check = judge_hold_health([pods], ["gpu-demo-hold"])
    assert check["passed"] is None and health[0]["reported"]
    assert check["detail"] == "not judged: the kubelet reports no device of the hold pods"


def test_other_pods_are_not_judged():
    pods = [waited(api_pod("someone-else", plugin_status((OTHER, "Unhealthy")))),
            waited(api_pod("gpu-demo-hold", plugin_status((UUID, "Healthy"))))]
    health = pods_device_health([pods], ["gpu-demo-hold"])
    assert [pod["pod"] for pod in health] == ["gpu-demo-hold"]


def test_the_queue_pods_unhealthy_device_fails_the_hand_over_and_a_healthy_one_leaves_it_alone():
    passed = {"id": "queue_got_held_gpu", "passed": True, "detail": "the queue pod saw {0}; the hold had {0}".format(UUID)}
    release = {"pods": [waited(api_pod("gpu-demo-queue", plugin_status((UUID, "Healthy"))), phase="Succeeded")]}
    checks = [dict(passed)]
    health = add_queue_pod_health(checks, release, "gpu-demo-queue")
    assert checks == [passed] and health["devices"][0]["health"] == "Healthy"

    release = {"pods": [waited(api_pod("gpu-demo-queue", plugin_status((UUID, "Unhealthy"))))]}
    checks = [dict(passed)]
    add_queue_pod_health(checks, release, "gpu-demo-queue")
    assert checks[0]["passed"] is False
    assert checks[0]["detail"] == ("the queue pod saw {0}; the hold had {0}; device health: the kubelet reports Unhealthy: "
                                   "{0} in pod gpu-demo-queue").format(UUID)
