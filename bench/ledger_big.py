"""Ledger at Kubernetes' scalability envelope: 5,000 nodes and 150,000 pods (bench/big_cluster.py), side by side:

  1. one node's ledger (read_strategy node): seconds, objects and bytes the API server sent, list calls, against
     the bytes of one full pod list (GET /api/v1/pods);
  2. the fleet-wide ledger (read_strategy fleet, in pages): seconds and peak memory (VmHWM of a process that does
     only that), against the bare `kubectl get pods -A -o json` of the same cluster, alternated, medians;
  3. a 20-node pre-flight (playbooks/gpu_demo.yml, nodes in parallel) on that cluster: every byte the API server
     sent to the playbook, counted by a TCP proxy on 127.0.0.1 that the playbook's kubeconfig points at.

The cluster is grown once (resumable, ~4 minutes on 2 cores) and kept on disk; this script starts it, and stops
its processes at the end unless --keep. `make bench-scale` runs it; results in bench/results/*-scale.{json,md}.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import big_cluster  # noqa: E402  pylint: disable=wrong-import-position
import cluster  # noqa: E402  pylint: disable=wrong-import-position  # tests/sim, via big_cluster
from ledger_scale import reader_for  # noqa: E402  pylint: disable=wrong-import-position

CHECKOUT = big_cluster.CHECKOUT
sys.path.insert(0, str(CHECKOUT / ".collections"))   # the collection, as ansible finds it (make setup links it)
VENV_BIN = Path(sys.executable).parent
RESULTS = Path(__file__).resolve().parent / "results"
NODE = big_cluster.node_name(2500)
PREFLIGHT_NODES = 20
TARGETS = {"node_s": 0.2, "node_bytes_share": 0.01, "fleet_ratio": 1.3, "fleet_peak_mib": 1024, "fleet_list_calls": 3,
           "preflight_bytes_per_node": 5_000_000}


def say(message: str) -> None:
    print(f"[bench-scale] {time.strftime('%H:%M:%S')} {message}", flush=True)


# --- reading in this process ---------------------------------------------------------------------


def read(kubeconfig: str, node: str | None, strategy: str = "auto") -> dict:
    from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import ledger  # pylint: disable=import-outside-toplevel
    reader = reader_for(kubeconfig)
    chosen = ledger.choose_read_strategy([node] if node else [], strategy)
    started = time.perf_counter()
    result = ledger.read_ledger(reader, node=node, strategy=chosen)
    seconds = time.perf_counter() - started
    holders = sum(len(entry["holders"]) for item in result["nodes"].values() for entry in item["resources"].values())
    return {"seconds": seconds, "strategy": chosen, "list_calls": reader.calls, "http_requests": reader.requests,
            "bytes": reader.bytes_received, "nodes": len(result["nodes"]), "holders": holders, "pending": len(result["pending"]),
            "requested": result["totals"]["nvidia.com/gpu"]["requested"]}


def vm_hwm_mib() -> float:
    """This process's peak resident memory (VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fleet_child(kubeconfig: str) -> None:
    """`ledger_big.py --fleet-child KUBECONFIG`: one fleet read in a fresh process, its numbers and peak memory as JSON."""
    # The imports the module makes, before the baseline: the read's own memory is peak minus baseline.
    from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import ledger  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    baseline = vm_hwm_mib()
    result = read(kubeconfig, None)
    result.update(peak_rss_mib=vm_hwm_mib(), baseline_rss_mib=baseline)
    print(json.dumps(result))


def fleet_read(kubeconfig: str) -> dict:
    started = time.monotonic()
    out = subprocess.run([sys.executable, __file__, "--fleet-child", kubeconfig], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.splitlines()[-1])
    result["wall_s"] = time.monotonic() - started
    return result


def kubectl_read(kubectl: str, kubeconfig: str) -> dict:
    """The bare read: `kubectl get pods -A -o json` (its default 500-pod chunks), output thrown away; wall and peak RSS."""
    started = time.monotonic()
    with open(os.devnull, "wb") as sink:
        process = subprocess.Popen([kubectl, "--kubeconfig", kubeconfig, "get", "pods", "-A", "-o", "json"], stdout=sink)
        _pid, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise RuntimeError(f"kubectl get pods -A failed ({status})")
    return {"seconds": time.monotonic() - started, "peak_rss_mib": usage.ru_maxrss / 1024}


