#!/usr/bin/env bash
# The device calls of the forty-first session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session41-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/: git sparse-checkout set --no-cone '/*'
# '!/benchmarks/results/'; afterwards git sparse-checkout disable. No call reads the results.
#   1  cross-entropy at vocab 50257 (rows that start off 16-byte boundaries), bf16 71-78% of copy
#      on the H200: the saved-lse backward's flat kernel (aligned blocks of the flat stream,
#      shipped for float32 only, never timed in bf16) against the row kernel, kernel alone
#      (parity_sweep.py, all four backward shapes), then the split forward with gradient's
#      launches at 4096 x 50257, bf16 and float32 (ce_split_meeting_sweep.py; the float32 aligned
#      launch was chosen on the H100).
#   2  call 1's finding shipped (the bf16 saved-lse backward's row kernel in 1024-column 2-warp
#      slices on the H200, cross_entropy.BWD_ROW_LAUNCHES_BY_MODEL): the cross-entropy GPU tests,
#      the harness's bf16 cross_entropy.bwd sweep, then the row kernel's smaller programs and its
#      loads without the eviction hint, kernel alone (parity_sweep.py, five shapes).
#   3  call 2's finding shipped (that launch's loads without the hint): the harness's bf16
#      cross_entropy.bwd sweep and the cross-entropy GPU tests again, then the split forward with
#      gradient against the looped kernel the op runs at 16384 x 32000 (81% of copy through the
#      harness; the split kernel at 16384 / 8 warps x2 ran 578 us alone in session 40, the looped
#      595 in session 31) and its launches at 2048 x 151936 (ce_split_meeting_sweep.py).
#   4  call 3's finding shipped (2-byte rows of the looped launch's reach, 16385-32768 classes,
#      take the flag-word split plan on the H200: cross_entropy.SPLIT_OVER_LOOPED_BY_MODEL): the
#      cross-entropy GPU tests, the harness's bf16 cross_entropy.fwd_bwd sweep, then the split
#      against the looped kernel across that reach, kernel alone (ce_split_meeting_sweep.py).
#   5  call 4's finding shipped (the split only where a row fills 90% of its programs' columns,
#      SPLIT_OVER_LOOPED_MIN_FILL): the cross-entropy GPU tests, the harness's bf16
#      cross_entropy.fwd_bwd sweep, then the op as the harness runs it against the looped kernel
#      and the split plan across the looped reach (parity_sweep.py's new fwd_bwd cases; the
#      ce_split_meeting_sweep.py "op" rows of call 4 ran 2.5x their kernel at 8192 x 32768).
#   6  the saved-lse backward's row kernel counting slices from aligned addresses for rows that
#      start off 16-byte boundaries (row_grads(aligned=True), ALIGN), kernel alone at 4096 x
#      50257 (parity_sweep.py, bf16 and float32), with its GPU tests; the op's forward with
#      gradient against both kernels again (parity_sweep.py, its inputs now copied for each
#      contender's check: Liger's cross-entropy writes its gradient into the logits).
#   7  every GPU test at the kernel code before call 9's float32 launch (the aligned-address
#      backward removed again; the CPU tier's slowest interpreter cases trimmed).
#   8  the float32 split forward with gradient (the arrival-counter launch chosen on the H100,
#      84-88% of copy through the harness on the H200 at 128256-262144 classes) against the
#      flag-word launches never timed in float32 there (ce_split_meeting_sweep.py).
#   9  call 8's finding shipped (float32 rows meet through flag words in two 16384-column 8-warp
#      programs an SM on the H200: cross_entropy.FLOAT32_FLAG_WORDS_BY_MODEL): the cross-entropy
#      GPU tests, the harness's float32 cross_entropy.fwd_bwd sweep, then the launch at 4096 x
#      50257 float32 (rows off 16-byte boundaries, which keep ALIGNED_FLOAT32_LAUNCHES).
#  10  the float32 norm backward of 131072 and 262144 columns (the flag-word split kernel at the
#      H100's 4096-column 4-warp launch, 76-89% of copy through the harness on the H200):
#      benchmarks/norm_bwd_narrow_sweep.py at wider and narrower programs, kernel alone.
#  11  call 10's finding shipped (float32 rows of 65537-131072 columns: the flags kernel in
#      8192-column 8-warp programs, one an SM, NORM_BWD_NARROW_BY_MODEL): the narrow-row GPU
#      tests at 131072 columns, then the three float32 norm backward rows at 8192 x 131072
#      through the harness.
# Usage: bash scripts/gpu/session41_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session41_calls.sh "$@"

ce_gpu_tests() {  # LIMIT_S: the cross-entropy, lean-kernel and fused linear cross-entropy GPU
  # tests (the weight past 2**31 elements left out) into OUT/keep/gpu-tests-ce-callCALL.txt
  gpu_tests "ce-call$CALL" "$1" tests/ops/test_cross_entropy.py tests/ops/test_lean_kernels.py \
    tests/ops/test_fused_linear_cross_entropy.py -n 6 \
    --deselect tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements
}

