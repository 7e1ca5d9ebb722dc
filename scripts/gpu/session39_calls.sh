#!/usr/bin/env bash
# The device calls of the thirty-ninth session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session39-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/: git sparse-checkout set --no-cone '/*'
# '!/benchmarks/results/'; afterwards git sparse-checkout disable. No call reads the results.
#   1  the two tests the thirty-eighth session changed and never ran on a GPU (the unit-factor
#      scaling test on the device; the blueprint bf16 problems failing on a fallback), then why
#      the norm forwards of 256 columns trail torch.compile by 2-3%: Nsight Compute (full set)
#      of ours beside Inductor's kernel at 32768 x 256 (benchmarks/problem_ncu.py), and
#      Inductor's source and launch for those rows (benchmarks/inductor_code.py).
#   2  norm_fwd_tile_kernel (call 1: Inductor's kernel at 256 columns, compiled for the row, runs
#      about half our row kernel's instructions): its tests on the GPU (bf16), then the norm
#      forwards of 256, 1024 and 2048 columns alone, the op as shipped against the tile kernel
#      at each launch of parity_sweep.tile_launches (parity_sweep.py's tile cases).
#   3  the tile kernel with the weight and bias loaded beside x (EARLY_W; call 2's tile kernel at
#      Inductor's launch stayed 0.7 us behind it at 256 columns, and loads them after the
#      reductions): its tests, then call 2's cases at launches of 16-32 elements a thread,
#      weight early and late.
#   4  calls 2-3's launches shipped (norm.NORM_FWD_TILE_LAUNCHES): the tile, norm and wide-row
#      tests on the GPU, then the norm forwards of 256, 1024 and 2048 columns through the harness
#      (bf16: the three norms at all three widths; float32: RMSNorm and LayerNorm at 256 and
#      1024).
#   5  the backward problems (forward + backward) at those rows, whose forward changed; then the
#      three tests call 4 found failing on the GPU (CPU tensors where the device's were meant),
#      and the rest of tests/ops unmarked (the GPU tier's calls ran only its gpu-marked tests)
#      in what time is left.
#   6  every GPU test at the code then (tests/ops on six workers, the rest on four),
#      then the five files whose CPU-tier tests call 5 found failing on the GPU, unmarked: those
#      tests now carry the interpreter marker and skip where CUDA is present.
# Usage: bash scripts/gpu/session39_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session39_calls.sh "$@"

problem_ncu() {  # PROBLEM DTYPE SHAPE: Nsight Compute of ours and torch.compile's kernels
  local name="ncu-$1-$2-${3//[=,]/}"
  timeout 150 ncu --profile-from-start off --set full -f -o "$OUT/keep/$name" \
    python3 benchmarks/problem_ncu.py --problem "$1" --dtype "$2" --shape "$3" \
    > "$OUT/$name.log" 2>&1
  echo "ncu $name: exit $?"; tail -3 "$OUT/$name.log"
  ncu --import "$OUT/keep/$name.ncu-rep" --page details > "$OUT/keep/$name.txt" 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Grid Size|Block Size|Achieved Occupancy|DRAM Throughput|Waves Per SM" \
    "$OUT/keep/$name.txt" | head -40
}

norm_rows() {  # PHASE DTYPE PROBLEMS SHAPE...: those rows through the harness into
  # OUT/keep/normPHASE-DTYPE-callCALL.json
  local phase="$1" dtype="$2" problems="$3" shape args=()
  shift 3
  for shape in "$@"; do args+=(--shape "$shape"); done
  timeout $((580 - SECONDS)) python3 -m warpforge bench --problem "$problems" --dtype "$dtype" \
    --sweep "${args[@]}" --max-time 1 --out "$OUT/keep/norm$phase-$dtype-call$CALL.json" \
    > "$OUT/bench-$phase-$dtype.log" 2>&1
  echo "bench $phase $dtype: exit $?"; grep -E "^│ (add|rms|layer)" "$OUT/bench-$phase-$dtype.log"
}

