#!/usr/bin/env bash
# The device calls planned in the twenty-third session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session24-h200-<date>/.
#   1  issue 6's compiler measurements of all eight blueprints at one commit with the generated
#      modules' deferred @triton.jit and stored bytecode (session 23 measured them on three
#      blueprints only, compiler-warm-call8.json, for want of device time), the replay of
#      10 000 calls included
#   2  the blueprint, tuning and robotics GPU tests: the generated modules' import path (its
#      own tests and test_triton_direct.py ran on CUDA in session 23, call 8; the rest of the
#      blueprint tests did not), the lookup that parses another model's shipped file only when
#      needed, the resample forward's new launches; then the resample
#      forwards through the harness (float32 rows of <= 32 columns now prefetch their row,
#      chosen by session 21's sweeps, not yet timed through the harness)
#   3  the whole harness test suite on CUDA (planned since session 22, not reached in session 23)
#   4  the norm GPU tests (the float32 norm forwards on their new H200 launches)
#   5  (planned in the twenty-fourth session) exhaustive tuning of the softmax forward
#      (softmax.fwd: log_softmax takes its launch too), never tuned on any GPU, in bf16 and
#      float32 at the issue's rows of <= 16384 columns; the result merged into the H200's
#      shipped table here, then softmax and log_softmax forward through the harness at those
#      rows (the float32 ones never timed on the H200)
#   6  the softmax GPU tests on the H200's new softmax.fwd table (call 5's merged file, now
#      shipped), then the harness tests on CUDA (call 3) in what time is left
# Usage: bash scripts/gpu/session24_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session24_calls.sh "$@"

case "$CALL" in
  1) compiler_run compiler-suite-call1 560 --timeout 120 --warm-repeats 3 --no-profile \
       --replay-steps 10000
     python3 scripts/compiler_table.py "$OUT/keep/compiler-suite-call1.json" ;;
  2) gpu_tests blueprint-tune-robotics 360 tests/blueprint tests/tune tests/robotics/test_robotics_gpu.py
     t0=$SECONDS
     timeout $((570 - SECONDS)) python3 -m warpforge bench --problem 'resample.fwd*' \
       --out "$OUT/keep/robotics-fwd-call2.json" > "$OUT/robotics-bench.log" 2>&1
     echo "robotics bench: exit $? in $((SECONDS - t0)) s"; tail -12 "$OUT/robotics-bench.log" ;;
  3) t0=$SECONDS
     timeout 540 python3 -m pytest tests/harness -q -p no:cacheprovider -rfEs \
       > "$OUT/keep/tests-harness-cuda-call3.txt" 2>&1
     echo "harness tests on CUDA: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/tests-harness-cuda-call3.txt")" ;;
  4) gpu_tests norm 540 tests/ops/test_norm.py ;;
  5) short_rows_tuned softmax.fwd fwd smfwd "softmax.fwd:95 log_softmax.fwd:95" 170 ;;
  6) gpu_tests softmax 150 tests/ops/test_softmax.py
     t0=$SECONDS
     timeout $((440 - SECONDS)) python3 -m pytest tests/harness -q -p no:cacheprovider -rfEs \
       > "$OUT/keep/tests-harness-cuda-call6.txt" 2>&1
     echo "harness tests on CUDA: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/tests-harness-cuda-call6.txt")" ;;
  *) echo "CALL: expected 1-6, got $CALL" >&2; exit 2 ;;
esac
finish_call one
