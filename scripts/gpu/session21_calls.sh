#!/usr/bin/env bash
# The device calls planned in the twentieth session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session21-h200-<date>/.
#   1  where issue 6's causal_attention_scores spends its time (0.85x torch.compile on the H200,
#      session20 blueprint-tuned-call7.json; one tile spanning the row measured slower than two
#      passes, so the per-element epilogue, not the product, looks like the cost): Nsight
#      Compute on the generated two-pass kernel (speed of light, instruction mix, warp stalls,
#      source counters) and on torch.compile's kernels for the same function, then the
#      blueprint GPU tests
#   2  issue 5's large resample shapes (72-75% of copy on the H200, session17 robotics-call4.json;
#      planned since the nineteenth session): search, tile and prefetch launches
#   3  exhaustive tuning of the float32 norm forwards (planned since the nineteenth session)
#   4  issue 6's compiler measurements for all eight forward blueprints with the H200's shipped
#      configs and the lookup that checks only the kernels asked about (mlp_block's first result
#      from disk took 53.5 ms in session20 compiler-gemm-call6.json, target 50), and each cold
#      compile again with its kernels compiled concurrently (WARPFORGE_CONCURRENT_COMPILE=1,
#      off by default until this measures it; layernorm_linear_gelu's cold ratio was 0.31 and
#      0.18 in two runs, target 0.25). Call 1's blueprint GPU tests include compile_ahead's.
#   5  (added after call 1's profile: the two-pass kernel issue-bound on its ALU pipe, 89.6 M
#      instructions against torch.compile's 71.3 M in two kernels) the causal kernel skipping
#      the N tiles its mask hides, with constant masks when there is no tail and exp2 of an fma:
#      codegen GPU tests, Nsight Compute again, retuned on the H200 and benched
#   6  the same after the per-tile test became one scan of the mask for the kept N range (call
#      5: 138.6 µs, 0.95x torch.compile; Nsight Compute: 1 eligible warp a scheduler, the
#      loads behind the test unpipelined)
#   7  (after call 2: smaller resample programs won at both large shapes, as on the H100) the
#      new default launch (32 elements a thread, 1024/2048-element tiles): robotics GPU tests,
#      the sweep over every case, then the harness's resample and align problems
#   8  (after call 4: mlp_block's first result from disk 57.6 / 38.0 / 56.6 ms, the one of eight
#      over 50) its warm first result seven times, profiled, beside layernorm_linear_gelu's (the
#      other two-kernel blueprint, 36.0 ms); torch.compile's cold run skipped
# Usage: bash scripts/gpu/session21_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session21_calls.sh "$@"

ncu_problem() {  # NAME IMPL: Nsight Compute on the kernels of one call (problem_run.py's range)
  timeout 200 ncu --nvtx --nvtx-include "profile/" --launch-count 8 --set full \
    --import-source yes -f -o "$OUT/keep/ncu-$1" \
    python3 scripts/gpu/problem_run.py blueprint.causal_attention_scores --impl "$2" \
    --warmup 3 --iters 1 > "$OUT/ncu-$1.log" 2>&1
  echo "ncu $1: exit $?"; tail -3 "$OUT/ncu-$1.log"
  ncu --import "$OUT/keep/ncu-$1.ncu-rep" --page details > "$OUT/keep/ncu-$1.txt" 2>&1
  ncu --import "$OUT/keep/ncu-$1.ncu-rep" --page raw > "$OUT/keep/ncu-$1-raw.txt" 2>&1
  grep -E "smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio" \
    "$OUT/keep/ncu-$1-raw.txt" | sort -k3 -g -r | head -6
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Ipc" \
    "$OUT/keep/ncu-$1.txt" | head -12
}

case "$CALL" in
  1) ncu_problem warpforge warpforge
     ncu_problem torch-compile torch.compile
     gpu_tests blueprint $((560 - SECONDS)) tests/blueprint ;;
  2) robotics_large ;;
  3) normfwd_fp32_grid ;;
  4) compiler_run compiler-suite 540 --problems blueprint.bias_gelu \
       blueprint.causal_attention_scores blueprint.layernorm_linear_gelu \
       blueprint.mixed_precision_chain blueprint.mlp_block blueprint.reduction_chain \
       blueprint.residual_rmsnorm_swiglu blueprint.scaled_masked_softmax \
       --timeout 150 --no-profile --concurrent-compile ;;
  5) gpu_tests codegen 150 tests/blueprint/test_codegen.py
     ncu_problem warpforge-skip warpforge
     blueprint_tune 100 \
       "blueprint.causal_attention_scores.k1_matmul_mul_where_softmax B=4,NH=16,T=1024,DH=64" \
       "blueprint.causal_attention_scores" ;;
  6) gpu_tests codegen 150 tests/blueprint/test_codegen.py
     ncu_problem warpforge-range warpforge
     blueprint_tune 100 \
       "blueprint.causal_attention_scores.k1_matmul_mul_where_softmax B=4,NH=16,T=1024,DH=64" \
       "blueprint.causal_attention_scores" ;;
  7) gpu_tests robotics 110 tests/robotics
     t0=$SECONDS
     timeout 200 python3 benchmarks/robotics_sweep.py --out "$OUT/robotics" --budget-s 150 \
       --stages search,tile,prefetch > "$OUT/robotics.log" 2>&1
     echo "robotics sweep: exit $? in $((SECONDS - t0)) s"; grep -E "best|wrong|error" "$OUT/robotics.log" | head
     cp "$OUT/robotics/robotics-sweep.json" "$OUT/keep/robotics-sweep-call7.json" 2>/dev/null
     t0=$SECONDS
     timeout $((470 - SECONDS)) python3 -m warpforge bench --problem 'resample*,align*' \
       --out "$OUT/keep/robotics-call7.json" > "$OUT/robotics-bench.log" 2>&1
     echo "robotics bench: exit $? in $((SECONDS - t0)) s"; tail -14 "$OUT/robotics-bench.log" ;;
  8) compiler_run compiler-warm 280 --problems blueprint.mlp_block blueprint.layernorm_linear_gelu \
       --timeout 120 --warm-repeats 7 --skip-torch-compile --replay-steps 2000 ;;
  *) echo "CALL: expected 1-8, got $CALL" >&2; exit 2 ;;
esac
finish_call one
