#!/usr/bin/env bash
# README's test command: installs what is missing (scripts/setup.sh), builds, and runs the whole
# suite (Nx's doctests against the backend + the project's tests) once per batch cap, each with
# its own fixed ExUnit seed, so neither submission timing nor test order can hide a race.
# Warnings in the project's own code fail the run: lib/ and test/support/ compile with
# --warnings-as-errors, the test files load with it too (mix test --warnings-as-errors). Nx's own
# warnings do not count: dependencies compile on their own, without the flag.
#
#   scripts/test.sh           caps 0, 4, 64 with seeds 0, 42, 1234 (what CI runs); the cap-4 run
#                             visits 4 elements per invocation in the element-wise kernels and
#                             runs them in workgroups of 256, as GPUs do
#                             (NXV_ELEMENTS_PER_INVOCATION, NXV_WORKGROUP_SIZE; lavapipe's
#                             defaults are 1 and 64); the cap-64 run submits every 16 commands
#                             as soon as the GPU has room, and 2 at once while it has nothing,
#                             as GPUs do (NXV_SUBMIT_COMMANDS, NXV_SUBMIT_IDLE; lavapipe's
#                             defaults are 0, never); the cap-4 run sorts long rows by the
#                             bitonic network rather than the radix sort (NXV_RADIX_SORT=0), so
#                             both stay tested
#   scripts/test.sh --matrix  every cap in 0 1 4 64 256 x every seed in 0 42 1234
#   extra arguments after the flag go to mix test (e.g. a test file)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
export MIX_ENV=test

if [ "${1:-}" = "--matrix" ]; then
  shift
  runs=()
  for cap in 0 1 4 64 256; do for seed in 0 42 1234; do runs+=("$cap:$seed"); done; done
else
  runs=("0:0" "4:42" "64:1234")
fi

mix deps.get >/dev/null
mix compile --warnings-as-errors
# Each run's output is kept so the failures can be repeated at the very end: CI shows only the
# tail of a long log, and a failure printed mid-run would be cut off.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=()
for run in "${runs[@]}"; do
  cap=${run%%:*}; seed=${run##*:}
  per=$([ "$cap" = 4 ] && echo 4 || echo "")
  wg=$([ "$cap" = 4 ] && echo 256 || echo "")
  sub=$([ "$cap" = 64 ] && echo 16 || echo "")
  idle=$([ "$cap" = 64 ] && echo 2 || echo "")
  radix=$([ "$cap" = 4 ] && echo 0 || echo "")
  echo "=== NXV_BATCH_MAX=$cap NXV_ELEMENTS_PER_INVOCATION=${per:-default} NXV_WORKGROUP_SIZE=${wg:-default} NXV_SUBMIT_COMMANDS=${sub:-default} NXV_SUBMIT_IDLE=${idle:-default} NXV_RADIX_SORT=${radix:-default} mix test --warnings-as-errors --seed $seed"
  if ! NXV_BATCH_MAX=$cap NXV_ELEMENTS_PER_INVOCATION=$per NXV_WORKGROUP_SIZE=$wg NXV_SUBMIT_COMMANDS=$sub NXV_SUBMIT_IDLE=$idle NXV_RADIX_SORT=$radix mix test --warnings-as-errors --seed "$seed" "$@" 2>&1 | tee "$logs/cap${cap}_seed$seed"; then
    failed+=("cap $cap seed $seed")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  # Each failure's heading and its first lines (the assertion, the values), run by run.
  for run in "${runs[@]}"; do
    cap=${run%%:*}; seed=${run##*:}
    [ -f "$logs/cap${cap}_seed$seed" ] || continue
    awk -v run="cap $cap seed $seed" '
      /^  [0-9]+\) / { shown = 0; print "--- " run ":" }
      /^  [0-9]+\) /, /^$/ { if (shown++ < 24) print }
    ' "$logs/cap${cap}_seed$seed" | head -c 6000
  done
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "All ${#runs[@]} runs passed."
