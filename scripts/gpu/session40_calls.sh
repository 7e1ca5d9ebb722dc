#!/usr/bin/env bash
# The device calls of the fortieth session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session40-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/: git sparse-checkout set --no-cone '/*'
# '!/benchmarks/results/'; afterwards git sparse-checkout disable. No call reads the results.
#   1  the wrong row totals suspected in the split softmax backward (session 39's call 6: one
#      element of bf16 8 x 262144 far out of tolerance): benchmarks/softmax_bwd_totals.py over
#      50 seeds at that shape and others, then every GPU test at this commit (the tuned-config
#      test session 39 moved to 512 columns included).
# Usage: bash scripts/gpu/session40_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session40_calls.sh "$@"

softmax_totals() {  # NAME SEEDS ARGS...: benchmarks/softmax_bwd_totals.py into OUT/keep/totals-NAME.json
  local name="$1" seeds="$2" t0=$SECONDS
  shift 2
  timeout 150 python3 benchmarks/softmax_bwd_totals.py --out "$OUT/keep/totals-$name.json" \
    --seeds "$seeds" "$@" > "$OUT/keep/totals-$name.txt" 2>&1
  echo "softmax totals $name: exit $? in $((SECONDS - t0)) s"
  grep -vE " 0 segments past [0-9.]+, 0 elements" "$OUT/keep/totals-$name.txt" | head -20
}

case "$CALL" in
1)
  softmax_totals bf16-8x262144 50
  softmax_totals fp16-8x262144 20 --dtype fp16
  softmax_totals bf16-300x262144 6 --rows 300
  softmax_totals bf16-64x131072 20 --rows 64 --cols 131072
  gpu_tests ops-call1 220 tests/ops -n 6 \
    --deselect tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements
  gpu_tests rest-call1 170 tests --ignore=tests/ops -n 4
  finish_call one
  ;;
*) echo "unknown call $CALL"; exit 2 ;;
esac
