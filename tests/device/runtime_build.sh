#!/usr/bin/env bash
# The real container runtime for `walkthrough.sh --real-runtime`, built from Go modules (the module proxy serves them)
# OUTSIDE the repository, in ${GPUOPS_DEVICE_CACHE:-~/.cache/gpuops-device}/runtime-<versions>/bin: containerd v2,
# its runc shim, ctr, runc, crictl, the CNI plugins loopback/dummy/host-local, NVIDIA's nvidia-cdi-hook and
# nvidia-container-runtime, and the pause program (Kubernetes' build/pause/linux/pause.c, static). Nothing of it is
# committed, and neither `make test` nor CI runs this. Prints the folder as its last line.
#
# Why each build is as it is (the GPU machine is Ubuntu 24.04 with a newer glibc than this Debian 12; nothing there
# can be installed):
#   runc       cgo is required (nsenter is C); built static and WITHOUT the seccomp tag (no libseccomp headers here):
#              the kubelet asks for no seccomp profile unless a pod does (seccompDefault is off), and a spec that
#              names one fails to start with "seccomp: config provided but seccomp not supported"
#   containerd CGO_ENABLED=0 (the btrfs snapshotter, the only cgo part, is left out: overlayfs is used); the
#              devmapper and zfs snapshotters and tracing left out too (build tags), to carry less
#   nvidia-*   cgo (NVML is dlopen'ed through go-nvml), linked against this glibc (older, so it runs there)
set -euo pipefail
export GOFLAGS=-trimpath GOTOOLCHAIN=local
CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.5.3
CNI_PLUGINS_VERSION=v1.10.0
NVIDIA_TOOLKIT_VERSION=v1.20.2
CRI_TOOLS_VERSION=v1.37.0
# The pause program comes from the Kubernetes sources the simulated cluster builds from.
# shellcheck source=../sim/versions.env
. "$(dirname "$0")/../sim/versions.env"
cache=${GPUOPS_DEVICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuops-device}
dest="$cache/runtime-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-cni-$CNI_PLUGINS_VERSION-toolkit-$NVIDIA_TOOLKIT_VERSION-crictl-$CRI_TOOLS_VERSION"
bin="$dest/bin"
mkdir -p "$bin"
started=$SECONDS
log() { printf '[runtime-build %4ds] %s\n' $((SECONDS - started)) "$*" >&2; }
# build NAME CGO TAGS LDFLAGS PACKAGE@VERSION: go install into $bin unless NAME is there.
build() {
  local name=$1 cgo=$2 tags=$3 ldflags=$4 package=$5
  [ -x "$bin/$name" ] && return 0
  log "$name: $package (CGO_ENABLED=$cgo, tags '$tags')"
  GOBIN="$bin" CGO_ENABLED=$cgo nice -n 10 go install -tags "$tags" -ldflags "-s -w $ldflags" "$package"
}
ctrd=github.com/containerd/containerd/v2
ctrd_x="-X $ctrd/version.Version=$CONTAINERD_VERSION -X $ctrd/version.Package=github.com/containerd/containerd"
build runc 1 "urfave_cli_no_docs netgo osusergo" "-extldflags -static -X main.gitCommit=$RUNC_VERSION" \
  "github.com/opencontainers/runc@$RUNC_VERSION"
build containerd-shim-runc-v2 0 "urfave_cli_no_docs no_grpc" "$ctrd_x" "$ctrd/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
for plugin in loopback dummy; do
  build "$plugin" 0 "" "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" \
    "github.com/containernetworking/plugins/plugins/main/$plugin@$CNI_PLUGINS_VERSION"
done
build host-local 0 "" "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" \
  "github.com/containernetworking/plugins/plugins/ipam/host-local@$CNI_PLUGINS_VERSION"
toolkit=github.com/NVIDIA/nvidia-container-toolkit
for tool in nvidia-cdi-hook nvidia-container-runtime; do
  build "$tool" 1 "" "-X $toolkit/internal/info.version=${NVIDIA_TOOLKIT_VERSION#v}" "$toolkit/cmd/$tool@$NVIDIA_TOOLKIT_VERSION"
done
build crictl 0 "" "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION" "sigs.k8s.io/cri-tools/cmd/crictl@$CRI_TOOLS_VERSION"
# Only what the walk uses: overlayfs and CRI; no btrfs, devmapper, zfs snapshotter, no OpenTelemetry tracing.
slim="urfave_cli_no_docs no_btrfs no_devmapper no_zfs no_tracing"
build ctr 0 "$slim" "$ctrd_x" "$ctrd/cmd/ctr@$CONTAINERD_VERSION"
build containerd 0 "$slim" "$ctrd_x" "$ctrd/cmd/containerd@$CONTAINERD_VERSION"
if [ ! -x "$bin/pause" ]; then
  log "pause: k8s.io/kubernetes@$KUBERNETES_VERSION build/pause/linux/pause.c, static"
  GOFLAGS=-mod=mod go mod download "k8s.io/kubernetes@$KUBERNETES_VERSION" >/dev/null 2>&1 || true
  pause_c="$(go env GOMODCACHE)/k8s.io/kubernetes@$KUBERNETES_VERSION/build/pause/linux/pause.c"
  cc -Os -static -s -DVERSION="$KUBERNETES_VERSION" -o "$bin/pause" "$pause_c"
fi
log "done: $(du -sh "$bin" | cut -f1)"
echo "$dest"
