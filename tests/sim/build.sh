#!/usr/bin/env bash
# Builds the simulated cluster's real control plane from Go modules (no prebuilt binary can be
# downloaded here): etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and the kubelet.
# Binaries land in a cache outside the checkout, keyed by version, so clean clones and CI reuse them.
# Prints the directory holding the binaries on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

cache_root=${GPUOPS_SIM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuops-sim}
k8s_bin="$cache_root/kubernetes-$KUBERNETES_VERSION/bin"
etcd_bin="$cache_root/etcd-$ETCD_VERSION/bin"
k8s_tools=(kube-apiserver kube-scheduler kube-controller-manager kubectl kubelet)

log() { printf '[sim-build %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

export CGO_ENABLED=0 GOFLAGS=-mod=mod

build_etcd() {
  [ -x "$etcd_bin/etcd" ] && return
  log "building etcd $ETCD_VERSION from go.etcd.io/etcd/server/v3 (cold build, a few minutes)"
  local src="$cache_root/src/etcd-$ETCD_VERSION"
  rm -rf "$src" && mkdir -p "$src" "$etcd_bin"
  # The etcd server module replaces its sibling modules with local paths; replaces only count in the
  # main module, so a wrapper module requiring the published versions builds it.
  (cd "$src" && go mod init gpuops.local/etcd-build >/dev/null 2>&1 \
     && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" \
     && go build -trimpath -o "$etcd_bin/etcd.tmp" go.etcd.io/etcd/server/v3) >&2
  mv "$etcd_bin/etcd.tmp" "$etcd_bin/etcd"
  log "etcd ready: $etcd_bin/etcd"
}

build_kubernetes() {
  local missing=0 tool
  for tool in "${k8s_tools[@]}"; do [ -x "$k8s_bin/$tool" ] || missing=1; done
  [ "$missing" = 0 ] && return
  local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  local staging_version="v0.${KUBERNETES_VERSION#v1.}"
  local src="$cache_root/src/kubernetes-$KUBERNETES_VERSION"
  log "building ${k8s_tools[*]} $KUBERNETES_VERSION (cold build: 10-30 min on 2 cores)"
  rm -rf "$src" && mkdir -p "$src" "$k8s_bin"
  log "downloading k8s.io/kubernetes@$KUBERNETES_VERSION through the Go module proxy"
  local upstream_gomod
  upstream_gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  # k8s.io/kubernetes replaces its staging modules with ./staging/...; the wrapper module replaces
  # each of them (the list is read from upstream, not typed) with its published v0.Y.Z.
  {
    echo "module gpuops.local/kubernetes-build"
    echo
    grep -E '^go [0-9]' "$upstream_gomod"
    grep -E '^godebug' "$upstream_gomod" || true
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    sed -nE 's#^[[:space:]]*(k8s\.io/[a-z0-9-]+) => \./staging/.*#replace \1 => \1 '"$staging_version"'#p' "$upstream_gomod"
  } > "$src/go.mod"
  log "resolving dependencies"
  (cd "$src" && go mod download k8s.io/kubernetes && go get "k8s.io/kubernetes@$KUBERNETES_VERSION") >&2
  local pkgs=() ldflags="-s -w"
  for tool in "${k8s_tools[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$tool"); done
  for var in "gitVersion=$KUBERNETES_VERSION" gitMajor=1 "gitMinor=$minor" gitTreeState=clean; do
    ldflags+=" -X k8s.io/component-base/version.$var -X k8s.io/client-go/pkg/version.$var"
  done
  log "compiling about 2,500 packages and linking ${#k8s_tools[@]} binaries (progress every 250 packages)"
  # -v names each package as it is compiled: count them so a long cold build shows it is alive.
  (cd "$src" && go build -v -trimpath -ldflags "$ldflags" -o "$k8s_bin/" "${pkgs[@]}" 2>&1 \
     | awk -v start="$(date +%s)" 'NR % 250 == 0 { printf "[sim-build] %d packages compiled (%d s)\n", NR, systime() - start; fflush() }
                                    /^(#|go: |.*\.go:[0-9]+)/ { print; fflush() }') >&2
  for tool in "${k8s_tools[@]}"; do
    [ -x "$k8s_bin/$tool" ] || { log "build failed: $k8s_bin/$tool missing"; exit 1; }
  done
  log "kubernetes binaries ready in $k8s_bin"
}

mkdir -p "$cache_root"
# One build at a time (parallel test workers may each ask for the binaries): the others wait, then reuse them.
exec 9>"$cache_root/.build.lock"
flock 9
start=$(date +%s)
build_etcd
build_kubernetes
log "all binaries present ($(( $(date +%s) - start )) s)"
echo "$k8s_bin:$etcd_bin"
