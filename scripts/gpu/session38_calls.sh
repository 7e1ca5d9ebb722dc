#!/usr/bin/env bash
# The device calls of the thirty-eighth session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session38-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/: git sparse-checkout set --no-cone '/*'
# '!/benchmarks/results/'; afterwards git sparse-checkout disable. No call reads the results.
#   1  where the bf16 LayerNorm backward's time goes against RMSNorm's at the issue's rows of
#      1024-8192 columns: benchmarks/ln_bwd_profile.py's kernel breakdown of forward + backward
#      for both norms, then Nsight Compute (full set) of each backward's row kernel at
#      16384 x 4096.
#   2  the bf16 norm backwards alone at 1024-8192 columns through parity_sweep.py's backward
#      cases: the rows kernel at launches the tuner never timed (16 warps without prefetch:
#      LayerNorm's prefetch there takes 75 registers, so one 16-warp program fits an SM where
#      two were asked) against the op's.
#   3  the same cases at launches capped in registers (RowLaunchConfig.max_registers: 16 warps
#      with prefetch at 64 registers, two an SM, and others that fit one more program an SM).
#   4  the measured backward launches shipped (norm.NORM_BWD_ROW_LAUNCHES): their GPU tests and
#      the norm tests, then layer_norm.bwd and rms_norm.bwd bf16 at 32768 x 1024 and 16384 x 4096
#      through the harness (RMSNorm at 4096 columns unchanged: a control).
#   5  the three norm backwards, bf16 and float32, at the issue's rows of 256-4096 columns,
#      alone, around their tuned launches (parity_sweep.py's neighbour cases: prefetch toggled,
#      one program an SM more and fewer, tiles of twice and half the rows).
#   6  call 5's three gains shipped (bf16 LayerNorm and add+RMSNorm at 256 columns, float32
#      RMSNorm at 4096): the backward launch and norm GPU tests, then those rows through the
#      harness.
#   7  the blueprint backward's weight gradient summed in its kernel (WARPFORGE_COLUMN_SUMS=1),
#      now into a [BLOCK_M, BLOCK_N] register tile reduced once a program rather than every row
#      block: the column-sum GPU tests, then blueprint.residual_rmsnorm_swiglu.bwd with it and
#      without it through the harness (bf16, 16384 x 4096).
#   8  that backward's row kernel tuned on the H200 (never tuned before: it ran the untuned
#      8-warp launch) at 16384 x 4096, then blueprint.residual_rmsnorm_swiglu.bwd through the
#      harness on the tuned config (gemm_tune_bench.sh), then with column sums on that config.
#   9  every GPU test at the session's final code: tests/ops on six workers (fused linear
#      cross-entropy's weight past 2**31 elements left out: it runs out of memory beside other
#      workers, and its code did not change), the rest of the tree on four.
#  10  the norm forwards of 1024-4096 columns still under torch.compile (float32 RMSNorm 0.96-0.99x)
#      through parity_sweep.py's specialized launches (NARROW_SPECIALIZED_CASES: whole-row and
#      looped one-row-a-program launches, each compiled for the row length and not).
#  11  float32 RMSNorm of 2048 columns on call 10's looped launch (NORM_FWD_ROW_LAUNCHES): the
#      wide-row GPU tests, then rms_norm.fwd float32 16384 x 2048 through the harness.
#  12  bf16 LayerNorm backward at 8192 x 8192 with its partial dweight / dbias rows in memory
#      (the rows kernel's PARTIALS_IN_MEMORY), so 16 warps fit two an SM: parity_sweep.py's case.
#  13  the GPU tests an audit of the tests changed (absolute tolerances scaled to probabilities of
#      about 1 / classes; the registry-hit test with ptxas made to fail; the unit-factor scaling
#      test with a signalling NaN), with the other tests of those files' changed functions.
# Usage: bash scripts/gpu/session38_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session38_calls.sh "$@"

