"""The 5,000-node / 150,000-pod bench cluster (Kubernetes' scalability envelope), kept on disk and reused.

Light nodes (no kubelets): Node objects with GPU capacity written through the API, and pods created with
``spec.nodeName`` already set (bound by the API, as DaemonSet pods are). Only etcd and kube-apiserver run
while the cluster grows and while the ledger is measured; the kube-scheduler and one fake kubelet for the
pre-flight's few nodes are started by ledger_big.py when it runs the role.

The cluster lives in ``.sim-bench-<nodes>n-<pods>p`` on port offset 1500 (ledger_scale.py's 2,000-node
cluster uses 1000; GPUOPS_BENCH_PORT_OFFSET moves both). Growing is resumable: each node's objects are created in one task, the finished node
numbers are appended to ``grown.txt``, and a rerun skips them (an object that already exists is fine).
``stop`` ends the processes and keeps etcd's data: the next ``up`` starts on the same data in seconds.

  big_cluster.py up|grow|stop|status [--nodes 5000] [--pods-per-node 30] [--workers 3] [--threads 24]
"""
from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import ssl
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / "tests" / "sim"))
import cluster  # noqa: E402  pylint: disable=wrong-import-position

# 500 above the 2,000-node bench cluster (ledger_scale.py: GPUOPS_BENCH_PORT_OFFSET, 1000 by default).
PORT_OFFSET = int(os.environ.get("GPUOPS_BENCH_PORT_OFFSET", "1000")) + 500
NODES = 5000
PODS_PER_NODE = 30
GPUS_PER_NODE = 8
GPU_PODS_PER_NODE = 2
# Unscheduled pods asking for a GPU (no scheduler runs while the cluster grows: they stay Pending, unbound).
QUEUED_GPU_PODS = 100
NAMESPACES = 10
NODE_PREFIX = "big-gpu-"
TOLERATIONS = [{"key": key, "operator": "Exists", "effect": "NoExecute"}
               for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]


def sim_dir(nodes: int = NODES, pods_per_node: int = PODS_PER_NODE) -> cluster.SimDir:
    return cluster.SimDir(CHECKOUT / f".sim-bench-{nodes}n-{nodes * pods_per_node}p", port_offset=PORT_OFFSET)


def say(message: str) -> None:
    print(f"[big] {time.strftime('%H:%M:%S')} {message}", flush=True)


def node_name(index: int) -> str:
    return f"{NODE_PREFIX}{index:05d}"


def node_body(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H20",
                "nvidia.com/gpu.count": str(GPUS_PER_NODE), "topology.kubernetes.io/zone": f"zone-{int(name[-5:]) % 3}"}}}


def node_status() -> dict:
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(GPUS_PER_NODE)}
    return {"status": {"capacity": capacity, "allocatable": capacity,
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench"}]}}


def pod_body(node: str | None, name: str, namespace: str, gpus: int) -> dict:
    """A pod as a workload controller writes it (labels, env, a probe): ~2 KB as the API server returns it."""
    if gpus:
        resources = {"limits": {"nvidia.com/gpu": str(gpus)}}
    else:
        resources = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}
    spec = {"containers": [{
        "name": "main", "image": "registry.example/bench/app:1.0", "resources": resources,
        "env": [{"name": "APP_MODE", "value": "serve"}, {"name": "LOG_LEVEL", "value": "info"}],
        "ports": [{"containerPort": 8080, "name": "http"}],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 10}}],
        "tolerations": TOLERATIONS, "terminationGracePeriodSeconds": 5}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app": "bench", "tier": "gpu" if gpus else "cpu", "pod-template-hash": "7d9f8c6b5"}},
            "spec": spec}


def queued_pod(index: int) -> dict:
    """An unscheduled pod asking for a GPU; its node selector matches no node, so it stays Pending with a scheduler too."""
    pod = pod_body(None, f"queued-{index:03d}", "bench-queue", 1)
    pod["spec"]["nodeSelector"] = {"gpuops.bench/pool": "none"}
    return pod


def node_pods(index: int, pods_per_node: int) -> list:
    node = node_name(index)
    return [pod_body(node, f"{node}-pod-{slot:02d}", f"bench-{(index + slot) % NAMESPACES}",
                     1 if slot < GPU_PODS_PER_NODE else 0) for slot in range(pods_per_node)]


class Api:
    """Raw HTTPS with the admin certificate, one keep-alive connection per thread (fast enough for 150,000 creates)."""

    def __init__(self, sim: cluster.SimDir):
        self.port = sim.ports.apiserver
        self.context = ssl.create_default_context(cafile=str(sim.pki / "ca.crt"))
        self.context.load_cert_chain(str(sim.pki / "admin.crt"), str(sim.pki / "admin.key"))
        self.local = threading.local()

    def request(self, method: str, path: str, body=None, content_type="application/json", ok=(200, 201, 409)) -> tuple:
        for attempt in range(5):
            connection = getattr(self.local, "connection", None)
            if connection is None:
                connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=120)
                self.local.connection = connection
            try:
                connection.request(method, path, body=json.dumps(body) if body is not None else None,
                                   headers={"Content-Type": content_type, "Accept": "application/json"})
                response = connection.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException):
                connection.close()
                self.local.connection = None
                time.sleep(0.5 * (attempt + 1))
                continue
            if response.status in ok:
                return response.status, data
            if response.status in (429, 500, 503, 504):
                time.sleep(0.5 * (attempt + 1))
                continue
            raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
        raise RuntimeError(f"{method} {path}: no answer after 5 attempts")


