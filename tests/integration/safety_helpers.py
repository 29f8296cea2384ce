"""Helpers shared by the safety tests (tests/integration/test_safety_*.py).

Everything is derived from the `sim` fixture (tests/integration/conftest.py), so the tests run on whatever
simulated cluster it gives: the default one in CI, or a second one (GPUOPS_SIM_DIR / GPUOPS_SIM_PORT_OFFSET).
inventory/sim names the default sim's kubeconfig and health URL, so these tests write their own one-node
inventory instead, and pass the connection they mean to test explicitly.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PLAYBOOK = "playbooks/gpu_demo.yml"
NODE = "prod102"
NAMESPACE = "gpu-operator"
RESOURCE = "nvidia.com/gpu"
MANAGED = "app.kubernetes.io/managed-by=gpuops.scheduling"
# Connection settings of the environment that would let a run fall back to the admin kubeconfig.
CONNECTION_ENV = ("KUBECONFIG", "K8S_AUTH_KUBECONFIG", "K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "K8S_AUTH_SSL_CA_CERT",
                  "K8S_AUTH_CONTEXT", "K8S_AUTH_USERNAME", "K8S_AUTH_PASSWORD", "K8S_AUTH_CERT_FILE", "K8S_AUTH_KEY_FILE")


def new_run_id(prefix: str = "sf") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def sim_kubeconfig(sim) -> dict:
    return json.loads(Path(sim.kubeconfig).read_text())


def ca_file(sim, directory: Path) -> str:
    """The API server's CA, as a file: the one the sim's kubeconfig names, or its inline data written out."""
    cluster = sim_kubeconfig(sim)["clusters"][0]["cluster"]
    if cluster.get("certificate-authority"):
        return cluster["certificate-authority"]
    import base64  # pylint: disable=import-outside-toplevel
    path = directory / "ca.crt"
    path.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    return str(path)


def token_kubeconfig(sim, token: str, path: Path, server: str | None = None) -> Path:
    """A kubeconfig with only a bearer token: server and CA from the sim's kubeconfig (or another server)."""
    cluster = dict(sim_kubeconfig(sim)["clusters"][0]["cluster"])
    if server:
        cluster["server"] = server
    context = {"cluster": "gpuops-sim-cluster", "user": "gpuops-preflight-user"}
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "gpuops-preflight@sim", "preferences": {},
              "clusters": [{"name": "gpuops-sim-cluster", "cluster": cluster}],
              "users": [{"name": "gpuops-preflight-user", "user": {"token": token}}],
              "contexts": [{"name": "gpuops-preflight@sim", "context": context}]}
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path


def write_inventory(directory: Path, sim, hosts: dict | None = None, **group_vars) -> Path:
    """An inventory (group gpu_nodes; host prod102, or `hosts`: name -> host vars) for the sim the fixture started.

    No kubeconfig unless given: each test says which connection it runs with.
    """
    variables = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                 "gpu_demo_vllm_health_url": sim.health_url, "gpu_demo_report_dir": str(directory / "reports"),
                 "gpu_demo_timeout": 30, **group_vars}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "hosts.yml"
    # JSON is YAML: no quoting surprises in the values.
    path.write_text(json.dumps({"gpu_nodes": {"hosts": hosts or {NODE: None}, "vars": variables}}, indent=2))
    return path


def run_env(sim, **extra) -> dict:
    """The fixture's environment for ansible, without any Kubernetes connection setting (no admin fallback)."""
    env = {key: value for key, value in sim.env.items() if key not in CONNECTION_ENV}
    env.update({key: str(value) for key, value in extra.items()})
    return env


def playbook_command(inventory: Path, extra_vars: dict | None = None, args: tuple = (), playbook: str = PLAYBOOK) -> list:
    command = [str(VENV_BIN / "ansible-playbook"), playbook, "-i", str(inventory)]
    if extra_vars:
        command += ["-e", json.dumps(extra_vars)]
    return command + list(args)


def run_playbook(inventory: Path, env: dict, extra_vars: dict | None = None, args: tuple = (),
                 timeout: int = 300, playbook: str = PLAYBOOK) -> subprocess.CompletedProcess:
    return subprocess.run(playbook_command(inventory, extra_vars, args, playbook), capture_output=True, text=True,
                          cwd=CHECKOUT, env=env, timeout=timeout, check=False)


def read_report(report_dir: Path, run_id: str, node: str = NODE) -> dict | None:
    path = report_dir / f"gpu-demo-{node}-{run_id}.json"
    return json.loads(path.read_text()) if path.exists() else None


def core_api(kubeconfig: str):
    from kubernetes import client, config  # pylint: disable=import-outside-toplevel
    return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))