norm_bwd_breakdown() {  # DTYPE SHAPES...: ln_bwd_profile.py of both norms at each MxN
  local dtype="$1" shape norm
  shift
  for shape in "$@"; do
    for norm in layer rms; do
      echo "== $norm $dtype $shape"
      timeout 60 python3 benchmarks/ln_bwd_profile.py --norm "$norm" --dtype "$dtype" \
        --M "${shape%x*}" --N "${shape#*x}" --out "$OUT/keep/profile-$norm-$dtype-$shape.json"
    done
  done
}

norm_bwd_ncu() {  # NORM DTYPE MxN KERNEL_REGEX: Nsight Compute, full set, one launch
  local name="ncu-$1-bwd-$2-$3"
  timeout 150 ncu -k "regex:$4" --launch-skip 2 --launch-count 1 --set full -f \
    -o "$OUT/keep/$name" python3 benchmarks/ln_bwd_profile.py --driver --norm "$1" \
    --dtype "$2" --M "${3%x*}" --N "${3#*x}" > "$OUT/$name.log" 2>&1
  echo "ncu $name: exit $?"; tail -2 "$OUT/$name.log"
  ncu --import "$OUT/keep/$name.ncu-rep" --page details > "$OUT/keep/$name.txt" 2>&1
  ncu --import "$OUT/keep/$name.ncu-rep" --page raw --csv > "$OUT/keep/$name-raw.csv" 2>&1
}

norm_bwd_parity() {  # parity_sweep.py's norm backward cases into OUT/keep/parity-norm-bwd-callCALL.*
  timeout 560 python3 benchmarks/parity_sweep.py --out "$OUT/parity" --only "norm.bwd M=" \
    > "$OUT/keep/parity-norm-bwd-call$CALL.txt" 2>&1
  echo "parity sweep: exit $?"; cat "$OUT/keep/parity-norm-bwd-call$CALL.txt"
  cp "$OUT/parity/parity_sweep.json" "$OUT/keep/parity-norm-bwd-call$CALL.json"
}

case "$CALL" in
1)
  nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv
  norm_bwd_breakdown bfloat16 16384x4096 8192x8192 16384x2048 32768x1024
  norm_bwd_ncu layer bfloat16 16384x4096 norm_bwd_rows
  norm_bwd_ncu rms bfloat16 16384x4096 norm_bwd_rows
  finish_call one
  ;;
2 | 3)
  norm_bwd_parity
  finish_call one
  ;;
4)
  gpu_tests norm-bwd-rows-call4 200 -n 4 tests/ops/test_norm_bwd_rows.py tests/ops/test_norm.py
  timeout 300 python3 -m warpforge bench --problem 'layer_norm.bwd,rms_norm.bwd' --dtype bf16 \
    --sweep --shape M=32768,N=1024 --shape M=16384,N=4096 --max-time 1 \
    --out "$OUT/keep/normbwd-bf16-call4.json" > "$OUT/bench.log" 2>&1
  echo "bench: exit $?"; grep -E "^│ (rms|layer)" "$OUT/bench.log"
  finish_call one
  ;;
5)
  parity_cases norm-bwd-neighbours-call5 560 --only "around the tuned launch"
  finish_call one
  ;;
6)
  gpu_tests norm-bwd-rows-call6 200 -n 4 tests/ops/test_norm_bwd_rows.py tests/ops/test_norm.py
  timeout 200 python3 -m warpforge bench --problem 'layer_norm.bwd,add_rms_norm.bwd' --dtype bf16 \
    --sweep --shape M=32768,N=256 --max-time 1 --out "$OUT/keep/normbwd-bf16-call6.json" \
    > "$OUT/bench.log" 2>&1
  echo "bench: exit $?"; grep -E "^│ (add|rms|layer)" "$OUT/bench.log"
  timeout 200 python3 -m warpforge bench --problem rms_norm.bwd --dtype fp32 --sweep \
    --shape M=16384,N=4096 --max-time 1 --out "$OUT/keep/normbwd-fp32-call6.json" \
    > "$OUT/bench.log" 2>&1
  echo "bench: exit $?"; grep -E "^│ (add|rms|layer)" "$OUT/bench.log"
  finish_call one
  ;;
