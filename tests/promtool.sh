#!/usr/bin/env bash
# `make promtool`: promtool, from Debian's prometheus package, for the test that checks the alerting rules the docs show
# (tests/unit/docs/test_prometheus_rule.py). Installed when missing; root or sudo is needed only for that. The
# package's Prometheus service is kept from starting. GPUOPS_PROMTOOL names another binary and skips the install.
set -euo pipefail

log() { printf '[promtool] %s\n' "$*"; }

# shellcheck source=as_root.sh
. "$(dirname "$0")/as_root.sh"
given_or_locked promtool GPUOPS_PROMTOOL
if command -v promtool >/dev/null 2>&1; then
  log "found $(command -v promtool)"
  exit 0
fi
can_install prometheus
started=$SECONDS
# Prometheus itself must not start: it would listen on every address; only its promtool is used.
apt_install_no_service prometheus
log "installed prometheus (for promtool) in $((SECONDS - started)) s"
