"""Start, inspect and stop the simulated GPU cluster (`make sim-up|sim-status|sim-down` call this).

  simctl.py up [--topology NAME|FILE]   build if needed, start everything on 127.0.0.1, wait until ready
  simctl.py status                      components, listeners, nodes and their GPU ledger
  simctl.py down                        stop every process started here, by pid; no listener remains
  simctl.py topology NAME|FILE          reset nodes and pods to another topology (cluster stays up)
  simctl.py vllm ok|503|slow|down       switch the fake vLLM's behaviour
  simctl.py restart COMPONENT [--pause S]  stop a component (e.g. kube-apiserver), wait S seconds, start it
  simctl.py stop|start COMPONENT        stop a component, or start it again as it was started (e.g.
                                        plugin-prod102-nvidia.com-gpu, kubelet-prod102)
  simctl.py fault NODE JSON             make a node's device plugin misbehave (tests/sim/node/plugin.go
                                        pluginFaults: {"unhealthy": [ids]}, {"unhealthy_once_allocated": [ids]},
                                        {"wrong_id": "first"}; {} heals), or
                                        its DRA driver (dra.go draFaults: {"dra_wrong_device": "first"},
                                        {"dra_taints": {DEVICE: {"key": K, "value": V, "effect": E}}},
                                        {"dra_health": {DEVICE: {"xid": N} or {"health": "Unknown"}}})
  simctl.py apiserver-flags [--add=FLAG ...]  restart kube-apiserver with extra flags (e.g.
                                        --add=--runtime-config=resource.k8s.io/v1=false); none: its own only
  simctl.py env                         print .sim/env.json (kubeconfig, URLs) for scripts

GPUOPS_SIM_DIR / GPUOPS_SIM_PORT_OFFSET run a second, independent cluster beside the default one.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster  # noqa: E402  pylint: disable=wrong-import-position
import nodes as real_nodes  # noqa: E402  pylint: disable=wrong-import-position
import dra_classes  # noqa: E402  pylint: disable=wrong-import-position
import scheduler_probe  # noqa: E402  pylint: disable=wrong-import-position
import topology as topo  # noqa: E402  pylint: disable=wrong-import-position

CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
# Node-side components are named per node: kubelet-<node>, runtime-<node>, plugin-<node>-<resource>; or the
# fakelet, for topologies of light nodes (benchmarks of many nodes: `light_nodes: true`).
NODE_PREFIXES = ("kubelet-", "runtime-", "plugin-", "dra-", "nvml-health-")
MAX_NODES = 64   # kubelet ports: sim.ports.kubelet + 2 * position (and + 1 for healthz)


def say(message: str) -> None:
    print(f"[sim] {message}", flush=True)


def api(sim: cluster.SimDir):
    from kubernetes import client, config  # imported late: `status`/`down` work without the venv
    config.load_kube_config(config_file=str(sim.kubeconfig))
    return client.CoreV1Api()


def node_components(sim: cluster.SimDir) -> list:
    return [name for name in cluster.started_components(sim) if name.startswith(NODE_PREFIXES) or name == "fakelet"]


def all_components(sim: cluster.SimDir) -> list:
    return list(CONTROL_PLANE) + node_components(sim) + ["fake-vllm"]


def is_up(sim: cluster.SimDir) -> bool:
    nodes_started = node_components(sim)
    return (bool(nodes_started) and all(cluster.running_pid(sim, name) for name in list(CONTROL_PLANE) + nodes_started)
            and cluster.api_ready(sim))


def refuse_long_socket_paths(sim: cluster.SimDir, topology_file: Path) -> None:
    """Before anything starts: the real-kubelet nodes' sockets must fit in a Unix socket address (light nodes have none)."""
    spec = topo.load(topology_file)
    if not spec.get("light_nodes"):
        cluster.refuse_long_socket_paths(sim, [node["name"] for node in spec["nodes"]])


def up(sim: cluster.SimDir, topology_name: str) -> None:
    started = time.monotonic()
    if is_up(sim):
        say(f"already running (kubeconfig {sim.kubeconfig}); `make sim-down` to stop it")
        ensure_vllm(sim)
        return
    topology_file = resolve_topology(topology_name)
    refuse_long_socket_paths(sim, topology_file)
    down(sim, quiet=True)
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
           "bin_dir": str(k8s_bin), "state_dir": str(sim.root), "port_offset": sim.ports.offset, "kubelet_port": sim.ports.kubelet,
           "kubernetes_version": cluster.VERSIONS["KUBERNETES_VERSION"], "etcd_version": cluster.VERSIONS["ETCD_VERSION"]}
    sim.env_file.write_text(json.dumps(env, indent=2) + "\n")


