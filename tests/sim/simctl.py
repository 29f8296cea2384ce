"""Start, inspect and stop the simulated GPU cluster (`make sim-up|sim-status|sim-down` call this).

  simctl.py up [--topology NAME|FILE]   build if needed, start everything on 127.0.0.1, wait until ready
  simctl.py status                      components, listeners, nodes and their GPU ledger
  simctl.py down                        stop every process started here, by pid; no listener remains
  simctl.py topology NAME|FILE          reset nodes and pods to another topology (cluster stays up)
  simctl.py vllm ok|503|slow|down       switch the fake vLLM's behaviour
  simctl.py restart COMPONENT [--pause S]  stop a component (e.g. kube-apiserver), wait S seconds, start it
  simctl.py env                         print .sim/env.json (kubeconfig, URLs) for scripts

GPUOPS_SIM_DIR / GPUOPS_SIM_PORT_OFFSET run a second, independent cluster beside the default one.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster  # noqa: E402  pylint: disable=wrong-import-position
import topology as topo  # noqa: E402  pylint: disable=wrong-import-position

CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
ALL_COMPONENTS = CONTROL_PLANE + ("fakelet", "fake-vllm")


def say(message: str) -> None:
    print(f"[sim] {message}", flush=True)


def api(sim: cluster.SimDir):
    from kubernetes import client, config  # imported late: `status`/`down` work without the venv
    config.load_kube_config(config_file=str(sim.kubeconfig))
    return client.CoreV1Api()


def is_up(sim: cluster.SimDir) -> bool:
    return all(cluster.running_pid(sim, name) for name in ALL_COMPONENTS if name != "fake-vllm") and cluster.api_ready(sim)


def up(sim: cluster.SimDir, topology_name: str) -> None:
    started = time.monotonic()
    if is_up(sim):
        say(f"already running (kubeconfig {sim.kubeconfig}); `make sim-down` to stop it")
        ensure_vllm(sim)
        return
    down(sim, quiet=True)
    topology_file = resolve_topology(topology_name)
    say("checking the control-plane binaries (built once, cached under ~/.cache/gpuops-sim)")
    k8s_bin, etcd_bin = cluster.binary_dirs()
    sim.make()
    shutil.rmtree(sim.etcd_data, ignore_errors=True)
    shutil.rmtree(sim.run, ignore_errors=True)
    sim.make()
    cluster.ensure_pki(sim)
    cluster.write_kubeconfig(sim)

    say(f"starting etcd on 127.0.0.1:{sim.ports.etcd_client}")
    cluster.start_process(sim, "etcd", cluster.etcd_argv(sim, etcd_bin))
    say(f"starting kube-apiserver on {sim.api_url}")
    cluster.start_process(sim, "kube-apiserver", cluster.apiserver_argv(sim, k8s_bin))
    check_alive(sim, ("etcd", "kube-apiserver"), lambda: cluster.api_ready(sim), 90, "kube-apiserver /readyz")
    say("starting kube-controller-manager and kube-scheduler")
    cluster.start_process(sim, "kube-controller-manager", cluster.controller_manager_argv(sim, k8s_bin))
    cluster.start_process(sim, "kube-scheduler", cluster.scheduler_argv(sim, k8s_bin))
    core = api(sim)
    check_alive(sim, CONTROL_PLANE, lambda: _has_default_service_account(core), 60,
                "the controller manager to create the default ServiceAccount")
    write_env(sim, k8s_bin)
    start_nodes(sim, topology_file)
    ensure_vllm(sim)
    say(f"ready in {time.monotonic() - started:.1f}s: kubeconfig {sim.kubeconfig}, vLLM {sim.health_url}")


def resolve_topology(name: str) -> Path:
    path = Path(name)
    if not path.exists():
        path = topo.TOPOLOGIES / f"{name}.yaml"
    topo.load(path)  # fail before starting anything on a bad file
    return path.resolve()


def check_alive(sim: cluster.SimDir, names, predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for name in names:
            if not cluster.running_pid(sim, name):
                tail = (sim.logs / f"{name}.log").read_text(errors="replace").splitlines()[-15:]
                raise SystemExit(f"[sim] {name} exited while waiting for {what}; last lines of {sim.logs / (name + '.log')}:\n"
                                 + "\n".join(tail))
        if time.monotonic() > deadline:
            raise SystemExit(f"[sim] timed out after {timeout:.0f}s waiting for {what}; logs in {sim.logs}")
        time.sleep(0.25)


def _has_default_service_account(core) -> bool:
    try:
        core.read_namespaced_service_account("default", "default")
        return True
    except Exception:  # pylint: disable=broad-except  # not there yet, or API still settling
        return False


def write_env(sim: cluster.SimDir, k8s_bin: Path) -> None:
    env = {"kubeconfig": str(sim.kubeconfig), "api_url": sim.api_url, "health_url": sim.health_url,
           "models_url": sim.health_url.replace("/health", "/v1/models"), "kubectl": str(k8s_bin / "kubectl"),
           "bin_dir": str(k8s_bin), "state_dir": str(sim.root), "kubelet_port": sim.ports.kubelet,
           "kubernetes_version": cluster.VERSIONS["KUBERNETES_VERSION"], "etcd_version": cluster.VERSIONS["ETCD_VERSION"]}
    sim.env_file.write_text(json.dumps(env, indent=2) + "\n")


def start_nodes(sim: cluster.SimDir, topology_file: Path) -> None:
    """Start the fake kubelet for a topology and wait until its nodes are Ready and its pods settled."""
    shutil.copyfile(topology_file, sim.topology)
    spec = topo.load(sim.topology)
    say(f"starting the fake kubelet/device plugin for {len(spec['nodes'])} node(s) ({topology_file.name})")
    cluster.start_process(sim, "fakelet", cluster.python_argv(
        "fakelet.py", "--kubeconfig", str(sim.kubeconfig), "--topology", str(sim.topology), "--state-dir", str(sim.run),
        "--port", str(sim.ports.kubelet), "--cert", str(sim.pki / "kubelet.crt"), "--key", str(sim.pki / "kubelet.key")))
    core = api(sim)
    expected_ready = {node["name"] for node in spec["nodes"] if node.get("ready", True)}
    expected_pods = {(pod.get("namespace", "default"), pod["name"]) for pod in spec.get("pods") or []}

    def settled():
        nodes = core.list_node().items
        ready = {node.metadata.name for node in nodes
                 if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
                 and not any(t.key == "node.kubernetes.io/not-ready" for t in node.spec.taints or [])}
        pods = {(pod.metadata.namespace, pod.metadata.name) for pod in core.list_pod_for_all_namespaces().items
                if pod.status.phase in ("Running", "Succeeded")}
        return expected_ready <= ready and expected_pods <= pods

    check_alive(sim, CONTROL_PLANE + ("fakelet",), settled, 60, "the nodes to be Ready and the topology's pods to run")


def ensure_vllm(sim: cluster.SimDir, mode: str | None = None) -> None:
    if mode is None and not sim.vllm_mode.exists():
        mode = (topo.load(sim.topology).get("vllm") or {}).get("mode", "ok") if sim.topology.exists() else "ok"
    if mode:
        sim.vllm_mode.write_text(mode + "\n")
    if (mode or sim.vllm_mode.read_text().strip()) == "down":
        cluster.stop_process(sim, "fake-vllm")
        return
    api_key = str((topo.load(sim.topology).get("vllm") or {}).get("api_key", "") if sim.topology.exists() else "")
    if cluster.running_pid(sim, "fake-vllm") and _vllm_api_key(sim) != api_key:
        # The topology changed the API key (vllm.api_key): the server reads it only when it starts.
        cluster.stop_process(sim, "fake-vllm")
    if not cluster.running_pid(sim, "fake-vllm"):
        cluster.start_process(sim, "fake-vllm", cluster.python_argv(
            "fake_vllm.py", "--port", str(sim.ports.vllm), "--mode-file", str(sim.vllm_mode), "--api-key", api_key))
        cluster.wait_for(lambda: _listening(sim.ports.vllm), 10, "the fake vLLM to listen")


def _vllm_api_key(sim: cluster.SimDir) -> str:
    """The --api-key the running fake vLLM was started with."""
    try:
        argv = json.loads((sim.pids / "fake-vllm.argv.json").read_text())["argv"]
    except (OSError, ValueError, KeyError):
        return ""
    return argv[argv.index("--api-key") + 1] if "--api-key" in argv[:-1] else ""


def _listening(port: int) -> bool:
    return any(entry[1] == port for entry in listeners())


def listeners() -> list:
    """(address, port, inode) of every TCP socket in LISTEN state on this machine."""
    found = []
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] != "0A":
                continue
            address, port = fields[1].split(":")
            found.append((_decode_address(address, family), int(port, 16), fields[9]))
    return found


def _decode_address(hex_address: str, family: int) -> str:
    raw = bytes.fromhex(hex_address)
    if family == 4:
        return ".".join(str(b) for b in raw[::-1])
    words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
    return ":".join(b"".join(words)[i:i + 2].hex() for i in range(0, 16, 2))


def component_listeners(sim: cluster.SimDir) -> dict:
    """Listening sockets that belong to the sim's processes (and their children), by component."""
    inodes = {entry[2]: (entry[0], entry[1]) for entry in listeners()}
    result = {}
    for name in ALL_COMPONENTS:
        pid = cluster.running_pid(sim, name)
        if not pid:
            continue
        sockets = []
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = fd.readlink().as_posix()
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = target[8:-1]
                if inode in inodes:
                    sockets.append(inodes[inode])
        result[name] = sorted(set(sockets))
    return result


