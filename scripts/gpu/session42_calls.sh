#!/usr/bin/env bash
# The device calls of the forty-second session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session42-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/: git sparse-checkout set --no-cone '/*'
# '!/benchmarks/results/'; afterwards git sparse-checkout disable. No call reads the results.
#   1  the saved-lse cross-entropy backward's aligned-address row kernel (session 41's
#      cross_entropy_bwd_aligned_kernel, never run on a GPU): its GPU tests, then kernel alone at
#      4096 x 50257 against the shipped row launch (parity_sweep.py, bf16 and float32); then the
#      bf16 LayerNorm backward of 65536-262144 columns (62-67% of copy through the harness) at
#      split launches never timed for it there, kernel alone (norm_bwd_narrow_sweep.py).
#   2  the lagged split norm backward's LEAN arithmetic for 2-byte rows (xhat and dx in fused
#      multiply-adds from x, no offset add where it is 0, rows of whole chunks unmasked; 28% fewer
#      instructions a loop in an sm_90 compile): its GPU tests, then kernel alone against the
#      kernel before it (lagold) at the launches the ops take, bf16 (norm_bwd_narrow_sweep.py).
#   3  call 2's finding shipped (LEAN for 2-byte rows; 2-byte LayerNorm rows of 65536-131071
#      columns take the lagged kernel at 2048 columns on the H200): the narrow-row GPU tests, then
#      bf16 rms_norm.bwd, add_rms_norm.bwd and layer_norm.bwd at 32768-262144 columns through
#      the harness.
#   4  the lagged split norm forward's LEAN arithmetic for 2-byte rows (y in one fused multiply-add
#      a column, no offset add where it is 0, whole chunks unmasked; int32 pairs packed by one
#      cvt.rn.bf16x2.f32 each): the split-forward GPU tests, kernel alone against the kernel
#      without LEAN (" old") at 131072 and 262144 columns (norm_split_fwd.py), then the bf16
#      forwards there and layer_norm.bwd (forward + backward) through the harness.
#   5  launches after LEAN, kernel alone, no code change: the bf16 split forward at 32768-131072
#      columns (the lag kernel, LEAN, against the flag-word kernel rows under 16 chunks take, and
#      wider or deeper lag launches; norm_split_fwd.py), then the bf16 backward at 4096 x 32768
#      (LayerNorm's pairs kernel and add+RMSNorm's flag-word launch against the LEAN lagged
#      kernel) and LayerNorm's at 8192 x 262144 (norm_bwd_narrow_sweep.py).
#   6  call 5's findings shipped (2-byte rows of 32768-65535 columns: the lagged backward in
#      1024-column programs on the H200; the forward without a residual: the lag kernel from 4
#      chunks): their GPU tests, the forward kernel alone at 8192 x 98304 (12 chunks, where the
#      default changed), then bf16 rms_norm.bwd, add_rms_norm.bwd and layer_norm.bwd at 4096 x
#      32768 through the harness.
#   7  the flag-word split forward without the offset add where it is 0 and, rows of whole
#      chunks, unmasked (every dtype; LayerNorm's float32 kernel 944 -> 688 instructions in an
#      sm_90 compile): the split-forward GPU tests, kernel alone against the kernel before (" old")
#      in float32 at 131072 and 262144 columns and bf16 add+RMSNorm at 98304 (norm_split_fwd.py),
#      then the float32 forwards and forward + backward there through the harness.
#   8  call 7's change reverted (slower in float32): the float32 rows of call 7 again through the
#      harness, on the kernels they run now, and bf16 rms_norm.bwd and add_rms_norm.bwd at 131072
#      and 262144 columns (forward + backward, last timed before the LEAN split forward).
#   9  the backward rows kernel's LEAN arithmetic for 2-byte rows (xhat and dx in fused
#      multiply-adds, no offset add where it is 0, no where on xhat, rows of one whole block
#      unmasked; LayerNorm at 8192 columns 360 -> 320 instructions in an sm_90 compile): the norm
#      GPU tests, kernel alone against the rows kernel before (norm_bwd_narrow_sweep.py's
#      "default old") at the issue's six rows of up to 16384 columns, bf16, then the bf16
#      backward (forward + backward) there through the harness.
#  10  call 9's change reverted (slower through the harness): those eighteen bf16 rows again on
#      the shipped kernels.
# Usage: bash scripts/gpu/session42_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session42_calls.sh "$@"

