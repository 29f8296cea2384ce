#!/usr/bin/env bash
# `make browser`: a headless Chromium for the summary page's browser test (tests/integration/test_fleet_summary.py).
# Installs Debian's `chromium` package when no chromium is on PATH, and says what it does. Root, or sudo, is needed
# only for that install. GPUOPS_CHROMIUM names another binary and skips the install.
set -euo pipefail

log() { printf '[browser] %s\n' "$*"; }

if [ -n "${GPUOPS_CHROMIUM:-}" ]; then
  log "using GPUOPS_CHROMIUM=$GPUOPS_CHROMIUM"
  exit 0
fi
for name in chromium chromium-browser; do
  if command -v "$name" >/dev/null 2>&1; then
    log "found $(command -v "$name"): $("$name" --version 2>/dev/null | head -1)"
    exit 0
  fi
done

if ! command -v apt-get >/dev/null 2>&1; then
  log "no chromium on PATH and no apt-get: install Chromium, or set GPUOPS_CHROMIUM to its binary" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo -n)
else
  log "no chromium on PATH, and installing it needs root (or sudo): apt-get install chromium" >&2
  exit 1
fi
log "no chromium on PATH: installing Debian's chromium package (apt-get update, apt-get install -y chromium; ~2 minutes)"
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
log "installed $(command -v chromium): $(chromium --version 2>/dev/null | head -1)"
