#!/usr/bin/env bash
# `make test`: runs the given make targets one after another, prints each one's time, stops at the first that fails,
# and ends with the table of stage times (CI's log shows where its minutes went).
# Usage: bash tests/stages.sh TARGET...
set -uo pipefail
started=$SECONDS
times=()
report() {
  printf '[test %4ds] stage times:\n' $((SECONDS - started))
  printf '  %s\n' "${times[@]}"
  printf '[test %4ds] total\n' $((SECONDS - started))
}
for target in "$@"; do
  began=$SECONDS
  printf '[test %4ds] %s\n' $((SECONDS - started)) "$target"
  "${MAKE:-make}" --no-print-directory "$target"
  status=$?
  times+=("$(printf '%-12s %5d s  %s' "$target" $((SECONDS - began)) "$([ "$status" -eq 0 ] && echo passed || echo "FAILED ($status)")")")
  printf '[test %4ds] %s: %d s\n' $((SECONDS - started)) "$target" $((SECONDS - began))
  if [ "$status" -ne 0 ]; then
    report
    exit "$status"
  fi
done
report
