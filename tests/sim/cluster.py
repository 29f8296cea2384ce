"""The simulated cluster's processes: where they live, how they start, how they stop.

A real control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) on 127.0.0.1,
plus the fake kubelet/device plugin (fakelet.py) and the fake vLLM (fake_vllm.py). Every listener
binds 127.0.0.1. State lives in one directory (default `.sim/` in the checkout): certificates,
kubeconfig, pid files, logs, etcd data.
"""
from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import os
import signal
import socket
import ssl
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

SIM_SRC = Path(__file__).resolve().parent
CHECKOUT = SIM_SRC.parents[1]
LOOPBACK = "127.0.0.1"


def _versions() -> dict:
    pairs = (line.split("=", 1) for line in (SIM_SRC / "versions.env").read_text().splitlines()
             if "=" in line and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


VERSIONS = _versions()


@dataclass(frozen=True)
class Ports:
    """Fixed ports (so inventory/sim can name them), shifted by GPUOPS_SIM_PORT_OFFSET for a second sim."""

    offset: int = 0

    @property
    def etcd_client(self) -> int:
        return 12379 + self.offset

    @property
    def etcd_peer(self) -> int:
        return 12380 + self.offset

    @property
    def apiserver(self) -> int:
        return 16443 + self.offset

    @property
    def kubelet(self) -> int:
        return 11250 + self.offset

    @property
    def vllm(self) -> int:
        return 18000 + self.offset


# A Unix socket's path holds at most 107 bytes (sun_path is 108, with its NUL). The nodes' sockets live in a short folder
# of their own (GPUOPS_SIM_RUN_DIR moves it), so that a checkout or a GPUOPS_SIM_DIR at any depth can run the cluster.
SOCKET_PATH_LIMIT = 107
RUN_DIR_VARIABLE = "GPUOPS_SIM_RUN_DIR"
# The sockets each real-kubelet node has, below its folder: our CRI runtime, the kubelet's PodResources API, the DRA
# driver's registration and its service (kubeletplugin's names), and the longest device plugin socket a topology names.
NODE_SOCKETS = ("runtime.sock", "kubelet/pod-resources/kubelet.sock",
                "kubelet/plugins_registry/gpu.nvidia.com-reg.sock", "kubelet/plugins/gpu.nvidia.com/dra.sock",
                "device-plugins/gpuops-nvidia-com-mig-3g-40gb.sock")


def short_run_dir(root: Path) -> Path:
    """The folder of the nodes' state and sockets: GPUOPS_SIM_RUN_DIR, else one under the temporary folder named by a hash
    of the sim's folder (each cluster its own, found again by the next simctl)."""
    given = os.environ.get(RUN_DIR_VARIABLE)
    if given:
        return Path(given).absolute()
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"gpuops-sim-{digest}"


def socket_paths_too_long(run: Path, node_names) -> list[str]:
    """The sockets of these nodes whose path would not fit in a Unix socket address, each with its length."""
    return [f"{path} ({len(os.fsencode(str(path)))} bytes)" for name in node_names for tail in NODE_SOCKETS
            for path in [run / "nodes" / name / tail] if len(os.fsencode(str(path))) > SOCKET_PATH_LIMIT]


def refuse_long_socket_paths(sim: "SimDir", node_names) -> None:
    """Refuse, before anything starts, a run folder whose nodes' sockets would not fit (a process would time out
    waiting for a socket that cannot be made, with nothing saying why)."""
    long_paths = socket_paths_too_long(sim.run, node_names)
    if long_paths:
        raise SystemExit(
            f"[sim] the simulated nodes' Unix sockets would not fit: {long_paths[0]}"
            f"{f' and {len(long_paths) - 1} more' if len(long_paths) > 1 else ''}; a Unix socket path holds at most "
            f"{SOCKET_PATH_LIMIT} bytes. Set {RUN_DIR_VARIABLE} to a shorter folder (now {sim.run}"
            f"{'' if os.environ.get(RUN_DIR_VARIABLE) else ', under TMPDIR'}) and run again.")


class SimDir:
    """Paths of one simulated cluster's state directory. The nodes' state, with their Unix sockets, lives in a short
    folder of its own (``run``, linked as <sim dir>/run), so the sim dir itself may be as deep as a checkout is."""

    def __init__(self, root: Path | None = None, port_offset: int | None = None):
        self.root = Path(root or os.environ.get("GPUOPS_SIM_DIR") or CHECKOUT / ".sim").resolve()
        offset = port_offset if port_offset is not None else int(os.environ.get("GPUOPS_SIM_PORT_OFFSET", "0"))
        self.ports = Ports(offset)
        self.pki = self.root / "pki"
        self.logs = self.root / "logs"
        self.pids = self.root / "pids"
        # The nodes' folders: fake containers' logs, nvidia-smi wrappers, and the sockets of the runtime, the kubelet,
        # the device plugin and the DRA driver.
        self.run = short_run_dir(self.root)
        self.run_link = self.root / "run"
        self.etcd_data = self.root / "etcd"
        self.kubeconfig = self.root / "kubeconfig"
        self.topology = self.root / "topology.yaml"
        self.vllm_mode = self.root / "vllm-mode"
        self.env_file = self.root / "env.json"

    @property
    def api_url(self) -> str:
        return f"https://{LOOPBACK}:{self.ports.apiserver}"

    @property
    def health_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.vllm}/health"

    def make(self) -> None:
        for path in (self.root, self.pki, self.logs, self.pids, self.run):
            path.mkdir(parents=True, exist_ok=True)
        # <sim dir>/run, where people and scripts look, points at the short folder (an older sim's real folder replaced).
        if self.run_link.is_symlink() and Path(os.readlink(self.run_link)) != self.run:
            self.run_link.unlink()
        elif self.run_link.is_dir() and not self.run_link.is_symlink():
            shutil.rmtree(self.run_link, ignore_errors=True)
        if not self.run_link.is_symlink():
            self.run_link.symlink_to(self.run)

    def remove_run(self) -> None:
        """Remove the nodes' folder and its link (simctl down: nothing of a stopped cluster is left under the
        temporary folder)."""
        shutil.rmtree(self.run, ignore_errors=True)
        if self.run_link.is_symlink():
            self.run_link.unlink()


