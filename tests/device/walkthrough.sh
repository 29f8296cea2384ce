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
#   bash tests/device/walkthrough.sh [--gib 8] [--nvidia-device-plugin PATH [--strategies "LIST:ID ..."] | --dra]
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
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle="$root/.build/device-bundle"
work=${GPUOPS_DEVICE_WORK:-/tmp/gpuops-device}
final=${OUT:-$root/.build/device-out}
out="$work/out"
py=${GPUOPS_DEVICE_PYTHON:-python3}
gib=8
nvidia_plugin=""
dra=""
strategies="envvar:uuid envvar:index volume-mounts:uuid volume-mounts:index cdi-annotations:uuid cdi-annotations:index cdi-cri:uuid cdi-cri:index"
while [ $# -gt 0 ]; do
  case $1 in
    --gib) gib=$2; shift 2 ;;
    --nvidia-device-plugin) nvidia_plugin=$2; shift 2 ;;
    --strategies) strategies=$2; shift 2 ;;
    --dra) dra=1; shift ;;
    *) echo "walkthrough.sh: unknown argument $1 (want --gib N, --nvidia-device-plugin PATH, --strategies LIST, --dra)" >&2; exit 2 ;;
  esac
done
if [ -n "$dra" ] && [ -n "$nvidia_plugin" ]; then
  echo "walkthrough.sh: --dra and --nvidia-device-plugin exclude each other (a node's GPUs are served one way)" >&2; exit 2
fi
if [ -n "$nvidia_plugin" ] && [ ! -f "$nvidia_plugin" ]; then
  echo "walkthrough.sh: --nvidia-device-plugin $nvidia_plugin: no such file (build it from NVIDIA's repository)" >&2; exit 2
fi
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
"$py" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$work/site" "$bundle"/wheels/*.whl
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
  [ -n "${nvidia_pid:-}" ] && kill "$nvidia_pid" 2>/dev/null || true
  "$py" tests/sim/simctl.py down || true
  [ -n "${standin:-}" ] && kill "$standin" 2>/dev/null || true
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

if [ -n "$dra" ]; then
  log "the cluster: control plane and prod102 (real kubelet, NVML-backed DRA driver, no device plugin)"
  "$py" tests/sim/simctl.py up --topology h200-dra
else
  log "the cluster: control plane and prod102 (real kubelet, NVML-backed device plugin)"
  "$py" tests/sim/simctl.py up --topology h200
fi
kubectl get node prod102 -o wide
kubectl get node prod102 -o jsonpath='{.status.nodeInfo}{"\n"}allocatable {.status.allocatable}{"\n"}'
if [ -n "$dra" ]; then
  log "what the DRA driver publishes (the ledger is the ResourceSlices and ResourceClaims)"
  for _ in $(seq 150); do [ -n "$(kubectl get resourceslices -o name)" ] && break; sleep 0.2; done
  kubectl get deviceclasses
  kubectl get resourceslices -o yaml | tee "$out/resourceslices.yaml"
  grep -h "publishes" .sim/logs/dra-prod102.log | head -3 || true
else
  grep -h "registered" .sim/logs/plugin-prod102-*.log | head -3

  log "the seed's kubectl replay"
  bash tests/device/kubectl_replay.sh 2>&1 | tee "$out/kubectl-replay.txt"
fi

node_dir="$root/.sim/run/nodes/prod102"
product() {   # lang, run id, [more variables, as JSON members]
  vars=$(printf '{"gpu_demo_node_processes": true, "gpu_demo_node_processes_options": {"source": "nvml",
    "pod_resources_socket": "%s", "checkpoint_path": "%s"}, "gpu_demo_report_dir": "%s", "gpu_demo_report_lang": "%s",
    "gpu_demo_run_id": "%s"%s}' "$node_dir/kubelet/pod-resources/kubelet.sock" \
    "$node_dir/device-plugins/kubelet_internal_checkpoint" "$out" "$1" "$2" "${3:+, $3}")
  ansible-playbook playbooks/gpu_demo.yml -i inventory/sim -e "$vars" 2>&1 | tee "$out/ansible-$2.txt" | tail -25
}
allocatable_is() {   # value, seconds
  for _ in $(seq $(($2 * 5))); do
    [ "$(kubectl get node prod102 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = "$1" ] && return 0
    sleep 0.2
  done
  echo "allocatable nvidia.com/gpu did not become $1 in $2 s" >&2; return 1
}
if [ -n "$dra" ]; then
  log "the product through DRA: plain nvidia.com/gpu served by the DeviceClass (auto), then the run's own claims"
  for lang in en zh; do product "$lang" "h200-dra-$lang" || failed="${failed:-} dra-$lang"; done
  product en h200-dra-claim '"gpu_demo_dra_request": "claim"' || failed="${failed:-} dra-claim"
  kubectl get resourceclaims -A
  log "the product through DRA: failed:${failed:- none}"
elif [ -z "$nvidia_plugin" ]; then
  log "the product: ansible-playbook playbooks/gpu_demo.yml -i inventory/sim (node processes through NVML)"
  for lang in en zh; do product "$lang" "h200-$lang"; done
else
  case $nvidia_plugin in
    *.xz) xz -dc "$nvidia_plugin" > "$work/bin/nvidia-device-plugin" ;;
    *) cp "$nvidia_plugin" "$work/bin/nvidia-device-plugin" ;;
  esac
  chmod +x "$work/bin/nvidia-device-plugin"
  "$work/bin/nvidia-device-plugin" --version | tee "$out/nvidia-device-plugin-version.txt"
  log "NVIDIA's device plugin instead of ours: simctl stop plugin-prod102-nvidia.com-gpu"
  "$py" tests/sim/simctl.py stop plugin-prod102-nvidia.com-gpu
  allocatable_is 0 30
  mkdir -p /var/run/cdi "$node_dir/var/run/cdi"
  for pair in $strategies; do
    list=${pair%%:*} id=${pair#*:}
    flags="--device-list-strategy=$list --device-id-strategy=$id --driver-root-ctr-path=/ --cdi-disable-hooks=all"
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
  log "NVIDIA's device plugin, every strategy run: failed:${failed:- none}"
fi
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee "$out/compute-apps.csv"
echo "stand-in /health after: $(health)"
kubectl get pods -A
log "done"
[ -z "${failed:-}" ]
