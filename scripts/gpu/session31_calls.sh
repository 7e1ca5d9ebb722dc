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
#   2  the same cap on the looped softmax and norm forwards: their shipped launches at bf16
#      4096 x 32768 and 8192 x 65536 (and the 32768-column ones at 4096 x 16384, where
#      layer_norm.fwd trails torch.compile) left to ptxas and capped at 48-128 registers a thread
#      (wide_rows_sweep.py registers; ptxas gives them 38-52 on sm_90 under Triton 3.9), then the
#      register-cap test on the GPU (test_register_cap_reaches_every_launch, capped and
#      uncapped outputs equal) and the looped GPU tests. If a cap wins, set max_registers on
#      that table's launch (softmax_ops.FWD_WIDE_LAUNCHES / FWD_LONG_LAUNCHES,
#      norm.NORM_FWD_WIDE_LAUNCHES / NORM_FWD_LONG_LAUNCHES) and time it through the harness
#      (sweep_part bf16 fwd with SUITE_PIECES and the shape).
#   3  the loss-only cross-entropy forward of 2048 rows of 151936 classes (bf16 86%, float32
#      88% of copy in the harness): rolled launches with 32 registers a thread so that a row's
#      program fits one wave (wide_rows_sweep.py ce-fwd-registers). If one wins, give
#      FWD_LOOPED_LAUNCHES (or a table like it) those rows and time cross_entropy.fwd through
#      the harness.
# Added in the thirty-first session, after calls 1-3 (the cap of 64 won at 4096 x 32768 and
# 8192 x 65536 in call 2; the softmax, log-softmax and LayerNorm launches there and the RMSNorm
# one at 65536 now carry it):
#   4  the capped launches against themselves uncapped across the rows they take (20000-65536
#      columns; wide_rows_sweep.py register-widths), the issue sweep's bf16 forwards at 4096 x
#      32768 and 8192 x 65536 through the harness.
#   5  the loss-only cross-entropy forward's launches with register caps (ce-fwd-caps); the
#      softmax forwards at 8192 x 65536 through the harness again, their launch's cap taken off
#      (it lost at 49152 and 57344 columns in call 4, and softmax at 65536 in its harness); the
#      wide-row GPU tests on the capped launches.
#   6  register caps on whole-row launches at 4096 x 32768 (wide_rows_sweep.py whole-row-caps):
#      the bf16 softmax backward, the float32 LayerNorm, RMSNorm and softmax forwards.
#   7  the bf16 softmax backward's whole-row launch against the split kernel at 24576-32768
#      columns (wide_rows_sweep.py softmax-bwd-widths; log-softmax's lost at 32768 in call 6).
#   8  log-softmax's backward on its own launch (LOG_BWD_WIDE_LAUNCHES, from call 7): the issue
#      sweep's bf16 softmax backwards at 4096 x 32768 through the harness, the softmax and
#      wide-row GPU tests.
#   9  the looped softmax forward of 32769-65536 columns at other launches capped at 64
#      registers a thread (wide_rows_sweep.py softmax-long-caps).
#  10  FWD_LONG_LAUNCHES on 4096-column chunks, 16 warps, 64 registers (from call 9): the same
#      sweep (now also at 40961 columns and with the launch before it), the issue sweep's bf16
#      softmax forwards at 8192 x 65536 through the harness, the softmax GPU tests.
#  11  log-softmax's backward routed outside softmax_backward (log_softmax_wide_backward; its
#      source is in the softmax.bwd tunable's hash): the softmax backward tests on the GPU.
# Usage: bash scripts/gpu/session31_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session31_calls.sh "$@"

case "$CALL" in
  1) SUITE_PIECES="cross_entropy.fwd_bwd:120" sweep_part bf16 ce
     keep_report ce-bf16 ce-fwdbwd-bf16
     gpu_tests ce-call1 300 tests/ops/test_cross_entropy.py tests/ops/test_fused_linear_cross_entropy.py ;;
  2) wide_sweep 300 registers registers-call2
     timeout 200 python3 -m pytest -q -p no:cacheprovider tests/ops/test_wide_rows.py \
       -k "register_cap or looped_gpu" > "$OUT/keep/gpu-tests-wide-rows-call2.txt" 2>&1
     echo "wide-rows tests: exit $?: $(tail -n 1 "$OUT/keep/gpu-tests-wide-rows-call2.txt")" ;;
  3) wide_sweep 300 ce-fwd-registers ce-fwd-registers-call3 ;;
  4) wide_sweep 180 register-widths register-widths-call4
     SUITE_PIECES="softmax.fwd:90 log_softmax.fwd:90 layer_norm.fwd:90 rms_norm.fwd:90" \
       sweep_part bf16 fwd "M=4096,N=32768 M=8192,N=65536"
     keep_report fwd-bf16 wide-fwd-bf16 ;;
  5) wide_sweep 200 ce-fwd-caps ce-fwd-caps-call5
     SUITE_PIECES="softmax.fwd:80 log_softmax.fwd:80" sweep_part bf16 fwd "M=8192,N=65536"
     keep_report fwd-bf16 softmax-long-bf16
     gpu_tests wide-rows-call5 240 tests/ops/test_wide_rows.py ;;
  6) wide_sweep 300 whole-row-caps whole-row-caps-call6 ;;
  7) wide_sweep 200 softmax-bwd-widths softmax-bwd-widths-call7 ;;
  8) SUITE_PIECES="softmax.bwd:90 log_softmax.bwd:90" sweep_part bf16 smbwd "M=4096,N=32768"
     keep_report smbwd-bf16 smbwd-bf16
     gpu_tests softmax-call8 240 tests/ops/test_softmax.py tests/ops/test_wide_rows.py ;;
  9) wide_sweep 200 softmax-long-caps softmax-long-caps-call9 ;;
  10) wide_sweep 150 softmax-long-caps softmax-long-caps-call10
      SUITE_PIECES="softmax.fwd:80 log_softmax.fwd:80" sweep_part bf16 fwd "M=8192,N=65536"
      keep_report fwd-bf16 softmax-long-bf16
      gpu_tests softmax-call10 200 tests/ops/test_wide_rows.py -k softmax ;;
  11) timeout 150 python3 -m pytest -q -p no:cacheprovider -rfEs tests/ops/test_wide_rows.py \
        tests/ops/test_softmax_split_bwd.py -k "backward and not split_backward_gpu" > "$OUT/keep/gpu-tests-softmax-bwd-call11.txt" 2>&1
      echo "softmax backward tests: exit $?: $(tail -n 1 "$OUT/keep/gpu-tests-softmax-bwd-call11.txt")" ;;
  *) echo "CALL: expected 1-11, got $CALL" >&2; exit 2 ;;
esac
finish_call one
