# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pre-flight's judgement of a node: before-state, plan, checks and their reasons."""


import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.scheduling.plugins.filter.gpu_demo import gpu_demo_preflight
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo.preflight import judge_admission, judge_node, tolerates

SETTINGS = dict(node="prod102", resource="nvidia.com/gpu", namespace="gpu-operator",
                pod_names=["gpu-demo-hold", "gpu-demo-queue", "gpu-demo-bypass-probe"], hold_mode="per_unit",
                hold_seconds=300, timeout=120, allow_busy_node=False, vllm_url="http://127.0.0.1:8000/health",
                vllm_require_healthy=True)
HEALTHY = {"healthy": True, "status": 200, "latency_ms": 3.2, "error": None}


def ledger(holders=(), allocatable=8, ready=True, unschedulable=False, labels=None, resource="nvidia.com/gpu"):
    held = sum(pod["units"] for pod in holders)
    return {"ledger": {"nodes": {"prod102": {
        "ready": ready, "unschedulable": unschedulable, "labels": labels or {}, "taints": [], "operator_running": {},
        "resources": {resource: {"capacity": allocatable, "allocatable": allocatable, "requested": held, "limits": held,
                                 "free": allocatable - held, "holders": list(holders)}}}}, "pending": []}}


def pod(name, units=1, namespace="default"):
    return {"namespace": namespace, "name": name, "units": units}


def checks(judgement):
    return {check["id"]: check for check in judgement["checks"]}


def test_an_idle_node_passes_and_plans_every_unit():
    judgement = judge_node(ledger(), HEALTHY, SETTINGS)
    assert all(check["passed"] for check in judgement["checks"]), judgement["checks"]
    assert [check["id"] for check in judgement["checks"]] == [
        "node_name_valid", "hold_outlives_waits", "timeout_usable", "vllm_healthy_before", "node_found",
        "node_ready", "node_schedulable", "resource_allocatable", "node_not_busy"]
    assert judgement["plan"] == {"units": 8, "replicas": 1, "mode": "per_unit"}
    assert checks(judgement)["vllm_healthy_before"]["detail"] == "inference server http://127.0.0.1:8000/health answered 200 in 3.2 ms"
    assert judgement["before"]["vllm"] == dict(HEALTHY, checked=True, url=SETTINGS["vllm_url"])


def test_a_busy_node_is_refused_naming_the_holders():
    judgement = judge_node(ledger([pod("vllm-h20", 6), pod("train", 1, "ml")]), HEALTHY, SETTINGS)
    busy = checks(judgement)["node_not_busy"]
    assert not busy["passed"]
    assert busy["detail"] == ("7 unit(s) held by default/vllm-h20, ml/train; refusing a busy node "
                              "(gpu_demo_allow_busy_node=false): wait for them to end, or set gpu_demo_allow_busy_node=true "
                              "to hold only the free units (kubectl get pods -A --field-selector spec.nodeName=prod102)")
    assert judgement["before"]["held_by_others"] == 7 and judgement["plan"]["units"] == 1


def test_allowed_busy_node_holds_only_the_free_units():
    judgement = judge_node(ledger([pod("vllm-h20", 8)]), HEALTHY, dict(SETTINGS, allow_busy_node=True))
    assert checks(judgement)["node_not_busy"]["passed"]
    assert checks(judgement)["node_not_busy"]["detail"].endswith("allowed by gpu_demo_allow_busy_node, the hold takes the 0 free unit(s)")
    assert checks(judgement)["free_units"]["passed"] is False
    assert checks(judgement)["free_units"]["detail"] == (
        "0 free unit(s) of nvidia.com/gpu to hold: other pods hold every unit; run again when one ends "
        "(kubectl get pods -A --field-selector spec.nodeName=prod102)")


