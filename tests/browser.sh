#!/usr/bin/env bash
# `make browser`: a headless Chromium for the summary page's browser test (tests/integration/test_fleet_summary.py).
# Installs Debian's `chromium` package when no chromium is on PATH, and says what it does (and how long it took). Root,
# or sudo, is needed only for that install. GPUOPS_CHROMIUM names another binary and skips the install.
set -euo pipefail

log() { printf '[browser] %s\n' "$*"; }

# shellcheck source=as_root.sh
. "$(dirname "$0")/as_root.sh"
given_or_locked browser GPUOPS_CHROMIUM
for name in chromium chromium-browser; do
  if command -v "$name" >/dev/null 2>&1; then
    log "found $(command -v "$name"): $("$name" --version 2>/dev/null | head -1)"
    exit 0
  fi
done

can_install chromium
# The packages are kept in ~/.cache/gpuops-browser/<distribution>-<architecture>/chromium-<version>/ and installed
# from there the next time (no index update, no download): the newest kept version for this distribution.
started=$SECONDS
release=$(. /etc/os-release && echo "${ID}-${VERSION_CODENAME:-$VERSION_ID}")-$(dpkg --print-architecture)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gpuops-browser/$release"
kept=$(find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'chromium-*' 2>/dev/null | sort -V | tail -1 || true)
kept=${kept:+$kept/}
export DEBIAN_FRONTEND=noninteractive
if [ -n "$kept" ] && as_root apt-get install -o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends "$kept"*.deb >/dev/null 2>&1; then
  log "installed $(command -v chromium) from the packages kept in $kept ($((SECONDS - started)) s): $(chromium --version 2>/dev/null | head -1)"
  exit 0
fi
log "no chromium on PATH: installing Debian's chromium package (apt-get update, apt-get install -y chromium; ~2 minutes)"
as_root apt-get update -o DPkg::Lock::Timeout=600 -qq
download=$(mktemp -d)
mkdir -p "$download/partial"
# Downloaded into a folder of its own, so that exactly the packages chromium needs on this machine are kept.
as_root apt-get install -o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends --download-only -o Dir::Cache::archives="$download" chromium >/dev/null
as_root apt-get install -o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends "$download"/*.deb >/dev/null
version=$(dpkg-query -W -f '${Version}' chromium)
mkdir -p "$cache/chromium-$version"
cp "$download"/*.deb "$cache/chromium-$version/"
rm -rf "$download"
log "installed $(command -v chromium) in $((SECONDS - started)) s: $(chromium --version 2>/dev/null | head -1); packages kept in $cache/chromium-$version"
