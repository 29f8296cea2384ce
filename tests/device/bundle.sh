#!/usr/bin/env bash
# `make device-bundle`: everything the GPU machine needs for tests/device/walkthrough.sh, built here (it reaches
# no package registry), in .build/device-bundle/ (git-ignored; the device tool carries it: `carry`):
#   bin/kube-allinone.xz   kube-apiserver, -scheduler, -controller-manager, kubelet and kubectl in ONE binary
#                          (tests/device/allinone: they share most of their code; five binaries would not fit)
#   bin/etcd.xz, bin/gpuops-simnode.xz
#   wheels/                tests/device/requirements.txt for CPython 3.12 on x86-64 Linux
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

rm -rf "$out" && mkdir -p "$out/bin" "$out/wheels"
log "compressing the binaries (xz; etcd stripped of its symbols first: 39 -> 27 MB)"
strip --strip-all -o "$out/etcd" "$etcd_bin/etcd"
for binary in "$allinone" "$out/etcd" "$simnode"; do
  xz -T2 -6 -c "$binary" > "$out/bin/$(basename "$binary").xz"
done
rm "$out/etcd"
log "wheels for CPython 3.12 (tests/device/requirements.txt)"
"$root/.venv/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_39_x86_64 -d "$out/wheels" -r "$root/tests/device/requirements.txt"
log "kubernetes.core from .venv"
site=$("$root/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
tar czf "$out/kubernetes-core.tar.gz" -C "$site" ansible_collections/kubernetes/core
tree=$(cd "$root" && git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
bundle=$(du -sb "$out" | cut -f1)
log "bundle $((bundle / 1048576)) MiB + working tree $((tree / 1048576)) MiB = $(((bundle + tree) / 1048576)) MiB (limit 64 MiB)"
du -b "$out"/bin/* "$out"/kubernetes-core.tar.gz | awk '{printf "  %6.1f MiB  %s\n", $1/1048576, $2}'