def start_nodes(sim: cluster.SimDir, topology_file: Path) -> None:
    """Start a topology's nodes and wait until they are Ready, advertise their GPUs and run the topology's pods."""
    shutil.copyfile(topology_file, sim.topology)
    spec = topo.load(sim.topology)
    core = api(sim)
    if spec.get("light_nodes"):
        say(f"starting the light nodes' fake kubelet for {len(spec['nodes'])} node(s) ({topology_file.name})")
        cluster.start_process(sim, "fakelet", cluster.python_argv(
            "fakelet.py", "--kubeconfig", str(sim.kubeconfig), "--topology", str(sim.topology), "--state-dir", str(sim.run),
            "--port", str(sim.ports.kubelet), "--cert", str(sim.pki / "kubelet.crt"), "--key", str(sim.pki / "kubelet.key")))
        watched = list(CONTROL_PLANE) + ["fakelet"]
    else:
        simnode = real_nodes.simnode_binary()
        k8s_bin = Path(json.loads(sim.env_file.read_text())["bin_dir"])
        node_list = real_nodes.nodes_of(sim, spec)
        say(f"starting {len(node_list)} real kubelet node(s) with simulated GPUs and runtime ({topology_file.name})")
        with real_nodes.host_in_use(sim):
            for node in node_list:
                node.write_files()
                node.start(k8s_bin, simnode)
        watched = list(CONTROL_PLANE) + [name for node in node_list for name in node.processes()]
        check_alive(sim, watched, lambda: _registered(core, spec), 60, "the kubelets to register their nodes")
        _apply_topology_node_fields(core, spec)
    _seed_pods(core, spec)
    # Real nodes all come up Ready with their GPUs; those the topology wants NotReady lose their runtime after.
    expected_ready = {node["name"] for node in spec["nodes"] if node.get("ready", True) or not spec.get("light_nodes")}
    # A pod that ends (restartPolicy Never) has settled once it ended; the others once they run.
    expected_pods = {(pod.get("namespace", "default"), pod["name"]):
                     ("Succeeded", "Failed") if pod.get("restart_policy") == "Never" else ("Running",)
                     for pod in spec.get("pods") or []}
    expected_gpus = {node["name"]: (gpus.resource, str(len(gpus.units)))
                     for node in spec["nodes"] for gpus in [topo.node_gpus(node)]
                     if gpus and not gpus.dra and (node.get("ready", True) or not spec.get("light_nodes"))}
    # DRA nodes: their driver's ResourceSlice holds every device.
    expected_slices = {node["name"]: len(gpus.units) for node in spec["nodes"] for gpus in [topo.node_gpus(node)]
                       if gpus and gpus.dra}
    dra_classes.install(sim, bool(expected_slices))

    def settled():
        found = core.list_node().items
        ready = _ready_nodes(core, found)
        advertised = {node.metadata.name: (node.status.allocatable or {}) for node in found}
        gpus_ok = all(advertised.get(name, {}).get(resource) == count for name, (resource, count) in expected_gpus.items())
        phases = {(pod.metadata.namespace, pod.metadata.name): pod.status.phase
                  for pod in core.list_pod_for_all_namespaces().items}
        pods_ok = all(phases.get(key) in wanted for key, wanted in expected_pods.items())
        slices_ok = not expected_slices or dra_classes.published_devices(sim) == expected_slices
        return expected_ready <= ready and gpus_ok and pods_ok and slices_ok

    check_alive(sim, watched, settled, 90, "the nodes to be Ready, advertise their GPUs and run the topology's pods")
    pods = {f"{pod.metadata.namespace}/{pod.metadata.name}": core.api_client.sanitize_for_serialization(pod)
            for pod in core.list_pod_for_all_namespaces().items}
    for node in real_nodes.nodes_of(sim, spec):
        node.write_process_views(pods)
    if not spec.get("light_nodes"):
        not_ready = [node for node in real_nodes.nodes_of(sim, spec) if not node.spec.get("ready", True)]
        for node in not_ready:
            node.make_not_ready()
        names = {node.name for node in not_ready}
        check_alive(sim, watched, lambda: not names & _ready_nodes(core), 30, f"{', '.join(sorted(names))} to turn NotReady")