7)
  gpu_tests column-sums-call7 150 tests/blueprint/test_column_sums.py
  (export WARPFORGE_COLUMN_SUMS=1
   blueprint_suite blueprint-bwd-column-sums-call7 "blueprint.residual_rmsnorm_swiglu.bwd:150")
  blueprint_suite blueprint-bwd-call7 "blueprint.residual_rmsnorm_swiglu.bwd:150"
  finish_call one
  ;;
8)
  blueprint_tune 60 \
    "blueprint.residual_rmsnorm_swiglu_backward.k0_add_rms_norm_silu_mul_sigmoid_sub_mean_rsqrt T=16384,H=4096" \
    "blueprint.residual_rmsnorm_swiglu.bwd"
  (export WARPFORGE_COLUMN_SUMS=1 WARPFORGE_DB_URL="sqlite:///$OUT/bp/tune.db"
   blueprint_suite blueprint-bwd-column-sums-call8 "blueprint.residual_rmsnorm_swiglu.bwd:150")
  finish_call one
  ;;
9)
  gpu_tests ops-call9 300 tests/ops -n 6 \
    --deselect tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements
  gpu_tests rest-call9 240 tests --ignore=tests/ops -n 4
  finish_call one
  ;;
10)
  parity_cases narrow-specialized-call10 330 --only \
    "rms_norm.fwd M=16384 N=2048 torch.float32 specialized" \
    "rms_norm.fwd M=16384 N=4096 torch.float32 specialized" \
    "rms_norm.fwd M=32768 N=1024 torch.float32 specialized" \
    "layer_norm.fwd M=16384 N=2048 torch.float32 specialized" \
    "layer_norm.fwd M=32768 N=1024 torch.float32 specialized" \
    "rms_norm.fwd M=32768 N=1024 torch.bfloat16 specialized" \
    "layer_norm.fwd M=32768 N=1024 torch.bfloat16 specialized"
  finish_call one
  ;;
11)
  gpu_tests wide-rows-call11 100 -n 4 tests/ops/test_wide_rows.py
  timeout 120 python3 -m warpforge bench --problem rms_norm.fwd --dtype fp32 --sweep \
    --shape M=16384,N=2048 --max-time 1 --out "$OUT/keep/rmsfwd-fp32-call11.json" > "$OUT/bench.log" 2>&1
  echo "bench: exit $?"; grep -E "^│ rms" "$OUT/bench.log"
  finish_call one
  ;;
12)
  parity_cases norm-bwd-in-memory-call12 150 --only \
    "layer_norm.bwd M=8192 N=8192 torch.bfloat16 backward alone"
  finish_call one
  ;;
13)
  gpu_tests audit-call13 170 -n 4 \
    tests/ops/test_wide_rows.py::test_more_than_2_to_31_elements_gpu \
    tests/ops/test_lean_kernels.py::test_cross_entropy_flat_backward_gpu \
    tests/ops/test_lean_kernels.py::test_cross_entropy_flat_backward_past_2_31_elements_gpu \
    tests/ops/test_split_rows.py::test_gpu_split_plans_match_the_reference \
    tests/ops/test_softmax.py::test_bf16_gpu \
    tests/ops/test_cross_entropy.py::test_gpu_matches_reference \
    tests/blueprint/test_triton_binaries.py::test_registry_hit_with_an_empty_triton_cache_does_not_recompile
  timeout 60 python3 -m pytest -q -p no:cacheprovider tests/ops/test_cross_entropy.py -k scaling_skips \
    tests/ops/test_norm_split_fwd.py -k "scaling_skips or public_ops_of_long_rows" \
    > "$OUT/keep/gpu-tests-audit-cpu-call13.txt" 2>&1
  echo "scaling and split-forward tests on the GPU: exit $?: $(tail -1 "$OUT/keep/gpu-tests-audit-cpu-call13.txt")"
  finish_call one
  ;;
*) echo "unknown call $CALL"; exit 2 ;;
esac
