#!/usr/bin/env bash
# `make pushgateway`: Debian's prometheus-pushgateway for the metrics test (tests/integration/test_metrics.py), which
# starts it on 127.0.0.1 itself (the package's own service is not used). Installed when missing; root or sudo is
# needed only for that. GPUOPS_PUSHGATEWAY names another binary and skips the install.
set -euo pipefail

log() { printf '[pushgateway] %s\n' "$*"; }

# shellcheck source=as_root.sh
. "$(dirname "$0")/as_root.sh"
given_or_locked pushgateway GPUOPS_PUSHGATEWAY
for name in prometheus-pushgateway pushgateway; do
  if command -v "$name" >/dev/null 2>&1; then
    log "found $(command -v "$name")"
    exit 0
  fi
done
can_install prometheus-pushgateway
started=$SECONDS
# The package's service must not start: it would listen on every address (the test runs its own on 127.0.0.1).
apt_install_no_service prometheus-pushgateway
log "installed prometheus-pushgateway in $((SECONDS - started)) s"