def _ready_nodes(core, found=None) -> set:
    return {node.metadata.name for node in (found if found is not None else core.list_node().items)
            if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
            and not any(t.key == "node.kubernetes.io/not-ready" for t in node.spec.taints or [])}


def _registered(core, spec: dict) -> bool:
    return {node["name"] for node in spec["nodes"]} <= {node.metadata.name for node in core.list_node().items}


def _apply_topology_node_fields(core, spec: dict) -> None:
    """What a real cluster's other agents put on a node (NFD/GFD labels, a cordon): the kubelet registered it,
    the topology adds the rest. Taints came with the kubelet's registration (registerWithTaints).

    Addresses too: the kubelet refuses a loopback --node-ip ("nodeIP can't be loopback address", logged at
    each status update) and, left to itself, would publish this machine's own network address, which the API
    server would then dial for logs. It leaves addresses it cannot compute as they are, so the loopback
    address written here stays, and the API server reaches every kubelet on 127.0.0.1."""
    for node in spec["nodes"]:
        core.patch_node_status(node["name"], {"status": {"addresses": [
            {"type": "InternalIP", "address": cluster.LOOPBACK}, {"type": "Hostname", "address": node["name"]}]}})
        labels = topo.node_labels(node, topo.node_gpus(node))
        # The kubelet sets these itself (and refuses to be told them).
        for own in ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch"):
            labels.pop(own, None)
        core.patch_node(node["name"], {"metadata": {"labels": labels},
                                       "spec": {"unschedulable": bool(node.get("unschedulable", False))}})


def _seed_pods(core, spec: dict) -> None:
    """The topology's pre-existing pods, created through the API and bound to their nodes (as DaemonSet pods are)."""
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    gpus = {node["name"]: topo.node_gpus(node) for node in spec["nodes"]}
    for pod_spec in spec.get("pods") or []:
        namespace = pod_spec.get("namespace", "default")
        _ensure_namespace(core, namespace)
        container = {"name": pod_spec.get("container", "main"),
                     "image": pod_spec.get("image", "registry.local/sim/" + pod_spec["name"].split("-")[0] + ":latest"),
                     "command": pod_spec.get("command") or ["sh", "-c", "exec sleep infinity"]}
        if pod_spec.get("gpus"):
            resource = pod_spec.get("resource") or gpus[pod_spec["node"]].resource
            container["resources"] = {"limits": {resource: str(pod_spec["gpus"])}}
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": pod_spec["name"], "namespace": namespace, "labels": pod_spec.get("labels") or {}},
               "spec": {"nodeName": pod_spec["node"], "containers": [container],
                        "restartPolicy": pod_spec.get("restart_policy", "Always"), "terminationGracePeriodSeconds": 1}}
        if pod_spec.get("priority_class"):
            pod["spec"]["priorityClassName"] = pod_spec["priority_class"]
        try:
            core.create_namespaced_pod(namespace, pod)
        except ApiException as error:
            if error.status != 409:
                raise


def _ensure_namespace(core, namespace: str) -> None:
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    try:
        core.create_namespace({"metadata": {"name": namespace}})
    except ApiException as error:
        if error.status != 409:
            raise
    # Pod admission needs the namespace's default ServiceAccount, which the controller manager creates
    # asynchronously: wait for it rather than fail the first pod.
    cluster.wait_for(lambda: _has_service_account(core, namespace), 30, f"the default ServiceAccount of {namespace}", 0.1)


def _has_service_account(core, namespace: str) -> bool:
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    try:
        core.read_namespaced_service_account("default", namespace)
        return True
    except ApiException as error:
        if error.status != 404:
            raise
        return False


def stop_nodes(sim: cluster.SimDir) -> list:
    """Stop every node-side component, all nodes at once: the kubelets first (they would restart what the
    runtime stops), then the plugins, then the runtimes (which end their containers)."""
    names = node_components(sim)
    kubelets = [name for name in names if name.startswith("kubelet-")]
    runtimes = [name for name in names if name.startswith("runtime-")]
    others = [name for name in names if name not in kubelets and name not in runtimes]
    return [stopped for group in (kubelets, others, runtimes) for stopped in cluster.stop_processes(sim, group)]


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
    for name in all_components(sim):
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
    components = all_components(sim)
    for name in components:
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
    return 0 if running == len(components) else 3