case "$CALL" in
1)
  gpu_tests aligned-call1 120 tests/ops/test_lean_kernels.py -k aligned -n 4
  parity_cases ce-aligned-call1 200 --only "cross_entropy.bwd M=4096 V=50257"
  SWEEP_OPS=layer SWEEP_DTYPES=bfloat16 SWEEP_SHAPES="8192x131072 8192x65536 8192x262144" \
    SWEEP_LAUNCHES="lag/4096/4/2/0 lag/8192/16/1/0 lag/8192/8/1/0 lag/4096/8/2/0 lag/2048/4/4/0 \
flags/8192/8/1/1 flags/8192/16/1/1 flags/4096/4/2/1" \
    timeout $((560 - SECONDS)) python3 benchmarks/norm_bwd_narrow_sweep.py sweep \
    "$OUT/keep/lnbwd-bf16-wide-call1.txt" > "$OUT/keep/lnbwd-bf16-wide-call1.log" 2>&1
  echo "norm bwd sweep: exit $?"; cut -c1-160 "$OUT/keep/lnbwd-bf16-wide-call1.log" | tail -40
  finish_call one
  ;;
2)
  gpu_tests narrow-call2 150 tests/ops/test_norm_bwd_narrow.py tests/ops/test_norm_split_bwd.py -n 6
  SWEEP_DTYPES=bfloat16 SWEEP_SHAPES="8192x131072 8192x262144 8192x65536" \
    SWEEP_LAUNCHES="lag/4096/4/2/0 lagold/4096/4/2/0 lag/2048/4/4/0 lagold/2048/4/4/0 \
lag/8192/16/1/0 lagold/8192/16/1/0" \
    timeout $((560 - SECONDS)) python3 benchmarks/norm_bwd_narrow_sweep.py sweep \
    "$OUT/keep/normbwd-lean-call2.txt" > "$OUT/keep/normbwd-lean-call2.log" 2>&1
  echo "norm bwd sweep: exit $?"; grep -v "^bfloat16.*default" "$OUT/keep/normbwd-lean-call2.log" | cut -c1-150 | tail -60
  finish_call one
  ;;
3)
  gpu_tests narrow-call3 100 tests/ops/test_norm_bwd_narrow.py -n 6
  sweep_bench $((570 - SECONDS)) normbwd-bf16 "rms_norm.bwd,add_rms_norm.bwd,layer_norm.bwd" bf16 \
    --shape M=4096,N=32768 --shape M=8192,N=65536 --shape M=8192,N=131072 --shape M=8192,N=262144
  finish_call one
  ;;
4)
  gpu_tests splitfwd-call4 100 tests/ops/test_norm_split_fwd.py -n 6
  timeout 200 python3 benchmarks/norm_split_fwd.py sweep "$OUT/keep/normfwd-lean-call4" \
    bf16:8192x131072,bf16:8192x262144 "lag1 8192/8w x2 pf,lag1 8192/8w x2 pf old,\
lag1 8192/8w x2 pk,lag1 8192/8w x2 pk old,lag1 8192/8w x2 pk 1p,lag1 8192/8w x2 pk 1p old" \
    > "$OUT/normfwd-sweep.log" 2>&1
  echo "norm fwd sweep: exit $?"; cut -c1-150 "$OUT/keep/normfwd-lean-call4.txt"
  sweep_bench $((570 - SECONDS)) normfwd-bf16 \
    "rms_norm.fwd,add_rms_norm.fwd,layer_norm.fwd,layer_norm.bwd" bf16 \
    --shape M=8192,N=131072 --shape M=8192,N=262144
  finish_call one
  ;;
5)
  timeout 250 python3 benchmarks/norm_split_fwd.py sweep "$OUT/keep/normfwd-launches-call5" \
    bf16:4096x32768,bf16:8192x65536,bf16:8192x131072 "flags 8192/8w x2 pf,lag1 8192/8w x2 pf,\
lag1 8192/8w x2 pk,lag1 8192/8w x2 pk 1p,lag2 8192/8w x2 pk 1p,lag1 16384/16w x1 pk 1p,\
lag1 16384/16w x1 pf,lag1 4096/4w x4 1p" > "$OUT/normfwd-sweep.log" 2>&1
  echo "norm fwd sweep: exit $?"; cut -c1-150 "$OUT/keep/normfwd-launches-call5.txt"
  SWEEP_DTYPES=bfloat16 SWEEP_SHAPES="4096x32768" SWEEP_LAUNCHES="lag/2048/4/4/0 lag/4096/4/2/0 \
lag/1024/2/8/0 flags/4096/4/2/1 flags/2048/4/4/1" \
    timeout $((480 - SECONDS)) python3 benchmarks/norm_bwd_narrow_sweep.py sweep \
    "$OUT/keep/normbwd-32768-call5.txt" > "$OUT/keep/normbwd-32768-call5.log" 2>&1
  echo "norm bwd sweep 32768: exit $?"; cut -c1-150 "$OUT/keep/normbwd-32768-call5.txt"
  SWEEP_OPS=layer SWEEP_DTYPES=bfloat16 SWEEP_SHAPES="8192x262144" \
    SWEEP_LAUNCHES="lag/4096/4/2/0 lag/8192/16/1/0 lag/8192/8/1/0" \
    timeout $((570 - SECONDS)) python3 benchmarks/norm_bwd_narrow_sweep.py sweep \
    "$OUT/keep/lnbwd-262144-call5.txt" > "$OUT/keep/lnbwd-262144-call5.log" 2>&1
  echo "LN bwd sweep 262144: exit $?"; cut -c1-150 "$OUT/keep/lnbwd-262144-call5.txt"
  finish_call one
  ;;
