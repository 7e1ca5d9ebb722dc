#!/usr/bin/env bash
# The device calls of the forty-third session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session43-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/: git sparse-checkout set --no-cone '/*'
# '!/benchmarks/results/'; afterwards git sparse-checkout disable. No call reads the results.
#   1  the re-reading split norm forward (norm_fwd_reread_kernel: each chunk read again from L2
#      for y LAG steps after its statistics were published, so the lag costs no registers): the
#      split-forward GPU tests, then kernel alone against the shipped lag / flag-word launches,
#      bf16 at 131072 and 262144 columns and float32 at 262144 (norm_split_fwd.py).
#   2  call 1's finding shipped (the split forward without a residual: the re-reading kernel two
#      steps behind, w held; bf16 8192-column programs 8 warps 2 an SM, float32 16 warps 1 an SM;
#      LayerNorm bf16 holding neither w nor b, float32 both): the split-forward GPU tests, then
#      kernel alone: bf16 LayerNorm with w held alone and one-pass moments at 131072 and 262144,
#      and the default against re-reading launches at the narrower split widths (bf16 65536,
#      98304; float32 49152, 65536, 131072).
#   3  call 2's findings shipped (bf16 LayerNorm holds w; float32 rows split from 32769 columns):
#      the split-forward GPU tests, bf16 LayerNorm kernel alone at 40960-65536 columns (the
#      looped whole-row kernel's rows) against the re-reading kernel, then bf16 rms_norm and
#      layer_norm forward and forward + backward at 131072 and 262144 through the harness.
#   4  no code change: float32 rms_norm and layer_norm forward and forward + backward at 65536,
#      131072 and 262144 columns through the harness (the re-reading kernel's float32 rows).
#   5  the re-reading split softmax forward (softmax_fwd_reread_kernel, a plan's reread_lag): its
#      GPU tests with the split softmax's, then kernel alone against the default (bf16: the
#      arrival-counter kernel; float32: the lag kernel) at 65536-262144 columns
#      (softmax_split_sweep.py).
#   6  call 5's findings shipped (the split forward re-reads for float32 rows and bf16
#      log-softmax rows of 8+ chunks): the softmax GPU tests, then through the harness bf16
#      log_softmax forward and forward + backward at 131072 and 262144, float32 softmax and
#      log_softmax forward at 65536-262144.
#   7  no code change: float32 softmax and log_softmax forward + backward at 65536-262144 through
#      the harness.
#   8  log-softmax's split plan picked by the op rather than in softmax_forward (whose source
#      keys the tuned row launches, which the change had left stale): the softmax and split-norm
#      GPU tests.
# Usage: bash scripts/gpu/session43_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session43_calls.sh "$@"

BF16_REREAD="lag1 8192/8w x2 pf,lag1 8192/8w x2 pk 1p,reread1 8192/8w x2 pf hold,\
reread2 8192/8w x2 pf hold,reread2 8192/8w x2 pf hold nohint,reread2 8192/8w x2 pf,\
reread2 8192/8w x2 hold,reread3 8192/8w x2 pf hold,reread4 8192/8w x2 pf hold,\
reread2 4096/8w x4 pf hold,reread2 4096/8w x2 pf hold,reread2 8192/16w x1 pf hold,\
reread2 16384/16w x1 pf hold"
SPLIT_FWD_TESTS=(tests/ops/test_norm_split_fwd.py tests/ops/test_norm.py
                 -k "split or long or wide or past" -n 6)
FP32_REREAD="flags 8192/8w x2 pf,reread2 8192/8w x2 pf,reread2 8192/8w x2 hold,\
reread2 4096/8w x2 pf hold,reread3 4096/8w x2 pf hold,reread2 8192/16w x1 pf hold,\
reread2 4096/8w x4 pf hold"

case "$CALL" in
1)
  gpu_tests splitfwd-call1 120 tests/ops/test_norm_split_fwd.py -n 6
  normfwd_sweep 260 normfwd-reread-bf16-call1 bf16:8192x131072,bf16:8192x262144 "$BF16_REREAD"
  normfwd_sweep $((570 - SECONDS)) normfwd-reread-fp32-call1 fp32:8192x262144 "$FP32_REREAD"
  finish_call one
  ;;