def full_list_bytes(sim: cluster.SimDir) -> int:
    """Bytes of one unpaginated list of every pod (what a ledger read of the whole cluster made the API server send)."""
    _status, data = big_cluster.Api(sim).request("GET", "/api/v1/pods", ok=(200,))
    return len(data)


def run_task(kubeconfig: str, args: dict) -> dict:
    """The module as users run it: ansible ad hoc, json callback; its result and the task's duration."""
    from ledger_scale import _seconds  # pylint: disable=import-outside-toplevel
    out = subprocess.run([str(VENV_BIN / "ansible"), "localhost", "-m", "gpuops.scheduling.gpu_ledger_facts", "-a", json.dumps(args)],
                         capture_output=True, text=True, check=True, cwd=CHECKOUT,
                         env={**os.environ, "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "K8S_AUTH_KUBECONFIG": kubeconfig,
                              "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"})
    task = json.loads(out.stdout)["plays"][0]["tasks"][0]
    result = task["hosts"]["localhost"]
    if result.get("failed"):
        raise RuntimeError(result.get("msg"))
    return {"result": result, "task_seconds": _seconds(task["task"]["duration"]["start"], task["task"]["duration"]["end"])}


# --- the pre-flight, through a counting proxy ----------------------------------------------------

class CountingProxy:
    """A TCP proxy on 127.0.0.1 (TLS passes through untouched) counting the bytes the API server sends back."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.sent_by_server = 0
        self.connections = 0
        self.port = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, client_reader, client_writer) -> None:
        self.connections += 1
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pipe(reader, writer, count: bool) -> None:
            try:
                while True:
                    data = await reader.read(65536)
                    if not data:
                        break
                    if count:
                        self.sent_by_server += len(data)
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        await asyncio.gather(pipe(client_reader, server_writer, False), pipe(server_reader, client_writer, True))


def ensure_queued_stay_unscheduled(api: big_cluster.Api) -> None:
    """The queued GPU pods must stay Pending once a scheduler runs: a node selector that no node matches."""
    _status, data = api.request("GET", "/api/v1/namespaces/bench-queue/pods/queued-000", ok=(200, 404))
    if b"nodeSelector" in data:
        return
    say("recreating the queued pods with a node selector no node matches")
    for index in range(big_cluster.QUEUED_GPU_PODS):
        api.request("DELETE", f"/api/v1/namespaces/bench-queue/pods/queued-{index:03d}?gracePeriodSeconds=0", ok=(200, 404))
    for index in range(big_cluster.QUEUED_GPU_PODS):
        api.request("POST", "/api/v1/namespaces/bench-queue/pods", big_cluster.queued_pod(index))


def start_preflight_side(sim: cluster.SimDir, count: int, workdir: Path) -> list:
    """The scheduler, and a fake kubelet for the pre-flight's light nodes (one GPU each), on the bench cluster."""
    api = big_cluster.Api(sim)
    for namespace in ("gpu-operator",):
        api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        api.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "default"}})
    ensure_queued_stay_unscheduled(api)
    names = [f"pre-{index:03d}" for index in range(count)]
    topology = workdir / "preflight-topology.yaml"
    topology.write_text(yaml.safe_dump({"light_nodes": True, "nodes": [
        {"name": name, "gpu": {"product": "NVIDIA H20", "count": 1}} for name in names]}))
    k8s_bin, _etcd_bin = cluster.binary_dirs()
    sim.make()
    if not cluster.running_pid(sim, "kube-scheduler"):
        cluster.start_process(sim, "kube-scheduler", cluster.scheduler_argv(sim, k8s_bin))
    cluster.stop_process(sim, "fakelet")
    cluster.start_process(sim, "fakelet", cluster.python_argv(
        "fakelet.py", "--kubeconfig", str(sim.kubeconfig), "--topology", str(topology), "--state-dir", str(sim.run),
        "--port", str(sim.ports.kubelet), "--cert", str(sim.pki / "kubelet.crt"), "--key", str(sim.pki / "kubelet.key"),
        "--watch-per-node"))

    def registered() -> bool:
        """The nodes are there and advertise their GPU once the fake kubelet has registered them."""
        status, data = api.request("GET", f"/api/v1/nodes/{names[-1]}", ok=(200, 404))
        return status == 200 and (json.loads(data)["status"].get("allocatable") or {}).get("nvidia.com/gpu") == "1"
    cluster.wait_for(registered, 120, "the pre-flight's light nodes", interval=1)
    # The API server taints a new node not-ready; the node lifecycle controller lifts it once the node is Ready.
    # No controller manager runs here (it would mark the 5,000 kubelet-less nodes unreachable): lifted by hand.
    for name in names:
        api.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, content_type="application/merge-patch+json")
    return names