def status(sim: cluster.SimDir) -> int:
    running = 0
    sockets = component_listeners(sim)
    for name in ALL_COMPONENTS:
        pid = cluster.running_pid(sim, name)
        running += bool(pid)
        where = ", ".join(f"{address}:{port}" for address, port in sockets.get(name, [])) or "-"
        print(f"{name:<24} {'pid ' + str(pid) if pid else 'stopped':<12} listening on {where}")
    if running and cluster.api_ready(sim):
        core = api(sim)
        for node in core.list_node().items:
            ready = next((c.status for c in node.status.conditions or [] if c.type == "Ready"), "Unknown")
            gpus = {key: value for key, value in (node.status.allocatable or {}).items() if "nvidia.com" in key}
            print(f"node {node.metadata.name:<18} Ready={ready:<6} allocatable {gpus}")
        print(f"kubeconfig: {sim.kubeconfig}")
    return 0 if running == len(ALL_COMPONENTS) else 3


def down(sim: cluster.SimDir, quiet: bool = False) -> None:
    stopped = [name for name in reversed(ALL_COMPONENTS) if cluster.stop_process(sim, name)]
    ports = {sim.ports.etcd_client, sim.ports.etcd_peer, sim.ports.apiserver, sim.ports.kubelet, sim.ports.vllm}
    cluster.wait_for(lambda: not [entry for entry in listeners() if entry[1] in ports], 10,
                     f"the sim's ports {sorted(ports)} to close")
    if not quiet:
        say(f"stopped {', '.join(stopped)}; no listener left on {sorted(ports)}" if stopped else "nothing was running")


