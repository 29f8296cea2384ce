"""Fixtures for tests that run against the simulated GPU cluster (tests/sim).

`sim` starts the cluster if it is not running (fast when the binaries are cached) and offers:
  sim.kubeconfig, sim.health_url, sim.models_url, sim.api_url, sim.env (environment for ansible runs)
  sim.kubectl(*args, check=True, input=None) -> CompletedProcess (text)
  sim.use_topology(name)        reset nodes and pods to tests/sim/topologies/<name>.yaml (or a path)
  sim.set_vllm(mode)            ok | 503 | slow | down
  sim.ansible_module(module, args, check=False) -> the module's result (dict), run ad hoc on localhost
  sim.playbook(path, inventory=..., extra_vars={}, check=False) -> CompletedProcess

In parallel (`make integration`, or `pytest -n auto tests/integration`: pytest-xdist), each worker has a cluster of
its own (worker 0 the checkout's .sim/, worker N .sim-w<N>/ on its own ports: tests/integration/parallel.py) and runs
one test at a time on it, so every test has a whole cluster to itself, as in a serial run. Every process a test
starts finds its worker's cluster through GPUOPS_SIM_DIR / GPUOPS_SIM_PORT_OFFSET (set here, inherited), and so does
inventory/sim. What a new test declares, if anything:
- nothing: the tests of one file run in order on one worker (a module fixture's set-up, or a test that builds on
  the cluster the one before it left, work unchanged). Start a test by switching to the topology it needs
  (`sim.use_topology(...)`: a switch takes ~4 s) rather than assuming the one a test in another file left;
- `pytestmark = pytest.mark.independent` in a file (or the mark on one test): each of its tests may run on any
  worker, in any order: for files whose every test sets up its own cluster state (its own use_topology first);
- `@pytest.mark.xdist_group("name")`: tests of several files that must run in order on one cluster;
- `@pytest.mark.exclusive`: the test runs with no other test on the machine (one that measures timings a loaded
  machine would blur, or that touches what all clusters share). Such tests run at the end, one at a time: use it
  only where it is needed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
SIM_SRC = CHECKOUT / "tests" / "sim"
sys.path.insert(0, str(SIM_SRC))
import cluster  # noqa: E402  pylint: disable=wrong-import-position
import parallel  # noqa: E402  pylint: disable=wrong-import-position
from simctl import CONTROL_PLANE  # noqa: E402  pylint: disable=wrong-import-position

VENV_BIN = Path(sys.executable).parent
# A parallel worker's tests, and every process they start, use the worker's own cluster.
os.environ.update(parallel.environment_for(os.environ.get("PYTEST_XDIST_WORKER"), os.environ, CHECKOUT))


class Sim:
    def __init__(self, sim_dir: cluster.SimDir):
        self.dir = sim_dir
        env = json.loads(sim_dir.env_file.read_text())
        self.kubeconfig = env["kubeconfig"]
        self.health_url = env["health_url"]
        self.models_url = env["models_url"]
        self.api_url = env["api_url"]
        self.kubectl_path = env["kubectl"]
        self.env = {**os.environ, "K8S_AUTH_KUBECONFIG": self.kubeconfig, "KUBECONFIG": self.kubeconfig,
                    "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
                    "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}

    def _simctl(self, *args: str) -> None:
        # What simctl says on failure (a component that exited, the last lines of its log) goes into the error, so
        # a CI log that keeps only the failures still says why a topology switch failed.
        result = subprocess.run([sys.executable, str(SIM_SRC / "simctl.py"), *args], cwd=CHECKOUT, check=False,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            raise AssertionError(f"simctl {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-4000:]}")

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:  # noqa: A002
        result = subprocess.run([self.kubectl_path, "--kubeconfig", self.kubeconfig, *args], input=input,
                                capture_output=True, text=True, check=False, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result

    def use_topology(self, name: str) -> None:
        self._simctl("topology", name)

    def set_vllm(self, mode: str) -> None:
        self._simctl("vllm", mode)

    def ansible_module(self, module: str, args: dict, check: bool = False, env: dict | None = None) -> dict:
        """Run one module on localhost and return its result, failed or not."""
        command = [str(VENV_BIN / "ansible"), "localhost", "-m", module]
        if args:   # an empty "-a '{}'" reads as raw parameters, which most modules refuse
            command += ["-a", json.dumps(args)]
        if check:
            command.append("--check")
        result = subprocess.run(command, capture_output=True, text=True, cwd=CHECKOUT, timeout=300, check=False,
                                env={**self.env, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json",
                                     **(env or {})})
        try:
            output = json.loads(result.stdout)
        except json.JSONDecodeError as error:
            raise AssertionError(f"no JSON from ansible ({result.returncode}): {result.stdout}\n{result.stderr}") from error
        return output["plays"][0]["tasks"][0]["hosts"]["localhost"]

    def playbook(self, playbook: str, inventory: str = "inventory/sim", extra_vars: dict | None = None,
                 check: bool = False, extra_args: tuple = (), env: dict | None = None,
                 timeout: int = 600) -> subprocess.CompletedProcess:
        command = [str(VENV_BIN / "ansible-playbook"), playbook, "-i", inventory]
        if extra_vars:
            command += ["-e", json.dumps(extra_vars)]
        if check:
            command.append("--check")
        command += list(extra_args)
        return subprocess.run(command, capture_output=True, text=True, cwd=CHECKOUT, timeout=timeout, check=False,
                              env={**self.env, **(env or {})})


@pytest.fixture(scope="session")
def sim():
    subprocess.run([sys.executable, str(SIM_SRC / "simctl.py"), "up"], check=True, cwd=CHECKOUT)
    yield Sim(cluster.SimDir())
    if parallel.worker_number(os.environ.get("PYTEST_XDIST_WORKER")) and not parallel.keep_clusters(os.environ):
        # A parallel worker's own cluster goes with it (GPUOPS_SIM_KEEP=1 keeps it for the next run); worker 0's is
        # the checkout's own (.sim/), left running as `make sim-up` left it.
        subprocess.run([sys.executable, str(SIM_SRC / "simctl.py"), "down"], check=False, cwd=CHECKOUT,
                       stdout=subprocess.DEVNULL)


@pytest.fixture(autouse=True)
def control_plane_outlives_the_test(request):
    """A control-plane process that exits during a test is that test's error, with the end of its log, and is
    started again (as the kubelet restarts kubeadm's static pods), so the tests after it on the worker's cluster
    still have one. Tests that stop a component on purpose start it again before they end."""
    yield
    if "sim" not in request.fixturenames:
        return
    sim_dir = cluster.SimDir()
    gone = [name for name in CONTROL_PLANE
            if (sim_dir.pids / f"{name}.argv.json").exists() and not cluster.running_pid(sim_dir, name)]
    if not gone:
        return
    said = []
    for name in gone:
        log = sim_dir.logs / f"{name}.log"
        # Its flags, printed at every start, say nothing of why it ended.
        lines = [line for line in log.read_text(errors="replace").splitlines() if "flags.go" not in line] if log.exists() else []
        tail = lines[-15:] or ["(nothing in its log)"]
        said.append(f"{name} exited; the end of {log}:\n" + "\n".join(tail))
        restarted = subprocess.run([sys.executable, str(SIM_SRC / "simctl.py"), "start", name], cwd=CHECKOUT,
                                   check=False, capture_output=True, text=True)
        said.append(f"simctl start {name}: rc {restarted.returncode} {restarted.stdout[-500:]}{restarted.stderr[-500:]}")
    if "kube-apiserver" in gone:
        cluster.wait_for(lambda: cluster.api_ready(sim_dir), 60, "kube-apiserver /readyz after its restart")
    pytest.fail("the simulated cluster's control plane did not outlive this test:\n" + "\n".join(said), pytrace=False)


# --- running in parallel (pytest-xdist): tests/integration/parallel.py ----------------------------------------

def pytest_configure(config):
    config.addinivalue_line("markers", "exclusive: runs with no other test on the machine (tests/integration/conftest.py)")
    config.addinivalue_line("markers", "independent: each test may run on any worker, in any order (conftest.py)")
    config.addinivalue_line("markers", "xdist_group(name): tests that run in order on one worker's cluster")


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
    parallel.write_description(config, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
    with parallel.machine_lock(parallel.shared_directory(item.config), item.get_closest_marker("exclusive") is not None):
        return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "each":
        return None
    return parallel.make_scheduler(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):  # pylint: disable=unused-argument
    return parallel.auto_workers(os.cpu_count() or 1, parallel.memory_available(), os.environ.get("GPUOPS_TEST_WORKERS"))


def pytest_runtest_logreport(report):
    parallel.note_report(report)


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
    parallel.save_durations(session.config)