def test_an_interrupted_runs_pods_are_leftovers_not_other_users():
    holders = [pod("gpu-demo-hold-0", 1, "gpu-operator"), pod("gpu-demo-queue", 1, "gpu-operator"),
               pod("gpu-demo-hold-0", 1, "default"), pod("gpu-demo-holder", 1, "gpu-operator")]
    judgement = judge_node(ledger(holders), HEALTHY, SETTINGS)
    assert [p["name"] for p in judgement["before"]["leftovers"]] == ["gpu-demo-hold-0", "gpu-demo-queue"]
    assert [p["namespace"] + "/" + p["name"] for p in judgement["before"]["others"]] == [
        "default/gpu-demo-hold-0", "gpu-operator/gpu-demo-holder"]
    assert judgement["before"]["held_by_others"] == 2 and judgement["plan"]["units"] == 6


def test_an_unreadable_ledger_gives_one_reason():
    judgement = judge_node({"failed": True, "msg": "node 'prod999' not found on https://127.0.0.1:16443"}, HEALTHY,
                           dict(SETTINGS, node="prod999"))
    assert [c["id"] for c in judgement["checks"] if not c["passed"]] == ["node_found"]
    assert checks(judgement)["node_found"]["detail"] == "node 'prod999' not found on https://127.0.0.1:16443"
    assert judgement["before"]["found"] is False and judgement["before"]["error"].startswith("node 'prod999'")
    assert judgement["plan"]["units"] == 0


def test_a_node_without_the_resource_is_named():
    judgement = judge_node(ledger(resource="nvidia.com/mig-1g.10gb"), HEALTHY, SETTINGS)
    assert checks(judgement)["node_found"] == {"id": "node_found", "phase": "preflight", "passed": False, "detail": (
        "node prod102 does not advertise nvidia.com/gpu: no device plugin on it offers that resource. Check the resource name "
        "(gpu_demo_resource) against what the node offers: kubectl get node prod102 -o jsonpath='{.status.allocatable}'")}
    assert "node_ready" not in checks(judgement)


def operator_ledger(**state):
    judged = ledger(**state)
    judged["ledger"]["operator"] = {"namespace": "gpu-operator", "pods": [], "running": {}}
    return judged


