#!/usr/bin/env bash
# `make setup`: the development venv, .venv. Made once per set of requirements, in
# ~/.cache/gpuops-venv/<key> (key: the Python version, the machine, requirements.txt and requirements-dev.txt), and
# linked as .venv: a fresh clone on a machine that made it before is set up at once (installing it from PyPI takes
# minutes, most of it unpacking). A .venv that is a folder of its own (made before this) is updated in place instead.
# GPUOPS_PYTHON names the interpreter (default python3).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${GPUOPS_PYTHON:-python3}
venv="$root/.venv"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gpuops-venv"
started=$SECONDS
log() { printf '[setup] %s\n' "$*"; }

install() {
  "$1/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$1/bin/python" -m pip install -q --disable-pip-version-check -r "$root/requirements-dev.txt"
}

if [ -d "$venv" ] && [ ! -L "$venv" ]; then
  log "updating .venv (a folder of its own) from requirements-dev.txt"
  install "$venv"
  touch "$venv/.installed"
  log ".venv updated in $((SECONDS - started)) s"
  exit 0
fi

key=$({ "$python" -c 'import platform, sys; print(sys.version, platform.machine())'
        cat "$root/requirements.txt" "$root/requirements-dev.txt"; } | sha256sum | cut -c1-16)
target="$cache/venv-$key"
mkdir -p "$cache"
exec 9>"$target.lock"
flock 9   # one checkout makes it, the others wait and reuse it
if [ -f "$target/.installed" ]; then
  how="reused"
  touch "$target/.installed"   # newer than this checkout's requirements files: make sees it up to date
else
  log "creating the venv for these requirements in $target, from PyPI (the first time: a few minutes)"
  rm -rf "$target"
  "$python" -m venv "$target"
  install "$target"
  touch "$target/.installed"
  how="created"
fi
ln -sfn "$target" "$venv"
log ".venv -> $target ($how, $((SECONDS - started)) s)"
