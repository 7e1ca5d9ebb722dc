#!/usr/bin/env bash
# The device calls of the thirty-sixth session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session36-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/ (the tracked tree outgrew the device
# tool's 64 MB transfer): git sparse-checkout set --no-cone '/*' '!/benchmarks/results/';
# afterwards git sparse-checkout disable. No call reads the results.
#   1  what the thirty-fifth session changed but did not run on a GPU: every robotics GPU test
#      (the single-stream resample kernel shares the streams kernel's new grid-slot code), the
#      resample problems through the harness, align's host time with the cached launch plan
#      (benchmarks/align_host_profile.py) and both align problems through the harness.
# Usage: bash scripts/gpu/session36_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session36_calls.sh "$@"

resample_bench() {  # the resample problems through the harness into OUT/keep/resample-callCALL.json
  local t0=$SECONDS
  timeout "$1" python3 -m warpforge bench --problem 'resample*' \
    --out "$OUT/keep/resample-call$CALL.json" > "$OUT/resample-bench.log" 2>&1
  echo "resample bench: exit $? in $((SECONDS - t0)) s"; tail -16 "$OUT/resample-bench.log"
}

host_profile() {  # benchmarks/align_host_profile.py into OUT/keep/align-host-profile-callCALL.*
  timeout 150 python3 benchmarks/align_host_profile.py --out "$OUT/host" \
    > "$OUT/keep/align-host-profile-call$CALL.txt" 2>&1
  echo "host profile: exit $?"; head -40 "$OUT/keep/align-host-profile-call$CALL.txt"
  cp "$OUT/host/align-host-profile.json" "$OUT/keep/align-host-profile-call$CALL.json"
}

case "$CALL" in
  1) gpu_tests robotics-call1 200 -n 4 tests/robotics
     resample_bench 170
     host_profile
     align_bench ;;
  *) echo "CALL: expected 1, got $CALL" >&2; exit 2 ;;
esac
finish_call one
