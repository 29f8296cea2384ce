# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ledger's sums, checked against `kubectl describe node` on objects recorded from a real API server.

tests/unit/fixtures/ledger/ holds nodes and pods as the kube-apiserver stored them and kubectl's
description of each node (re-record with tests/unit/fixtures/ledger/record.py).
"""

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from select_fields import select_fields

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import ledger

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "ledger"
NODES = json.loads((FIXTURES / "nodes.json").read_text())
PODS = json.loads((FIXTURES / "pods.json").read_text())
NODE_A, NODE_B = NODES


def kubectl_allocated(node_name):
    """kubectl describe node's Allocated resources table: {resource: (requests, limits)} as Decimals."""
    text = (FIXTURES / "describe-{0}.txt".format(node_name)).read_text()
    table = text.split("Allocated resources:")[1].split("Events:")[0]
    rows = {}
    for line in table.splitlines():
        match = re.match(r"^\s+(\S+)\s+(\S+)(?: \(\d+%\))?\s+(\S+)(?: \(\d+%\))?\s*$", line)
        if match and match.group(1) not in ("Resource", "--------"):
            rows[match.group(1)] = (ledger.parse_quantity(match.group(2)), ledger.parse_quantity(match.group(3)))
    return rows


def pod(name):
    return next(item for item in PODS if item["metadata"]["name"] == name)


def container(name, requests=None, limits=None, restart_policy=None):
    spec = {"name": name, "resources": {}}
    if requests:
        spec["resources"]["requests"] = requests
    if limits:
        spec["resources"]["limits"] = limits
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def pod_spec(containers, init_containers=(), overhead=None, node=None, phase="Running", name="p", namespace="ns"):
    spec = {"containers": list(containers), "initContainers": list(init_containers)}
    if overhead:
        spec["overhead"] = overhead
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": {"phase": phase}}


def gpu_node(name, units, resource="nvidia.com/gpu", labels=None):
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {},
            "status": {"capacity": {resource: str(units), "cpu": "8"}, "allocatable": {resource: str(units), "cpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize("text, expected", [
    ("1", 1), ("2", 2), ("0", 0), ("+3", 3), ("1k", 1000), ("1e3", 1000), ("1e0", 1), ("1E", 10 ** 18),
    ("500m", Decimal("0.5")), ("2750m", Decimal("2.75")), ("1Ki", 1024), ("16Gi", 16 * 1024 ** 3), (".5", Decimal("0.5")),
    ("1.5k", 1500), (7, 7),
])
def test_parse_quantity(text, expected):
    assert ledger.parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "one", "1 GPU", "1KB", "--1"])
def test_parse_quantity_rejects_what_is_not_a_quantity(text):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        ledger.parse_quantity(text)


def test_as_number_keeps_whole_units_integer():
    assert ledger.as_number(Decimal("1E+3")) == 1000 and isinstance(ledger.as_number(Decimal("1E+3")), int)
    assert ledger.as_number(Decimal("0.5")) == 0.5


@pytest.mark.parametrize("name, patterns, expected", [
    ("nvidia.com/gpu", ["nvidia.com/gpu"], True),
    ("nvidia.com/gpu.shared", ["nvidia.com/gpu"], False),
    ("nvidia.com/gpu.shared", ["nvidia.com/gpu", "nvidia.com/gpu.shared"], True),
    ("nvidia.com/mig-1g.10gb", ["nvidia.com/mig-*"], True),
    ("nvidia.com/mig-1g.10gb", ["nvidia.com/gpu"], False),
    ("amd.com/gpu", ["*/gpu"], True),
])
def test_matches_any(name, patterns, expected):
    assert ledger.matches_any(name, patterns) is expected


