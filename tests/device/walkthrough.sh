#!/usr/bin/env bash
# The walkthrough on a real GPU machine (the lent H200): the cluster on 127.0.0.1 with ONE real node, prod102,
# whose kubelet is the real one, whose device plugin advertises the machine's GPUs (NVML), and whose containers
# get only their own GPUs and run the machine's own nvidia-smi. Then, as the platform team did on prod102: the
# seed's kubectl replay, and the product (playbooks/gpu_demo.yml -i inventory/sim), with an inference server
# stand-in (PyTorch, GPU memory held outside any pod) answering /health.
#
# Needs the bundle (`make device-bundle` here, carried as .build/device-bundle) and nothing from the network.
# Writes what it shows into $OUT/walkthrough.tar.gz (or .build/device-out/): the replay, the transcripts, the
# reports (the device tool brings back at most 8 files).
#   bash tests/device/walkthrough.sh [--gib 8] [--nvidia-device-plugin PATH [--strategies "LIST:ID ..."]]
#                                    [--dra | --nvidia-dra-driver PATH] [--real-runtime] [--help]
# The device-plugin part runs unless only a DRA option is given; the DRA part runs after it when one is. Both NVIDIA
# binaries in one call: --nvidia-device-plugin nvidia-device-plugin --nvidia-dra-driver gpu-kubelet-plugin.
#
# --dra: the GPUs are served by DRA only (topology h200-dra): no device plugin; our DRA driver publishes the GPUs
# NVML sees as NVIDIA's driver does (gpu-<minor>, real UUID, product, memory) and a claim's CDI spec gives the
# container the machine's own /dev/nvidia<minor>. The kubectl replay (a device plugin's ledger) is replaced by the
# node's ResourceSlices; the product runs with plain nvidia.com/gpu requests served through DRA (en, zh) and with
# the run's own claims.
#
# --nvidia-device-plugin: NVIDIA's own device plugin (a binary built from github.com/NVIDIA/k8s-device-plugin,
# `go build ./cmd/nvidia-device-plugin`; PATH may be .xz) replaces ours after the replay, once per strategy
# (default: every DEVICE_LIST_STRATEGY with each DEVICE_ID_STRATEGY), and the product runs against it each time.
# It runs as the sim runs the kubelet: in its own mount namespace where the node's device-plugins folder is
# /var/lib/kubelet/device-plugins (its socket's fixed home) and the node's var/run/cdi is /var/run/cdi (where it
# writes its CDI spec, which our runtime reads); outside a daemonset it needs --driver-root-ctr-path=/ (the driver
# is at /, not at the daemonset's /driver-root) and, with no nvidia-ctk here, --cdi-disable-hooks=all.
#
# --nvidia-dra-driver: NVIDIA's own DRA kubelet plugin (gpu-kubelet-plugin, built from
# github.com/kubernetes-sigs/dra-driver-nvidia-gpu; PATH may be .xz) replaces our DRA driver on the h200-dra node
# (ours stopped, its checkpoint folder and ResourceSlice removed first: NVIDIA's would read the checkpoint as its
# own), and the product runs as with --dra. What it takes outside its daemonset, and why:
#   - driver root / (the chart's default; a GKE-style /usr/local/nvidia root has an empty dev/ folder that the plugin
#     takes as the device root, and every prepare then fails "empty device edits");
#   - libnvidia-ml.so.1 in one of the folders the plugin searches (<root>/, /usr/lib64, /usr/lib/<arch>-linux-gnu,
#     /lib64, /lib/<arch>-linux-gnu: no loader cache). Where the driver lives elsewhere (GKE: /usr/local/nvidia/lib64),
#     the plugin runs in a mount namespace of its own whose /usr/lib64 is a copy of the host's plus that one link;
#     the host is not changed;
#   - --image-name (required; only used to render MPS daemons) and --nvidia-cdi-hook-path (it copies the hook out of
#     its own image otherwise); the kubelet's plugin folders and the CDI folder are the simulated node's.
# PATH (for either NVIDIA option) may also be a bare file name inside the bundle's nvidia.tar.xz (bundle.sh packs
# the binaries named in GPUOPS_NVIDIA_BINARIES there, solid: two binaries and the bundle fit the 64 MiB carried).
#
# --real-runtime (with --nvidia-device-plugin and/or --nvidia-dra-driver): prod102's kubelet talks CRI to a REAL
# containerd v2 (CDI on) with runc instead of our runtime stand-in, and the GPU reaches each container only through
# NVIDIA's parts: the CDI specs NVIDIA's device plugin (cdi-cri, cdi-annotations) or DRA driver writes, run by runc
# with NVIDIA's nvidia-cdi-hook (the plugins now write their hooks: no --cdi-disable-hooks), or, for envvar and
# volume-mounts, NVIDIA's nvidia-container-runtime (jit-cdi mode) as containerd's default runtime, as the GPU Operator
# installs it. Default strategies then: cdi-cri:uuid cdi-annotations:uuid envvar:uuid volume-mounts:uuid. The demo
# pods' image and the pause image are made on the machine from its own files (tests/device/oci_image.py) and imported;
# the image sets NVIDIA_VISIBLE_DEVICES=all, as CUDA images do, and holds no nvidia-smi and no driver library. Each
# product run adds the bypass probe (a pod of the run asking for no GPU): under runc + CDI it must see no GPU, under
# NVIDIA's runtime it sees every GPU and the report names it. While each run goes, `crictl ps` and `nvidia-smi -L`
# inside each demo container are recorded (containers-<run>.txt, and the transcript). The seed's kubectl replay is
# left out (it runs on our simulated device plugin, whose containers get no nvidia-smi from a real runtime).
# What it needs:
#   - runtime.tar.xz (GPUOPS_REAL_RUNTIME=1 make device-bundle writes it into .build/device-runtime: containerd, its
#     runc shim, ctr, runc, crictl, the CNI plugins dummy/host-local/loopback, nvidia-cdi-hook, nvidia-container-runtime,
#     pause; built by tests/device/runtime_build.sh outside the repository, never committed), looked for in the bundle,
#     in .build/device-runtime, then in $GPUOPS_DEVICE_RUNTIME (default /tmp/gpuops-device-runtime). With the bundle it
#     is over the 64 MiB one device call carries, so two calls back to back, the second within the machine's 30 s warm
#     time: (1) carry .build/device-runtime (and NVIDIA's binary, .xz), command
#     `mkdir -p /tmp/gpuops-device-runtime && cp .build/device-runtime/* /tmp/gpuops-device-runtime/`; (2) carry the
#     bundle, command `bash tests/device/walkthrough.sh --real-runtime --nvidia-device-plugin
#     /tmp/gpuops-device-runtime/nvidia-device-plugin.xz` (or --nvidia-dra-driver .../gpu-kubelet-plugin.xz);
#   - root, cgroup v2 (or v1) writable, overlayfs, network namespaces; the driver's device nodes and libraries on the
#     host (found through the loader cache), its ldconfig; nothing installed: the runtime's state, images, network
#     namespaces and runc's state live under $GPUOPS_DEVICE_WORK/rr, its only socket there, its CRI streaming server on
#     127.0.0.1; pods get loopback and a dummy eth0 with a 127.1.x.x address (no veth, no route out);
#   - at the end the kubelet stops, then every pod and container is removed, containerd and its shims end, the
#     mounts and cgroups go and the folder is deleted (real_runtime.sh rr_stop).
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle="$root/.build/device-bundle"
work=${GPUOPS_DEVICE_WORK:-/tmp/gpuops-device}
final=${OUT:-$root/.build/device-out}
out="$work/out"
py=${GPUOPS_DEVICE_PYTHON:-python3}
gib=8
nvidia_plugin=""
nvidia_dra=""
dra=""
real_runtime=""
strategies="envvar:uuid envvar:index volume-mounts:uuid volume-mounts:index cdi-annotations:uuid cdi-annotations:index cdi-cri:uuid cdi-cri:index"
while [ $# -gt 0 ]; do
  case $1 in
    --gib) gib=$2; shift 2 ;;
    --nvidia-device-plugin) nvidia_plugin=$2; shift 2 ;;
    --nvidia-dra-driver) nvidia_dra=$2; dra=1; shift 2 ;;
    --strategies) strategies=$2; strategies_given=1; shift 2 ;;
    --dra) dra=1; shift ;;
    --real-runtime) real_runtime=1; shift ;;
    --help|-h) exec bash "$0" --help ;;
    *) echo "walkthrough.sh: unknown argument $1 (want --gib N, --nvidia-device-plugin PATH, --strategies LIST, --dra, --nvidia-dra-driver PATH, --real-runtime, --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$real_runtime" ]; then
  if [ -z "$nvidia_plugin" ] && [ -z "$nvidia_dra" ]; then
    echo "walkthrough.sh: --real-runtime needs --nvidia-device-plugin and/or --nvidia-dra-driver (our simulated plugin and driver hand a real runtime no nvidia-smi)" >&2
    exit 2
  fi
  [ -n "${strategies_given:-}" ] || strategies="cdi-cri:uuid cdi-annotations:uuid envvar:uuid volume-mounts:uuid"
