#!/usr/bin/env bash
# The supported stacks, each tested in its own venv (.venvs/<name>/): Python x ansible-core x kubernetes.core x
# the kubernetes client. `make test-newest` runs `newest` (also part of `make test`), `make test-matrix` runs
# every combination below. Each runs the unit tests and a focused integration set against the simulated
# cluster: the default demo, check mode, the secrets tests (K8S_AUTH_* env, inline kubeconfig dicts, every API
# module in process and shipped), the pre-flight's bad-input cases, and the jobs run through ansible-runner as
# AWX runs them. The README's table of supported versions is this table; galaxy.yml, meta/runtime.yml and
# requirements.txt declare its lowest and newest.
#
# kubernetes.core comes from the `ansible` package on PyPI (Galaxy is unreachable on our machines): only its
# ansible_collections/kubernetes/core (and ansible.posix, whose json callback the tests read results with) is
# extracted from the wheel into the venv's site-packages, where ansible-core finds it; the whole package is
# ~470 MB installed. The wheels are kept in ~/.cache/gpuops-newest. Venvs are made once and remade when what they
# must hold changes.
#
# Usage: bash tests/stack.sh [--setup-only] [--sanity] NAME... | all   [-- extra pytest options]
# --sanity: ansible-test sanity too (tests/sanity.sh with the combination's ansible-test and Python).
# GPUOPS_PYTHON311 / GPUOPS_PYTHON312 / GPUOPS_PYTHON313 name an interpreter; by default pythonX.Y on PATH,
# then pyenv's newest X.Y.*.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
wheel_cache="$HOME/.cache/gpuops-newest"

# name | Python | ansible-core | `ansible` wheel = the kubernetes.core it carries | kubernetes client
# (the newest of each series PyPI serves, unless pinned)
combinations=(
  "lowest   | 3.11 | ansible-core==2.19.0     | 12.0.0=6.1.0 | kubernetes==24.2.0"
  "core2.19 | 3.11 | ansible-core>=2.19,<2.20 | 12.3.0=6.2.0 | kubernetes"
  "core2.20 | 3.12 | ansible-core>=2.20,<2.21 | 13.8.0=6.4.0 | kubernetes"
  "newest   | 3.13 | ansible-core>=2.21,<2.22 | 14.5.0=6.6.0 | kubernetes"
)
# What the tests need besides the collection's requirements (grpcio: the PodResources unit tests; prometheus-client:
# the metrics tests read the textfile with its parser; lxml: the JUnit test validates against the schema).
test_packages=("ansible-runner>=2.4" "grpcio>=1.60" "pytest>=8" "pytest-timeout>=2.3" "pytest-xdist>=3.6" "cryptography>=42" "prometheus-client>=0.20" "lxml>=5")
integration_tests=(tests/integration/test_safety_secrets.py
                   tests/integration/test_gpu_demo.py::test_default_topology_walkthrough
                   tests/integration/test_gpu_demo.py::test_check_mode_creates_nothing
                   tests/integration/test_safety_bad_input.py::test_refused_before_any_pod_with_a_clear_error
                   tests/integration/test_awx_runner.py)

