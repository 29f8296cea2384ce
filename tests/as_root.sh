# shellcheck shell=bash
# Sourced by the scripts that apt-get install a Debian package the tests need (browser.sh, pushgateway.sh, promtool.sh).

# given_or_locked NAME VARIABLE: exits when the environment variable VARIABLE names the binary to use (nothing is
# installed); else takes the install lock ~/.cache/gpuops-NAME.lock, held until the script exits: one install at a time
# (CI starts one beside its first stages, and a make target asks again), the second waits and then finds the first's.
given_or_locked() {
  if [ -n "${!2:-}" ]; then
    log "using $2=${!2}"
    exit 0
  fi
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}"
  mkdir -p "$cache"
  exec 9>"$cache/gpuops-$1.lock"
  flock 9
}

# can_install PACKAGE: returns when apt-get can install it here (as root, or through `sudo -n`); otherwise says what
# to install by hand and exits.
can_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    log "no $1 found and no apt-get: install $1 yourself" >&2
    exit 1
  fi
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
    log "installing $1 needs root (or sudo): apt-get install $1" >&2
    exit 1
  fi
}

# as_root COMMAND...: runs it as root: directly when we are root, else through `sudo -n`.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  else
    sudo -n "$@"
  fi
}

# apt_install_no_service PACKAGE: apt-get install PACKAGE (apt-get update first only if the install fails) with every
# service start refused: a Debian server package starts its service on install, listening on every address, and the
# tests start their own on 127.0.0.1. policy-rc.d (invoke-rc.d's documented switch) refuses the starts; one already
# there is left as it is, and ours is removed when the calling script exits.
apt_install_no_service() {
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod +x /usr/sbin/policy-rc.d
    trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  # CI installs Chromium beside the unit tests: wait for dpkg's lock rather than fail on it.
  local wait_for_dpkg=(-o DPkg::Lock::Timeout=600)
  as_root apt-get install "${wait_for_dpkg[@]}" -y --no-install-recommends "$1" >/dev/null \
    || { as_root apt-get update -qq \
         && as_root apt-get install "${wait_for_dpkg[@]}" -y --no-install-recommends "$1" >/dev/null; }
}