fi
# The device-plugin part runs unless a DRA option came alone.
plugin_part=1
[ -n "$dra" ] && [ -z "$nvidia_plugin" ] && plugin_part=""
started=$SECONDS
log() { printf '[walkthrough %4ds] %s\n' $((SECONDS - started)) "$*"; }
rm -rf "$out" && mkdir -p "$out" "$work/bin" "$final"
cd "$root"
export LANG=C.UTF-8 LC_ALL=C.UTF-8 PYTHONUNBUFFERED=1

log "this machine"
nvidia-smi -L
uname -r; nproc

log "unpacking the bundle ($(du -sh "$bundle" | cut -f1))"
for packed in "$bundle"/bin/*.xz; do
  xz -dc "$packed" > "$work/bin/$(basename "$packed" .xz)"
done
chmod +x "$work"/bin/*
for name in kube-apiserver kube-scheduler kube-controller-manager kubelet kubectl; do
  ln -sfn kube-allinone "$work/bin/$name"
done
# The Python packages arrive installed for CPython 3.12 and packed solid (bundle.sh); their scripts' first line is
# this machine's Python.
rm -rf "$work/site" && mkdir -p "$work/site"
tar xJf "$bundle/site.tar.xz" -C "$work/site"
python_path=$(command -v "$py")
sed -i "1s|^#!.*python.*$|#!$python_path|" "$work"/site/bin/*
# NVIDIA's binaries, where the bundle carries them (GPUOPS_NVIDIA_BINARIES at bundle time).
if [ -f "$bundle/nvidia.tar.xz" ]; then
  mkdir -p "$work/nvidia" && tar xJf "$bundle/nvidia.tar.xz" -C "$work/nvidia"
  ls -l "$work/nvidia"
fi
# nvidia_binary PATH NAME: the binary PATH names (a file, a .xz, or a name inside the bundle's nvidia.tar.xz), as
# $work/bin/NAME.
nvidia_binary() {
  local given=$1 name=$2
  if [ ! -f "$given" ] && [ -f "$work/nvidia/$given" ]; then given="$work/nvidia/$given"; fi
  case $given in
    *.xz) xz -dc "$given" > "$work/bin/$name" ;;
    *) cp "$given" "$work/bin/$name" ;;
  esac
  chmod +x "$work/bin/$name"
}
# The real container runtime (GPUOPS_REAL_RUNTIME=1 at bundle time): containerd, runc, CNI, NVIDIA's hook and runtime.
if [ -n "$real_runtime" ]; then
  runtime_tar=""
  for candidate in "$bundle/runtime.tar.xz" "$root/.build/device-runtime/runtime.tar.xz" \
                   "${GPUOPS_DEVICE_RUNTIME:-/tmp/gpuops-device-runtime}/runtime.tar.xz"; do
    if [ -f "$candidate" ]; then runtime_tar=$candidate; break; fi
  done
  [ -n "$runtime_tar" ] || { echo "walkthrough.sh: --real-runtime needs runtime.tar.xz (GPUOPS_REAL_RUNTIME=1 make device-bundle; see --help)" >&2; exit 2; }
  log "the real runtime's binaries: $runtime_tar ($(du -h "$runtime_tar" | cut -f1))"
  rm -rf "$work/rr-bin" && mkdir -p "$work/rr-bin" && tar xJf "$runtime_tar" -C "$work/rr-bin"
  chmod +x "$work"/rr-bin/*
  # shellcheck source=real_runtime.sh
  . "$root/tests/device/real_runtime.sh"
fi
mkdir -p "$work/collections"
tar xzf "$bundle/kubernetes-core.tar.gz" -C "$work/collections"
mkdir -p .collections/ansible_collections/gpuops
ln -sfn ../../.. .collections/ansible_collections/gpuops/scheduling
export PYTHONPATH="$work/site" PATH="$work/site/bin:$work/bin:$PATH"
export ANSIBLE_CONFIG="$root/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$root/.collections:$work/collections"
export GPUOPS_SIM_BIN_DIR="$work/bin" KUBECONFIG="$root/.sim/kubeconfig"
kubectl version --client | head -1
ansible-playbook --version | head -1

health() { "$py" -c 'import sys, urllib.request
try:
    print(urllib.request.urlopen("http://127.0.0.1:18000/health", timeout=2).status)
except OSError as error:
    print(error); sys.exit(1)'; }
cleanup() {
  if [ -n "${watcher:-}" ]; then kill "$watcher" 2>/dev/null || true; fi
  if [ -n "${nvidia_pid:-}" ]; then kill "$nvidia_pid" 2>/dev/null || true; fi
  "$py" tests/sim/simctl.py down || true
  # After the kubelet (which would start the pods' containers again): everything of the real runtime goes.
  if [ -n "$real_runtime" ]; then rr_stop || true; fi
  if [ -n "${standin:-}" ]; then kill "$standin" 2>/dev/null || true; fi
  cp -r .sim/logs "$out/sim-logs" 2>/dev/null || true
  tar czf "$final/walkthrough.tar.gz" -C "$out" .
}
trap cleanup EXIT

log "the inference server stand-in: $gib GiB held through PyTorch, /health on 127.0.0.1:18000, no pod, no GPU request"
"$py" tests/device/inference_standin.py --port 18000 --gib "$gib" > "$out/standin.log" 2>&1 &
standin=$!
for _ in $(seq 120); do health >/dev/null 2>&1 && break; sleep 0.5; done
echo "stand-in /health before: $(health)"
cat "$out/standin.log"

node_dir="$root/.sim/run/nodes/prod102"
product() {   # lang, run id, [more variables, as JSON members]
  local more=${3:-} status=0
  # With the real runtime, each run also sends the bypass probe (a pod asking for no GPU), and every demo container
  # is listed by crictl and looked into while the run goes.
  [ -n "$real_runtime" ] && more="\"gpu_demo_bypass_probe\": true${more:+, $more}"
  vars=$(printf '{"gpu_demo_node_processes": true, "gpu_demo_node_processes_options": {"source": "nvml",
    "pod_resources_socket": "%s", "checkpoint_path": "%s"}, "gpu_demo_report_dir": "%s", "gpu_demo_report_lang": "%s",
    "gpu_demo_run_id": "%s"%s}' "$node_dir/kubelet/pod-resources/kubelet.sock" \
    "$node_dir/device-plugins/kubelet_internal_checkpoint" "$out" "$1" "$2" "${more:+, $more}")
  if [ -n "$real_runtime" ]; then rr_watch "$out/containers-$2.txt" & watcher=$!; fi
  ansible-playbook playbooks/gpu_demo.yml -i inventory/sim -e "$vars" 2>&1 | tee "$out/ansible-$2.txt" | tail -25 || status=1
  if [ -n "$real_runtime" ]; then
    sleep 1; kill "$watcher" 2>/dev/null || true; wait "$watcher" 2>/dev/null || true; watcher=""
    log "the demo containers of $2, as the real runtime ran them (crictl ps; nvidia-smi -L inside each)"
    cat "$out/containers-$2.txt" 2>/dev/null || echo "(none seen)"
    grep -h "probe" "$out/gpu-demo-prod102-$2.md" 2>/dev/null | head -3 || true
  fi
  return $status
}
allocatable_is() {   # value, seconds
  for _ in $(seq $(($2 * 5))); do
    [ "$(kubectl get node prod102 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = "$1" ] && return 0
    sleep 0.2
  done
  echo "allocatable nvidia.com/gpu did not become $1 in $2 s" >&2; return 1
}
# slices_of DRIVER SECONDS: wait until DRIVER has published a ResourceSlice for prod102.
slices_of() {
  for _ in $(seq $(($2 * 5))); do
    [ -n "$(kubectl get resourceslices --field-selector "spec.driver=$1,spec.nodeName=prod102" -o name)" ] && return 0
    sleep 0.2
  done
  echo "no ResourceSlice of $1 for prod102 after $2 s" >&2; return 1
}
# cluster TOPOLOGY: the cluster up on that topology (or switched to it).
cluster_up=""
cluster() {
  if [ -n "$cluster_up" ]; then
    "$py" tests/sim/simctl.py topology "$1"
  else
    "$py" tests/sim/simctl.py up --topology "$1"
    cluster_up=1
  fi
  kubectl get node prod102 -o wide
  kubectl get node prod102 -o jsonpath='{.status.nodeInfo}{"\n"}allocatable {.status.allocatable}{"\n"}'
}

rr_runtime=""
if [ -n "$real_runtime" ]; then
  log "the real container runtime: containerd, runc, CNI (loopback only), NVIDIA's hook and runtime, under $work/rr"
  rr_init "$work/rr-bin" "$work/rr" "$node_dir"
  mkdir -p "$node_dir/etc/cdi" "$node_dir/var/run/cdi"
  "$work/rr-bin/runc" --version | head -1
  "$work/rr-bin/nvidia-container-runtime" --version | head -1
  "$work/rr-bin/nvidia-cdi-hook" --version | head -1
  rr_start runc
  # shellcheck disable=SC2154  # rr_dir, rr_sock, rr_bin: set by real_runtime.sh's rr_start
  cp "$rr_dir/config.toml" "$out/containerd-config.toml"
  rr_runtime=runc
  image=$(awk '/^gpu_demo_image:/ {print $2}' inventory/sim/group_vars/gpu_nodes.yml)
  rr_images "${image:?no gpu_demo_image in inventory/sim}"
  log "the real runtime when the hand-off breaks: a CDI device no spec names, a spec whose hook is missing"
  rr_failures "$out/runtime-failures.txt" "$image"
  # The simulated node starts no runtime of its own: its kubelet talks to containerd (tests/sim/nodes.py).
  # shellcheck disable=SC2154
  export GPUOPS_SIM_CRI_SOCKET="$rr_sock"
fi
# use_runtime runc|nvidia: containerd's default runtime (a restart; the kubelet reconnects).
use_runtime() {
  [ -n "$real_runtime" ] && [ "$rr_runtime" != "$1" ] || return 0
  log "containerd's default runtime: $1"
  rr_start "$1"
  rr_runtime=$1
}

if [ -n "$plugin_part" ]; then
  log "the cluster: control plane and prod102 (real kubelet, NVML-backed device plugin${real_runtime:+, containerd})"
  cluster h200
  grep -h "registered" .sim/logs/plugin-prod102-*.log | head -3

  if [ -z "$real_runtime" ]; then
    log "the seed's kubectl replay"
    bash tests/device/kubectl_replay.sh 2>&1 | tee "$out/kubectl-replay.txt"
  fi
  if [ -z "$nvidia_plugin" ]; then
    log "the product: ansible-playbook playbooks/gpu_demo.yml -i inventory/sim (node processes through NVML)"
    for lang in en zh; do product "$lang" "h200-$lang" || failed="${failed:-} $lang"; done
  else
    nvidia_binary "$nvidia_plugin" nvidia-device-plugin
    "$work/bin/nvidia-device-plugin" --version | tee "$out/nvidia-device-plugin-version.txt"
    log "NVIDIA's device plugin instead of ours: simctl stop plugin-prod102-nvidia.com-gpu"
    "$py" tests/sim/simctl.py stop plugin-prod102-nvidia.com-gpu
    allocatable_is 0 30
    mkdir -p /var/run/cdi "$node_dir/var/run/cdi"
    for pair in $strategies; do
      list=${pair%%:*} id=${pair#*:}
      flags="--device-list-strategy=$list --device-id-strategy=$id --driver-root-ctr-path=/ --cdi-disable-hooks=all"
      if [ -n "$real_runtime" ]; then
        # The real runtime runs the specs' hooks: NVIDIA's own, from here. envvar and volume-mounts go through
        # NVIDIA's runtime (the GPU Operator's default runtime), the CDI strategies through runc.
        # shellcheck disable=SC2154
        flags="--device-list-strategy=$list --device-id-strategy=$id --driver-root-ctr-path=/ --nvidia-cdi-hook-path=$rr_bin/nvidia-cdi-hook"
        case $list in envvar|volume-mounts) use_runtime nvidia ;; *) use_runtime runc ;; esac
      fi
      log "NVIDIA's device plugin: $flags"
      rm -f "$node_dir/var/run/cdi/"*.json
      # shellcheck disable=SC2016,SC2086  # $0 and $@ are the inner shell's; the flags are words
      unshare --mount --propagation private -- sh -c 'mount --bind "$0/device-plugins" /var/lib/kubelet/device-plugins &&
        mount --bind "$0/var/run/cdi" /var/run/cdi && exec "$@"' "$node_dir" "$work/bin/nvidia-device-plugin" $flags \
        > "$out/nvidia-device-plugin-$list-$id.log" 2>&1 &
      nvidia_pid=$!
      allocatable_is 1 60 || { cat "$out/nvidia-device-plugin-$list-$id.log"; exit 1; }
      grep -h "Registered device plugin\|Starting\|CDI spec\|strategy" "$out/nvidia-device-plugin-$list-$id.log" | head -5 || true
      ls -l "$node_dir/var/run/cdi/"
      cp "$node_dir/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json" "$out/cdi-spec-$list-$id.json" 2>/dev/null || true
      product en "h200-nvidia-$list-$id" || failed="${failed:-} $pair"
      if [ "$pair" = "volume-mounts:uuid" ]; then
        product zh "h200-nvidia-$list-$id-zh" || failed="${failed:-} $pair(zh)"
      fi
      kill "$nvidia_pid"; wait "$nvidia_pid" 2>/dev/null || true
      nvidia_pid=""
      allocatable_is 0 30
    done
  fi
  log "the device-plugin part: failed:${failed:- none}"
fi

# nvidia_dra_driver: NVIDIA's gpu-kubelet-plugin in place of ours on prod102 (the header says what each step is for).
nvidia_dra_driver() {
  nvidia_binary "$nvidia_dra" gpu-kubelet-plugin
  "$work/bin/gpu-kubelet-plugin" --version 2>&1 | tee "$out/gpu-kubelet-plugin-version.txt"
  log "NVIDIA's DRA driver instead of ours: simctl stop dra-prod102, its checkpoint folder and ResourceSlice removed"
  "$py" tests/sim/simctl.py stop dra-prod102
  rm -rf "$node_dir/kubelet/plugins/gpu.nvidia.com"
  kubectl delete resourceslices --field-selector spec.driver=gpu.nvidia.com,spec.nodeName=prod102 --wait=true
  local arch lib_dir="" folder namespace_lib=""
  arch=$(uname -m)
  for folder in /usr/lib64 "/usr/lib/$arch-linux-gnu" /lib64 "/lib/$arch-linux-gnu"; do
    if [ -e "$folder/libnvidia-ml.so.1" ]; then lib_dir=$folder; break; fi
  done
  if [ -z "$lib_dir" ]; then
    local nvml
    nvml=$(ldconfig -p | awk '/libnvidia-ml\.so\.1 / {print $NF; exit}')
    nvml=$(readlink -f "${nvml:?libnvidia-ml.so.1 is neither in the loader cache nor where the plugin looks}")
    namespace_lib="$work/usr-lib64"
    rm -rf "$namespace_lib"
    if [ -d /usr/lib64 ]; then cp -a /usr/lib64 "$namespace_lib"; else mkdir -p "$namespace_lib"; fi
    ln -sfn "$nvml" "$namespace_lib/libnvidia-ml.so.1"
    log "libnvidia-ml.so.1 is at $nvml: the plugin's /usr/lib64 is $namespace_lib (its own mount namespace)"
  else
    log "libnvidia-ml.so.1 found in $lib_dir"
  fi
  mkdir -p "$node_dir/var/run/cdi"
  local flags=(--node-name prod102 --kubeconfig "$root/.sim/kubeconfig"
    --image-name registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1
    --nvidia-cdi-hook-path "${rr_bin:-/usr/bin}/nvidia-cdi-hook" --cdi-root "$node_dir/var/run/cdi"
    --kubelet-registrar-directory-path "$node_dir/kubelet/plugins_registry"
    --kubelet-plugins-directory-path "$node_dir/kubelet/plugins"
    --nvidia-driver-root / --container-driver-root /)
  log "gpu-kubelet-plugin ${flags[*]}"
  if [ -n "$namespace_lib" ]; then
    # shellcheck disable=SC2016  # $0 and $@ are the inner shell's
    NVIDIA_VISIBLE_DEVICES=void unshare --mount --propagation private -- \
      sh -c 'mount --bind "$0" /usr/lib64 && exec "$@"' "$namespace_lib" "$work/bin/gpu-kubelet-plugin" "${flags[@]}" \
      > "$out/gpu-kubelet-plugin.log" 2>&1 &
  else
    NVIDIA_VISIBLE_DEVICES=void "$work/bin/gpu-kubelet-plugin" "${flags[@]}" > "$out/gpu-kubelet-plugin.log" 2>&1 &
  fi
  nvidia_pid=$!
  slices_of gpu.nvidia.com 60 || { cat "$out/gpu-kubelet-plugin.log"; exit 1; }
  kubectl get resourceslices -o json > "$out/resourceslices-nvidia.json"
  grep -h "RegisterPlugin\|DRAResourceHealth\|gpu.nvidia.com" .sim/logs/kubelet-prod102.log | tail -5 || true
}

if [ -n "$dra" ]; then
  use_runtime runc
  log "the cluster: control plane and prod102 (real kubelet, NVML-backed DRA driver, no device plugin${real_runtime:+, containerd})"
  cluster h200-dra
  log "what the DRA driver publishes (the ledger is the ResourceSlices and ResourceClaims)"
  slices_of gpu.nvidia.com 30
  kubectl get deviceclasses
  kubectl get resourceslices -o json | tee "$out/resourceslices.json"
  grep -h "publishes" .sim/logs/dra-prod102.log | head -3 || true
  driver=ours
  if [ -n "$nvidia_dra" ]; then nvidia_dra_driver; driver=nvidia; fi
  log "the product through DRA ($driver): plain nvidia.com/gpu served by the DeviceClass (auto), then the run's own claims"
  for lang in en zh; do product "$lang" "h200-dra-$driver-$lang" || failed="${failed:-} dra-$driver-$lang"; done
  product en "h200-dra-$driver-claim" '"gpu_demo_dra_request": "claim"' || failed="${failed:-} dra-$driver-claim"
  kubectl get resourceclaims -A
  if [ -n "$nvidia_dra" ]; then
    cp "$node_dir"/var/run/cdi/*.json "$out/" 2>/dev/null || true
    kill "$nvidia_pid"; wait "$nvidia_pid" 2>/dev/null || true
    nvidia_pid=""
  fi
  log "the DRA part: failed:${failed:- none}"
fi
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee "$out/compute-apps.csv"
echo "stand-in /health after: $(health)"
kubectl get pods -A
log "done: failed:${failed:- none}"
[ -z "${failed:-}" ]