def down(sim: cluster.SimDir, quiet: bool = False) -> None:
    started_on = sim.ports
    try:   # the ports it was started on, whatever GPUOPS_SIM_PORT_OFFSET says now
        started_on = cluster.Ports(json.loads(sim.env_file.read_text())["port_offset"])
    except (OSError, ValueError, KeyError):
        pass
    stopped = cluster.stop_processes(sim, ["fake-vllm"])
    stopped += stop_nodes(sim)
    # The API server's clients first (they would log its absence), then the API server, then etcd.
    stopped += cluster.stop_processes(sim, ["kube-scheduler", "kube-controller-manager"])
    stopped += cluster.stop_processes(sim, ["kube-apiserver"]) + cluster.stop_processes(sim, ["etcd"])
    left = real_nodes.restore_host(sim)
    sim.remove_run()
    ports = {started_on.etcd_client, started_on.etcd_peer, started_on.apiserver}
    if "fake-vllm" in stopped:   # the port is someone else's otherwise (an inference server of the machine's own)
        ports.add(started_on.vllm)
    ports |= set(range(started_on.kubelet, started_on.kubelet + 2 * MAX_NODES))
    if stopped:   # (nothing of ours listens otherwise: the ports may be another cluster's by now)
        cluster.wait_for(lambda: not [entry for entry in listeners() if entry[1] in ports], 10, "the sim's ports to close")
    if not quiet:
        say(f"stopped {', '.join(stopped)}; no listener left on the sim's ports" if stopped else "nothing was running")
        if left:
            say("left on the host: " + "; ".join(left))


def reset_topology(sim: cluster.SimDir, topology_name: str) -> None:
    """Swap the nodes: stop the node components, remove every node and non-system pod, start the new ones."""
    topology_file = resolve_topology(topology_name)
    refuse_long_socket_paths(sim, topology_file)
    # The control plane is enough: the nodes are replaced anyway (so a node that died in a test is no hindrance).
    gone = [name for name in CONTROL_PLANE if not cluster.running_pid(sim, name)]
    if gone:
        raise SystemExit(f"[sim] the simulated cluster is not running ({', '.join(gone)} not running): `make sim-up` first")
    # On a loaded machine /readyz may take longer than one probe's 2 s: wait for it, as for everything else.
    cluster.wait_for(lambda: cluster.api_ready(sim), 30, "kube-apiserver /readyz")
    started = time.monotonic()
    stop_nodes(sim)
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
    stop_component(sim, component)
    time.sleep(pause)
    start_component(sim, component)
    if component == "kube-apiserver":
        check_alive(sim, ("kube-apiserver",), lambda: cluster.api_ready(sim), 60, "kube-apiserver /readyz")
    say(f"{component} restarted after {pause:.1f}s away")


def reboot(sim: cluster.SimDir, node: str) -> None:
    """The node boots again: a new boot id, its kubelet restarted (which reports it as the Node's bootID, as after a
    reboot). Pods and the device plugin carry on as they were."""
    boot_file = sim.run / "nodes" / node / "boot_id"
    if not boot_file.exists():
        raise SystemExit(f"[sim] no real-kubelet node {node!r} in this sim ({sim.run / 'nodes'})")
    boot_file.write_text(str(uuid.uuid4()) + "\n")
    restart(sim, f"kubelet-{node}", 0.0)


def stop_component(sim: cluster.SimDir, component: str) -> None:
    if not (sim.pids / f"{component}.argv.json").exists():
        raise SystemExit(f"[sim] {component} was not started by this sim (started: {', '.join(cluster.started_components(sim))})")
    cluster.stop_process(sim, component, grace=2)


def start_component(sim: cluster.SimDir, component: str) -> None:
    """Start a stopped component again, exactly as it was started."""
    saved = sim.pids / f"{component}.argv.json"
    if not saved.exists():
        raise SystemExit(f"[sim] {component} was not started by this sim")
    if cluster.running_pid(sim, component):
        return
    argv = json.loads(saved.read_text())
    if component.startswith(NODE_PREFIXES):
        # A kubelet binds the device-plugins mount point as it starts: the host must be ready for it.
        with real_nodes.host_in_use(sim):
            cluster.start_process(sim, component, argv["argv"], argv["env"], marker=argv.get("marker"))
        return
    cluster.start_process(sim, component, argv["argv"], argv["env"], marker=argv.get("marker"))


