#!/usr/bin/env bash
# The device calls planned in the twenty-seventh session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session28-h200-<date>/.
# Session 27 found why its looped norm forward (norm_fwd_looped_kernel) trails torch.compile's
# kernel of the same shape (bf16 LayerNorm 4096 x 16384: 82.6 against 71.7 us): torch.compile
# knows N when compiling, so its statistics loop is unrolled and a thread's loads are all in
# flight at once; with N known only at run time each chunk's load waits for the one before
# (sm_90 SASS, compiled offline; see the kernel's docstring). WideLaunch(unrolled=True) now
# unrolls that pass for the row's chunk count (CHUNKS, one compile per count); never timed.
#   1  the looped kernel, rolled and unrolled, against the op, torch.compile and Liger at the
#      ten looped cases of benchmarks/parity_sweep.py; then the wide-row GPU tests (the
#      unrolled launches' first compile by Triton 3.6). If an unrolled launch wins a row, give
#      it to NORM_FWD_ROW_LAUNCHES / NORM_FWD_WIDE_LAUNCHES and time the harness there
#      (sweep_part with SUITE_PIECES, as session 27's call 9 did).
#   2  (after call 1: bf16 LayerNorm 4096 x 32768, the looped kernel unrolled and walking
#      forwards at 4096-column chunks on 16 warps, 154.7 us against the op's 170.9 and
#      torch.compile's 176.2; NORM_FWD_WIDE_LAUNCHES now gives it) the harness at that row,
#      LayerNorm forward and backward; the launch at the narrower wide rows (wide_rows_sweep.py
#      widths, against the split path and the whole-row kernel); the wide-row GPU tests.
#   3  (after call 2: at 24577 columns the looped LayerNorm launch beat the split path, and
#      bf16 RMSNorm's and add+RMSNorm's whole-row launches lost to it; the table now says so)
#      the wide-row and norm GPU tests on the new dispatch.
#   4  (after LayerNorm's paired row sums went through one helper, sum_pair, whose
#      interpreter branch is a compile-time global: INTERPRETED) the GPU tests of the kernels
#      that call it: the split and narrow-split backwards, then the norm tests.
#   5  bf16 LayerNorm 4096 x 16384, the row under torch.compile (0.95x), at looped launches
#      outside LOOPED_GRID (parity_sweep.py --looped-grid): smaller chunks on fewer warps,
#      larger on more.
#   6  the looped kernel past 32768 columns, where the split kernel runs bf16 LayerNorm at
#      63-67% of copy: LayerNorm 8192 x 65536 and 131072, RMSNorm 8192 x 65536, at chunks of
#      4096 and 8192 columns (at most 32 chunks a row unrolled).
#   7  (after call 6: at 8192 x 65536 the looped launch, 8192-column chunks on 32 warps,
#      unrolled, beat the split kernel for bf16 LayerNorm and RMSNorm; NORM_FWD_LONG_LAUNCHES
#      now gives it to rows of 32769-65536 columns) the harness there, forward, then forward
#      and backward while device time lasts.
# Usage: bash scripts/gpu/session28_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session28_calls.sh "$@"

case "$CALL" in
  1) parity_cases looped-call1 360 --only looped
     gpu_tests wide-rows-call1 $((560 - SECONDS)) tests/ops/test_wide_rows.py ;;
  2) SUITE_PIECES="layer_norm.fwd:100 layer_norm.bwd:120" sweep_part bf16 fwd "M=4096,N=32768"
     keep_report fwd-bf16 ln-unrolled-bf16
     timeout $((450 - SECONDS)) python3 benchmarks/wide_rows_sweep.py widths "$OUT/keep/widths-call2"
     echo "widths: exit $?"
     gpu_tests wide-rows-call2 $((560 - SECONDS)) tests/ops/test_wide_rows.py ;;
  3) gpu_tests wide-rows-call3 200 tests/ops/test_wide_rows.py
     gpu_tests norm-call3 $((560 - SECONDS)) tests/ops/test_norm.py ;;
  4) gpu_tests split-bwd-call4 200 tests/ops/test_norm_split_bwd.py tests/ops/test_norm_bwd_narrow.py
     gpu_tests norm-call4 $((560 - SECONDS)) tests/ops/test_norm.py ;;
  5) parity_cases ln16k-call5 300 --only "layer_norm.fwd M=4096 N=16384 torch.bfloat16 looped" \
       --looped-grid 1024/4 2048/4 4096/8 8192/16 8192/32 16384/32 ;;
  6) parity_cases long-call6 400 --looped-grid 4096/16 8192/16 8192/32 \
       --only "M=8192 N=65536 torch.bfloat16 looped" "M=8192 N=131072 torch.bfloat16 looped" ;;
  7) SUITE_PIECES="layer_norm.fwd:90 rms_norm.fwd:90" sweep_part bf16 fwd "M=8192,N=65536"
     keep_report fwd-bf16 long-fwd-bf16
     if [ $SECONDS -lt 110 ]; then
       SUITE_PIECES="layer_norm.bwd:70 rms_norm.bwd:70" sweep_part bf16 normbwd "M=8192,N=65536"
       keep_report normbwd-bf16 long-normbwd-bf16
     fi ;;
  *) echo "CALL: expected 1-7, got $CALL" >&2; exit 2 ;;
esac
finish_call one