started=$SECONDS
log() { printf '[stack %4ds] %s\n' $((SECONDS - started)) "$*"; }
die() { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

# A pyenv shim named pythonX.Y exists even where it cannot run, so each candidate is run.
find_python() {
  local minor=$1 override candidates=() candidate
  override="GPUOPS_PYTHON${minor/./}"
  [ -n "${!override:-}" ] && candidates+=("${!override}")
  candidates+=("python$minor")
  if command -v pyenv >/dev/null; then
    while IFS= read -r candidate; do candidates+=("$candidate"); done \
      < <(printf '%s\n' "$(pyenv root)"/versions/"$minor".*/bin/python"$minor" | sort -rV)
  fi
  for candidate in "${candidates[@]}"; do
    if "$candidate" -c "import sys; assert '%d.%d' % sys.version_info[:2] == '$minor'; print(sys.executable)" 2>/dev/null; then
      return 0
    fi
  done
  return 1
}

# make_venv NAME PYTHON CORE_SPEC ANSIBLE_VERSION KUBERNETES_CORE_VERSION CLIENT_SPEC
make_venv() {
  local name=$1 python=$2 core_spec=$3 ansible_version=$4 collection_version=$5 client_spec=$6
  local venv="$root/.venvs/$name" stamp site wheel
  stamp="$python | $core_spec | ansible==$ansible_version | $client_spec | ${test_packages[*]} | $(cat "$root/requirements.txt")"
  if [ -f "$venv/.installed" ] && [ "$(cat "$venv/.installed")" = "$stamp" ]; then
    return 0
  fi
  log "$name: creating .venvs/$name with $python, installing $core_spec, $client_spec, requirements.txt, ansible-runner, grpcio, pytest from PyPI"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$core_spec" -r "$root/requirements.txt" "$client_spec" \
    "${test_packages[@]}"
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  wheel="$wheel_cache/ansible-$ansible_version-py3-none-any.whl"
  if [ ! -s "$wheel" ]; then
    log "$name: downloading the ansible $ansible_version wheel (~50 MB) from PyPI into $wheel_cache"
    "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      --dest "$wheel_cache" "ansible==$ansible_version"
  fi
  log "$name: extracting kubernetes.core (and ansible.posix) from ${wheel##*/}"
  "$venv/bin/python" - "$wheel" "$site" "kubernetes/core=$collection_version" "ansible/posix" <<'EOF'
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
}

# run_combination NAME [pytest options]: set up and test one combination; its exit status.
run_combination() {
  local name=$1 line fields python venv found status=0 began=$SECONDS
  shift
  for line in "${combinations[@]}"; do
    IFS='|' read -ra fields <<<"${line// /}"
    [ "${fields[0]}" = "$name" ] && break
    fields=()
  done
  [ ${#fields[@]} -eq 5 ] || die "no combination named '$name' (known: $(printf '%s ' "${combinations[@]%%|*}"))"
  local minor=${fields[1]} core_spec=${fields[2]} ansible_version=${fields[3]%%=*} collection_version=${fields[3]#*=}
  local client_spec=${fields[4]}
  python=$(find_python "$minor") || die "no Python $minor found (tried \$GPUOPS_PYTHON${minor/./}, python$minor on PATH, \$(pyenv root)/versions/$minor.*): install one, e.g. 'pyenv install $minor'"
  # One maker of a venv at a time (CI makes the newest one beside the first stages, then `make test` asks again).
  mkdir -p "$root/.venvs"
  exec 8>"$root/.venvs/.$name.lock"
  flock 8
  make_venv "$name" "$python" "$core_spec" "$ansible_version" "$collection_version" "$client_spec"
  flock -u 8
  venv="$root/.venvs/$name"
  [ -z "$setup_only" ] || return 0

  # What ansible will use: this checkout as gpuops.scheduling (ansible.cfg: .collections), the expected
  # kubernetes.core and nothing else of that name earlier on the collections path.
  found=$(PATH="$venv/bin:$PATH" ANSIBLE_CONFIG="$root/ansible.cfg" ansible-galaxy collection list kubernetes.core --format json 2>/dev/null \
          | "$venv/bin/python" -c 'import json, sys; print(" ".join(c["kubernetes.core"]["version"] for c in json.load(sys.stdin).values()))')
  [ "$found" = "$collection_version" ] \
    || die "$name: ansible finds kubernetes.core '$found', expected $collection_version alone (look in ~/.ansible/collections)"
  log "$name: $("$venv/bin/python" --version), $(PATH="$venv/bin:$PATH" ansible --version | sed -n 1p), kubernetes.core $found, kubernetes $("$venv/bin/python" -c 'import kubernetes; print(kubernetes.__version__)')"

  # Two pytest runs: tests/unit and tests/integration both have a test_gpu_demo.py (no packages).
  # The integration tests start the simulated cluster if it is not up (GPUOPS_SIM_* honoured).
  (
    export PATH="$venv/bin:$PATH" ANSIBLE_CONFIG="$root/ansible.cfg"
    cd "$root"
    rc=0
    log "$name: pytest tests/unit $*"
    "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit "$@" || rc=$?
    log "$name: pytest ${integration_tests[*]} $*"
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -n auto "${integration_tests[@]}" "$@" || rc=$?
    if [ -n "$sanity" ]; then
      log "$name: ansible-test sanity (Python $minor)"
      GPUOPS_SANITY_VENV="$venv" GPUOPS_SANITY_PYTHON="$minor" bash tests/sanity.sh || rc=$?
    fi
    exit "$rc"
  ) || status=$?
  log "$name: $([ "$status" -eq 0 ] && echo passed || echo "FAILED (exit $status)") in $((SECONDS - began)) s"
  return "$status"
}

[ -e "$root/.collections/ansible_collections/gpuops/scheduling" ] || die ".collections/ansible_collections/gpuops/scheduling missing: run 'make setup' first"
setup_only="" sanity=""
[ "${1:-}" = "--setup-only" ] && { setup_only=1; shift; }
[ "${1:-}" = "--sanity" ] && { sanity=1; shift; }
names=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do names+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#names[@]} -gt 0 ] || die "usage: bash tests/stack.sh NAME... | all [-- pytest options]"
if [ "${names[*]}" = "all" ]; then
  names=()
  for line in "${combinations[@]}"; do names+=("${line%%|*}"); done
  names=("${names[@]// /}")
fi

summary=() overall=0
for name in "${names[@]}"; do
  began=$SECONDS
  if run_combination "$name" "$@"; then result=passed; else result=FAILED; overall=1; fi
  summary+=("$(printf '%-9s %-7s %4d s' "$name" "$result" $((SECONDS - began)))")
done
log "summary:"
printf '  %s\n' "${summary[@]}"
exit "$overall"
