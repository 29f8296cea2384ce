"""playbooks/gpu_ledger_audit.yml on the simulated node: the seed's own lesson, found automatically.

The default topology is the walkthrough's prod102: its H20 is free in the scheduler's ledger, while a
vLLM pod that requested no GPU and a host Python process use 90 GiB of its memory.
"""
from __future__ import annotations

import json

import yaml


def inventory(sim, tmp_path) -> str:
    node_dir = sim.dir.run / "nodes" / "prod102"
    hosts = {"all": {"children": {"gpu_nodes": {"hosts": {"prod102": {
        # The simulated node is this machine: no SSH, the fake node's nvidia-smi, /proc and checkpoint.
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "gpu_ledger_audit_become": False, "gpu_ledger_audit_kubeconfig": sim.kubeconfig,
        "gpu_ledger_audit_report_dir": str(tmp_path),
        "gpu_ledger_audit_process_facts_options": {
            "source": "nvidia-smi", "nvidia_smi_path": str(node_dir / "bin" / "nvidia-smi"),
            "proc_root": str(node_dir / "proc"), "host_root": str(node_dir),
            "checkpoint_path": str(node_dir / "device-plugins" / "kubelet_internal_checkpoint"),
            "pod_resources_socket": str(node_dir / "kubelet" / "pod-resources" / "kubelet.sock")}}}}}}}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(hosts))
    return str(path)


def test_audit_finds_the_out_of_ledger_users_of_a_free_gpu(sim, tmp_path):
    sim.use_topology("default")
    run = sim.playbook("playbooks/gpu_ledger_audit.yml", inventory=inventory(sim, tmp_path),
                       env={"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
                            "ANSIBLE_SHOW_CUSTOM_STATS": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    audit = json.loads(run.stdout)["global_custom_stats"]["gpu_ledger_audit"]["prod102"]
    gpu = audit["gpus"][0]
    assert gpu["uuid"] == "GPU-0a9cfb9a-ef39-5b22-54ec-22474c4cfd76"
    assert gpu["ledger_state"] == "free"
    assert gpu["memory_bytes"]["out_of_ledger_pod"] == 86016 * 2**20
    assert gpu["memory_bytes"]["host"] == 6144 * 2**20
    assert audit["summary"]["free_but_in_use"] == 1
    report = (tmp_path / "prod102-ledger-audit.md").read_text()
    assert "| nvidia.com/gpu | 1 | 0 | 1 |" in report
    assert "is free in the ledger but 90.0 GiB of its memory is in use" in report
    assert "(pod default/vllm-h20)" in report


def test_audit_can_gate_on_a_free_gpu_in_use(sim, tmp_path):
    run = sim.playbook("playbooks/gpu_ledger_audit.yml", inventory=inventory(sim, tmp_path),
                       extra_vars={"gpu_ledger_audit_fail_on_warning": True})
    assert run.returncode != 0
    assert "is free in the ledger but" in run.stdout


def test_audit_runs_on_the_sim_inventory_as_it_is(sim):
    """`ansible-playbook playbooks/gpu_ledger_audit.yml -i inventory/sim`, nothing else: inventory/sim points the
    node-side module at the simulated node (its nvidia-smi, /proc, the kubelet's PodResources socket): the
    checkout's own .sim/, or the cluster GPUOPS_SIM_DIR names (a parallel worker's)."""
    sim.use_topology("default")
    run = sim.playbook("playbooks/gpu_ledger_audit.yml", env={"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
                                                              "ANSIBLE_SHOW_CUSTOM_STATS": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "unsafe" not in run.stderr, run.stderr
    audit = json.loads(run.stdout)["global_custom_stats"]["gpu_ledger_audit"]["prod102"]
    assert audit["summary"]["free_but_in_use"] == 1
