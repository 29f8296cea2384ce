# shellcheck shell=bash
# Sourced by the scripts that apt-get install a Debian package the tests need (browser.sh, pushgateway.sh).

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
