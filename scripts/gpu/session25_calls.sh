#!/usr/bin/env bash
# The device calls planned in the twenty-fourth session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session25-h200-<date>/.
#   1  the bf16 norm forwards through the harness at the issue's rows of <= 16384 columns, on
#      the H200's own bf16 configs (shipped in the twenty-fourth session from the seventeenth's
#      search, not yet timed through the harness), then the norm GPU tests on them
#   2  exhaustive tuning of the softmax backward (softmax.bwd, registered in the twenty-fourth
#      session; log_softmax takes its launch too) in bf16 and float32 at the issue's rows of
#      <= 16384 columns, merged into the H200's shipped table here, then softmax and
#      log_softmax backward through the harness at those rows (as session24 call 5 did for the
#      forward)
#   3  the harness test files on CUDA that session24 call 6 did not reach before its limit
#   4  call 2 again with softmax.bwd's trials timing log-softmax's backward too (call 2's launch,
#      tuned on softmax's alone, cost float32 log-softmax 5% at 16384 x 4096), then the softmax
#      GPU tests on the merged table
#   5  the GPU tests of tests/nn and of the op files calls 1 and 4 did not run (the training
#      loop, activations, RoPE, cross-entropy, FLCE, lean, tunable, split and whole-row kernels)
# Usage: bash scripts/gpu/session25_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session25_calls.sh "$@"

case "$CALL" in
  1) SUITE_PIECES="rms_norm.fwd:100 layer_norm.fwd:100 add_rms_norm.fwd:100" \
       sweep_part bf16 fwd "$SHORT_ROWS"
     mv "$OUT/keep/fwd-bf16.json" "$OUT/keep/normfwd-bf16-call1.json" 2>/dev/null
     mv "$OUT/keep/fwd-bf16.png" "$OUT/keep/normfwd-bf16-call1.png" 2>/dev/null
     gpu_tests norm $((560 - SECONDS)) tests/ops/test_norm.py ;;
  2) short_rows_tuned softmax.bwd smbwd smbwd "softmax.bwd:95 log_softmax.bwd:95" 200 ;;
  3) t0=$SECONDS
     timeout 540 python3 -m pytest -q -p no:cacheprovider -rfEs tests/harness/test_kernelbench_set.py \
       tests/harness/test_process_tree.py tests/harness/test_reports_and_ceilings.py \
       tests/harness/test_timing.py tests/harness/test_verification_checks.py \
       > "$OUT/keep/tests-harness-cuda-call3.txt" 2>&1
     echo "harness tests on CUDA: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/tests-harness-cuda-call3.txt")" ;;
  4) short_rows_tuned softmax.bwd smbwd smbwd "softmax.bwd:95 log_softmax.bwd:95" 260
     gpu_tests softmax $((580 - SECONDS)) tests/ops/test_softmax.py ;;
  5) gpu_tests ops-nn $((555 - SECONDS)) tests/nn tests/test_runtime.py tests/ops/test_activations.py \
       tests/ops/test_rope.py tests/ops/test_cross_entropy.py tests/ops/test_fused_linear_cross_entropy.py \
       tests/ops/test_lean_kernels.py tests/ops/test_tunables.py tests/ops/test_split_rows.py \
       tests/ops/test_softmax_split_bwd.py tests/ops/test_norm_split_fwd.py \
       tests/ops/test_norm_split_bwd.py tests/ops/test_norm_bwd_narrow.py tests/ops/test_wide_rows.py ;;
  *) echo "CALL: expected 1-5, got $CALL" >&2; exit 2 ;;
esac
finish_call one
