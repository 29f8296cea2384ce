"""playbooks/gpu_demo.yml run the way AWX / AAP runs a job: through ansible-runner, from a private data dir.

What AWX does for a job, and what each test does the same way:
- the collection comes from its built tarball, installed into the job's collections path
  (`requirements_collections`, where AWX installs a project's collections/requirements.yml), never from the
  checkout; kubernetes.core comes from the Python environment, as in an execution environment;
- the project holds only the playbooks; `inventory/hosts`, `env/extravars` (a survey's answers),
  `env/envvars` (the "OpenShift or Kubernetes API Bearer Token" credential: K8S_AUTH_HOST, K8S_AUTH_API_KEY,
  K8S_AUTH_SSL_CA_CERT, K8S_AUTH_VERIFY_SSL) and `env/cmdline` (verbosity, the Check job type);
- the token is the least-privilege ServiceAccount's of playbooks/preflight_rbac.yml; no kubeconfig anywhere;
- AWX shows the job events, the status and rc, and the statistics set_stats hands over (the
  `artifact_data` of the playbook_on_stats event): the tests assert on exactly those, and that no secret
  is in any event or artifact.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from safety_helpers import (CHECKOUT, CONNECTION_ENV, NAMESPACE, NODE, ca_file, core_api, demo_pods, ledger,
                            new_run_id, tail)

VENV_BIN = Path(sys.executable).parent
VLLM_TOKEN = "sk-awx-survey-" + "7f3c9a1e5b2d4c60"   # a survey "password" answer; must never show either


@pytest.fixture(scope="module")
def awx(sim, tmp_path_factory):
    """The collection built and installed as AWX would, the RBAC applied, a ServiceAccount token."""
    sim.use_topology("default")
    applied = sim.playbook("playbooks/preflight_rbac.yml")
    assert applied.returncode == 0, tail(applied)
    token = sim.kubectl("-n", NAMESPACE, "create", "token", "gpuops-preflight", "--duration", "1h").stdout.strip()
    directory = tmp_path_factory.mktemp("awx")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ANSIBLE_", "K8S_AUTH_")) and key not in CONNECTION_ENV}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_NOCOLOR"] = "1"
    built = subprocess.run([str(VENV_BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(directory),
                            str(CHECKOUT)], capture_output=True, text=True, env=env, cwd=directory, check=False)
    assert built.returncode == 0, tail(built)
    tarball, = directory.glob("gpuops-scheduling-*.tar.gz")
    collections = directory / "requirements_collections"
    installed = subprocess.run([str(VENV_BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps",
                                "-p", str(collections), str(tarball)],
                               capture_output=True, text=True, env=env, cwd=directory, check=False)
    assert installed.returncode == 0, tail(installed)
    return {"token": token, "ca": ca_file(sim, directory), "collections": collections, "env": env, "dir": directory}


class Job:
    """One ansible-runner job's artifacts, as AWX reads them."""

    def __init__(self, private_data_dir: Path, ident: str, process: subprocess.CompletedProcess):
        self.process = process
        self.artifacts = private_data_dir / "artifacts" / ident
        self.status = (self.artifacts / "status").read_text().strip()
        self.rc = int((self.artifacts / "rc").read_text())
        self.stdout = (self.artifacts / "stdout").read_text()
        self.events = sorted((json.loads(path.read_text()) for path in (self.artifacts / "job_events").glob("*.json")),
                             key=lambda event: event["counter"])

    def of(self, *kinds: str) -> list:
        return [event for event in self.events if event["event"] in kinds]

    def stats(self) -> dict:
        stats, = self.of("playbook_on_stats")
        return stats["event_data"]

    def host_results(self) -> list:
        """(task name, event) of each task's final result on a host (loop items excluded)."""
        return [(event["event_data"]["task"], event) for event in self.of(
            "runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable")]

    def shown(self) -> str:
        """Every file ansible-runner left for the job (events, stdout, stderr, fact_cache), as text, except `command`:
        ansible-runner's record of the environment it was started with, which AWX does not show (it keeps its own
        copy as the job's job_env, with credential values hidden)."""
        return "\n".join(path.read_text(errors="replace") for path in sorted(self.artifacts.rglob("*"))
                         if path.is_file() and path.name != "command")


def lay_out(awx, sim, name: str, survey: dict, host: str = NODE, check: bool = False) -> Path:
    """A private data dir laid out as AWX does for playbooks/gpu_demo.yml."""
    private_data_dir = awx["dir"] / name
    (private_data_dir / "project").mkdir(parents=True)
    shutil.copytree(CHECKOUT / "playbooks", private_data_dir / "project" / "playbooks")
    (private_data_dir / "inventory").mkdir()
    inventory = {"gpu_nodes": {"hosts": {host: {"gpu_demo_vllm_health_url": sim.health_url}}}}
    (private_data_dir / "inventory" / "hosts").write_text(json.dumps(inventory))
    (private_data_dir / "env").mkdir()
    (private_data_dir / "env" / "extravars").write_text(json.dumps(survey))
    (private_data_dir / "env" / "envvars").write_text(json.dumps({
        "K8S_AUTH_HOST": sim.api_url, "K8S_AUTH_API_KEY": awx["token"], "K8S_AUTH_SSL_CA_CERT": awx["ca"],
        "K8S_AUTH_VERIFY_SSL": "True", "ANSIBLE_COLLECTIONS_PATHS": str(awx["collections"]),
        "ANSIBLE_COLLECTIONS_PATH": str(awx["collections"])}))
    (private_data_dir / "env" / "cmdline").write_text("-vvv" + (" --check" if check else ""))
    return private_data_dir


