#!/usr/bin/env bash
# `make pushgateway`: Debian's prometheus-pushgateway for the metrics test (tests/integration/test_metrics.py), which
# starts it on 127.0.0.1 itself (the package's own service is not used). Installed when missing; root or sudo is
# needed only for that. GPUOPS_PUSHGATEWAY names another binary and skips the install.
set -euo pipefail

log() { printf '[pushgateway] %s\n' "$*"; }

if [ -n "${GPUOPS_PUSHGATEWAY:-}" ]; then
  log "using GPUOPS_PUSHGATEWAY=$GPUOPS_PUSHGATEWAY"
  exit 0
fi
mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}"
exec 9>"${XDG_CACHE_HOME:-$HOME/.cache}/gpuops-pushgateway.lock"
flock 9
for name in prometheus-pushgateway pushgateway; do
  if command -v "$name" >/dev/null 2>&1; then
    log "found $(command -v "$name")"
    exit 0
  fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  log "no prometheus-pushgateway on PATH and no apt-get: install it, or set GPUOPS_PUSHGATEWAY to its binary" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo -n)
else
  log "installing prometheus-pushgateway needs root (or sudo): apt-get install prometheus-pushgateway" >&2
  exit 1
fi
started=$SECONDS
# The package's service must not start (the test runs its own on 127.0.0.1): policy-rc.d refuses it during the install.
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get install -y --no-install-recommends prometheus-pushgateway >/dev/null \
  || { "${as_root[@]}" apt-get update -qq && "${as_root[@]}" apt-get install -y --no-install-recommends prometheus-pushgateway >/dev/null; }
log "installed prometheus-pushgateway in $((SECONDS - started)) s"
