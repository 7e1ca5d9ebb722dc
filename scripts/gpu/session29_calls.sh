#!/usr/bin/env bash
# The device calls planned in the twenty-eighth session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session29-h200-<date>/.
# Session 28 gave bf16/fp16 LayerNorm and RMSNorm forwards of 32769-65536 columns the looped
# kernel (NORM_FWD_LONG_LAUNCHES: 8192-column chunks on 32 warps, unrolled), timed only at
# 8192 x 65536, where it beat the split kernel by 1.16-1.19x; add+RMSNorm was not tried.
#   1  the long table's launches against the split kernel at 40961 (no whole 16-byte vectors),
#      49152, 57344 and 65536 columns, and add+RMSNorm at the same looped launch
#      (wide_rows_sweep.py long); then the wide-row GPU tests, which run the long table's
#      launches through the public ops in bf16 for the first time. If a width loses, give the
#      launch a min_n (or aligned); if add+RMSNorm wins, add it to the table and time the
#      harness there (sweep_part with SUITE_PIECES, as session 28's call 7 did).
#   2  the looped softmax forward (softmax_fwd_looped_kernel, written this session) at seven
#      launches against the split kernel, the whole-row kernel and Liger, bf16 and float32 rows
#      of 16384-131072 columns (wide_rows_sweep.py softmax); then the wide-row GPU tests.
#   3  the looped softmax forward with one exp a value and no -inf test in its statistics
#      pass, at bf16 rows of 16384-32768 columns (24577 too) and 8192 x 65536, five launches
#      against the split and whole-row kernels (wide_rows_sweep.py softmax-widths); the
#      wide-row GPU tests, now with the looped softmax in bf16.
#   4  after the 2-byte softmax forward took the looped kernel (FWD_WIDE_LAUNCHES, 16385-32768
#      columns; FWD_LONG_LAUNCHES, 32769-65536): the long launch against the split kernel at
#      40961-65536 columns (wide_rows_sweep.py softmax-long), then the harness: softmax and
#      log-softmax forward, and forward + backward, bf16 at 4096 x 32768 and 8192 x 65536.
#   5  the softmax and wide-row GPU tests on that dispatch.
#   6  after the looped log-softmax subtracts the row's max and its log-sum apart (call 5's
#      float32 test found shift + log(sum) rounding near the max): the softmax and wide-row
#      GPU tests again, then the harness's log_softmax.fwd and .bwd bf16 rows of call 4 again.
#   7  the looped cross-entropy forward with gradient (cross_entropy_fwd_grad_looped_kernel,
#      not dispatched yet) against the current dispatch, bf16 16384 x 32000, 4096 x 50257,
#      8192 x 32768 (wide_rows_sweep.py ce), in the session's last device seconds.
#   8  after bf16 and fp16 rows of 16385-32768 classes took it (FWD_GRAD_LOOPED_LAUNCHES): the
#      harness's cross_entropy.fwd_bwd bf16 at 16384 x 32000.
# Usage: bash scripts/gpu/session29_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session29_calls.sh "$@"

case "$CALL" in
  1) timeout 300 python3 benchmarks/wide_rows_sweep.py long "$OUT/keep/long-widths-call1"
     echo "long widths: exit $?"
     cat "$OUT/keep/long-widths-call1.txt"
     gpu_tests wide-rows-call1 $((560 - SECONDS)) tests/ops/test_wide_rows.py ;;
  2) timeout 420 python3 benchmarks/wide_rows_sweep.py softmax "$OUT/keep/softmax-looped-call2"
     echo "softmax looped: exit $?"
     cat "$OUT/keep/softmax-looped-call2.txt"
     gpu_tests wide-rows-call2 $((570 - SECONDS)) tests/ops/test_wide_rows.py ;;
  3) timeout 400 python3 benchmarks/wide_rows_sweep.py softmax-widths "$OUT/keep/softmax-widths-call3"
     echo "softmax widths: exit $?"
     cat "$OUT/keep/softmax-widths-call3.txt"
     gpu_tests wide-rows-call3 $((570 - SECONDS)) tests/ops/test_wide_rows.py ;;
  4) timeout 120 python3 benchmarks/wide_rows_sweep.py softmax-long "$OUT/keep/softmax-long-call4"
     echo "softmax long: exit $?"
     cat "$OUT/keep/softmax-long-call4.txt"
     SUITE_PIECES="softmax.fwd:90 log_softmax.fwd:90" sweep_part bf16 fwd "M=4096,N=32768 M=8192,N=65536"
     keep_report fwd-bf16 softmax-fwd-bf16
     SUITE_PIECES="softmax.bwd:110 log_softmax.bwd:110" sweep_part bf16 smbwd "M=4096,N=32768 M=8192,N=65536"
     keep_report smbwd-bf16 softmax-bwd-bf16 ;;
  5) gpu_tests softmax-call5 $((560 - SECONDS)) tests/ops/test_softmax.py tests/ops/test_wide_rows.py ;;
  6) gpu_tests softmax-call6 300 tests/ops/test_softmax.py tests/ops/test_wide_rows.py
     SUITE_PIECES="log_softmax.fwd:90 log_softmax.bwd:110" sweep_part bf16 fwd "M=4096,N=32768 M=8192,N=65536"
     keep_report fwd-bf16 log-softmax-bf16 ;;
  7) timeout 110 python3 benchmarks/wide_rows_sweep.py ce "$OUT/keep/ce-looped-call7"
     echo "ce looped: exit $?"
     cat "$OUT/keep/ce-looped-call7.txt" ;;
  8) SUITE_PIECES="cross_entropy.fwd_bwd:90" sweep_part bf16 ce "M=16384,V=32000"
     keep_report ce-bf16 ce-fwdbwd-bf16 ;;
  *) echo "CALL: expected 1-8, got $CALL" >&2; exit 2 ;;
esac
finish_call one
