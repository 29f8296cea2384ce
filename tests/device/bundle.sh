#!/usr/bin/env bash
# `make device-bundle`: everything the GPU machine needs for tests/device/walkthrough.sh, built here (it reaches
# no package registry), in .build/device-bundle/ (git-ignored; the device tool carries it: `carry`):
#   bin/kube-allinone.xz   kube-apiserver, -scheduler, -controller-manager, kubelet and kubectl in ONE binary
#                          (tests/device/allinone: they share most of their code; five binaries would not fit)
#   bin/etcd.xz, bin/gpuops-simnode.xz
#   site.tar.xz            tests/device/requirements.txt installed for CPython 3.12 on x86-64 Linux, packed solid
#                          (the wheels are zip files: one xz over their contents is 7.5 MiB against 17.3)
#   nvidia.tar.xz          only with GPUOPS_NVIDIA_BINARIES="PATH ...": NVIDIA's binaries a user built (device plugin,
#                          gpu-kubelet-plugin), packed solid with xz's x86 filter (15.5 -> 11.8 MiB), so that both
#                          travel with the bundle and the tree; never committed
# and, only with GPUOPS_REAL_RUNTIME=1 (walkthrough.sh --real-runtime), in .build/device-runtime/ BESIDE the bundle:
#   runtime.tar.xz         containerd, its runc shim, ctr, runc, crictl, the CNI plugins, nvidia-cdi-hook,
#                          nvidia-container-runtime and pause, as tests/device/runtime_build.sh builds them outside the
#                          repository (cached), packed solid with xz's x86 filter; never committed. It does not fit in
#                          the same 64 MiB as the bundle: a first device call carries .build/device-runtime and copies
#                          it to /tmp/gpuops-device-runtime, the next (within the machine's 30 s warm time) carries the
#                          bundle and runs the walk, which finds it there (walkthrough.sh --help)
#   kubernetes-core.tar.gz kubernetes.core from .venv (the `ansible` package's copy)
# The checkout itself travels as the working tree. Prints the bundle's size; it must stay under 64 MiB with the tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/.build/device-bundle"
# shellcheck source=../sim/versions.env
. "$root/tests/sim/versions.env"
cache_root=${GPUOPS_SIM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuops-sim}
started=$SECONDS
log() { printf '[device-bundle %3ds] %s\n' $((SECONDS - started)) "$*"; }

log "control plane sources and etcd (tests/sim/build.sh; cached)"
bins=$(bash "$root/tests/sim/build.sh" | tail -1)
etcd_bin=${bins#*:}
src="$cache_root/src/kubernetes-$KUBERNETES_VERSION"
digest=$(sha256sum "$root/tests/device/allinone/main.go" | cut -c1-12)
allinone="$cache_root/allinone-$KUBERNETES_VERSION-$digest/kube-allinone"
if [ ! -x "$allinone" ]; then
  log "linking the all-in-one Kubernetes binary (a few minutes cold; packages come from the sim's build cache)"
  mkdir -p "$src/allinone" "$(dirname "$allinone")"
  cp "$root/tests/device/allinone/main.go" "$src/allinone/main.go"
  minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  ldflags="-s -w"
  for var in "gitVersion=$KUBERNETES_VERSION" gitMajor=1 "gitMinor=$minor" gitTreeState=clean; do
    ldflags+=" -X k8s.io/component-base/version.$var -X k8s.io/client-go/pkg/version.$var"
  done
  (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$allinone.tmp" ./allinone)
  mv "$allinone.tmp" "$allinone"
fi
simnode=$(cd "$root/tests/sim" && "$root/.venv/bin/python" -c 'import nodes; print(nodes.simnode_binary())' | tail -1)  # (a cold build prints a line first)

rm -rf "$out" && mkdir -p "$out/bin"
log "compressing the binaries (xz with its x86 filter, preset 9; etcd and gpuops-simnode stripped of their symbols first: 39 -> 27 MB, 50 -> 35 MB)"
strip --strip-all -o "$out/etcd" "$etcd_bin/etcd"
strip --strip-all -o "$out/gpuops-simnode" "$simnode"
for binary in "$allinone" "$out/etcd" "$out/gpuops-simnode"; do
  xz -T2 --x86 --lzma2=preset=9 -c "$binary" > "$out/bin/$(basename "$binary").xz"
done
rm "$out/etcd" "$out/gpuops-simnode"
log "Python packages for CPython 3.12 (tests/device/requirements.txt), installed into one folder and packed solid"
site_dir=$(mktemp -d)
trap 'rm -rf "$site_dir"' EXIT
"$root/.venv/bin/python" -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_39_x86_64 --target "$site_dir" -r "$root/tests/device/requirements.txt"
# ansible-core's wheel carries ansible-test, which nothing on the machine runs.
tar cf - -C "$site_dir" --exclude=./ansible_test . | xz -T2 -9 > "$out/site.tar.xz"
if [ -n "${GPUOPS_NVIDIA_BINARIES:-}" ]; then
  log "NVIDIA's binaries, packed solid: $GPUOPS_NVIDIA_BINARIES"
  nvidia_dir=$(mktemp -d)
  trap 'rm -rf "$site_dir" "$nvidia_dir"' EXIT
  for binary in $GPUOPS_NVIDIA_BINARIES; do
    [ -f "$binary" ] || { echo "bundle.sh: GPUOPS_NVIDIA_BINARIES names $binary, which is not a file" >&2; exit 2; }
    cp "$binary" "$nvidia_dir/"
  done
  tar cf - -C "$nvidia_dir" . | xz -T2 --x86 --lzma2=preset=9 > "$out/nvidia.tar.xz"
fi
if [ -n "${GPUOPS_REAL_RUNTIME:-}" ]; then
  log "the real container runtime (tests/device/runtime_build.sh; cached outside the repository), packed solid"
  runtime_dir=$(bash "$root/tests/device/runtime_build.sh" | tail -1)
  runtime_out="$root/.build/device-runtime"
  mkdir -p "$runtime_out" && rm -f "$runtime_out/runtime.tar.xz"
  tar cf - -C "$runtime_dir/bin" . | xz -T2 --x86 --lzma2=preset=9e > "$runtime_out/runtime.tar.xz"
  du -b "$runtime_dir"/bin/* | awk '{printf "  %6.1f MiB  %s (unpacked)\n", $1/1048576, $2}'
  du -b "$runtime_out"/* | awk '{printf "  %6.1f MiB  %s (carried in a call of its own)\n", $1/1048576, $2}'
fi
log "kubernetes.core from .venv"
site=$("$root/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
tar czf "$out/kubernetes-core.tar.gz" -C "$site" ansible_collections/kubernetes/core
tree=$(cd "$root" && git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
bundle=$(du -sb "$out" | cut -f1)
log "bundle $((bundle / 1048576)) MiB + working tree $((tree / 1048576)) MiB = $(((bundle + tree) / 1048576)) MiB (limit 64 MiB)"
du -b "$out"/bin/* "$out"/*.tar.* | awk '{printf "  %6.1f MiB  %s\n", $1/1048576, $2}'
