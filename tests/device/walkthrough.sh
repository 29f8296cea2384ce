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
#   bash tests/device/walkthrough.sh [--gib 8]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle="$root/.build/device-bundle"
work=${GPUOPS_DEVICE_WORK:-/tmp/gpuops-device}
final=${OUT:-$root/.build/device-out}
out="$work/out"
py=${GPUOPS_DEVICE_PYTHON:-python3}
gib=8
[ "${1:-}" = "--gib" ] && gib=$2
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

log "the cluster: control plane and prod102 (real kubelet, NVML-backed device plugin)"
"$py" tests/sim/simctl.py up --topology h200
kubectl get node prod102 -o wide
kubectl get node prod102 -o jsonpath='{.status.nodeInfo}{"\n"}allocatable {.status.allocatable}{"\n"}'
grep -h "registered" .sim/logs/plugin-prod102-*.log | head -3

log "the seed's kubectl replay"
bash tests/device/kubectl_replay.sh 2>&1 | tee "$out/kubectl-replay.txt"

log "the product: ansible-playbook playbooks/gpu_demo.yml -i inventory/sim (node processes through NVML)"
node_dir="$root/.sim/run/nodes/prod102"
for lang in en zh; do
  vars=$(printf '{"gpu_demo_node_processes": true, "gpu_demo_node_processes_options": {"source": "nvml",
    "pod_resources_socket": "%s", "checkpoint_path": "%s"}, "gpu_demo_report_dir": "%s", "gpu_demo_report_lang": "%s",
    "gpu_demo_run_id": "h200-%s"}' "$node_dir/kubelet/pod-resources/kubelet.sock" \
    "$node_dir/device-plugins/kubelet_internal_checkpoint" "$out" "$lang" "$lang")
  ansible-playbook playbooks/gpu_demo.yml -i inventory/sim -e "$vars" 2>&1 | tee "$out/ansible-$lang.txt" | tail -25
done
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee "$out/compute-apps.csv"
echo "stand-in /health after: $(health)"
kubectl get pods -A
log "done"
