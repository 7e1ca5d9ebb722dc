#!/usr/bin/env bash
# The device calls planned in the twenty-ninth session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session30-h200-<date>/.
# Session 29 sent 2-byte cross-entropy forwards with gradient of 16385-32768 classes to the
# looped kernel (FWD_GRAD_LOOPED_LAUNCHES) at its end: the harness verified and timed it at
# bf16 16384 x 32000, but the cross-entropy and fused-linear-cross-entropy GPU tests have not
# run on that dispatch, nor the new looped test (test_gpu_looped_forward_with_grad).
#   1  those GPU tests; then the issue sweep's cross-entropy part in bf16 (every vocabulary,
#      forward, backward, forward + backward), whose 16384 x 32000 rows take the looped kernel.
# Usage: bash scripts/gpu/session30_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session30_calls.sh "$@"

case "$CALL" in
  1) gpu_tests ce-call1 300 tests/ops/test_cross_entropy.py tests/ops/test_fused_linear_cross_entropy.py
     sweep_part bf16 ce
     keep_report ce-bf16 ce-bf16 ;;
  *) echo "CALL: expected 1, got $CALL" >&2; exit 2 ;;
esac
finish_call one