def run_preflight(sim: cluster.SimDir, names: list, workdir: Path) -> dict:
    proxy = CountingProxy(sim.ports.apiserver)
    config = yaml.safe_load(sim.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    kubeconfig = workdir / "kubeconfig-counted"
    kubeconfig.write_text(yaml.safe_dump(config))
    inventory = workdir / "preflight-inventory.yml"
    inventory.write_text(yaml.safe_dump({"gpu_nodes": {"hosts": {name: None for name in names}, "vars": {
        "ansible_connection": "local", "gpu_demo_kubeconfig": str(kubeconfig), "gpu_demo_vllm_health_url": "",
        "gpu_demo_report_dir": str(workdir / "reports")}}}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
           "K8S_AUTH_KUBECONFIG": str(kubeconfig)}
    started = time.monotonic()
    result = subprocess.run([str(VENV_BIN / "ansible-playbook"), "playbooks/gpu_demo.yml", "-i", str(inventory),
                             "-e", "gpu_demo_parallel=true", "--forks", str(len(names))],
                            cwd=CHECKOUT, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        import fleet  # pylint: disable=import-outside-toplevel
        raise RuntimeError(f"pre-flight of {len(names)} nodes failed:\n{fleet.failures(result.stdout)}")
    return {"nodes": len(names), "seconds": seconds, "bytes_from_api_server": proxy.sent_by_server,
            "bytes_per_node": proxy.sent_by_server / len(names), "connections": proxy.connections}


# --- the run -------------------------------------------------------------------------------------

def main(repeats: int = 5, fleet_runs: int = 3, preflight_nodes: int = PREFLIGHT_NODES, keep: bool = False,
         skip_preflight: bool = False) -> dict:
    sim = big_cluster.sim_dir()
    if len(big_cluster.grown(sim)) < big_cluster.NODES:
        say("growing the bench cluster first (resumable): bench/big_cluster.py grow")
        big_cluster.grow(sim, big_cluster.NODES, big_cluster.PODS_PER_NODE, 3, 24)
    big_cluster.up(sim)
    env = json.loads((sim.root / "env.json").read_text())
    kubeconfig = str(sim.kubeconfig)
    results = {"cluster": {"nodes": big_cluster.NODES, "bound_pods": big_cluster.NODES * big_cluster.PODS_PER_NODE,
                           "queued_gpu_pods": big_cluster.QUEUED_GPU_PODS, "dir": str(sim.root)}}
    try:
        full = full_list_bytes(sim)
        results["full_pod_list_bytes"] = full
        say(f"one full pod list: {full / 2**20:.0f} MiB")

        node_runs = [read(kubeconfig, NODE) for _repeat in range(repeats)]
        task = run_task(kubeconfig, {"node": NODE})
        node = dict(node_runs[0], seconds=statistics.median(run["seconds"] for run in node_runs), node=NODE,
                    task_s=task["task_seconds"], task_strategy=task["result"]["read_strategy"],
                    bytes_share=node_runs[0]["bytes"] / full)
        results["node"] = node
        say(f"one node's ledger: {node}")

        fleet_rows, kubectl_rows = [], []
        for _run in range(fleet_runs):   # alternated, so both see the same machine load
            kubectl_rows.append(kubectl_read(env["kubectl"], kubeconfig))
            fleet_rows.append(fleet_read(kubeconfig))
            say(f"fleet {fleet_rows[-1]['seconds']:.1f}s / {fleet_rows[-1]['peak_rss_mib']:.0f} MiB; "
                f"kubectl {kubectl_rows[-1]['seconds']:.1f}s / {kubectl_rows[-1]['peak_rss_mib']:.0f} MiB")
        fleet = dict(fleet_rows[0], seconds=statistics.median(row["seconds"] for row in fleet_rows),
                     wall_s=statistics.median(row["wall_s"] for row in fleet_rows),
                     peak_rss_mib=max(row["peak_rss_mib"] for row in fleet_rows))
        kubectl = {"seconds": statistics.median(row["seconds"] for row in kubectl_rows),
                   "peak_rss_mib": max(row["peak_rss_mib"] for row in kubectl_rows)}
        results["fleet"] = dict(fleet, kubectl=kubectl, ratio=fleet["seconds"] / kubectl["seconds"],
                                ratio_process=fleet["wall_s"] / kubectl["seconds"], runs=fleet_runs)
        if not skip_preflight:
            with tempfile.TemporaryDirectory(prefix="gpuops-bench-scale-") as workdir:
                names = start_preflight_side(sim, preflight_nodes, Path(workdir))
                results["preflight"] = run_preflight(sim, names, Path(workdir))
                say(f"pre-flight: {results['preflight']}")
    finally:
        if not keep:
            big_cluster.stop(sim)
    return results


def table(results: dict) -> str:
    node, fleet = results["node"], results["fleet"]
    lines = [f"| 5,000 nodes / 150,000 pods ({results['full_pod_list_bytes'] / 2**20:.0f} MiB a full pod list) | measured | target |",
             "| --- | ---: | ---: |",
             f"| one node's ledger (read_strategy {node['strategy']}): read + sums | {node['seconds']:.3f} s "
             f"(ansible task {node['task_s']:.2f} s) | <= {TARGETS['node_s']} s |",
             f"| one node's ledger: objects / bytes from the API server / list calls | {node['holders']} holders of "
             f"{node['requested']} units, {node['pending']} pending; {node['bytes'] / 1024:.0f} KiB "
             f"({node['bytes_share'] * 100:.3f}% of a full list); {node['list_calls']} calls | <= 1% |",
             f"| fleet-wide ledger (in pages) vs `kubectl get pods -A -o json` | {fleet['seconds']:.1f} s vs "
             f"{fleet['kubectl']['seconds']:.1f} s: {fleet['ratio']:.2f}x | <= {TARGETS['fleet_ratio']}x |",
             f"| fleet-wide ledger: peak memory (kubectl: {fleet['kubectl']['peak_rss_mib']:.0f} MiB) / list calls / requests | "
             f"{fleet['peak_rss_mib']:.0f} MiB / {fleet['list_calls']} / {fleet['http_requests']} | <= 1024 MiB / 3 |"]
    if results.get("preflight"):
        pre = results["preflight"]
        lines.append(f"| {pre['nodes']}-node pre-flight (playbook, parallel): bytes the API server sent | "
                     f"{pre['bytes_from_api_server'] / 2**20:.1f} MiB, {pre['bytes_per_node'] / 1e6:.2f} MB a node, "
                     f"{pre['seconds']:.0f} s | < 5 MB a node |")
    return "\n".join(lines)


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet-child", metavar="KUBECONFIG")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--fleet-runs", type=int, default=3)
    parser.add_argument("--preflight-nodes", type=int, default=PREFLIGHT_NODES)
    parser.add_argument("--skip-preflight", action="store_true")
    parser.add_argument("--keep", action="store_true", help="leave the bench cluster's processes running")
    options = parser.parse_args()
    if options.fleet_child:
        fleet_child(options.fleet_child)
        return 0
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "cpus": os.cpu_count()}
    results.update(main(options.repeats, options.fleet_runs, options.preflight_nodes, options.keep, options.skip_preflight))
    RESULTS.mkdir(exist_ok=True)
    stamp = results["date"].replace(":", "").replace("+0000", "Z")
    (RESULTS / f"{stamp}-scale.json").write_text(json.dumps(results, indent=2) + "\n")
    summary = table(results)
    (RESULTS / f"{stamp}-scale.md").write_text(f"# Ledger at 5,000 nodes / 150,000 pods, {results['date']}\n\n{summary}\n")
    print(summary)
    print(f"\n[bench-scale] results in {RESULTS}/{stamp}-scale.{{json,md}}")
    return 0


if __name__ == "__main__":
    sys.exit(cli())
