"""Bad input: each case fails with a clear error naming the input, and leaves nothing behind.

For every case a watch records each pod of the run the API server ever saw. Inputs the pre-flight can
judge (node, resource, namespace, connection, credentials, node name) must be refused before any pod
exists; inputs only a running pod reveals (an image that cannot start, a timeout too small for the
node) must fail fast with the reason, and end with every pod of the run deleted. In every case the
node's ledger ends as it began and no pod of the run remains.

Decisions, from the role's behaviour:
- a namespace that does not exist is NOT created: the run fails saying `namespace <name> does not exist` and
  how to create it (met by the node lock's Lease, or without the lock by the dry run of the demo pods), and
  nothing is created;
- vLLM down or answering 503: refused before any pod exists (check vllm_healthy_before, naming the URL and
  what it answered); gpu_demo_vllm_require_healthy=false runs anyway and only records it;
- gpu_demo_timeout 0 (or negative) is refused by the pre-flight (check timeout_usable).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from safety_helpers import (MANAGED, NAMESPACE, PodRecorder, closed_loopback_port, core_api, demo_pods, ledger,
                            new_run_id, output_of, read_report, run_env, run_playbook, tail, token_kubeconfig, write_inventory)

SLOW_EVIDENCE = "sleep 3; nvidia-smi -L; echo '{{ gpu_demo_evidence_marker }}'"


@dataclass
class Case:
    extra_vars: dict = field(default_factory=dict)
    # Fragments that must be in the run's output (the error naming the input); {port}/{kubeconfig}/{url} filled in.
    expect: tuple = ()
    failed_checks: tuple = ()            # must all be among the report's failed checks
    created: bool = False                # the pods may be created (and must then be gone)
    topology: str = "default"
    connection: str = "admin"            # admin | missing-file | closed-port | invalid-token | revoked-token
    vllm: str = "ok"
    fail_fast: float | None = None       # the pod_wait call that met the failure must end within this many seconds


# Judged by the pre-flight: refused before any pod exists. Independent of each other, so they run as the
# hosts of ONE playbook run (gpu_demo_parallel, a fork each): ansible's start-up is paid once.
PREFLIGHT_CASES = {
    "unknown-node": Case({"gpu_demo_node": "prod999"}, ("Refusing node prod999", "node 'prod999' not found"), ("node_found",)),
    "invalid-node-name": Case({"gpu_demo_node": "Prod_102!"}, ("node name 'Prod_102!' is not a valid node name",),
                              ("node_name_valid",)),
    "wrong-resource-name": Case({"gpu_demo_resource": "nvidia.com/gpx"},
                                ("node prod102 advertises none of nvidia.com/gpx", "it advertises: cpu"), ("node_found",)),
    # Which task meets these first (the node lock, the ledger read, the dry run) is the role's business:
    # the error must name the input, whatever check reports it.
    "missing-namespace-fails-not-created": Case({"gpu_demo_namespace": "gpuops-no-such-ns"},
                                                ("namespace gpuops-no-such-ns does not exist",
                                                 "kubectl create namespace gpuops-no-such-ns")),
    "kubeconfig-path-missing": Case({}, ("kubeconfig file not found: {kubeconfig}",), connection="missing-file"),
    "api-unreachable-closed-port": Case({}, ("127.0.0.1:{port}",), connection="closed-port"),
    "invalid-token": Case({}, ("401",), connection="invalid-token"),
    "revoked-token-deleted-serviceaccount": Case({}, ("401",), connection="revoked-token"),
}

# Each its own run: they create pods, change the sim (vLLM, topology), or are known to create pods (xfail).
RUNTIME_CASES = {
    "image-cannot-start": Case({"gpu_demo_image": "registry.local/gpuops/smi:does-not-exist"},
                               ("ErrImagePull", "registry.local/gpuops/smi:does-not-exist"), ("hold_running",),
                               created=True, fail_fast=10),
    "timeout-1s-too-small-for-the-node": Case({"gpu_demo_timeout": 1, "gpu_demo_evidence_command": SLOW_EVIDENCE},
                                              ("timed out after 1s", "gpu-demo-hold"), ("hold_running",), created=True),
    "timeout-0": Case({"gpu_demo_timeout": 0}, ("gpu_demo_timeout (0) must be at least 1 second",), ("timeout_usable",)),
    # A pre-flight only proves it did not disturb a server that was healthy before: an unhealthy one refuses the node.
    "vllm-down": Case({}, ("inference server {url}", "did not answer", "refusing the node"), ("vllm_healthy_before",), vllm="down"),
    "vllm-503": Case({}, ("inference server {url}", "answered 503", "refusing the node"), ("vllm_healthy_before",), vllm="503"),
    # Last: the only case on another topology (mixed MIG: whole GPUs advertise 0, the resource exists but is empty).
    "node-without-the-resource-mig-mixed": Case({}, ("allocatable nvidia.com/gpu = 0",), ("resource_allocatable",),
                                                topology="mig-mixed"),
}


@pytest.fixture(scope="module")
def cluster_state(sim):
    state = {"topology": None}
    yield state
    sim.set_vllm("ok")
    if state["topology"] != "default":
        sim.use_topology("default")


def connection(sim, kind: str, directory) -> tuple:
    """(gpu_demo_kubeconfig, what the output must name) for a connection case."""
    if kind == "admin":
        return sim.kubeconfig, {}
    if kind == "missing-file":
        path = str(directory / "no-such-dir" / "kubeconfig")
        return path, {"kubeconfig": path}
    if kind == "closed-port":
        port = closed_loopback_port()
        config = sim_kubeconfig_with_server(sim, f"https://127.0.0.1:{port}", directory / "closed-port.kubeconfig")
        return config, {"port": port}
    if kind == "invalid-token":
        return str(token_kubeconfig(sim, "gpuops-invalid-token-0123456789abcdef", directory / "invalid.kubeconfig")), {}
    if kind == "revoked-token":
        account = "gpuops-it-revoked"
        sim.kubectl("-n", NAMESPACE, "create", "serviceaccount", account)
        token = sim.kubectl("-n", NAMESPACE, "create", "token", account, "--duration", "1h").stdout.strip()
        sim.kubectl("-n", NAMESPACE, "delete", "serviceaccount", account, "--wait=true")
        return str(token_kubeconfig(sim, token, directory / "revoked.kubeconfig")), {}
    raise ValueError(kind)


def sim_kubeconfig_with_server(sim, server: str, path) -> str:
    import json  # pylint: disable=import-outside-toplevel
    from pathlib import Path  # pylint: disable=import-outside-toplevel
    config = json.loads(Path(sim.kubeconfig).read_text())
    config["clusters"][0]["cluster"]["server"] = server
    path.write_text(json.dumps(config))
    return str(path)


@pytest.fixture(scope="module")
def preflight_batch(sim, cluster_state, tmp_path_factory):
    """Every pre-flight case as one host of one playbook run; a watch records any pod of the collection created."""
    if cluster_state["topology"] != "default":
        sim.use_topology("default")
        cluster_state["topology"] = "default"
    sim.set_vllm("ok")
    directory = tmp_path_factory.mktemp("preflight-cases")
    admin = core_api(sim.kubeconfig)
    before = ledger(admin)
    hosts, names = {}, {}
    for case_id, case in PREFLIGHT_CASES.items():
        kubeconfig, names[case_id] = connection(sim, case.connection, directory)
        hosts[case_id] = {"gpu_demo_node": "prod102", "gpu_demo_kubeconfig": kubeconfig, "gpu_demo_run_id": new_run_id("bad"),
                          **case.extra_vars}
    inventory = write_inventory(directory, sim, hosts=hosts)
    recorder = PodRecorder(sim.kubeconfig, MANAGED)
    try:
        run = run_playbook(inventory, run_env(sim), {"gpu_demo_parallel": True}, args=("--forks", str(len(hosts))))
    finally:
        created = recorder.stop()
    print(f"{len(hosts)} pre-flight cases in one run: rc={run.returncode}, pods created: {created}")
    return {"run": run, "hosts": hosts, "names": names, "created": created, "before": before, "dir": directory}


@pytest.mark.parametrize("case_id", list(PREFLIGHT_CASES))
def test_refused_before_any_pod_with_a_clear_error(sim, preflight_batch, case_id):
    case, host = PREFLIGHT_CASES[case_id], preflight_batch["hosts"][case_id]
    names = {**preflight_batch["names"][case_id], "url": sim.health_url}
    run = preflight_batch["run"]
    assert run.returncode != 0
    assert "failed=1" in next(line for line in run.stdout.splitlines() if line.startswith(case_id + " ")), tail(run)
    report = read_report(preflight_batch["dir"] / "reports", host["gpu_demo_run_id"], host["gpu_demo_node"])
    assert report is not None and report["passed"] is False
    assert set(case.failed_checks) <= set(report["failed_checks"]), report["failed_checks"]
    for fragment in case.expect:
        expected = fragment.format(**names)
        assert expected in report["failure"]["message"], f"{expected!r} not in {report['failure']['message']!r}"
        assert expected in output_of(run)
    assert preflight_batch["created"] == [], f"pods were created: {preflight_batch['created']}"
    admin = core_api(sim.kubeconfig)
    assert demo_pods(admin) == [] and ledger(admin) == preflight_batch["before"]
    namespace = case.extra_vars.get("gpu_demo_namespace")
    if namespace:   # the decision: a missing namespace is an error, never created by the role
        assert sim.kubectl("get", "namespace", namespace, check=False).returncode != 0, f"namespace {namespace} was created"


def test_a_failed_dry_run_gives_one_reason(sim, cluster_state, tmp_path):
    """The dry run is reached without the node lock (which would meet the missing namespace first)."""
    del cluster_state
    run_id = new_run_id("bad")
    inventory = write_inventory(tmp_path, sim, gpu_demo_kubeconfig=sim.kubeconfig)
    run = run_playbook(inventory, run_env(sim), {"gpu_demo_run_id": run_id, "gpu_demo_lock": False,
                                                 "gpu_demo_namespace": "gpuops-no-such-ns"})
    report = read_report(tmp_path / "reports", run_id)
    if report is None or "namespace gpuops-no-such-ns does not exist" not in report["failure"]["message"]:
        pytest.fail("the dry run was not reached: " + tail(run))
    assert "preemptionPolicy unknown" not in report["failure"]["message"], report["failure"]["message"]


@pytest.mark.parametrize("case", list(RUNTIME_CASES.values()), ids=list(RUNTIME_CASES))
def test_fails_with_the_reason_and_leaves_nothing(sim, cluster_state, tmp_path, case):
    if cluster_state["topology"] != case.topology:
        sim.use_topology(case.topology)
        cluster_state["topology"] = case.topology
    sim.set_vllm(case.vllm)
    admin = core_api(sim.kubeconfig)
    before = ledger(admin)
    kubeconfig, names = connection(sim, case.connection, tmp_path)
    names["url"] = sim.health_url
    run_id = new_run_id("bad")
    inventory = write_inventory(tmp_path, sim, gpu_demo_kubeconfig=kubeconfig)
    recorder = PodRecorder(sim.kubeconfig, f"gpuops.scheduling/run-id={run_id}")
    started = time.monotonic()
    try:
        run = run_playbook(inventory, run_env(sim), {"gpu_demo_run_id": run_id, **case.extra_vars})
    finally:
        created = recorder.stop()
    elapsed = time.monotonic() - started
    output = output_of(run)
    print(f"rc={run.returncode} elapsed={elapsed:.1f}s pods created={created}")
    assert run.returncode != 0, "the run passed: " + tail(run)
    for fragment in case.expect:
        assert fragment.format(**names) in output, f"{fragment.format(**names)!r} not in the output:\n{tail(run)}"
    report = read_report(tmp_path / "reports", run_id, case.extra_vars.get("gpu_demo_node", "prod102"))
    assert report is not None, "the run wrote no report: " + tail(run)
    assert report["passed"] is False
    assert set(case.failed_checks) <= set(report["failed_checks"]), report["failed_checks"]
    if not case.created:
        assert created == [], f"pods were created: {created}"
    if case.fail_fast is not None:   # the pod_wait call that met the failure ended long before gpu_demo_timeout (30 s)
        walk = report["durations"]["walk"]
        assert walk is not None and walk < case.fail_fast, f"the walk took {walk}s: not failing fast"
    # Nothing of the run remains, the node is as it was found (the fixture's vLLM state aside).
    assert demo_pods(admin, run_id) == []
    assert demo_pods(admin) == [], "a pod of the collection remains"
    assert ledger(admin) == before
