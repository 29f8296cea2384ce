#!/usr/bin/env bash
# `make test-newest`: the default demo, the secrets tests and the unit tests on the newest
# stack the collection accepts: Python 3.13, the newest ansible-core 2.21.x PyPI serves for it, and
# kubernetes.core 6.6.0 (from kubernetes.core 6.3.0 on, an inline kubeconfig is masked by AnsibleK8SModule
# instead of by the argument spec: issue 12). `make test` runs the rest on .venv (Python 3.11, ansible-core
# 2.19, kubernetes.core 6.2.0), so both ways of masking are tested.
#
# .venv-newest is made once and reused. kubernetes.core comes from the `ansible` package on PyPI (Galaxy is
# unreachable on our machines): only its ansible_collections/kubernetes/core is extracted from the wheel into
# the venv's site-packages, where ansible-core finds it (the whole package is ~470 MB installed), with
# ansible.posix, whose json callback the tests read results with.
#
# Usage: bash tests/newest.sh [extra pytest options]. GPUOPS_PYTHON313 names the interpreter to use; by
# default python3.13 on PATH, then pyenv's newest 3.13.x.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv-newest"
ansible_core_spec="ansible-core>=2.21,<2.22"
# The newest kubernetes.core PyPI serves, inside the `ansible` package of that version.
kubernetes_core_version=6.6.0
ansible_package_version=14.5.0
wheel_cache="$HOME/.cache/gpuops-newest"
integration_tests=(tests/integration/test_safety_secrets.py
                   tests/integration/test_gpu_demo.py::test_default_topology_walkthrough)

started=$SECONDS
log() { printf '[newest %3ds] %s\n' $((SECONDS - started)) "$*"; }
die() { printf '[newest] ERROR: %s\n' "$*" >&2; exit 1; }

# 1. Python 3.13: a pyenv shim named python3.13 exists even where it cannot run, so each candidate is run.
find_python313() {
  local candidates=() candidate
  [ -n "${GPUOPS_PYTHON313:-}" ] && candidates+=("$GPUOPS_PYTHON313")
  candidates+=(python3.13)
  if command -v pyenv >/dev/null; then
    while IFS= read -r candidate; do candidates+=("$candidate"); done \
      < <(printf '%s\n' "$(pyenv root)"/versions/3.13.*/bin/python3.13 | sort -rV)
  fi
  for candidate in "${candidates[@]}"; do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 13); print(sys.executable)' 2>/dev/null; then
      return 0
    fi
  done
  return 1
}
python313=$(find_python313) || die "no Python 3.13 found (tried \$GPUOPS_PYTHON313, python3.13 on PATH, \$(pyenv root)/versions/3.13.*): install one, e.g. 'pyenv install 3.13', or set GPUOPS_PYTHON313"

# 2. The venv, remade when the interpreter or what it must hold changes.
stamp="$python313 | $ansible_core_spec | ansible==$ansible_package_version | $(cat "$root/requirements.txt")"
site=""
if [ ! -f "$venv/.installed" ] || [ "$(cat "$venv/.installed")" != "$stamp" ]; then
  log "creating ${venv#"$root"/} with $python313 and installing $ansible_core_spec, requirements.txt, pytest from PyPI (first time: about a minute)"
  rm -rf "$venv"
  "$python313" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$ansible_core_spec" -r "$root/requirements.txt" \
    "pytest>=8" "pytest-timeout>=2.3" "cryptography>=42"
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  wheel="$wheel_cache/ansible-$ansible_package_version-py3-none-any.whl"
  if [ ! -s "$wheel" ]; then
    log "downloading the ansible $ansible_package_version wheel (51 MB) from PyPI into $wheel_cache"
    "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      --dest "$wheel_cache" "ansible==$ansible_package_version"
  fi
  log "extracting kubernetes.core (and ansible.posix, for the tests' json callback) from ${wheel##*/} into the venv's site-packages"
  "$venv/bin/python" - "$wheel" "$site" "kubernetes/core=$kubernetes_core_version" "ansible/posix" <<'EOF'
import json
import sys
import zipfile

wheel, site = sys.argv[1:3]
with zipfile.ZipFile(wheel) as archive:
    for collection in sys.argv[3:]:
        path, _, expected = collection.partition("=")
        prefix = "ansible_collections/%s/" % path
        version = json.loads(archive.read(prefix + "MANIFEST.json"))["collection_info"]["version"]
        if expected and version != expected:
            sys.exit("%s carries %s %s, not %s" % (wheel, path, version, expected))
        archive.extractall(site, [name for name in archive.namelist() if name.startswith(prefix)])
EOF
  printf '%s' "$stamp" >"$venv/.installed"
fi

# 3. What ansible will use: this checkout as gpuops.scheduling (ansible.cfg: .collections), kubernetes.core
#    6.6.0 and nothing else of that name earlier on the collections path.
export PATH="$venv/bin:$PATH" ANSIBLE_CONFIG="$root/ansible.cfg"
cd "$root"
[ -e .collections/ansible_collections/gpuops/scheduling ] || die ".collections/ansible_collections/gpuops/scheduling missing: run 'make setup' first"
found=$(ansible-galaxy collection list kubernetes.core --format json 2>/dev/null \
        | python3 -c 'import json, sys; print(" ".join(c["kubernetes.core"]["version"] for c in json.load(sys.stdin).values()))')
[ "$found" = "$kubernetes_core_version" ] \
  || die "ansible finds kubernetes.core '$found', expected $kubernetes_core_version alone (look in ~/.ansible/collections)"
log "$("$venv/bin/python" --version), $(ansible --version | sed -n 1p), kubernetes.core $found"

# 4. Run. The integration tests start the simulated cluster if it is not up (GPUOPS_SIM_* honoured).
# Two pytest runs: tests/unit and tests/integration both have a test_gpu_demo.py (no packages).
status=0
log "pytest tests/unit $*"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit "$@" || status=$?
log "pytest ${integration_tests[*]} $*"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "${integration_tests[@]}" "$@" || status=$?
log "done (exit $status)"
exit "$status"