6)
  gpu_tests norms-call6 150 tests/ops/test_norm_bwd_narrow.py tests/ops/test_norm_split_fwd.py \
    tests/ops/test_norm.py -k "narrow or split or past_16384 or wide_pairs" -n 6
  timeout 100 python3 benchmarks/norm_split_fwd.py sweep "$OUT/keep/normfwd-98304-call6" \
    bf16:8192x98304 "flags 8192/8w x2 pf,lag1 8192/8w x2 pf,lag1 8192/8w x2 pk 1p" \
    > "$OUT/normfwd-sweep.log" 2>&1
  echo "norm fwd sweep: exit $?"; cut -c1-150 "$OUT/keep/normfwd-98304-call6.txt"
  sweep_bench $((570 - SECONDS)) normbwd-bf16 "rms_norm.bwd,add_rms_norm.bwd,layer_norm.bwd" bf16 \
    --shape M=4096,N=32768
  finish_call one
  ;;
7)
  gpu_tests splitfwd-call7 100 tests/ops/test_norm_split_fwd.py -n 6
  timeout 150 python3 benchmarks/norm_split_fwd.py sweep "$OUT/keep/normfwd-flags-call7" \
    fp32:8192x131072,fp32:8192x262144,bf16:8192x98304 "flags 8192/8w x2 pf,\
flags 8192/8w x2 pf old,flags 8192/8w x2,flags 8192/8w x2 old" > "$OUT/normfwd-sweep.log" 2>&1
  echo "norm fwd sweep: exit $?"; cut -c1-150 "$OUT/keep/normfwd-flags-call7.txt"
  sweep_bench $((570 - SECONDS)) normfp32 \
    "rms_norm.fwd,add_rms_norm.fwd,layer_norm.fwd,rms_norm.bwd,add_rms_norm.bwd,layer_norm.bwd" \
    fp32 --shape M=8192,N=131072 --shape M=8192,N=262144
  finish_call one
  ;;
8)
  sweep_bench 300 normfp32 \
    "rms_norm.fwd,add_rms_norm.fwd,layer_norm.fwd,rms_norm.bwd,add_rms_norm.bwd,layer_norm.bwd" \
    fp32 --shape M=8192,N=131072 --shape M=8192,N=262144
  sweep_bench $((570 - SECONDS)) normbwd-bf16 "rms_norm.bwd,add_rms_norm.bwd" bf16 \
    --shape M=8192,N=131072 --shape M=8192,N=262144
  finish_call one
  ;;
9)
  gpu_tests norm-call9 150 tests/ops/test_norm.py tests/ops/test_norm_bwd_rows.py -n 6
  SWEEP_DEFAULT_OLD=1 SWEEP_LAUNCHES="" SWEEP_DTYPES=bfloat16 \
    SWEEP_SHAPES="32768x256 32768x1024 16384x2048 16384x4096 8192x8192 4096x16384" \
    timeout 150 python3 benchmarks/norm_bwd_narrow_sweep.py sweep \
    "$OUT/keep/normbwd-rows-call9.txt" > "$OUT/keep/normbwd-rows-call9.log" 2>&1
  echo "norm bwd sweep: exit $?"; cut -c1-150 "$OUT/keep/normbwd-rows-call9.txt"
  sweep_bench $((570 - SECONDS)) normbwd-bf16 "rms_norm.bwd,add_rms_norm.bwd,layer_norm.bwd" bf16 \
    --shape M=32768,N=256 --shape M=32768,N=1024 --shape M=16384,N=2048 --shape M=16384,N=4096 \
    --shape M=8192,N=8192 --shape M=4096,N=16384
  finish_call one
  ;;
10)
  sweep_bench 400 normbwd-bf16 "rms_norm.bwd,add_rms_norm.bwd,layer_norm.bwd" bf16 \
    --shape M=32768,N=256 --shape M=32768,N=1024 --shape M=16384,N=2048 --shape M=16384,N=4096 \
    --shape M=8192,N=8192 --shape M=4096,N=16384
  finish_call one
  ;;
*) echo "unknown call $CALL"; exit 2 ;;
esac