def up(sim: cluster.SimDir) -> None:
    """etcd + kube-apiserver on the kept data (or a fresh store), nothing else."""
    if cluster.running_pid(sim, "kube-apiserver") and cluster.api_ready(sim):
        return
    k8s_bin, etcd_bin = cluster.binary_dirs()
    sim.make()
    cluster.ensure_pki(sim)
    cluster.write_kubeconfig(sim)
    if not cluster.running_pid(sim, "etcd"):
        cluster.start_process(sim, "etcd", cluster.etcd_argv(sim, etcd_bin) + ["--quota-backend-bytes=8589934592"])
    cluster.stop_process(sim, "kube-apiserver")
    # Bigger request budget than the defaults: the bench writes with many threads at once.
    cluster.start_process(sim, "kube-apiserver", cluster.apiserver_argv(sim, k8s_bin) + [
        "--max-requests-inflight=800", "--max-mutating-requests-inflight=400"])
    cluster.wait_for(lambda: cluster.api_ready(sim), 300, "the bench kube-apiserver /readyz", interval=1)
    (sim.root / "env.json").write_text(json.dumps({
        "kubeconfig": str(sim.kubeconfig), "api_url": sim.api_url, "kubectl": str(k8s_bin / "kubectl"),
        "bin_dir": str(k8s_bin), "kubernetes_version": cluster.VERSIONS["KUBERNETES_VERSION"]}, indent=2) + "\n")
    say(f"bench cluster up at {sim.api_url} ({sim.root})")


def stop(sim: cluster.SimDir) -> None:
    """Stop every process started for this cluster (by pid file); etcd's data stays."""
    for name in reversed(cluster.started_components(sim)):
        if cluster.stop_process(sim, name):
            say(f"stopped {name}")


def _prepare(api: Api) -> None:
    for namespace in [f"bench-{index}" for index in range(NAMESPACES)] + ["bench-queue"]:
        api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        # No controller manager runs: the ServiceAccount admission plugin needs the namespace's default account.
        api.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "default"}})


def _grow_nodes(args: tuple) -> int:
    """One worker process: the nodes of ``indexes``, each whole (node, status, pods), recorded when done."""
    root, indexes, pods_per_node, threads = args
    sim = cluster.SimDir(Path(root), port_offset=PORT_OFFSET)
    api = Api(sim)
    done_file = open(sim.root / "grown.txt", "a")  # pylint: disable=consider-using-with
    lock = threading.Lock()

    def grow_one(index: int) -> None:
        name = node_name(index)
        api.request("POST", "/api/v1/nodes", node_body(name))
        api.request("PATCH", f"/api/v1/nodes/{name}/status", node_status(), content_type="application/merge-patch+json")
        for pod in node_pods(index, pods_per_node):
            api.request("POST", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)
        with lock:
            done_file.write(f"{index}\n")
            done_file.flush()

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(grow_one, indexes))
    done_file.close()
    return len(indexes)


def grown(sim: cluster.SimDir) -> set:
    path = sim.root / "grown.txt"
    return {int(line) for line in path.read_text().split()} if path.exists() else set()


def grow(sim: cluster.SimDir, nodes: int, pods_per_node: int, workers: int, threads: int) -> None:
    up(sim)
    api = Api(sim)
    _prepare(api)
    for index in range(QUEUED_GPU_PODS):
        api.request("POST", "/api/v1/namespaces/bench-queue/pods", queued_pod(index))
    todo = sorted(set(range(nodes)) - grown(sim))
    say(f"{nodes - len(todo)} of {nodes} nodes already grown; growing {len(todo)} "
        f"({len(todo) * pods_per_node} pods) with {workers} processes x {threads} threads")
    started = time.monotonic()
    batches = [todo[start:start + 50] for start in range(0, len(todo), 50)]
    with multiprocessing.Pool(workers) as pool:
        finished = 0
        for count in pool.imap_unordered(_grow_nodes, [(str(sim.root), batch, pods_per_node, threads) for batch in batches]):
            finished += count
            elapsed = time.monotonic() - started
            if finished % 500 < 50 or finished == len(todo):
                say(f"{nodes - len(todo) + finished}/{nodes} nodes, {finished * pods_per_node / elapsed:.0f} pods/s, "
                    f"{elapsed:.0f}s")
    say(f"grown: {nodes} nodes, {nodes * pods_per_node} bound pods + {QUEUED_GPU_PODS} queued GPU pods")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "grow", "stop", "status"])
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--pods-per-node", type=int, default=PODS_PER_NODE)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=24)
    options = parser.parse_args()
    sim = sim_dir(options.nodes, options.pods_per_node)
    if options.command == "up":
        up(sim)
    elif options.command == "grow":
        grow(sim, options.nodes, options.pods_per_node, options.workers, options.threads)
    elif options.command == "stop":
        stop(sim)
    else:
        print(json.dumps({"dir": str(sim.root), "grown_nodes": len(grown(sim)),
                          "running": {name: cluster.running_pid(sim, name) for name in cluster.started_components(sim)}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