def binary_dirs() -> tuple[Path, Path]:
    """Build (or reuse) the control-plane binaries; returns (kubernetes bin, etcd bin).

    GPUOPS_SIM_BIN_DIR (one folder holding every binary) skips the build: a machine without Go, such as the GPU
    machine the device bundle is unpacked on (tests/device)."""
    if os.environ.get("GPUOPS_SIM_BIN_DIR"):
        prebuilt = Path(os.environ["GPUOPS_SIM_BIN_DIR"])
        return prebuilt, prebuilt
    out = subprocess.run(["bash", str(SIM_SRC / "build.sh")], check=True, stdout=subprocess.PIPE, text=True)
    k8s_bin, etcd_bin = out.stdout.strip().splitlines()[-1].split(":")
    return Path(k8s_bin), Path(etcd_bin)


# --- certificates -------------------------------------------------------------------------------

# Bumped whenever the certificates' shape changes, so an existing .sim/pki is made anew.
PKI_VERSION = "2"


def ensure_pki(sim: SimDir) -> None:
    """CA, apiserver and kubelet serving certs, an admin client cert, the service-account keys.

    Shaped as kubeadm shapes them, so that strict X.509 verification (Python 3.13's default
    VERIFY_X509_STRICT) accepts them: the CA has a critical keyUsage and a subject key identifier, every
    issued certificate names its issuer's key (authority key identifier) and has a critical keyUsage.
    """
    marker = sim.pki / "pki-version"
    if (sim.pki / "admin.crt").exists() and marker.exists() and marker.read_text().strip() == PKI_VERSION:
        return
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def new_key():
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def write_key(name, key):
        (sim.pki / name).write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuops-sim-ca")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=3650))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))
    leaf_key_usage = x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                   data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                                   encipher_only=False, decipher_only=False)
    authority_key_id = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())

    def issue(name, common_name, organization=None, server=False):
        key = new_key()
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        builder = (x509.CertificateBuilder().subject_name(x509.Name(attributes)).issuer_name(ca_name)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=3650))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(leaf_key_usage, critical=True)
                   .add_extension(authority_key_id, critical=False)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.DNSName("kubernetes"), x509.DNSName("kubernetes.default.svc"),
                x509.IPAddress(ipaddress.ip_address(LOOPBACK)), x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
            ]), critical=False).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        else:
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        (sim.pki / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        write_key(f"{name}.key", key)

    sim.pki.mkdir(parents=True, exist_ok=True)
    (sim.pki / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    write_key("ca.key", ca_key)
    issue("apiserver", "kube-apiserver", server=True)
    issue("kubelet", "gpuops-sim-kubelet", server=True)
    sa_key = new_key()
    write_key("sa.key", sa_key)
    (sim.pki / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    issue("admin", "gpuops-sim-admin", organization="system:masters")
    # Written last: its presence means the whole set exists, in this shape.
    marker.write_text(PKI_VERSION + "\n")


def write_kubeconfig(sim: SimDir) -> None:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "gpuops-sim", "preferences": {},
        "clusters": [{"name": "gpuops-sim", "cluster": {
            "server": sim.api_url, "certificate-authority": str(sim.pki / "ca.crt")}}],
        "users": [{"name": "gpuops-sim-admin", "user": {
            "client-certificate": str(sim.pki / "admin.crt"), "client-key": str(sim.pki / "admin.key")}}],
        "contexts": [{"name": "gpuops-sim", "context": {"cluster": "gpuops-sim", "user": "gpuops-sim-admin"}}],
    }
    sim.kubeconfig.write_text(json.dumps(config, indent=2) + "\n")
    sim.kubeconfig.chmod(0o600)


# --- processes ----------------------------------------------------------------------------------

def start_process(sim: SimDir, name: str, argv: list[str], env: dict | None = None, marker: str | None = None) -> int:
    """Start a component in a session of its own, output to .sim/logs/<name>.log. ``marker``: a string its
    command line always holds, which tells a live component from a recycled pid; by default this sim's state
    folder when the command line names it (so that no other cluster's etcd or kubelet on this machine passes
    for ours), else ``name``."""
    own = str(sim.root) + os.sep   # with the separator: .sim/ is no part of .sim-w1/
    if marker is None and any(own in arg for arg in argv):
        marker = own
    log = open(sim.logs / f"{name}.log", "ab")  # pylint: disable=consider-using-with  # owned by the child
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env={**os.environ, **(env or {})})
    log.close()
    (sim.pids / f"{name}.pid").write_text(f"{proc.pid}\n")
    (sim.pids / f"{name}.argv.json").write_text(json.dumps({"argv": argv, "env": env or {}, "marker": marker}))
    return proc.pid


def running_pid(sim: SimDir, name: str) -> int | None:
    """The pid of a component we started, if that process still exists and still is ours."""
    pid_file = sim.pids / f"{name}.pid"
    if not pid_file.exists():
        return None
    pid = int(pid_file.read_text().strip())
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return None
    if state in ("Z", "X"):
        return None
    # Guard against a recycled pid: the command line must still name the component (it is empty
    # for an instant while the child execs).
    marker = None
    try:
        marker = json.loads((sim.pids / f"{name}.argv.json").read_text()).get("marker")
    except (OSError, ValueError):
        pass
    marker = marker or (name.replace("-", "_") if name in ("fake-vllm",) else name)
    return pid if not cmdline or marker.encode() in cmdline else None


def started_components(sim: SimDir) -> list[str]:
    """Every component with a pid file, running or not."""
    return sorted(path.name[:-len(".pid")] for path in sim.pids.glob("*.pid"))


def stop_process(sim: SimDir, name: str, grace: float = 10.0) -> bool:
    return bool(stop_processes(sim, [name], grace))


def stop_processes(sim: SimDir, names: list, grace: float = 10.0) -> list:
    """Stop components together: SIGTERM to each one's process group, then SIGKILL to those still there after
    ``grace`` seconds. Returns the names of those that were running."""
    pids = {}
    for name in names:
        pid = running_pid(sim, name)
        (sim.pids / f"{name}.pid").unlink(missing_ok=True)
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGTERM)
                pids[name] = pid
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids.values()):
        time.sleep(0.05)
    for pid in pids.values():
        if _alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    killed_by = time.monotonic() + 5
    while time.monotonic() < killed_by and any(_alive(pid) for pid in pids.values()):
        time.sleep(0.05)
    return [name for name in names if name in pids]


