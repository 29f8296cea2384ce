"""Fixtures for tests that run against the simulated GPU cluster (tests/sim).

`sim` starts the cluster if it is not running (fast when the binaries are cached) and offers:
  sim.kubeconfig, sim.health_url, sim.models_url, sim.api_url, sim.env (environment for ansible runs)
  sim.kubectl(*args, check=True, input=None) -> CompletedProcess (text)
  sim.use_topology(name)        reset nodes and pods to tests/sim/topologies/<name>.yaml (or a path)
  sim.set_vllm(mode)            ok | 503 | slow | down
  sim.ansible_module(module, args, check=False) -> the module's result (dict), run ad hoc on localhost
  sim.playbook(path, inventory=..., extra_vars={}, check=False) -> CompletedProcess
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

VENV_BIN = Path(sys.executable).parent


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
        subprocess.run([sys.executable, str(SIM_SRC / "simctl.py"), *args], check=True, cwd=CHECKOUT,
                       stdout=subprocess.DEVNULL)

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
def sim() -> Sim:
    subprocess.run([sys.executable, str(SIM_SRC / "simctl.py"), "up"], check=True, cwd=CHECKOUT)
    return Sim(cluster.SimDir())
