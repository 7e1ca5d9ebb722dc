#!/usr/bin/env bash
# The device calls planned in the twenty-first session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session22-h200-<date>/.
#   1  issue 6's suite in one harness run with the ceilings, part 1: the row blueprints with
#      the H200's shipped configs (sessions 17-21 benched them in pieces, on four commits)
#   2  part 2: the matmul blueprints (causal_attention_scores' kept-range kernel, 1.27x in
#      session21 blueprint-tuned-call6.json without ceilings) and the backward
#   3  exhaustive tuning of the float32 norm forwards (planned since the nineteenth session;
#      session 21 spent its device time on calls 5-8 instead)
#   4  issue 5's large bf16 resample (0.94x torch.compile at 78% of copy, session21
#      robotics-call7.json): the tile stage session 21's sweep budget did not reach
#   5  mlp_block's first result from disk, bimodal between runs (33.5-57.6 ms in session 21):
#      seven repeats that now record the kernels' first launch apart from the loading
#   6  the masked softmax's switches (built in session 21, off, unmeasured: FULL_RUN_TILES,
#      the run of tiles the mask keeps throughout without loading it; LAST_ROWS_FIRST, the
#      longest causal row blocks launched first): the codegen GPU tests (their bf16 test among
#      them), then scripts/gpu/masked_softmax_ab.py at T = 1024, 2048 and 4096; switch on only
#      what wins, then retune and bench through the harness
#   7  (added in session 22, after call 6 switched LAST_ROWS_FIRST on) the causal blueprint
#      through the harness with the ceilings, then scripts/gpu/matmul_lowering_ab.py: mlp_block's
#      and layernorm_linear_gelu's generated GEMMs against cuBLAS(Lt) lowerings
#   8  (after call 7: bias + GELU/ReLU matmul groups lowered to cuBLASLt's epilogue) the blueprint
#      GPU tests, the two GEMM-bound blueprints through the harness with the ceilings, and their
#      first result from disk (seven repeats each, as call 5)
#   9  (after call 8: compiler_bench initialises cuBLAS before the window, as a model's forward
#      has, and times one run without) the blueprint GPU tests, then the compiler's measurements
#      of the three blueprints whose kernels changed this session, torch.compile's cold compile
#      included
#  10  the same for the other five blueprints and causal_attention_scores again (its warm
#      repeats in call 9 were slow in every stage before the window too), without the profiles
# Usage: bash scripts/gpu/session22_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session22_calls.sh "$@"

case "$CALL" in
  1) blueprint_suite blueprint-rows-call1 "blueprint.bias_gelu:80" \
       "blueprint.residual_rmsnorm_swiglu:90" "blueprint.scaled_masked_softmax:90" \
       "blueprint.reduction_chain:80" "blueprint.mixed_precision_chain:80" ;;
  2) blueprint_suite blueprint-matmul-call2 "blueprint.causal_attention_scores:100" \
       "blueprint.layernorm_linear_gelu:130" "blueprint.mlp_block:130" \
       "blueprint.residual_rmsnorm_swiglu.bwd:130" ;;
  3) normfwd_fp32_grid ;;
  4) t0=$SECONDS
     timeout 400 python3 benchmarks/robotics_sweep.py --out "$OUT/robotics" --budget-s 320 \
       --stages search,tile,prefetch --only "fwd.bf16 B=64 S=4096" > "$OUT/robotics.log" 2>&1
     echo "robotics sweep: exit $? in $((SECONDS - t0)) s"; tail -50 "$OUT/robotics.log"
     cp "$OUT/robotics/robotics-sweep.json" "$OUT/keep/robotics-sweep-call4.json" 2>/dev/null ;;
  5) compiler_run compiler-warm 280 --problems blueprint.mlp_block blueprint.layernorm_linear_gelu \
       --timeout 120 --warm-repeats 7 --skip-torch-compile --replay-steps 2000
     python3 scripts/compiler_table.py "$OUT/keep/compiler-warm.json" ;;
  6) gpu_tests codegen 150 tests/blueprint/test_codegen.py
     t0=$SECONDS
     timeout $((560 - SECONDS)) python3 scripts/gpu/masked_softmax_ab.py \
       "$OUT/keep/masked-softmax-ab-call6.json" > "$OUT/ab.log" 2>&1
     echo "masked softmax A/B: exit $? in $((SECONDS - t0)) s"; tail -5 "$OUT/ab.log" ;;
  7) blueprint_suite blueprint-causal-call7 "blueprint.causal_attention_scores:100"
     t0=$SECONDS
     timeout $((560 - SECONDS)) python3 scripts/gpu/matmul_lowering_ab.py \
       "$OUT/keep/matmul-lowering-ab-call7.json" > "$OUT/ab.log" 2>&1
     echo "matmul lowering A/B: exit $? in $((SECONDS - t0)) s"; grep -v "^ *triton_\|AUTOTUNE" "$OUT/ab.log" | tail -12 ;;
  8) gpu_tests blueprint 200 tests/blueprint
     blueprint_suite blueprint-matmul-call8 "blueprint.layernorm_linear_gelu:130" \
       "blueprint.mlp_block:130"
     compiler_run compiler-warm-call8 250 --problems blueprint.mlp_block \
       blueprint.layernorm_linear_gelu --timeout 120 --warm-repeats 7 --skip-torch-compile \
       --replay-steps 2000
     python3 scripts/compiler_table.py "$OUT/keep/compiler-warm-call8.json" ;;
  9) gpu_tests blueprint 200 tests/blueprint
     compiler_run compiler-call9 330 --problems blueprint.mlp_block \
       blueprint.layernorm_linear_gelu blueprint.causal_attention_scores --timeout 120 \
       --warm-repeats 5 --replay-steps 2000
     python3 scripts/compiler_table.py "$OUT/keep/compiler-call9.json" ;;
  10) compiler_run compiler-call10 400 --problems blueprint.causal_attention_scores \
        blueprint.bias_gelu blueprint.residual_rmsnorm_swiglu blueprint.scaled_masked_softmax \
        blueprint.reduction_chain blueprint.mixed_precision_chain --timeout 120 \
        --warm-repeats 3 --no-profile --replay-steps 10000
      python3 scripts/compiler_table.py "$OUT/keep/compiler-call10.json" ;;
  *) echo "CALL: expected 1-10, got $CALL" >&2; exit 2 ;;
esac
finish_call one