def _alive(pid: int) -> bool:
    """Whether the process still runs. An exited one is gone for us at once, zombie or not: it holds no port
    and no file any more, and it is reaped by whoever is its parent now (we are, when we started it in this
    process; a machine's init may take seconds: this one's reaps every ~2 s)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def api_ready(sim: SimDir, path: str = "/readyz") -> bool:
    context = ssl.create_default_context(cafile=str(sim.pki / "ca.crt"))
    context.load_cert_chain(str(sim.pki / "admin.crt"), str(sim.pki / "admin.key"))
    try:
        with urllib.request.urlopen(sim.api_url + path, context=context, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def wait_for(predicate, timeout: float, what: str, interval: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def unix_socket_accepts(path: Path) -> bool:
    """Whether something listens on the Unix socket at ``path`` (a file left by a dead process does not)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


# --- the components' command lines --------------------------------------------------------------

def etcd_argv(sim: SimDir, etcd_bin: Path) -> list[str]:
    client = f"http://{LOOPBACK}:{sim.ports.etcd_client}"
    peer = f"http://{LOOPBACK}:{sim.ports.etcd_peer}"
    return [str(etcd_bin / "etcd"), "--name=gpuops-sim", f"--data-dir={sim.etcd_data}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=gpuops-sim={peer}", "--log-level=warn",
            # A throwaway test store: durability is not needed, speed on slow disks is.
            "--unsafe-no-fsync=true", "--quota-backend-bytes=4294967296"]