2)
  gpu_tests splitfwd-call2 150 "${SPLIT_FWD_TESTS[@]}"
  normfwd_sweep 200 lnfwd-reread-bf16-call2 bf16:8192x131072,bf16:8192x262144 \
    "reread2 8192/8w x2 pf,reread2 8192/8w x2 pf holdw,reread2 8192/8w x2 pf holdw 1p,\
reread2 8192/8w x2 pf 1p,reread3 8192/8w x2 pf holdw,reread2 4096/8w x4 pf holdw 1p,\
reread2 16384/16w x1 pf holdw,reread2 4096/8w x2 pf holdw,reread2 4096/8w x2 pf holdw 1p"
  normfwd_sweep 160 normfwd-widths-bf16-call2 bf16:8192x65536,bf16:8192x98304 \
    "reread2 8192/8w x2 pf hold,reread2 4096/8w x4 pf hold,reread2 8192/8w x2 pf,\
reread2 8192/8w x2 pf holdw"
  normfwd_sweep $((570 - SECONDS)) normfwd-widths-fp32-call2 \
    fp32:8192x65536,fp32:8192x131072,fp32:8192x49152 \
    "flags 8192/8w x2 pf,reread2 8192/16w x1 pf hold,reread2 4096/8w x2 pf hold"
  finish_call one
  ;;
3)
  gpu_tests splitfwd-call3 150 "${SPLIT_FWD_TESTS[@]}"
  normfwd_sweep 120 lnfwd-long-bf16-call3 bf16:8192x40960,bf16:8192x49152,bf16:8192x65536 \
    "reread2 8192/8w x2 pf holdw"
  sweep_bench $((570 - SECONDS)) normfwd-bf16 \
    "rms_norm.fwd,layer_norm.fwd,rms_norm.bwd,layer_norm.bwd" bf16 \
    --shape M=8192,N=131072 --shape M=8192,N=262144
  finish_call one
  ;;
4)
  sweep_bench 570 normfwd-fp32 "rms_norm.fwd,layer_norm.fwd,rms_norm.bwd,layer_norm.bwd" fp32 \
    --shape M=8192,N=65536 --shape M=8192,N=131072 --shape M=8192,N=262144
  finish_call one
  ;;
5)
  gpu_tests softmax-call5 170 tests/ops/test_softmax.py -k "lag_kernel_gpu or split_rows_gpu" -n 8
  timeout $((570 - SECONDS)) python3 benchmarks/softmax_split_sweep.py --out "$OUT/smfwd" \
    --shapes 8192x131072:bf16,8192x262144:bf16,8192x262144:fp32,8192x131072:fp32,8192x65536:bf16 \
    --only "default,8192/8 x2 reread2 pf,8192/8 x2 reread2,8192/8 x2 reread3 pf,\
4096/8 x4 reread2 pf,16384/16 x1 reread2 pf,8192/16 x1 reread2 pf,4096/8 x2 reread2 pf" \
    > "$OUT/smfwd.log" 2>&1
  echo "softmax fwd sweep: exit $?"
  cp "$OUT/smfwd/softmax_split_sweep.txt" "$OUT/keep/smfwd-reread-call5.txt"
  cp "$OUT/smfwd/softmax_split_sweep.json" "$OUT/keep/smfwd-reread-call5.json"
  cut -c1-120 "$OUT/keep/smfwd-reread-call5.txt"
  finish_call one
  ;;
6)
  gpu_tests softmax-call6 120 tests/ops/test_softmax.py \
    -k "long_rows_take or split_rows_gpu or default_split_plan or 2_to_31 or reread" -n 8
  sweep_bench 200 smfwd-bf16 "log_softmax.fwd,log_softmax.bwd" bf16 \
    --shape M=8192,N=131072 --shape M=8192,N=262144
  sweep_bench $((570 - SECONDS)) smfwd-fp32 "softmax.fwd,log_softmax.fwd" fp32 \
    --shape M=8192,N=65536 --shape M=8192,N=131072 --shape M=8192,N=262144
  finish_call one
  ;;
7)
  sweep_bench 570 smbwd-fp32 "softmax.bwd,log_softmax.bwd" fp32 \
    --shape M=8192,N=65536 --shape M=8192,N=131072 --shape M=8192,N=262144
  finish_call one
  ;;
8)
  gpu_tests softmax-call8 150 tests/ops/test_softmax.py tests/ops/test_norm_split_fwd.py \
    -k "long_rows_take or split_rows_gpu or default_split_plan or 2_to_31 or reread or split_forward" -n 8
  finish_call one
  ;;
*) echo "unknown call $CALL"; exit 2 ;;
esac