def run_job(awx, sim, name: str, survey: dict, host: str = NODE, check: bool = False) -> Job:
    """Lay out a private data dir as AWX does and run playbooks/gpu_demo.yml in it with ansible-runner."""
    private_data_dir = lay_out(awx, sim, name, survey, host, check)
    process = subprocess.run([str(VENV_BIN / "ansible-runner"), "run", str(private_data_dir), "-p", "playbooks/gpu_demo.yml",
                              "--ident", name, "-q"], capture_output=True, text=True, env=awx["env"], timeout=600, check=False)
    return Job(private_data_dir, name, process)


def survey(awx, run_id: str) -> dict:
    """What a survey built from roles/gpu_demo/meta/argument_specs.yml would send."""
    return {"gpu_demo_namespace": NAMESPACE, "gpu_demo_resource": "nvidia.com/gpu", "gpu_demo_hold_mode": "per_unit",
            "gpu_demo_timeout": 30, "gpu_demo_hold_seconds": 120, "gpu_demo_report_lang": "en",
            "gpu_demo_report_dir": str(awx["dir"] / "reports"), "gpu_demo_run_id": run_id,
            "gpu_demo_vllm_bearer_token": VLLM_TOKEN}


def assert_no_secret(job: Job, awx) -> None:
    text = job.shown()
    payload, signature = awx["token"].split(".")[1:]
    for name, needle in {"token": awx["token"], "token payload": payload, "token signature": signature,
                         "vLLM API key": VLLM_TOKEN}.items():
        assert needle not in text, f"the {name} is in the job's artifacts"


def assert_events_are_per_task(job: Job) -> None:
    """AWX lists one event per task start and one result per task and host, each under its task's uuid."""
    starts = {event["event_data"]["task_uuid"]: event["event_data"]["task"] for event in job.of("playbook_on_task_start")}
    results = job.host_results()
    assert starts and results
    per_task = {}
    for task, event in results:
        uuid = event["event_data"]["task_uuid"]
        assert starts.get(uuid) == task, f"result of {task!r} under no task start of that name"
        per_task[uuid] = per_task.get(uuid, 0) + 1
    assert set(per_task.values()) == {1}, "a task has several results on the one host"
    # Every task's result comes from the installed tarball, not from the checkout.
    paths = {event["event_data"].get("task_path", "").split(":")[0] for _task, event in results}
    role_paths = {path for path in paths if "/roles/" in path}
    assert role_paths and all(path.startswith(str(job.artifacts.parents[2] / "requirements_collections")) for path in role_paths), role_paths


def test_job_passes_with_the_credential_as_awx_injects_it(sim, awx):
    admin = core_api(sim.kubeconfig)
    before = ledger(admin)
    run_id = new_run_id("awx")
    job = run_job(awx, sim, "job-run", survey(awx, run_id))
    assert (job.status, job.rc) == ("successful", 0), job.stdout[-4000:] + job.process.stderr[-2000:]
    assert_events_are_per_task(job)
    assert not job.of("runner_on_failed", "runner_on_unreachable")
    stats = job.stats()
    assert stats["failures"] == {} and stats["ok"][NODE] > 10
    # What a workflow gates on: the statistics set_stats hands to AWX.
    result = stats["artifact_data"]["gpu_demo"][NODE]
    assert result["passed"] is True and result["failed_checks"] == [], result["failed_checks"]
    assert result["hold"]["distinct_uuids"] and result["queue"]["evidence"]["uuids"]
    assert result["report_files"]["json"].startswith(str(awx["dir"] / "reports"))
    # The API tasks ran in ansible-playbook's process with the K8S_AUTH_* credential of the job's environment.
    assert job.stdout.count(": running in the controller's process") >= 5, job.stdout[-4000:]
    assert_no_secret(job, awx)
    # Control: the token did reach the job (ansible-runner's record of the environment it was given holds it).
    assert awx["token"] in (job.artifacts / "command").read_text()
    assert demo_pods(admin) == [] and ledger(admin) == before