class TestPodFormula:
    """k8s.io/component-helpers/resource PodRequests/PodLimits on hand-made pods."""

    def test_app_containers_are_summed(self):
        pod_object = pod_spec([container("a", limits={"nvidia.com/gpu": "1"}), container("b", limits={"nvidia.com/gpu": "2"})])
        assert ledger.pod_requests(pod_object) == {"nvidia.com/gpu": 3}
        assert ledger.pod_limits(pod_object) == {"nvidia.com/gpu": 3}

    def test_a_limit_alone_is_the_request(self):
        assert ledger.pod_requests(pod_spec([container("a", limits={"nvidia.com/gpu": "2"})])) == {"nvidia.com/gpu": 2}

    def test_an_explicit_request_wins_over_the_limit(self):
        pod_object = pod_spec([container("a", requests={"cpu": "1"}, limits={"cpu": "2"})])
        assert ledger.pod_requests(pod_object) == {"cpu": 1}
        assert ledger.pod_limits(pod_object) == {"cpu": 2}

    def test_a_larger_init_container_sets_the_floor(self):
        pod_object = pod_spec([container("app", limits={"nvidia.com/gpu": "1"})], [container("init", limits={"nvidia.com/gpu": "4"})])
        assert ledger.pod_requests(pod_object) == {"nvidia.com/gpu": 4}

    def test_a_smaller_init_container_changes_nothing(self):
        pod_object = pod_spec([container("app", limits={"nvidia.com/gpu": "2"})], [container("init", limits={"nvidia.com/gpu": "1"})])
        assert ledger.pod_requests(pod_object) == {"nvidia.com/gpu": 2}

    def test_init_containers_take_the_largest_not_the_sum(self):
        init = [container("one", limits={"nvidia.com/gpu": "2"}), container("two", limits={"nvidia.com/gpu": "3"})]
        assert ledger.pod_requests(pod_spec([container("app")], init)) == {"nvidia.com/gpu": 3}

    def test_a_sidecar_runs_alongside_the_app(self):
        sidecar = container("proxy", limits={"nvidia.com/gpu": "1"}, restart_policy="Always")
        pod_object = pod_spec([container("app", limits={"nvidia.com/gpu": "1"})], [sidecar])
        assert ledger.pod_requests(pod_object) == {"nvidia.com/gpu": 2}
        assert ledger.pod_limits(pod_object) == {"nvidia.com/gpu": 2}

    def test_an_init_container_after_a_sidecar_runs_beside_it(self):
        init = [container("proxy", limits={"nvidia.com/gpu": "1"}, restart_policy="Always"), container("setup", limits={"nvidia.com/gpu": "2"})]
        assert ledger.pod_requests(pod_spec([container("app", limits={"nvidia.com/gpu": "1"})], init)) == {"nvidia.com/gpu": 3}

    def test_an_init_container_before_a_sidecar_runs_alone(self):
        init = [container("setup", limits={"nvidia.com/gpu": "2"}), container("proxy", limits={"nvidia.com/gpu": "1"}, restart_policy="Always")]
        assert ledger.pod_requests(pod_spec([container("app", limits={"nvidia.com/gpu": "1"})], init)) == {"nvidia.com/gpu": 2}

    def test_overhead_adds_to_requests_and_to_nonzero_limits_only(self):
        pod_object = pod_spec([container("app", requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "2"})],
                              overhead={"cpu": "250m", "memory": "64Mi"})
        assert ledger.pod_requests(pod_object) == {"cpu": Decimal("1.25"), "memory": (1024 + 64) * 1024 ** 2}
        assert ledger.pod_limits(pod_object) == {"cpu": Decimal("2.25")}

    def test_a_pod_without_resources_requests_nothing(self):
        assert ledger.pod_requests({"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "c"}]}}) == {}


class TestAgainstKubectl:
    """Every Allocated resources row of kubectl describe node, from the same recorded objects."""

    @pytest.mark.parametrize("node", NODES, ids=ledger.node_name)
    def test_requests_and_limits_equal_kubectl_describe(self, node):
        result = ledger.build_ledger([node], PODS, patterns=["*"])["nodes"][ledger.node_name(node)]["resources"]
        compared = 0
        for resource, (requests, limits) in kubectl_allocated(ledger.node_name(node)).items():
            if resource not in result:  # kubectl prints ephemeral-storage even when the node does not advertise it
                continue
            assert (result[resource]["requested"], result[resource]["limits"]) == (ledger.as_number(requests), ledger.as_number(limits)), resource
            compared += 1
        assert compared >= 3

    def test_gpu_row_of_the_busy_node(self):
        gpu = ledger.build_ledger(NODES, PODS)["nodes"]["ledger-fixture-a"]["resources"]["nvidia.com/gpu"]
        # 3 (two containers) + 4 (init larger) + 3 (sidecar then init) + 2 (init then sidecar) + 1 + 1 (overhead pod) + 1 (terminating)
        assert {key: gpu[key] for key in ("capacity", "allocatable", "requested", "limits", "free")} == {
            "capacity": 8, "allocatable": 7, "requested": 15, "limits": 15, "free": -8}
        holders = {holder["name"]: holder for holder in gpu["holders"]}
        assert sorted(holders) == ["being-deleted", "explicit-requests", "init-larger", "init-then-sidecar",
                                   "sidecar-then-init", "two-containers", "with-overhead"]
        assert holders["two-containers"] == {"namespace": "gpuops-ledger-fixtures", "name": "two-containers",
                                             "uid": pod("two-containers")["metadata"]["uid"], "phase": "Running",
                                             "units": 3, "priority": 0, "priority_class_name": None, "terminating": False}
        assert holders["init-larger"]["phase"] == "Pending"  # bound, not started: still holds its units
        assert holders["being-deleted"]["terminating"] is True


class TestLedger:
    def test_terminated_pods_hold_nothing(self):
        names = [holder["name"] for holder in ledger.build_ledger(NODES, PODS)["nodes"]["ledger-fixture-a"]["resources"]["nvidia.com/gpu"]["holders"]]
        assert "finished" not in names and "crashed" not in names

    def test_pods_bound_to_other_nodes_are_left_out(self):
        result = ledger.build_ledger([NODE_B], PODS)
        assert list(result["nodes"]) == ["ledger-fixture-b"]
        gpu = result["nodes"]["ledger-fixture-b"]["resources"]["nvidia.com/gpu"]
        assert (gpu["requested"], gpu["free"], [h["name"] for h in gpu["holders"]]) == (2, 0, ["elsewhere"])

    def test_mig_and_shared_resources_by_name_and_pattern(self):
        resources = ledger.build_ledger([NODE_A], PODS, patterns=["nvidia.com/mig-*", "nvidia.com/gpu.shared"])["nodes"]["ledger-fixture-a"]["resources"]
        assert sorted(resources) == ["nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb"]
        assert (resources["nvidia.com/mig-1g.10gb"]["requested"], resources["nvidia.com/mig-1g.10gb"]["free"]) == (2, 5)
        shared = resources["nvidia.com/gpu.shared"]
        assert (shared["requested"], shared["free"]) == (1, 7)
        assert shared["holders"][0]["priority_class_name"] == "system-cluster-critical"
        assert shared["holders"][0]["priority"] == 2000000000

    def test_unbound_pods_asking_for_the_resource_are_pending(self):
        pending = ledger.build_ledger(NODES, PODS)["pending"]
        assert [entry["name"] for entry in pending] == ["waiting"]
        waiting = pending[0]
        assert waiting["requests"] == {"nvidia.com/gpu": 1}
        assert waiting["phase"] == "Pending" and waiting["reason"] == "Unschedulable"
        assert "didn't match Pod's node affinity/selector" in waiting["message"]

    def test_pending_pods_only_for_the_resources_asked(self):
        assert ledger.build_ledger(NODES, PODS, patterns=["nvidia.com/mig-*"])["pending"] == []

    def test_node_state_labels_and_taints(self):
        node = ledger.build_ledger(NODES, PODS)["nodes"]["ledger-fixture-a"]
        assert node["unschedulable"] is True
        assert node["ready"] is False  # no kubelet ever reported the fixture nodes Ready
        assert node["labels"] == {
            "feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559",
            "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/mig.strategy": "mixed"}
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["taints"]
        assert "operator_running" not in node

    def test_totals_add_up_over_nodes(self):
        totals = ledger.build_ledger(NODES, PODS)["totals"]
        assert totals == {"nvidia.com/gpu": {"capacity": 10, "allocatable": 9, "requested": 17, "limits": 17, "free": -8}}

    def test_fleet_leaves_out_nodes_without_gpus_but_keeps_labelled_ones(self):
        cpu_node = {"metadata": {"name": "cpu-1", "labels": {}}, "status": {"capacity": {"cpu": "8"}}}
        broken = {"metadata": {"name": "gpu-broken", "labels": {"nvidia.com/gpu.present": "true"}}, "status": {"capacity": {"cpu": "8"}}}
        result = ledger.build_ledger([cpu_node, broken, gpu_node("gpu-1", 1)], [])
        assert sorted(result["nodes"]) == ["gpu-1", "gpu-broken"]
        assert result["nodes"]["gpu-broken"]["resources"] == {}
        assert result["nodes"]["gpu-1"]["ready"] is True

    def test_an_idle_node(self):
        gpu = ledger.build_ledger([gpu_node("prod102", 1)], [])["nodes"]["prod102"]["resources"]["nvidia.com/gpu"]
        assert gpu == {"capacity": 1, "allocatable": 1, "requested": 0, "limits": 0, "free": 1, "holders": []}

    def test_zero_allocatable_mixed_mig_node_is_reported(self):
        node = gpu_node("mig-node", 0)
        node["status"]["capacity"]["nvidia.com/mig-1g.10gb"] = node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "7"
        resources = ledger.build_ledger([node], [], patterns=["nvidia.com/gpu", "nvidia.com/mig-*"])["nodes"]["mig-node"]["resources"]
        assert (resources["nvidia.com/gpu"]["allocatable"], resources["nvidia.com/mig-1g.10gb"]["free"]) == (0, 7)

    def test_allocatable_falls_back_to_capacity_like_kubectl(self):
        node = gpu_node("old-node", 2)
        del node["status"]["allocatable"]
        assert ledger.build_ledger([node], [])["nodes"]["old-node"]["resources"]["nvidia.com/gpu"]["allocatable"] == 2


class TestOperatorPods:
    @pytest.mark.parametrize("name, labels, component", [
        ("nvidia-device-plugin-daemonset-7xk2p", {"app": "nvidia-device-plugin-daemonset"}, "device_plugin"),
        ("nvdp-nvidia-device-plugin-x2k9q", {"app.kubernetes.io/name": "nvidia-device-plugin"}, "device_plugin"),
        ("nvidia-device-plugin-daemonset-7xk2p", {}, "device_plugin"),
        ("gpu-feature-discovery-r8d5m", {"app": "gpu-feature-discovery"}, "gpu_feature_discovery"),
        ("gpu-operator-node-feature-discovery-worker-9xk2m", {"app.kubernetes.io/name": "node-feature-discovery"}, "node_feature_discovery"),
        ("gpu-operator-node-feature-discovery-worker-9xk2m", {}, "node_feature_discovery"),
        ("gpu-operator-node-feature-discovery-master-6c8f7d9b5-x2x7k", {}, "node_feature_discovery"),
        ("nvidia-device-plugin-mps-control-daemon-abcde", {}, None),
        ("nvidia-operator-validator-2kq9w", {"app": "nvidia-operator-validator"}, None),
        ("gpu-demo-hold", {}, None),
    ])
    def test_components_are_recognised(self, name, labels, component):
        assert ledger.operator_component({"metadata": {"name": name, "labels": labels}}) == component

    def test_running_per_cluster_and_per_node(self):
        def operator_pod(name, node, phase, ready):
            return {"metadata": {"name": name, "labels": {}}, "spec": {"nodeName": node},
                    "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}

        operator = ledger.summarize_operator_pods("gpu-operator", [
            operator_pod("nvidia-device-plugin-daemonset-7xk2p", "prod102", "Running", True),
            operator_pod("nvidia-device-plugin-daemonset-9zz9z", "prod103", "Pending", False),
            operator_pod("gpu-feature-discovery-r8d5m", "prod103", "Running", True),
            operator_pod("nvidia-cuda-validator-hx4fz", "prod102", "Succeeded", False),
        ])
        assert operator["running"] == {"device_plugin": True, "gpu_feature_discovery": True, "node_feature_discovery": False}
        assert [entry["name"] for entry in operator["pods"]] == [
            "nvidia-device-plugin-daemonset-7xk2p", "nvidia-device-plugin-daemonset-9zz9z", "gpu-feature-discovery-r8d5m"]
        assert operator["pods"][0] == {"name": "nvidia-device-plugin-daemonset-7xk2p", "component": "device_plugin",
                                       "node": "prod102", "phase": "Running", "ready": True}
        nodes = ledger.build_ledger([gpu_node("prod102", 1), gpu_node("prod103", 1)], [], operator=operator)
        assert nodes["operator"] is operator
        assert nodes["nodes"]["prod102"]["operator_running"] == {
            "device_plugin": True, "gpu_feature_discovery": False, "node_feature_discovery": False}
        assert nodes["nodes"]["prod103"]["operator_running"]["device_plugin"] is False


class TestOnlyTheFieldsRead:
    """Readers may decode only NODE_FIELDS, POD_FIELDS and OPERATOR_POD_FIELDS: the ledger must not change."""

    @pytest.mark.parametrize("patterns", [["nvidia.com/gpu"], ["nvidia.com/*"], ["*"]])
    def test_selected_fields_give_the_same_ledger(self, patterns):
        nodes = [select_fields(node, ledger.NODE_FIELDS) for node in NODES]
        pods = [select_fields(pod_object, ledger.POD_FIELDS) for pod_object in PODS]
        operator_pods = [select_fields(pod_object, ledger.OPERATOR_POD_FIELDS) for pod_object in PODS]
        assert len(json.dumps(pods)) < len(json.dumps(PODS)) / 3
        full = ledger.build_ledger(NODES, PODS, patterns, ledger.summarize_operator_pods("ns", PODS))
        assert ledger.build_ledger(nodes, pods, patterns, ledger.summarize_operator_pods("ns", operator_pods)) == full

    @pytest.mark.parametrize("patterns", [["nvidia.com/gpu"], ["nvidia.com/mig-*", "cpu"], ["*"]])
    def test_wanted_resources_only(self, patterns):
        wanted = ledger.ResourceFilter(patterns)
        for pod_object in PODS:
            for formula in (ledger.pod_requests, ledger.pod_limits):
                every = formula(pod_object)
                expected = {name: units for name, units in every.items() if ledger.matches_any(name, patterns)}
                assert formula(pod_object, wanted) == expected, (pod_object["metadata"]["name"], formula.__name__)
        assert wanted == {name: ledger.matches_any(name, patterns) for name in wanted}


def field_selector_matches(pod_object, selector):
    """The API server's pod field selectors as the ledger uses them: ``spec.nodeName`` and ``status.phase``,
    with ``=`` and ``!=``, comma meaning and; an empty value matches an absent field."""
    values = {"spec.nodeName": (pod_object.get("spec") or {}).get("nodeName") or "",
              "status.phase": (pod_object.get("status") or {}).get("phase") or ""}
    for term in (selector or "").split(","):
        if not term:
            continue
        if "!=" in term:
            field, value = term.split("!=", 1)
            if values[field] == value:
                return False
        else:
            field, value = term.split("=", 1)
            if values[field] != value:
                return False
    return True


class CountingReader:
    """A reader like _k8s_client.CoreV1Reader, over in-memory objects, counting its calls.

    It returns only the fields asked for, as CoreV1Reader does with msgspec: every read_ledger test
    then also checks that NODE_FIELDS, POD_FIELDS and OPERATOR_POD_FIELDS hold all the ledger reads.
    Field selectors are applied as the API server applies them; ``pods_returned`` counts the pods sent.
    """

    host = "https://127.0.0.1:16443"

    def __init__(self, nodes, pods):
        self.nodes, self.pods, self.calls = nodes, pods, []
        self.pods_returned = 0

    def get_node(self, name, fields=None):
        self.calls.append(("get_node", name))
        found = next((node for node in self.nodes if ledger.node_name(node) == name), None)
        return select_fields(found, fields)

    def list_nodes(self, fields=None):
        self.calls.append(("list_nodes",))
        return [select_fields(node, fields) for node in self.nodes]

    def list_pods(self, namespace=None, field_selector=None, fields=None, keep=None, page_size=None):
        self.calls.append(("list_pods", namespace, field_selector))
        sent = [select_fields(pod_object, fields) for pod_object in self.pods
                if namespace in (None, pod_object["metadata"]["namespace"]) and field_selector_matches(pod_object, field_selector)]
        self.pods_returned += len(sent)
        return [item for item in sent if keep is None or keep(item)]


ONE_NODE_READS = ("list_pods", None, "spec.nodeName=,status.phase=Pending")


def world(node_count=4, pods_per_node=6):
    """Several GPU nodes with GPU holders, CPU pods and finished pods on each, a CPU node, and unscheduled pods
    (one asking for a GPU, one not)."""
    nodes = [gpu_node("gpu-{0}".format(index), 4) for index in range(node_count)]
    nodes.append({"metadata": {"name": "cpu-0", "labels": {}}, "status": {"capacity": {"cpu": "8"}}})
    pods = []
    for index in range(node_count):
        for slot in range(pods_per_node):
            resources = {"limits": {"nvidia.com/gpu": "1"}} if slot < 2 else {"requests": {"cpu": "1"}}
            phase = "Succeeded" if slot == pods_per_node - 1 else "Running"
            pods.append(pod_spec([container("c", **resources)], node="gpu-{0}".format(index), phase=phase,
                                 name="gpu-{0}-{1}".format(index, slot)))
    pods.append(pod_spec([container("c", limits={"nvidia.com/gpu": "2"})], node="cpu-0", name="odd-on-cpu-node"))
    pods.append(pod_spec([container("c", limits={"nvidia.com/gpu": "1"})], phase="Pending", name="queued-gpu"))
    pods.append(pod_spec([container("c", requests={"cpu": "1"})], phase="Pending", name="queued-cpu"))
    for index, pod_object in enumerate(pods):
        pod_object["metadata"]["uid"] = "uid-{0}".format(index)
    return nodes, pods


class TestReadStrategy:
    @pytest.mark.parametrize("nodes, strategy, expected", [
        ([], "auto", "fleet"), ([], "node", "fleet"), (["a"], "auto", "node"), (["a"], "fleet", "fleet"),
        (["n{0}".format(index) for index in range(ledger.NODE_READ_MAX_NODES)], "auto", "node"),
        (["n{0}".format(index) for index in range(ledger.NODE_READ_MAX_NODES + 1)], "auto", "fleet"),
        (["n{0}".format(index) for index in range(ledger.NODE_READ_MAX_NODES + 1)], "node", "node"),
    ])
    def test_choice(self, nodes, strategy, expected):
        assert ledger.choose_read_strategy(nodes, strategy) == expected

    def test_unknown_strategy(self):
        with pytest.raises(ValueError, match="unknown read strategy 'cheap'"):
            ledger.choose_read_strategy(["a"], "cheap")

    def test_node_field_selector_is_kubectl_describe_nodes(self):
        assert ledger.node_pods_field_selector("prod102") == "spec.nodeName=prod102,status.phase!=Succeeded,status.phase!=Failed"


class TestReadLedger:
    def test_one_node_reads_the_node_its_pods_and_the_unscheduled_pods(self):
        reader = CountingReader(NODES, PODS)
        result = ledger.read_ledger(reader, node="ledger-fixture-b")
        assert list(result["nodes"]) == ["ledger-fixture-b"]
        assert sorted(reader.calls, key=str) == sorted([
            ("get_node", "ledger-fixture-b"),
            ("list_pods", None, "spec.nodeName=ledger-fixture-b,status.phase!=Succeeded,status.phase!=Failed"),
            ONE_NODE_READS], key=str)

    @pytest.mark.parametrize("name", ["ledger-fixture-a", "ledger-fixture-b"])
    @pytest.mark.parametrize("patterns", [["nvidia.com/gpu"], ["nvidia.com/*"]])
    def test_node_read_equals_the_fleet_read_of_the_node(self, name, patterns):
        by_node = ledger.read_ledger(CountingReader(NODES, PODS), node=name, patterns=patterns, strategy="node")
        by_fleet = ledger.read_ledger(CountingReader(NODES, PODS), node=name, patterns=patterns, strategy="fleet")
        whole = ledger.read_ledger(CountingReader(NODES, PODS), patterns=patterns)
        assert by_node == by_fleet
        assert by_node["nodes"][name] == whole["nodes"][name]
        assert by_node["pending"] == whole["pending"]
        assert [entry["name"] for entry in by_node["pending"]] == ["waiting"]

    def test_node_read_on_a_fleet(self):
        nodes, pods = world()
        reader = CountingReader(nodes, pods)
        result = ledger.read_ledger(reader, node="gpu-2")
        whole = ledger.read_ledger(CountingReader(nodes, pods))
        assert result["nodes"] == {"gpu-2": whole["nodes"]["gpu-2"]}
        gpu = result["nodes"]["gpu-2"]["resources"]["nvidia.com/gpu"]
        assert (gpu["requested"], gpu["free"]) == (2, 2)
        assert [holder["name"] for holder in gpu["holders"]] == ["gpu-2-0", "gpu-2-1"]
        assert result["totals"] == {"nvidia.com/gpu": {"capacity": 4, "allocatable": 4, "requested": 2, "limits": 2, "free": 2}}
        assert [entry["name"] for entry in result["pending"]] == ["queued-gpu"] == [entry["name"] for entry in whole["pending"]]
        # What the API server sent: the node's 5 non-terminated pods and the 2 unscheduled ones, not the fleet's 27.
        assert reader.pods_returned == 7

    def test_a_pod_of_another_node_is_not_counted(self):
        nodes, pods = world()
        result = ledger.read_ledger(CountingReader(nodes, pods), node="gpu-0")
        names = [holder["name"] for holder in result["nodes"]["gpu-0"]["resources"]["nvidia.com/gpu"]["holders"]]
        assert names == ["gpu-0-0", "gpu-0-1"]

    def test_a_pod_bound_between_the_reads_is_a_holder_not_pending(self):
        nodes, pods = world(1, 3)
        queued = next(item for item in pods if item["metadata"]["name"] == "queued-gpu")

        class BindingReader(CountingReader):
            """The scheduler binds the queued pod after the unscheduled pods were listed."""
            def list_pods(self, namespace=None, field_selector=None, fields=None, keep=None, page_size=None):
                listed = super(BindingReader, self).list_pods(namespace, field_selector, fields, keep, page_size)
                if field_selector == ledger.UNSCHEDULED_FIELD_SELECTOR:
                    queued["spec"]["nodeName"] = "gpu-0"
                    return listed
                bound = dict(queued, spec=dict(queued["spec"], nodeName="gpu-0"))
                return listed + [bound] if "queued-gpu" not in [item["metadata"]["name"] for item in listed] else listed

        original = ledger.ThreadPoolExecutor
        try:
            ledger.ThreadPoolExecutor = SerialExecutor
            result = ledger.read_ledger(BindingReader(nodes, pods), node="gpu-0")
        finally:
            ledger.ThreadPoolExecutor = original
        assert result["pending"] == []
        assert "queued-gpu" in [holder["name"] for holder in result["nodes"]["gpu-0"]["resources"]["nvidia.com/gpu"]["holders"]]

    def test_a_few_nodes(self):
        nodes, pods = world()
        reader = CountingReader(nodes, pods)
        result = ledger.read_ledger(reader, node=["gpu-3", "gpu-1"])
        whole = ledger.read_ledger(CountingReader(nodes, pods))
        assert list(result["nodes"]) == ["gpu-1", "gpu-3"]
        assert result["nodes"]["gpu-3"] == whole["nodes"]["gpu-3"]
        assert result["totals"]["nvidia.com/gpu"]["requested"] == 4
        assert len(reader.calls) == 5

    def test_operator_pods_of_the_node_only(self):
        nodes, pods = world(2, 2)
        operator_pods = [{"metadata": {"name": "nvidia-device-plugin-daemonset-x7k2{0}".format(index), "namespace": "gpu-operator",
                                       "labels": {"app": "nvidia-device-plugin-daemonset"}},
                          "spec": {"nodeName": "gpu-{0}".format(index), "containers": []}, "status": {"phase": "Running"}}
                         for index in range(2)]
        reader = CountingReader(nodes, pods + operator_pods)
        result = ledger.read_ledger(reader, node="gpu-1", operator_namespace="gpu-operator")
        assert [entry["node"] for entry in result["operator"]["pods"]] == ["gpu-1"]
        assert result["nodes"]["gpu-1"]["operator_running"]["device_plugin"] is True
        assert ("list_pods", "gpu-operator", "spec.nodeName=gpu-1") in reader.calls

    def test_fleet_read_keeps_only_the_pods_it_counts(self):
        nodes, pods = world()
        kept = []

        class KeepingReader(CountingReader):
            def list_pods(self, namespace=None, field_selector=None, fields=None, keep=None, page_size=None):
                result = super(KeepingReader, self).list_pods(namespace, field_selector, fields, keep, page_size)
                assert page_size == ledger.FLEET_PAGE_SIZE
                kept.extend(item["metadata"]["name"] for item in result)
                return result

        result = ledger.read_ledger(KeepingReader(nodes, pods))
        assert sorted(kept) == sorted(["gpu-{0}-{1}".format(node, slot) for node in range(4) for slot in range(2)]
                                      + ["odd-on-cpu-node", "queued-gpu"])
        assert result == ledger.build_ledger(nodes, pods)

    def test_one_node_takes_a_constant_number_of_reads(self):
        for node_count in (1, 50):
            nodes, pods = world(node_count)
            reader = CountingReader(nodes, pods)
            ledger.read_ledger(reader, node="gpu-0")
            assert len(reader.calls) == 3
            assert reader.pods_returned == 5 + 2

    @pytest.mark.parametrize("node_count", [1, 50, 500])
    def test_the_fleet_takes_three_reads_whatever_its_size(self, node_count):
        nodes = [gpu_node("gpu-{0}".format(index), 4) for index in range(node_count)]
        pods = [pod_spec([container("c", limits={"nvidia.com/gpu": "1"})], node="gpu-{0}".format(index % node_count),
                         name="p{0}".format(index)) for index in range(node_count * 3)]
        reader = CountingReader(nodes, pods)
        result = ledger.read_ledger(reader, operator_namespace="gpu-operator")
        assert len(reader.calls) == 3
        assert result["totals"]["nvidia.com/gpu"]["requested"] == node_count * 3

    def test_unknown_node_in_a_fleet_read(self):
        with pytest.raises(ledger.LedgerError, match="^node 'prod999' not found on https://127.0.0.1:16443$"):
            ledger.read_ledger(CountingReader(NODES, PODS), node="prod999", strategy="fleet")

    def test_unknown_node(self):
        with pytest.raises(ledger.LedgerError, match="^node 'prod999' not found on https://127.0.0.1:16443$"):
            ledger.read_ledger(CountingReader(NODES, PODS), node="prod999")

    def test_node_without_the_resource(self):
        cpu_node = {"metadata": {"name": "prod102", "labels": {}}, "status": {"capacity": {"cpu": "8", "memory": "1Gi", "pods": "110"}}}
        with pytest.raises(ledger.LedgerError) as error:
            ledger.read_ledger(CountingReader([cpu_node], []), node="prod102")
        assert str(error.value) == "node prod102 advertises none of nvidia.com/gpu; it advertises: cpu, memory, pods"

    def test_labelled_gpu_node_without_the_resource_hints_at_the_device_plugin(self):
        node = {"metadata": {"name": "prod102", "labels": {"nvidia.com/gpu.present": "true"}}, "status": {"capacity": {"cpu": "8"}}}
        with pytest.raises(ledger.LedgerError, match=r"is the device plugin running on it\?"):
            ledger.read_ledger(CountingReader([node], []), node="prod102", patterns=["nvidia.com/gpu", "nvidia.com/mig-*"])


class SerialExecutor:
    """ThreadPoolExecutor's interface, running each call at once, in order (for tests of interleavings)."""

    def __init__(self, max_workers=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, function, *args, **kwargs):
        class Done:
            def __init__(self, value):
                self.value = value

            def result(self):
                return self.value
        return Done(function(*args, **kwargs))

    def map(self, function, items):
        return [function(item) for item in items]