def reset_topology(sim: cluster.SimDir, topology_name: str) -> None:
    """Swap the fake nodes: stop the fakelet, remove every node and non-system pod, start it anew."""
    topology_file = resolve_topology(topology_name)
    if not is_up(sim):
        raise SystemExit("[sim] the simulated cluster is not running: `make sim-up` first")
    started = time.monotonic()
    cluster.stop_process(sim, "fakelet")
    from kubernetes import client  # pylint: disable=import-outside-toplevel
    core = api(sim)
    force = client.V1DeleteOptions(grace_period_seconds=0)
    for pod in core.list_pod_for_all_namespaces().items:
        if pod.metadata.namespace != "kube-system":
            _ignore_missing(core.delete_namespaced_pod, pod.metadata.name, pod.metadata.namespace, body=force)
    for node in core.list_node().items:
        _ignore_missing(core.delete_node, node.metadata.name)
    coordination = client.CoordinationV1Api()
    for lease in coordination.list_namespaced_lease("kube-node-lease").items:
        _ignore_missing(coordination.delete_namespaced_lease, lease.metadata.name, "kube-node-lease")
    cluster.wait_for(lambda: not core.list_pod_for_all_namespaces(field_selector="metadata.namespace!=kube-system").items,
                     30, "the old topology's pods to be gone")
    shutil.rmtree(sim.run, ignore_errors=True)
    sim.make()
    start_nodes(sim, topology_file)
    sim.vllm_mode.unlink(missing_ok=True)
    ensure_vllm(sim)
    say(f"topology {topology_file.name} ready in {time.monotonic() - started:.1f}s")


def restart(sim: cluster.SimDir, component: str, pause: float) -> None:
    """A control-plane fault for tests: the component is gone for `pause` seconds, then back."""
    saved = sim.pids / f"{component}.argv.json"
    if not saved.exists():
        raise SystemExit(f"[sim] {component} was not started by this sim")
    cluster.stop_process(sim, component, grace=2)
    time.sleep(pause)
    argv = json.loads(saved.read_text())
    cluster.start_process(sim, component, argv["argv"], argv["env"])
    if component == "kube-apiserver":
        check_alive(sim, ("kube-apiserver",), lambda: cluster.api_ready(sim), 60, "kube-apiserver /readyz")
    say(f"{component} restarted after {pause:.1f}s away")


def _ignore_missing(call, *args, **kwargs) -> None:
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    try:
        call(*args, **kwargs)
    except ApiException as error:
        if error.status != 404:
            raise


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up").add_argument("--topology", default="default")
    sub.add_parser("status")
    sub.add_parser("down")
    sub.add_parser("env")
    sub.add_parser("topology").add_argument("name")
    sub.add_parser("vllm").add_argument("mode", choices=["ok", "503", "slow", "down"])
    restart_parser = sub.add_parser("restart")
    restart_parser.add_argument("component", choices=ALL_COMPONENTS)
    restart_parser.add_argument("--pause", type=float, default=0.0)
    args = parser.parse_args(argv)
    sim = cluster.SimDir()
    if args.command == "up":
        up(sim, args.topology)
    elif args.command == "status":
        return status(sim)
    elif args.command == "down":
        down(sim)
    elif args.command == "env":
        print(sim.env_file.read_text() if sim.env_file.exists() else "{}")
    elif args.command == "topology":
        reset_topology(sim, args.name)
    elif args.command == "restart":
        restart(sim, args.component, args.pause)
    elif args.command == "vllm":
        ensure_vllm(sim, args.mode)
        say(f"fake vLLM mode: {args.mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