def test_gpus_without_a_registered_device_plugin_are_named_with_where_to_look():
    """The labels say GPUs, the node advertises no nvidia.com/gpu at all: the plugin never registered."""
    judged = operator_ledger(resource="example.com/other", labels={"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "1"})
    detail = checks(judge_node(judged, HEALTHY, SETTINGS))["node_found"]["detail"]
    assert detail.startswith("node prod102 does not advertise nvidia.com/gpu, although its labels say it has GPUs "
                             "(nvidia.com/gpu.present=true, nvidia.com/gpu.count=1): the NVIDIA device plugin has not registered")
    assert "kubectl -n gpu-operator get pods -o wide --field-selector spec.nodeName=prod102" in detail
    # Wrong world: no GPU label, nothing is blamed on the plugin.
    plain = checks(judge_node(operator_ledger(resource="example.com/other"), HEALTHY, SETTINGS))["node_found"]["detail"]
    assert "device plugin has not registered" not in plain and "gpu_demo_resource" in plain


def ledger_with(capacity, allocatable, labels=None):
    judged = operator_ledger(labels=labels)
    judged["ledger"]["nodes"]["prod102"]["resources"]["nvidia.com/gpu"].update(capacity=capacity, allocatable=allocatable, free=allocatable)
    return judged


@pytest.mark.parametrize("capacity, labels, says, not_says", [
    # Capacity but nothing allocatable: every device unhealthy, or the plugin stopped.
    (1, {"nvidia.com/gpu.present": "true"},
     ("allocatable nvidia.com/gpu = 0 while its capacity is 1", "device plugin stopped", "Unhealthy",
      "kubectl -n gpu-operator get pods", "kubectl describe node prod102"),
     ("MIG",)),
    # Nothing at all while the labels say GPUs: never registered.
    (0, {"nvidia.com/gpu.present": "true"}, ("(capacity 0) although its labels say it has GPUs", "has not registered"),
     ("Unhealthy",)),
    # Mixed MIG: the whole-GPU resource is empty on purpose.
    (0, {"nvidia.com/gpu.present": "true", "nvidia.com/mig.strategy": "mixed"}, ("MIG devices", "set gpu_demo_resource"),
     ("has not registered", "Unhealthy")),
    # No GPU label, no capacity: no blame on a plugin.
    (0, {}, ("(capacity 0): the node offers no unit",), ("device plugin",)),
])
def test_allocatable_zero_says_why_and_where_to_look(capacity, labels, says, not_says):
    detail = checks(judge_node(ledger_with(capacity, 0, labels), HEALTHY, SETTINGS))["resource_allocatable"]
    assert detail["passed"] is False
    assert all(text in detail["detail"] for text in says), detail
    assert not any(text in detail["detail"] for text in not_says), detail
    healthy = checks(judge_node(ledger_with(1, 1, labels), HEALTHY, SETTINGS))["resource_allocatable"]
    assert healthy == {"id": "resource_allocatable", "phase": "preflight", "passed": True, "detail": "allocatable nvidia.com/gpu = 1"}


@pytest.mark.parametrize("state,passed,detail,look", [
    (dict(ready=False), False, "node prod102 is not Ready", "kubectl describe node prod102"),
    (dict(unschedulable=True), False, "node prod102 is cordoned (spec.unschedulable)", "kubectl uncordon prod102"),
    (dict(allocatable=0), False, "allocatable nvidia.com/gpu = 0", "kubectl describe node prod102"),
])
def test_node_state_checks(state, passed, detail, look):
    judged = checks(judge_node(ledger(**state), HEALTHY, SETTINGS))
    assert any(check["detail"].startswith(detail) and look in check["detail"] and check["passed"] is passed
               for check in judged.values()), judged
    assert all(look not in check["detail"] for check in checks(judge_node(ledger(), HEALTHY, SETTINGS)).values())


@pytest.mark.parametrize("vllm,require,passed,detail", [
    ({"healthy": False, "status": 503, "latency_ms": 2.0}, True, False,
     "inference server http://127.0.0.1:8000/health answered 503 in 2.0 ms; refusing the node (gpu_demo_vllm_require_healthy=true)"),
    ({"healthy": False, "status": None, "error": "connection refused"}, False, True,
     "inference server http://127.0.0.1:8000/health did not answer: connection refused; proceeding (gpu_demo_vllm_require_healthy=false)"),
    ({"failed": True, "msg": "boom"}, True, False,
     "inference server http://127.0.0.1:8000/health did not answer: boom; refusing the node (gpu_demo_vllm_require_healthy=true)"),
])
def test_the_inference_server_answer_is_judged(vllm, require, passed, detail):
    check = checks(judge_node(ledger(), vllm, dict(SETTINGS, vllm_require_healthy=require)))["vllm_healthy_before"]
    assert (check["passed"], check["detail"]) == (passed, detail)


def test_no_inference_server_url_means_not_checked():
    judgement = judge_node(ledger(), {}, dict(SETTINGS, vllm_url=""))
    assert checks(judgement)["vllm_healthy_before"]["passed"]
    assert checks(judgement)["vllm_healthy_before"]["detail"].startswith("inference server (not checked)")
    assert judgement["before"]["vllm"]["checked"] is False


def test_names_timeouts_and_replicas():
    judged = judge_node(ledger(labels={"nvidia.com/gpu.replicas": "4"}), HEALTHY,
                        dict(SETTINGS, node="Prod_102", hold_seconds="200", timeout=0))
    by_id = checks(judged)
    assert not by_id["node_name_valid"]["passed"] and "'Prod_102' is not a valid node name" in by_id["node_name_valid"]["detail"]
    assert by_id["hold_outlives_waits"]["passed"] and by_id["hold_outlives_waits"]["detail"].startswith(
        "gpu_demo_hold_seconds (200) exceeds twice gpu_demo_timeout (0)")
    assert by_id["timeout_usable"]["detail"].startswith("gpu_demo_timeout (0) must be at least 1 second")
    assert judge_node(ledger(labels={"nvidia.com/gpu.replicas": "4"}), HEALTHY, SETTINGS)["plan"]["replicas"] == 4
    assert judge_node(ledger(labels={"nvidia.com/gpu.replicas": "4"}, resource="amd.com/gpu"), HEALTHY,
                      dict(SETTINGS, resource="amd.com/gpu"))["plan"]["replicas"] == 1


def test_the_filter_names_a_missing_setting_and_a_wrong_input():
    with pytest.raises(AnsibleFilterError, match="missing setting.*timeout"):
        gpu_demo_preflight(ledger(), HEALTHY, **{k: v for k, v in SETTINGS.items() if k != "timeout"})
    with pytest.raises(AnsibleFilterError, match="registered results"):
        gpu_demo_preflight("not a result", HEALTHY, **SETTINGS)
    assert gpu_demo_preflight(ledger(), HEALTHY, **SETTINGS)["plan"]["units"] == 8


CLASS = "gpuops-preflight-no-preempt"


def admitted(name, policy="Never", kind="Pod"):
    """One object as pod_admission says the API server's dry run admitted it."""
    return {"kind": kind, "name": name, "namespace": "gpu-operator", "admitted": True,
            "preemption_policy": policy if kind == "Pod" else None, "priority_class_name": CLASS if kind == "Pod" else None,
            "status": None, "reason": None, "message": None}


def refused(name, message, reason="Forbidden", status=403):
    """One object as pod_admission says the API server refused it (the API's Status, verbatim)."""
    return {"kind": "Pod", "name": name, "namespace": "gpu-operator", "admitted": False, "preemption_policy": None,
            "priority_class_name": None, "status": status, "reason": reason, "message": message}


def dry_run(*objects, **existing):
    """pod_admission's result."""
    return {"changed": False, "admitted": all(item["admitted"] for item in objects), "objects": list(objects),
            "existing": [{"name": name} for name in existing.get("existing", [])]}


def admission_checks(result, create=True, leftovers=()):
    judged = judge_admission(result, CLASS, create, leftovers)
    return judged, dict((check["id"], (check["passed"], check["detail"])) for check in judged["checks"])


def test_pods_the_api_server_admits_without_preemption():
    judged, checks = admission_checks(dry_run(admitted("gpu-demo-hold"), admitted("gpu-demo-queue")))
    assert checks == {
        "demo_pods_admitted": (True, "the API server admits the 2 demo pod(s) (dry run)"),
        "demo_pods_never_preempt": (True, "PriorityClass gpuops-preflight-no-preempt gives the demo pods preemptionPolicy Never"),
    }
    assert judged == {"priority_class_missing": False, "checks": judged["checks"]}


def test_a_class_that_lets_demo_pods_preempt_is_refused():
    _judged, checks = admission_checks(dry_run(admitted("gpu-demo-hold", "PreemptLowerPriority"), admitted("gpu-demo-queue")))
    assert checks["demo_pods_never_preempt"] == (
        False, "PriorityClass gpuops-preflight-no-preempt gives the demo pods preemptionPolicy PreemptLowerPriority, Never: it must "
               "be Never, so that a demo pod never evicts anything")


def test_a_missing_class_the_run_creates_is_no_refusal_unless_it_may_not():
    message = 'pods "gpu-demo-hold" is forbidden: no PriorityClass with name gpuops-preflight-no-preempt was found'
    missing = dry_run(refused("gpu-demo-hold", message), refused("gpu-demo-queue", message.replace("hold", "queue")))
    judged, checks = admission_checks(missing)
    assert judged["priority_class_missing"] is True
    assert checks == {
        "demo_pods_admitted": (True, "PriorityClass gpuops-preflight-no-preempt does not exist yet: the run creates it "
                                     "(value 0, preemptionPolicy Never)"),
        "demo_pods_never_preempt": (True, "the run creates PriorityClass gpuops-preflight-no-preempt with preemptionPolicy Never"),
    }
    _judged, checks = admission_checks(dry_run(refused("gpu-demo-hold", message)), create=False)
    assert checks == {"demo_pods_admitted": (False, message + ": create PriorityClass gpuops-preflight-no-preempt (value 0, "
                                             "preemptionPolicy Never), or let the run create it (gpu_demo_create_priority_class=true; "
                                             "needs create on priorityclasses)")}


def test_a_dry_run_that_failed_otherwise_gives_one_reason():
    _judged, checks = admission_checks(dry_run(refused("gpu-demo-hold", 'namespaces "nope" not found', "NotFound", 404)))
    assert checks == {"demo_pods_admitted": (False, "namespace nope does not exist: the demo creates its pods there. Create it "
                                                    "(kubectl create namespace nope) or set gpu_demo_namespace to an existing one")}
    forbidden = 'pods "gpu-demo-queue" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=1'
    _judged, checks = admission_checks(dry_run(admitted("gpu-demo-hold"), refused("gpu-demo-queue", forbidden)))
    assert checks == {"demo_pods_admitted": (False, "the server-side dry run of the demo pods failed: {0} (kubectl apply "
                                                    "--dry-run=server -f <the pods> shows the same)".format(forbidden))}
    _judged, checks = admission_checks({"failed": True, "msg": "could not reach https://127.0.0.1:16443"})
    assert checks == {"demo_pods_admitted": (False, "the server-side dry run of the demo pods could not be made: could not reach "
                                                    "https://127.0.0.1:16443")}


def test_a_dry_run_not_made_judges_nothing():
    assert admission_checks({"skipped": True})[1] == {} and admission_checks({})[1] == {}


def test_names_an_earlier_runs_leftovers_hold_are_no_refusal_and_are_asked_about_again():
    taken = refused("gpu-demo-hold", 'pods "gpu-demo-hold" already exists', "AlreadyExists", 409)
    _judged, checks = admission_checks(dry_run(taken, admitted("gpu-demo-queue")), leftovers=["gpu-demo-hold"])
    assert checks == {
        "demo_pods_admitted": (True, "the API server admits the 1 demo pod(s) (dry run); gpu-demo-hold is taken by a pod an "
                                     "earlier run left, removed before the walk"),
        "demo_pods_never_preempt": (True, "PriorityClass gpuops-preflight-no-preempt gives the demo pods preemptionPolicy Never")}
    _judged, checks = admission_checks(dry_run(taken), leftovers=["gpu-demo-hold"])
    assert checks["demo_pods_admitted"][0] is True and checks["demo_pods_never_preempt"][0] is None
    # A name taken by a pod that is no leftover of ours is a refusal.
    _judged, checks = admission_checks(dry_run(taken, admitted("gpu-demo-queue")))
    assert checks["demo_pods_admitted"][0] is False and "already exists" in checks["demo_pods_admitted"][1]


DEFAULT_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
GATE_TOLERATION = {"key": "gpuops.scheduling/gpu-preflight-pending", "operator": "Exists", "effect": "NoSchedule"}


def tainted(*taints, **state):
    built = ledger(**state)
    built["ledger"]["nodes"]["prod102"]["taints"] = [dict(zip(("key", "value", "effect"), taint)) for taint in taints]
    return built


class TestTaints:
    """The node's taints against the demo pods' tolerations, before anything is created."""

    def judged(self, built, tolerations=None):
        settings = dict(SETTINGS, tolerations=DEFAULT_TOLERATIONS if tolerations is None else tolerations)
        return checks(judge_node(built, HEALTHY, settings))

    def test_a_foreign_taint_is_refused_naming_it_and_the_variable(self):
        found = self.judged(tainted(("team.example.com/reserved", "ml", "NoSchedule"), ("nvidia.com/gpu", "present", "NoSchedule")))
        taint = found["node_taints_tolerated"]
        assert taint["passed"] is False and taint["phase"] == "preflight"
        assert taint["detail"] == (
            "node prod102 has 1 taint(s) the demo pods do not tolerate, so the scheduler would place none of them there: "
            "key team.example.com/reserved, value ml, effect NoSchedule. If the demo may run beside what the taint keeps "
            "away, add a toleration to gpu_demo_tolerations (for example {key: team.example.com/reserved, operator: Equal, "
            "value: ml, effect: NoSchedule}); otherwise remove the taint when the node may take work (kubectl taint node "
            "prod102 team.example.com/reserved=ml:NoSchedule-)")

    def test_the_toleration_given_passes_naming_what_is_tolerated(self):
        built = tainted(("team.example.com/reserved", "ml", "NoSchedule"))
        toleration = {"key": "team.example.com/reserved", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
        found = self.judged(built, DEFAULT_TOLERATIONS + [toleration])
        assert found["node_taints_tolerated"] == {
            "id": "node_taints_tolerated", "phase": "preflight", "passed": True,
            "detail": "the demo pods tolerate every NoSchedule and NoExecute taint of node prod102: "
                      "team.example.com/reserved=ml:NoSchedule"}

    def test_an_untainted_node_passes(self):
        assert self.judged(tainted())["node_taints_tolerated"]["detail"] == (
            "the demo pods tolerate every NoSchedule and NoExecute taint of node prod102 (it has none)")

    def test_prefer_no_schedule_does_not_block_and_no_execute_does(self):
        assert self.judged(tainted(("soft", None, "PreferNoSchedule")))["node_taints_tolerated"]["passed"] is True
        found = self.judged(tainted(("drain", None, "NoExecute")))["node_taints_tolerated"]
        assert found["passed"] is False and "key drain, value (none), effect NoExecute" in found["detail"]
        assert "{key: drain, operator: Exists, effect: NoExecute}" in found["detail"]

    def test_the_gates_own_toleration_tolerates_the_startup_taint(self):
        built = tainted(("gpuops.scheduling/gpu-preflight-pending", None, "NoSchedule"))
        assert self.judged(built)["node_taints_tolerated"]["passed"] is False
        assert self.judged(built, DEFAULT_TOLERATIONS + [GATE_TOLERATION])["node_taints_tolerated"]["passed"] is True

    def test_taints_other_checks_name_the_cause_of_are_theirs(self):
        found = self.judged(tainted(("node.kubernetes.io/unschedulable", None, "NoSchedule"), unschedulable=True))
        assert found["node_schedulable"]["passed"] is False and found["node_taints_tolerated"]["passed"] is True
        found = self.judged(tainted(("node.kubernetes.io/not-ready", None, "NoExecute"), ready=False))
        assert found["node_ready"]["passed"] is False and found["node_taints_tolerated"]["passed"] is True

    @pytest.mark.parametrize("toleration, taint, expected", [
        ({"operator": "Exists"}, ("any", "x", "NoExecute"), True),                        # empty key, Exists: every taint
        ({"key": "k", "operator": "Exists"}, ("k", "v", "NoSchedule"), True),             # empty effect: every effect
        ({"key": "k", "operator": "Equal", "value": "v"}, ("k", "v", "NoExecute"), True),
        ({"key": "k", "value": "v"}, ("k", "v", "NoSchedule"), True),                     # no operator means Equal
        ({"key": "k", "operator": "Equal", "value": "v"}, ("k", "w", "NoSchedule"), False),
        ({"key": "k", "operator": "Equal"}, ("k", None, "NoSchedule"), True),             # empty value equals none
        ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, ("k", None, "NoExecute"), False),
        ({"key": "j", "operator": "Exists"}, ("k", None, "NoSchedule"), False),
        ({"key": "k", "operator": "Gt", "value": "1"}, ("k", "2", "NoSchedule"), False),  # unknown operator: no match
    ])
    def test_tolerations_match_as_kubernetes_matches_them(self, toleration, taint, expected):
        assert tolerates(toleration, dict(zip(("key", "value", "effect"), taint))) is expected