case "$CALL" in
1)
  parity_cases ce-bwd-bf16-call1 330 --only "cross_entropy.bwd M=4096 V=50257 torch.bfloat16" \
    "cross_entropy.bwd M=16384 V=32000 torch.bfloat16" "cross_entropy.bwd M=8192 V=128256 torch.bfloat16" \
    "cross_entropy.bwd M=4096 V=262144 torch.bfloat16"
  ce_meeting_sweep "$((570 - SECONDS))" 4096x50257:bf16,4096x50257:fp32 \
    "default,op,words 4096/4 x8,words 2048/2 x16,words 4096/8 x4,words 8192/8 x2,words 16384/16 x1,words 8192/8 x4"
  finish_call one
  ;;
2)
  ce_gpu_tests 150
  sweep_bench 200 cebwd-bf16 cross_entropy.bwd bf16
  parity_cases ce-bwd-bf16-call2 $((570 - SECONDS)) --only "cross_entropy.bwd M=4096 V=50257 torch.bfloat16" \
    "cross_entropy.bwd M=16384 V=32000 torch.bfloat16" "cross_entropy.bwd M=8192 V=128256 torch.bfloat16" \
    "cross_entropy.bwd M=4096 V=262144 torch.bfloat16" "cross_entropy.bwd M=2048 V=151936 torch.bfloat16"
  finish_call one
  ;;
3)
  sweep_bench 200 cebwd-bf16 cross_entropy.bwd bf16
  gpu_tests ce-call3 150 tests/ops/test_cross_entropy.py tests/ops/test_lean_kernels.py -n 6
  ce_meeting_sweep "$((570 - SECONDS))" 16384x32000:bf16,2048x151936:bf16 \
    "default,op,words 16384/8 x2,words 8192/4 x4,words 4096/4 x8,words 16384/16 x2"
  finish_call one
  ;;
4)
  gpu_tests ce-call4 150 tests/ops/test_cross_entropy.py tests/ops/test_lean_kernels.py -n 6
  sweep_bench 200 cefwdbwd-bf16 cross_entropy.fwd_bwd bf16
  ce_meeting_sweep "$((570 - SECONDS))" 16384x32000:bf16,8192x32768:bf16,16384x24576:bf16,16384x16392:bf16,16384x20000:bf16 \
    "op,looped,words 8192/4 x4,words 16384/8 x2,words 4096/4 x8"
  finish_call one
  ;;
5)
  gpu_tests ce-call5 150 tests/ops/test_cross_entropy.py tests/ops/test_lean_kernels.py -n 6
  sweep_bench 200 cefwdbwd-bf16 cross_entropy.fwd_bwd bf16
  parity_cases ce-fwd-bwd-bf16-call5 $((570 - SECONDS)) --only "cross_entropy.fwd_bwd"
  finish_call one
  ;;
6)
  gpu_tests lean-call6 120 tests/ops/test_lean_kernels.py -n 6
  parity_cases ce-aligned-call6 300 --only "cross_entropy.bwd M=4096 V=50257" "cross_entropy.fwd_bwd"
  finish_call one
  ;;
7)
  gpu_tests ops-call7 260 tests/ops -n 6 \
    --deselect tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements
  gpu_tests rest-call7 $((540 - SECONDS)) tests --ignore=tests/ops -n 4
  finish_call one
  ;;
8)
  ce_meeting_sweep 400 4096x262144:fp32,2048x151936:fp32,8192x128256:fp32 \
    "default,counter 8192/8 x4,words 8192/8 x4,words 8192/4 x4,words 4096/4 x8,words 16384/8 x2,words 16384/16 x1,counter 16384/16 x1"
  finish_call one
  ;;
9)
  ce_gpu_tests 180
  sweep_bench 200 cefwdbwd-fp32 cross_entropy.fwd_bwd fp32
  ce_meeting_sweep "$((560 - SECONDS))" 4096x50257:fp32 \
    "default,words 16384/8 x2,words 8192/4 x4"
  finish_call one
  ;;
10)
  SWEEP_DTYPES=float32 SWEEP_SHAPES="8192x131072 8192x262144" SWEEP_LAUNCHES="flags/4096/4/2/1 \
flags/8192/8/1/1 flags/8192/16/1/1 flags/2048/4/4/1 flags/4096/8/2/1" \
    timeout 240 python3 benchmarks/norm_bwd_narrow_sweep.py sweep "$OUT/keep/normbwd-fp32-wide-call10.txt" \
    > "$OUT/keep/normbwd-fp32-wide-call10.log" 2>&1
  echo "norm bwd sweep: exit $?"; cut -c1-160 "$OUT/keep/normbwd-fp32-wide-call10.log" | tail -40
  finish_call one
  ;;
11)
  gpu_tests narrow-call11 60 tests/ops/test_norm_bwd_narrow.py -k 131072 -n 6
  sweep_bench $((225 - SECONDS)) normbwd-fp32 "rms_norm.bwd,add_rms_norm.bwd,layer_norm.bwd" fp32 \
    --shape M=8192,N=131072
  finish_call one
  ;;
*) echo "unknown call $CALL"; exit 2 ;;
esac
