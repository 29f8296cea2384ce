"""Ledger at scale: gpu_ledger_facts over fleets of 100, 500 and 2,000 fake GPU nodes with 10 pods each.

Runs in a cluster of its own (a second simulated cluster, torn down afterwards) so the thousands of
objects never reach the default one. Each fleet is grown from the previous one; the task is then
run for real (`ansible localhost -m gpuops.scheduling.gpu_ledger_facts`, which runs in ansible's own process as
in the role) and timed, and the same read
is repeated in-process to measure peak memory and count HTTP requests. Times are medians of --repeats runs.

With --keep the cluster stays up, and a later run reuses it and the bench nodes it already has
(growing a 2,000-node fleet takes minutes): `--scales 2000 --keep` again only measures.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
BENCH_SIM_DIR = CHECKOUT / ".sim-bench"
# Beside the checkout's own cluster; GPUOPS_BENCH_PORT_OFFSET moves it when another cluster uses these ports.
BENCH_PORT_OFFSET = os.environ.get("GPUOPS_BENCH_PORT_OFFSET", "1000")
PODS_PER_NODE = 10
GPUS_PER_NODE = 8
SCALES = (100, 500, 2000)
REPEATS = 5
GROW_THREADS = 16


def simctl(*args: str) -> None:
    subprocess.run([sys.executable, str(CHECKOUT / "tests" / "sim" / "simctl.py"), *args], check=True, env=bench_env(),
                   stdout=subprocess.DEVNULL)


def bench_env() -> dict:
    return {**os.environ, "GPUOPS_SIM_DIR": str(BENCH_SIM_DIR), "GPUOPS_SIM_PORT_OFFSET": BENCH_PORT_OFFSET}


def node_body(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true",
                                                  "nvidia.com/gpu.product": "NVIDIA-H20", "nvidia.com/gpu.count": str(GPUS_PER_NODE)}}}


def node_status(name: str) -> dict:
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(GPUS_PER_NODE)}
    return {"status": {"capacity": capacity, "allocatable": capacity,
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench"}]}}


def pod_body(node: str, index: int) -> dict:
    """Ten pods a node: two hold a GPU each, the rest are ordinary CPU pods (as on a busy GPU node)."""
    resources = {"limits": {"nvidia.com/gpu": "1"}} if index < 2 else {"requests": {"cpu": "100m", "memory": "128Mi"}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{node}-pod-{index}", "namespace": "bench", "labels": {"app": "bench"}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "bench:1", "resources": resources}],
                     # The bench nodes have no kubelet: they turn NotReady, and without these the node lifecycle
                     # controller would evict every pod after 5 minutes, shrinking the fleet under measurement.
                     "tolerations": [{"key": key, "operator": "Exists", "effect": "NoExecute"}
                                     for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]}}


def bench_pod_names(core) -> list:
    # Raw JSON: the client's model classes take most of a minute over 20,000 pods.
    listing = json.loads(core.list_namespaced_pod("bench", _preload_content=False).data)
    return [pod["metadata"]["name"] for pod in listing["items"]]


def send(call, *args) -> None:
    """One write, its answer read and its connection given back to the pool (an unread raw response keeps
    its connection: 20,000 of them ran out of file descriptors)."""
    response = call(*args, _preload_content=False)
    response.read()
    response.release_conn()


def grow(core, have: int, want: int) -> None:
    """Nodes have..want-1, then every bench pod of nodes 0..want-1 that is missing (a kept cluster may miss some)."""
    names = [f"bench-gpu-{index:05d}" for index in range(have, want)]
    with ThreadPoolExecutor(GROW_THREADS) as pool:
        list(pool.map(lambda name: send(core.create_node, node_body(name)), names))
        list(pool.map(lambda name: send(core.patch_node_status, name, node_status(name)), names))
        existing = set(bench_pod_names(core))
        pods = [pod_body(f"bench-gpu-{node:05d}", index) for node in range(want) for index in range(PODS_PER_NODE)]
        missing = [pod for pod in pods if pod["metadata"]["name"] not in existing]
        list(pool.map(lambda pod: send(core.create_namespaced_pod, "bench", pod), missing))


def run_task(kubeconfig: str) -> dict:
    """The task as users run it; returns its result and the task's duration from the json callback."""
    started = time.monotonic()
    out = subprocess.run([str(VENV_BIN / "ansible"), "localhost", "-m", "gpuops.scheduling.gpu_ledger_facts"],
                         capture_output=True, text=True, check=True, cwd=CHECKOUT,
                         env={**os.environ, "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"), "K8S_AUTH_KUBECONFIG": kubeconfig,
                              "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"})
    wall = time.monotonic() - started
    task = json.loads(out.stdout)["plays"][0]["tasks"][0]
    result = task["hosts"]["localhost"]
    if result.get("failed"):
        raise RuntimeError(result.get("msg"))
    duration = task["task"]["duration"]
    return {"result": result, "wall": wall, "task_seconds": _seconds(duration["start"], duration["end"])}