def apiserver_flags(sim: cluster.SimDir, flags: list) -> None:
    """Restart kube-apiserver as `up` starts it plus ``flags`` (none: as `up` started it), for tests of an API server
    configured otherwise (``--runtime-config=resource.k8s.io/v1=false``: no Dynamic Resource Allocation API)."""
    bad = [flag for flag in flags if not flag.startswith("--")]
    if bad:
        raise SystemExit(f"[sim] kube-apiserver flags must start with --: {', '.join(bad)}")
    saved = sim.pids / "kube-apiserver.argv.json"
    if not saved.exists():
        raise SystemExit("[sim] kube-apiserver was not started by this sim: `make sim-up` first")
    started = json.loads(saved.read_text())
    argv = cluster.apiserver_argv(sim, Path(started["argv"][0]).parent) + list(flags)
    stop_component(sim, "kube-apiserver")
    cluster.start_process(sim, "kube-apiserver", argv, started["env"], marker=started.get("marker"))
    # Without resource.k8s.io/v1 a 1.36 API server serves, but its own informers of the DRA objects (the node
    # authorizer's) never sync, so its informer-sync readiness check never passes: every other one must.
    readyz = "/readyz?exclude=informer-sync" if flags else "/readyz"
    check_alive(sim, ("kube-apiserver",), lambda: cluster.api_ready(sim, readyz), 60, f"kube-apiserver {readyz}")
    ready = "ready" if cluster.api_ready(sim) else "serving (its informer-sync readiness check fails)"
    if not flags:
        # Back to every API group: the scheduler's and controller-manager's informers of a group the API server did
        # not serve (resource.k8s.io) back off on its 404s for up to a minute, so a DeviceClass created now stays
        # unknown to the scheduler ("device class ... does not exist") past a walk's hold. Started again, they list
        # every group at once, and the scheduler schedules only once all its informers have synced.
        for component in ("kube-controller-manager", "kube-scheduler"):
            restart(sim, component, pause=0)
    # The tests that call this configure the cluster, they do not test an outage: wait until the scheduler
    # watches again (its reflectors back off while the API server is away).
    waited = scheduler_probe.wait_until_scheduler_watches(api(sim))
    say(f"kube-apiserver restarted with {' '.join(flags) if flags else 'its own flags only'}: {ready}; "
        f"kube-scheduler tried a new pod {waited:.1f}s later")


def set_fault(sim: cluster.SimDir, node: str, faults: str) -> None:
    """Write a node's device-plugin faults file (the plugin re-reads it at once)."""
    path = sim.run / "nodes" / node / "faults.json"
    if not path.parent.exists():
        raise SystemExit(f"[sim] no real-kubelet node {node!r} in this sim ({sim.run / 'nodes'})")
    value = json.loads(faults)
    if not isinstance(value, dict):
        raise SystemExit(f"[sim] faults must be a JSON object, got {faults!r}")
    path.write_text(json.dumps(value) + "\n")


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
    restart_parser.add_argument("component")
    restart_parser.add_argument("--pause", type=float, default=0.0)
    sub.add_parser("reboot", help="a new boot id for NODE and its kubelet restarted").add_argument("node")
    sub.add_parser("stop").add_argument("component")
    sub.add_parser("start").add_argument("component")
    flags_parser = sub.add_parser("apiserver-flags", help="restart kube-apiserver with extra flags (none: its own only)")
    flags_parser.add_argument("--add", action="append", default=[], metavar="FLAG",
                              help="a flag to add, e.g. --add=--runtime-config=resource.k8s.io/v1=false")
    fault_parser = sub.add_parser("fault")
    fault_parser.add_argument("node")
    fault_parser.add_argument("faults", help='JSON, e.g. {"unhealthy": ["GPU-..."]}, {"wrong_id": "first"}, '
                              '{"dra_wrong_device": "first"}, {"dra_taints": {"gpu-1": {"key": "gpu.nvidia.com/xid", '
                              '"value": "79"}}}, {"dra_health": {"gpu-1": {"xid": 79}}}; {} heals')
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
    elif args.command == "reboot":
        reboot(sim, args.node)
    elif args.command == "stop":
        stop_component(sim, args.component)
    elif args.command == "start":
        start_component(sim, args.component)
    elif args.command == "apiserver-flags":
        apiserver_flags(sim, args.add)
    elif args.command == "fault":
        set_fault(sim, args.node, args.faults)
    elif args.command == "vllm":
        ensure_vllm(sim, args.mode)
        say(f"fake vLLM mode: {args.mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
