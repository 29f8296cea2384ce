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
# shellcheck source=as_root.sh
. "$(dirname "$0")/as_root.sh"
as_root=()   # set by as_root_for
as_root_for prometheus-pushgateway
started=$SECONDS
# The package's service must not start: it would listen on every address (the test runs its own on 127.0.0.1).
# policy-rc.d refuses every service start during the install (invoke-rc.d's documented switch), unless one is there.
export DEBIAN_FRONTEND=noninteractive
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | "${as_root[@]}" tee /usr/sbin/policy-rc.d >/dev/null
  "${as_root[@]}" chmod +x /usr/sbin/policy-rc.d
  trap '"${as_root[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
fi
"${as_root[@]}" apt-get install -y --no-install-recommends prometheus-pushgateway >/dev/null \
  || { "${as_root[@]}" apt-get update -qq && "${as_root[@]}" apt-get install -y --no-install-recommends prometheus-pushgateway >/dev/null; }
log "installed prometheus-pushgateway in $((SECONDS - started)) s"