case "$CALL" in
1)
  timeout 120 python3 -m pytest -q -p no:cacheprovider -rfEs \
    tests/ops/test_cross_entropy.py -k scaling_skips \
    > "$OUT/keep/gpu-tests-unverified-call1.txt" 2>&1
  echo "scaling test: exit $?: $(tail -1 "$OUT/keep/gpu-tests-unverified-call1.txt")"
  gpu_tests blueprint-bf16-call1 200 -n 4 \
    tests/blueprint/test_blueprint_problems.py::test_problem_in_bfloat16_on_gpu
  for problem in rms_norm.fwd layer_norm.fwd; do
    for dtype in bf16 fp32; do problem_ncu "$problem" "$dtype" M=32768,N=256; done
  done
  problem_ncu add_rms_norm.fwd bf16 M=32768,N=256
  for dtype in bf16 fp32; do
    timeout 120 python3 benchmarks/inductor_code.py --out "$OUT/ind-$dtype" --problem rms_norm.fwd \
      --dtype "$dtype" --shape M=32768,N=256 > /dev/null 2>&1
    cp "$OUT/ind-$dtype/inductor-kernels.txt" "$OUT/keep/inductor-rms-fwd-$dtype-256.txt"
  done
  timeout 60 python3 benchmarks/inductor_code.py --out "$OUT/ind-ln" --problem layer_norm.fwd \
    --dtype bf16 --shape M=32768,N=256 > /dev/null 2>&1
  cp "$OUT/ind-ln/inductor-kernels.txt" "$OUT/keep/inductor-ln-fwd-bf16-256.txt"
  grep -E "cubin|triton_heuristics|XBLOCK|num_warps" "$OUT"/keep/inductor-*.txt | head -40
  finish_call one
  ;;
2 | 3)
  timeout 120 python3 -m pytest -q -p no:cacheprovider -rfEs -n 4 tests/ops/test_norm_tile_fwd.py \
    > "$OUT/keep/gpu-tests-tile-call$CALL.txt" 2>&1
  echo "tile tests on the GPU: exit $?: $(tail -1 "$OUT/keep/gpu-tests-tile-call$CALL.txt")"
  parity_cases "tile-call$CALL" 500 --only "N=256 torch.bfloat16 tile" "N=256 torch.float32 tile" \
    "N=1024 torch.bfloat16 tile" "N=1024 torch.float32 tile" "N=2048 torch.float32 tile" \
    "N=2048 torch.bfloat16 tile"
  finish_call one
  ;;
4)
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rfEs -n 6 tests/ops/test_norm_tile_fwd.py \
    tests/ops/test_norm.py tests/ops/test_wide_rows.py > "$OUT/keep/gpu-tests-norm-call4.txt" 2>&1
  echo "norm tests on the GPU: exit $?: $(tail -1 "$OUT/keep/gpu-tests-norm-call4.txt")"
  norm_rows fwd bf16 "rms_norm.fwd,layer_norm.fwd,add_rms_norm.fwd" \
    M=32768,N=256 M=32768,N=1024 M=16384,N=2048
  norm_rows fwd fp32 "rms_norm.fwd,layer_norm.fwd" M=32768,N=256 M=32768,N=1024
  finish_call one
  ;;
5)
  norm_rows bwd bf16 "rms_norm.bwd,layer_norm.bwd,add_rms_norm.bwd" \
    M=32768,N=256 M=32768,N=1024 M=16384,N=2048
  norm_rows bwd fp32 "rms_norm.bwd,layer_norm.bwd" M=32768,N=256 M=32768,N=1024
  timeout 100 python3 -m pytest -q -p no:cacheprovider -rfEs -n 4 tests/ops/test_norm.py \
    tests/ops/test_wide_rows.py -k "partials_in_registers or bias_only_keeps or public_forwards_of_1025" \
    > "$OUT/keep/gpu-tests-fixed-call5.txt" 2>&1
  echo "fixed tests on the GPU: exit $?: $(tail -1 "$OUT/keep/gpu-tests-fixed-call5.txt")"
  timeout $((570 - SECONDS)) python3 -m pytest -q -p no:cacheprovider -rfE -n 6 tests/ops \
    --deselect tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements \
    > "$OUT/keep/tests-ops-unmarked-call5.txt" 2>&1
  echo "tests/ops unmarked on the GPU: exit $?: $(tail -1 "$OUT/keep/tests-ops-unmarked-call5.txt")"
  grep -E "^FAILED|^ERROR" "$OUT/keep/tests-ops-unmarked-call5.txt" | head -30
  finish_call one
  ;;
6)
  gpu_tests ops-call6 200 tests/ops -n 6 \
    --deselect tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements
  gpu_tests rest-call6 170 tests --ignore=tests/ops -n 4
  timeout $((560 - SECONDS)) python3 -m pytest -q -p no:cacheprovider -rfE -n 4 \
    tests/ops/test_cross_entropy.py tests/ops/test_norm_split_bwd.py tests/ops/test_tunables.py \
    tests/ops/test_parity_sweep.py tests/ops/test_ops_bwd_sweep.py \
    > "$OUT/keep/tests-interpreter-marked-call6.txt" 2>&1
  echo "the interpreter-marked files unmarked on the GPU: exit $?: $(tail -n 1 "$OUT/keep/tests-interpreter-marked-call6.txt")"
  grep -E "^FAILED|^ERROR" "$OUT/keep/tests-interpreter-marked-call6.txt" | head -20
  finish_call one
  ;;
*) echo "unknown call $CALL"; exit 2 ;;
esac