def _seconds(start: str, end: str) -> float:
    from datetime import datetime  # pylint: disable=import-outside-toplevel
    layout = "%Y-%m-%dT%H:%M:%S.%fZ"
    return (datetime.strptime(end, layout) - datetime.strptime(start, layout)).total_seconds()


def reader_for(kubeconfig: str):
    """A CoreV1Reader over the kubernetes client, as the module builds it (without kubernetes.core's discovery)."""
    sys.path.insert(0, str(CHECKOUT / ".collections"))
    from kubernetes import config  # pylint: disable=import-outside-toplevel
    from kubernetes.dynamic import DynamicClient  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import client  # pylint: disable=import-outside-toplevel

    api_client = config.new_client_from_config(config_file=kubeconfig)
    # kubernetes.core's client without its API discovery: requests only need the ApiClient underneath.
    dynamic = DynamicClient.__new__(DynamicClient)
    dynamic.client = api_client

    class Connection:   # the two attributes CoreV1Reader uses of kubernetes.core's client
        configuration = api_client.configuration
        client = dynamic

    return client.CoreV1Reader(Connection())


def in_process(kubeconfig: str, measure_memory: bool = False) -> dict:
    """The task's read and sums in this process: seconds, HTTP requests, and (separately, since
    tracing slows Python down) peak Python memory."""
    reader = reader_for(kubeconfig)   # puts the collection on sys.path
    from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes import ledger as _ledger  # pylint: disable=import-outside-toplevel

    if measure_memory:
        tracemalloc.start()
    started = time.perf_counter()
    ledger = _ledger.read_ledger(reader)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] if measure_memory else 0
    tracemalloc.stop()
    return {"seconds": seconds, "calls": reader.calls, "requests": reader.requests, "peak_mib": peak / 2**20,
            "nodes": len(ledger["nodes"])}


def bench_nodes(core) -> int:
    """How many bench nodes a kept cluster already has (they are numbered from 0)."""
    names = {node.metadata.name for node in core.list_node().items}
    count = sum(1 for name in names if name.startswith("bench-gpu-"))
    if any(f"bench-gpu-{index:05d}" not in names for index in range(count)):
        raise RuntimeError("the bench nodes are not numbered 0..N-1: `simctl.py down` the bench cluster and start again")
    return count


def main(scales=SCALES, keep: bool = False, repeats: int = REPEATS) -> list:
    rows = []
    print("[bench] ledger at scale: starting (or reusing) a separate simulated cluster in .sim-bench", flush=True)
    simctl("up")
    try:
        from kubernetes import client, config  # pylint: disable=import-outside-toplevel
        kubeconfig = str(BENCH_SIM_DIR / "kubeconfig")
        configuration = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        # One connection per growing thread, reused (see send()).
        configuration.connection_pool_maxsize = GROW_THREADS
        core = client.CoreV1Api(client.ApiClient(configuration))
        try:
            core.create_namespace({"metadata": {"name": "bench"}})
        except client.ApiException as error:
            if error.status != 409:  # a kept cluster already has it
                raise
        have = bench_nodes(core)
        for scale in scales:
            if scale < have:
                raise RuntimeError(f"the kept bench cluster already has {have} nodes, more than {scale}")
            started = time.monotonic()
            grow(core, have, scale)
            have = scale
            print(f"[bench] {scale} nodes / {scale * PODS_PER_NODE} pods ready in {time.monotonic() - started:.0f}s", flush=True)
            runs = [run_task(kubeconfig) for _repeat in range(repeats)]
            inner = [in_process(kubeconfig) for _repeat in range(repeats)]
            memory = in_process(kubeconfig, measure_memory=True)
            gpu_nodes = [name for name in runs[0]["result"]["ledger"]["nodes"] if name.startswith("bench-gpu-")]
            assert len(gpu_nodes) == scale, f"ledger saw {len(gpu_nodes)} of {scale} nodes"
            pods = len(bench_pod_names(core))
            assert pods == scale * PODS_PER_NODE, f"{pods} bench pods instead of {scale * PODS_PER_NODE}"
            rows.append({
                "nodes": scale, "pods": scale * PODS_PER_NODE,
                "task_s": statistics.median(r["task_seconds"] for r in runs),
                "ansible_wall_s": statistics.median(r["wall"] for r in runs),
                "read_and_sum_s": statistics.median(r["seconds"] for r in inner),
                "list_calls": runs[0]["result"]["api_calls"], "http_requests": runs[0]["result"]["api_requests"],
                "peak_mib": memory["peak_mib"],
            })
            print(f"[bench] {rows[-1]}", flush=True)
    finally:
        if not keep:
            simctl("down")
    return rows


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=list(SCALES))
    parser.add_argument("--keep", action="store_true", help="leave the bench cluster running (to profile it, or to rerun)")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs per measurement (the median is reported)")
    options = parser.parse_args()
    print(json.dumps(main(options.scales, options.keep, options.repeats), indent=2))
