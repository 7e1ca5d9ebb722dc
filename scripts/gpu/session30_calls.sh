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
#   2  the loss-only cross-entropy forward (cross_entropy.fwd; bf16 16384 x 32000 ran at 80% of
#      copy) with its chunk loop unrolled (row_losses(looped=...): cross_entropy_fwd_kernel's
#      CHUNKS, written in session 29, not timed) at four launches against the current dispatch,
#      bf16 rows of 32000-262144 classes (wide_rows_sweep.py ce-fwd). If a launch wins, give
#      the loss-only path a table as FWD_GRAD_LOOPED_LAUNCHES does the forward with gradient,
#      then time the harness's cross_entropy.fwd there (sweep_part with SUITE_PIECES).
#   3  the looped softmax over rows that start off 16-byte boundaries, walked from aligned
#      addresses (softmax_fwd_looped_aligned_kernel, WideLaunch.align_chunks; written in session
#      29, not timed) against the shipped looped launch and the split kernel, bf16 at 24577,
#      40961, 50257 and 32767 columns (wide_rows_sweep.py softmax-unaligned); then the wide-row
#      GPU tests (test_softmax_looped_gpu runs it at 16411 and 40961 columns). If it wins, set
#      align_chunks on FWD_WIDE_LAUNCHES' and FWD_LONG_LAUNCHES' 2-byte launches. (It lost;
#      the kernel and the sweep mode are gone since 14182250, so call 3 runs only at fb911915.)
# Calls 4 and on were written in session 30 from what 1-3 found:
#   4  the loss-only kernel's launches again, rolled and unrolled, at 32000-262144 classes
#      (wide_rows_sweep.py ce-fwd with CE_FWD_LOOPED as committed after call 3; the device ran
#      this sweep alone, kernel alone).
#   5  the loss-only table it chose (FWD_LOOPED_LAUNCHES) through the harness: the issue
#      sweep's cross_entropy.fwd in bf16; the cross-entropy GPU tests (the new
#      test_gpu_looped_loss_only_forward among them) and the wide-row GPU tests with the
#      aligned softmax variant removed.
#   6  the loss-only forward of rows that start off 16-byte boundaries (vocab 50257, the
#      aligned kernel; 68% of copy in call 5) at other (BLOCK, num_warps) launches
#      (wide_rows_sweep.py ce-fwd-unaligned); the loss-only GPU test again (call 5 held the
#      bf16 per-row losses to a float32 tolerance; they come in the logits' dtype).
#   7  the launch call 6 chose for those rows (ALIGNED_FWD_LAUNCHES) and the looped table
#      through the harness: the issue sweep's cross_entropy.fwd in bf16 again; the
#      cross-entropy GPU tests.
#   8  the forward with gradient of those rows (the aligned flag-word split kernel; 73% of
#      copy forward + backward in call 1) at other split plans (wide_rows_sweep.py
#      ce-split-unaligned), as smaller chunks won the loss-only forward there.
#   9  the forward with gradient's looped kernel (the training path at 32000 and 32768
#      classes) in 1024-4096-column chunks on 2-16 warps (wide_rows_sweep.py ce-small).
#  10  GPU tests of the files this session's changes reach besides those run above: fused
#      linear cross-entropy (its no-gradient chunks take the loss-only tables), the loss
#      modules, softmax (the aligned variant's removal), the tunables.
#  11  the looped forward with gradient with its registers capped at 64-128 a thread
#      (wide_rows_sweep.py ce-registers; WideLaunch.max_registers).
# (Its harness timing and GPU tests could not run: the device time was spent. They are
# scripts/gpu/session31_calls.sh call 1.)
# Usage: bash scripts/gpu/session30_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session30_calls.sh "$@"

case "$CALL" in
  1) gpu_tests ce-call1 300 tests/ops/test_cross_entropy.py tests/ops/test_fused_linear_cross_entropy.py
     sweep_part bf16 ce
     keep_report ce-bf16 ce-bf16 ;;
  2) wide_sweep 300 ce-fwd ce-fwd-looped-call2 ;;
  3) wide_sweep 200 softmax-unaligned softmax-unaligned-call3
     gpu_tests wide-rows-call3 $((570 - SECONDS)) tests/ops/test_wide_rows.py ;;
  4) wide_sweep 300 ce-fwd ce-fwd-launches-call4 ;;
  5) SUITE_PIECES="cross_entropy.fwd:120" sweep_part bf16 ce
     keep_report ce-bf16 ce-fwd-bf16
     gpu_tests ce-call5 200 tests/ops/test_cross_entropy.py
     gpu_tests wide-rows-call5 $((575 - SECONDS)) tests/ops/test_wide_rows.py ;;
  6) wide_sweep 200 ce-fwd-unaligned ce-fwd-unaligned-call6
     gpu_tests ce-call6 200 tests/ops/test_cross_entropy.py -k loss_only ;;
  7) SUITE_PIECES="cross_entropy.fwd:120" sweep_part bf16 ce
     keep_report ce-bf16 ce-fwd-bf16
     gpu_tests ce-call7 300 tests/ops/test_cross_entropy.py ;;
  8) wide_sweep 240 ce-split-unaligned ce-split-unaligned-call8 ;;
  9) wide_sweep 240 ce-small ce-small-call9 ;;
  10) gpu_tests reach-call10 500 tests/ops/test_fused_linear_cross_entropy.py \
        tests/nn/test_loss_modules.py tests/ops/test_softmax.py tests/ops/test_tunables.py ;;
  11) wide_sweep 240 ce-registers ce-registers-call11 ;;
  *) echo "CALL: expected 1-11, got $CALL" >&2; exit 2 ;;
esac
finish_call one