def demo_pods(core, run_id: str | None = None) -> list:
    """Every pod the collection created (or only one run's), in any namespace: (namespace/name, phase, deleting)."""
    selector = MANAGED + (f",gpuops.scheduling/run-id={run_id}" if run_id else "")
    return sorted((f"{pod.metadata.namespace}/{pod.metadata.name}", pod.status.phase, bool(pod.metadata.deletion_timestamp))
                  for pod in core.list_pod_for_all_namespaces(label_selector=selector).items)


def units(pod, resource: str = RESOURCE) -> int:
    total = 0
    for container in pod.spec.containers:
        resources = container.resources
        value = ((resources.limits or {}) if resources else {}).get(resource) or ((resources.requests or {}) if resources else {}).get(resource)
        total += int(value or 0)
    return total


def ledger(core, node: str = NODE, resource: str = RESOURCE) -> dict:
    """What `kubectl describe node` shows under Allocated resources: units requested by non-terminated pods."""
    node_object = core.read_node(node)
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    live = [pod for pod in pods if pod.status.phase not in ("Succeeded", "Failed")]
    return {"allocatable": int((node_object.status.allocatable or {}).get(resource, 0)),
            "requested": sum(units(pod, resource) for pod in live),
            "pods": sorted(f"{pod.metadata.namespace}/{pod.metadata.name}" for pod in live)}


def wait_until(predicate, timeout: float = 30.0, what: str = "the condition", interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def fresh_scheduler(sim) -> float:
    """Start kube-scheduler again and wait until it tries a new pod; returns the seconds that took.

    After an API server outage a 1.36 kube-scheduler may lag (its watches back off for up to a minute) and may hold a
    cache that the outage left wrong (a binding in flight when the API server went): it exits on that later, by design
    (pkg/scheduler/backend/cache/cache.go), in whatever test runs next on the cluster. A test that made the outage
    calls this once the outage is over, so what it runs after (a rerun) and the tests after it meet a scheduler that
    did not live through it.
    """
    # tests/sim is on the path (conftest.py)
    import scheduler_probe  # pylint: disable=import-outside-toplevel
    restarted = subprocess.run([sys.executable, str(CHECKOUT / "tests" / "sim" / "simctl.py"), "restart", "kube-scheduler",
                                "--pause", "0"], capture_output=True, text=True, timeout=120, check=False)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    return scheduler_probe.wait_until_scheduler_watches(core_api(sim.kubeconfig))


def tail(process: subprocess.CompletedProcess, limit: int = 4000) -> str:
    return (process.stdout + process.stderr)[-limit:]


def output_of(process: subprocess.CompletedProcess) -> str:
    return process.stdout + process.stderr


def ansible_module(sim, module: str, args: dict, env: dict) -> dict:
    """One module on localhost with the given environment (sim.ansible_module always adds the admin kubeconfig)."""
    command = [str(VENV_BIN / "ansible"), "localhost", "-m", module, "-a", json.dumps(args)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=CHECKOUT, timeout=120, check=False,
                            env={**env, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"})
    return json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def closed_loopback_port() -> int:
    """A loopback port nothing listens on (bound, then closed at once)."""
    import socket  # pylint: disable=import-outside-toplevel
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0", "false", "no")


class PodRecorder:
    """Records every pod created (ADDED) that matches a label selector, from the moment it is built.

    A list first, then a watch from that resourceVersion, so nothing is missed however late the thread
    starts; the watch is renewed every 2 s until stop().
    """

    def __init__(self, kubeconfig: str, label_selector: str):
        import threading  # pylint: disable=import-outside-toplevel
        self.core = core_api(kubeconfig)
        self.selector = label_selector
        self.created = []
        self.events = []    # (monotonic time, event type, namespace/name, phase, deleting)
        self._stop = threading.Event()
        listing = self.core.list_pod_for_all_namespaces(label_selector=label_selector)
        self.initial = sorted(f"{pod.metadata.namespace}/{pod.metadata.name}" for pod in listing.items)
        self._version = listing.metadata.resource_version
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kubernetes import watch  # pylint: disable=import-outside-toplevel
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                for change in stream.stream(self.core.list_pod_for_all_namespaces, label_selector=self.selector,
                                            resource_version=self._version, timeout_seconds=2, _request_timeout=10):
                    pod = change["object"]
                    self._version = pod.metadata.resource_version
                    name = f"{pod.metadata.namespace}/{pod.metadata.name}"
                    self.events.append((time.monotonic(), change["type"], name, pod.status.phase, bool(pod.metadata.deletion_timestamp)))
                    if change["type"] == "ADDED" and name not in self.created:
                        self.created.append(name)
            except Exception:  # pylint: disable=broad-except  # API restarts, 410 Gone: relist from now
                time.sleep(0.5)
                try:
                    self._version = self.core.list_pod_for_all_namespaces(label_selector=self.selector).metadata.resource_version
                except Exception:  # pylint: disable=broad-except
                    pass

    def stop(self) -> list:
        self._stop.set()
        self._thread.join(timeout=15)
        return self.created
