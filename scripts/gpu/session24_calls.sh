#!/usr/bin/env bash
# The device calls planned in the twenty-third session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session24-h200-<date>/.
#   1  issue 6's compiler measurements of all eight blueprints at one commit with the generated
#      modules' deferred @triton.jit and stored bytecode (session 23 measured them on three
#      blueprints only, compiler-warm-call8.json, for want of device time), the replay of
#      10 000 calls included
#   2  the blueprint, tuning and norm GPU tests: the generated modules' import path (its own
#      tests and test_triton_direct.py ran on CUDA in session 23, call 8; the rest of the
#      blueprint tests did not), the lookup that parses another model's shipped file only when
#      needed, and the float32 norm forwards on their new H200 launches
#   3  the whole harness test suite on CUDA (planned since session 22, not reached in session 23)
# Usage: bash scripts/gpu/session24_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session24_calls.sh "$@"

case "$CALL" in
  1) compiler_run compiler-suite-call1 560 --timeout 120 --warm-repeats 3 --no-profile \
       --replay-steps 10000
     python3 scripts/compiler_table.py "$OUT/keep/compiler-suite-call1.json" ;;
  2) gpu_tests blueprint-tune-norm 540 tests/blueprint tests/tune tests/ops/test_norm.py ;;
  3) t0=$SECONDS
     timeout 540 python3 -m pytest tests/harness -q -p no:cacheprovider -rfEs \
       > "$OUT/keep/tests-harness-cuda-call3.txt" 2>&1
     echo "harness tests on CUDA: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/tests-harness-cuda-call3.txt")" ;;
  *) echo "CALL: expected 1-3, got $CALL" >&2; exit 2 ;;
esac
finish_call one