def apiserver_argv(sim: SimDir, k8s_bin: Path) -> list[str]:
    pki = sim.pki
    return [str(k8s_bin / "kube-apiserver"),
            f"--etcd-servers=http://{LOOPBACK}:{sim.ports.etcd_client}",
            f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}", f"--secure-port={sim.ports.apiserver}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            # Cluster IPs are data here: nothing routes to them.
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true",
            # The fake kubelet serves pod logs on the node's loopback address.
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            f"--kubelet-client-certificate={pki / 'admin.crt'}", f"--kubelet-client-key={pki / 'admin.key'}",
            # A loopback advertise address is not a valid endpoint of the `kubernetes` service.
            "--endpoint-reconciler-type=none",
            "--profiling=false", "--v=1"]


def scheduler_argv(sim: SimDir, k8s_bin: Path) -> list[str]:
    return [str(k8s_bin / "kube-scheduler"), f"--kubeconfig={sim.kubeconfig}",
            f"--authentication-kubeconfig={sim.kubeconfig}", f"--authorization-kubeconfig={sim.kubeconfig}",
            f"--bind-address={LOOPBACK}", "--secure-port=0", "--leader-elect=false", "--v=1"]


def controller_manager_argv(sim: SimDir, k8s_bin: Path) -> list[str]:
    return [str(k8s_bin / "kube-controller-manager"), f"--kubeconfig={sim.kubeconfig}",
            f"--authentication-kubeconfig={sim.kubeconfig}", f"--authorization-kubeconfig={sim.kubeconfig}",
            f"--bind-address={LOOPBACK}", "--secure-port=0", "--leader-elect=false",
            f"--service-account-private-key-file={sim.pki / 'sa.key'}", f"--root-ca-file={sim.pki / 'ca.crt'}",
            "--use-service-account-credentials=false",
            "--controllers=*",
            "--v=1"]


def python_argv(script: str, *args: str) -> list[str]:
    return [sys.executable, str(SIM_SRC / script), *args]
