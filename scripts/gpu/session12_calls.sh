#!/usr/bin/env bash
# The twelfth session's device calls (cross entropy over rows that start off 16-byte
# boundaries), one per CALL, each under the 10-minute limit; results under
# benchmarks/results/session12-2026-11-25/. Carry .whl/ (Liger-Kernel) and set
# WARPFORGE_GIT_COMMIT. Writes OUT/keep/* (what comes back) and OUT/keep/logs.tgz.
#   1  GPU tests of the eleventh session's merged tree (never run on the GPU) with the
#      aligned-slices saved-lse backward merged; bf16 cross entropy at 4096 x 50257 through the
#      harness with WARPFORGE_CE_ALIGNED_BWD=0 and =1 (the switch was removed with the kernel)
#   2  cross-entropy GPU tests, bf16 fwd_bwd at 4096 x 50257 with WARPFORGE_CE_ALIGNED_SPLIT=0
#      and =1, the other GPU tests of the merged tree
#   3  cross-entropy GPU tests, benchmarks/ce_split_sweep.py, fp32 fwd_bwd at 4096 x 50257 with
#      the aligned split off and on, the bf16 cross-entropy part of the issue's sweep
#   4  cross-entropy GPU tests, the fp32 cross-entropy part of the issue's sweep
#   5  fused linear cross-entropy GPU tests (50257 classes: the aligned split in place), the
#      bf16 swiglu/geglu part of the issue's sweep
#   6  the fp32 forward part of the issue's sweep (norms, softmax, log_softmax)
#   7  the fp32 softmax/log_softmax backward and swiglu/geglu parts of the issue's sweep
#   8  the fp32 norm backward part of the issue's sweep
#   9  the split norm backward GPU tests and the fp32 norm backward rows of 65536-262144 columns
#      with the weight gradient flushed every NORM_BWD_FLUSH_ROWS rows
# Usage: bash scripts/gpu/session12_calls.sh OUT CALL
set -uo pipefail
OUT="${1:?usage: session12_calls.sh OUT 1-9}"
CALL="${2:?usage: session12_calls.sh OUT 1-9}"
mkdir -p "$OUT/keep"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

source "$(dirname "$0")/calls_common.sh"

fwd_bwd_50257() {  # SWITCH DTYPE: cross_entropy.fwd_bwd at 4096 x 50257, the switch 0 then 1
  local switch="$1" dtype="$2" mode t0
  for mode in 0 1; do
    t0=$SECONDS
    env "$switch=$mode" SUITE_DTYPE="$dtype" SUITE_SHAPE="M=4096,V=50257" SUITE_BUDGET_S=90 \
      SUITE_CEILINGS=1 SUITE_SWEEP=1 SUITE_MAX_TIME=0.3 \
      bash scripts/gpu/bench_parts.sh "$OUT/$dtype-$mode" "fwd_bwd-$dtype-$mode" \
      "cross_entropy.fwd_bwd:80" > "$OUT/$dtype-$mode.log" 2>&1
    cp "$OUT/$dtype-$mode/fwd_bwd-$dtype-$mode.json" "$OUT/keep/" 2>/dev/null
    echo "$dtype $switch=$mode: $((SECONDS - t0)) s"
    python3 scripts/results_table.py "$OUT/keep/fwd_bwd-$dtype-$mode.json" 2>&1 | grep cross_entropy
  done
}

case "$CALL" in
  1) gpu_tests merged 240 -x tests/ops/test_cross_entropy.py tests/ops/test_lean_kernels.py \
       tests/ops/test_wide_rows.py tests/ops/test_norm_bwd_narrow.py \
       tests/ops/test_norm_split_bwd.py tests/ops/test_norm_split_fwd.py \
       tests/ops/test_row_kernels_compile.py
     for mode in 0 1; do
       WARPFORGE_CE_ALIGNED_BWD=$mode sweep_part bf16 ce "M=4096,V=50257"
       mv "$OUT/keep/ce-bf16.json" "$OUT/keep/ce-bf16-aligned-bwd-$mode.json"
     done ;;
  2) gpu_tests ce 150 -x tests/ops/test_cross_entropy.py
     fwd_bwd_50257 WARPFORGE_CE_ALIGNED_SPLIT bf16
     gpu_tests rest $((570 - SECONDS)) tests/ops/test_lean_kernels.py tests/ops/test_wide_rows.py \
       tests/ops/test_norm_bwd_narrow.py tests/ops/test_norm_split_bwd.py \
       tests/ops/test_norm_split_fwd.py tests/ops/test_row_kernels_compile.py ;;
  3) gpu_tests ce 150 -x tests/ops/test_cross_entropy.py
     t0=$SECONDS
     timeout 150 python3 benchmarks/ce_split_sweep.py --out "$OUT/keep" > "$OUT/sweep.log" 2>&1
     echo "split sweep: exit $? in $((SECONDS - t0)) s"
     fwd_bwd_50257 WARPFORGE_CE_ALIGNED_SPLIT fp32
     sweep_part bf16 ce ;;
  4) gpu_tests ce 150 -x tests/ops/test_cross_entropy.py
     sweep_part fp32 ce ;;
  5) gpu_tests flce 150 tests/ops/test_fused_linear_cross_entropy.py
     sweep_part bf16 gated ;;
  6) sweep_part fp32 fwd ;;
  7) sweep_part fp32 smbwd
     sweep_part fp32 gated ;;
  8) sweep_part fp32 normbwd ;;
  9) gpu_tests normsplit 120 tests/ops/test_norm_split_bwd.py
     sweep_part fp32 normbwd "N=65536 N=131072 N=262144" ;;
  *) echo "CALL: expected 1-9, got $CALL" >&2; exit 2 ;;
esac
tar -czf "$OUT/keep/logs.tgz" -C "$OUT" --exclude=keep --exclude='*cache*' . 2>/dev/null
find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep -exec rm -rf {} +
