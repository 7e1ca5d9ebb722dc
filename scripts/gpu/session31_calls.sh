#!/usr/bin/env bash
# The device calls planned in the thirtieth session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session31-h200-<date>/.
# Session 30 capped the looped cross-entropy forward with gradient at 64 registers a thread
# (FWD_GRAD_LOOPED_LAUNCHES, max_registers) from a kernel-alone sweep whose outputs matched
# the uncapped kernel's bit for bit (session30 ce-registers-call11); the device time ran out
# before the harness timed it or the GPU tests ran on it.
#   1  the issue sweep's cross_entropy.fwd_bwd in bf16 (16384 x 32000 takes the capped launch),
#      then the whole cross-entropy GPU test file on it (test_gpu_looped_forward_with_grad
#      runs the shipped launch at 300 x 32000, 5 x 16392 and 7 x 32768 against float64).
# Usage: bash scripts/gpu/session31_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session31_calls.sh "$@"

case "$CALL" in
  1) SUITE_PIECES="cross_entropy.fwd_bwd:120" sweep_part bf16 ce
     keep_report ce-bf16 ce-fwdbwd-bf16
     gpu_tests ce-call1 300 tests/ops/test_cross_entropy.py tests/ops/test_fused_linear_cross_entropy.py ;;
  *) echo "CALL: expected 1, got $CALL" >&2; exit 2 ;;
esac
finish_call one
