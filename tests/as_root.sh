# shellcheck shell=bash
# Sourced by the scripts that apt-get install a Debian package the tests need (browser.sh, pushgateway.sh).
# as_root_for PACKAGE: sets the array as_root to the prefix that runs a command as root (nothing when we are root,
# `sudo -n` where sudo is), or says what to install by hand and exits.
# shellcheck disable=SC2034  # as_root is the calling script's: it runs its commands with it
as_root_for() {
  if ! command -v apt-get >/dev/null 2>&1; then
    log "no $1 found and no apt-get: install $1 yourself" >&2
    exit 1
  fi
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo -n)
  else
    log "installing $1 needs root (or sudo): apt-get install $1" >&2
    exit 1
  fi
}