def test_failed_job_names_the_failed_task_in_its_events(sim, awx):
    run_id = new_run_id("awx")
    job = run_job(awx, sim, "job-fail", survey(awx, run_id), host="prod999")
    assert (job.status, job.rc) == ("failed", 2), job.stdout[-4000:]
    # AWX lists each failed task with its message: the pre-flight check that refused the node (rescued, so the
    # cleanup and the report still run), then the task that fails the host.
    failed = [(task, event["event_data"]["res"].get("msg", "")) for task, event in job.host_results()
              if event["event"] == "runner_on_failed"]
    assert len(failed) == 2 and failed[0][0].startswith("Preflight"), failed
    assert "node 'prod999' not found" in failed[0][1], failed
    assert "node_found" in failed[1][1] and "node 'prod999' not found" in failed[1][1], failed
    for task, _message in failed:
        assert f"TASK [{task}]" in job.stdout or task in job.stdout
    stats = job.stats()
    assert stats["failures"] == {"prod999": 1} and stats["rescued"] == {"prod999": 1}
    result = stats["artifact_data"]["gpu_demo"]["prod999"]
    assert result["passed"] is False and result["failed_checks"] == ["node_found"], result
    assert "prod999" in result["failure"]["message"]
    assert_no_secret(job, awx)
    assert demo_pods(core_api(sim.kubeconfig)) == []


def test_check_job_type_creates_nothing(sim, awx):
    run_id = new_run_id("awx")
    job = run_job(awx, sim, "job-check", survey(awx, run_id), check=True)
    assert (job.status, job.rc) == ("successful", 0), job.stdout[-4000:]
    assert_events_are_per_task(job)
    assert not job.of("runner_on_failed")
    assert "would_create" in job.stdout and "gpu-demo-hold" in job.stdout
    result = job.stats()["artifact_data"]["gpu_demo"][NODE]
    assert result["report_files"] == {}
    assert not (awx["dir"] / "reports" / f"gpu-demo-{NODE}-{run_id}.json").exists()
    # The pods were only offered to the API server's dry run, which admitted each and changed nothing.
    dry_runs = [event["event_data"]["res"] for event in job.of("runner_on_ok") if "dry run" in event["event_data"]["task"]]
    assert len(dry_runs) == 1 and dry_runs[0]["changed"] is False, dry_runs
    assert dry_runs[0]["objects"] and all(found["admitted"] for found in dry_runs[0]["objects"]), dry_runs[0]["objects"]
    assert_no_secret(job, awx)
    assert demo_pods(core_api(sim.kubeconfig)) == []


def test_job_streamed_to_an_execution_node_keeps_its_report_in_the_cluster(sim, awx):
    """As AWX runs a job on an execution node: `ansible-runner transmit` on the controller, `ansible-runner worker` in a
    folder of its own (deleted when the job ends), `ansible-runner process` back on the controller; only the stream
    comes back. The node's report is read back from the cluster, and the verdicts are in the processed artifacts."""
    run_id = new_run_id("awx")
    name = "job-streamed"
    # Laid out as for a local job, then only streamed: the worker never sees this folder.
    private_data_dir = lay_out(awx, sim, name, survey(awx, run_id))
    runner = str(VENV_BIN / "ansible-runner")
    transmit = subprocess.run([runner, "transmit", str(private_data_dir), "-p", "playbooks/gpu_demo.yml", "--ident", name],
                              capture_output=True, env=awx["env"], timeout=120, check=False)
    assert transmit.returncode == 0, transmit.stderr[-2000:]
    worker_dir = awx["dir"] / "execution-node" / name
    worker = subprocess.run([runner, "worker", "--private-data-dir", str(worker_dir), "--delete"], input=transmit.stdout,
                            capture_output=True, env=awx["env"], timeout=600, check=False)
    assert worker.returncode == 0, worker.stderr[-2000:]
    assert not worker_dir.exists(), "the worker's folder outlived the job"
    processed_dir = awx["dir"] / (name + "-processed")
    processed_dir.mkdir()
    process = subprocess.run([runner, "process", str(processed_dir), "--ident", name], input=worker.stdout,
                             capture_output=True, env=awx["env"], timeout=120, check=False)
    assert process.returncode == 0, process.stderr.decode(errors="replace")[-2000:]
    job = Job(processed_dir, name, subprocess.CompletedProcess(process.args, process.returncode, "", ""))
    assert (job.status, job.rc) == ("successful", 0), job.stdout[-4000:]
    result = job.stats()["artifact_data"]["gpu_demo"][NODE]
    assert result["passed"] is True and result["run_id"] == run_id, result.get("failed_checks")
    # The report, read back from the cluster: the Node names it, and it holds the verdict the artifacts hold.
    admin = core_api(sim.kubeconfig)
    named = admin.read_node(NODE).metadata.annotations["gpuops.scheduling/gpu-preflight-report-configmap"]
    assert named == f"{NAMESPACE}/{result['report_configmap']['name']}"
    stored = admin.read_namespaced_config_map(result["report_configmap"]["name"], NAMESPACE)
    kept = json.loads(stored.data["report.json"])
    assert (kept["run_id"], kept["passed"], kept["checks"]) == (run_id, True, result["checks"])
    assert_no_secret(job, awx)
