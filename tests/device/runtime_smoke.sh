#!/usr/bin/env bash
# The real runtime alone on the GPU machine, no cluster (a minute): containerd + runc + NVIDIA's runtime from
# runtime.tar.xz (GPUOPS_REAL_RUNTIME=1 make device-bundle), the demo image made here, then: a pod asking for no GPU
# under runc and under NVIDIA's runtime (rr_smoke), what breaks the hand-off (rr_failures), and everything removed.
#   bash tests/device/runtime_smoke.sh RUNTIME_TAR_XZ [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tarball=$1 out=${2:-${OUT:-/tmp}}
mkdir -p "$out"
work=${GPUOPS_DEVICE_WORK:-/tmp/gpuops-device}/smoke
rm -rf "$work" && mkdir -p "$work/bin" "$work/node/etc/cdi" "$work/node/var/run/cdi"
tar xJf "$tarball" -C "$work/bin"
# shellcheck source=real_runtime.sh
. "$here/real_runtime.sh"
rr_init "$work/bin" "$work/rr" "$work/node"
trap 'rr_stop; rm -rf "$work"' EXIT
image=docker.m.daocloud.io/vllm/vllm-openai:latest
for runtime in runc nvidia; do
  echo "=== containerd's default runtime: $runtime"
  rr_start "$runtime"
  [ "$runtime" = runc ] && rr_images "$image"
  rr_smoke "$image" 2>&1 | tee "$out/smoke-$runtime.txt"
done
echo "=== the hand-off broken (runc)"
rr_start runc
rr_failures "$out/runtime-failures.txt" "$image"
# shellcheck disable=SC2154  # rr_dir: set by real_runtime.sh's rr_start
tail -5 "$rr_dir/nvidia-container-runtime.log" 2>/dev/null || true
