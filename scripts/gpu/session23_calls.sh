#!/usr/bin/env bash
# The device calls planned in the twenty-second session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session23-h200-<date>/.
#   1  codegen.COLUMN_SUMS (built in session 22, off, unmeasured: a sum_to over a row group's
#      leading dims summed in its kernel, so residual_rmsnorm_swiglu's backward no longer
#      stores and re-reads its [T, H] weight-gradient product): its GPU tests, then the
#      backward blueprint through the harness with it on and off, in one call. The backward
#      ties torch.compile (1.00x, session22 blueprint-matmul-call2.json) at 52% of copy.
#      causal_attention_scores joins the second run: its generator v8 kernel (FULL_RUN removed,
#      session 22) has not been benched (v7 measured 104.4 µs, blueprint-causal-call7.json)
#   2  issue 5's large bf16 resample (0.94x torch.compile at 78% of copy, session21
#      robotics-call7.json): the tile stage the twenty-first session's sweep budget did not reach
#   3  exhaustive tuning of the float32 norm forwards (planned since the nineteenth session)
#   4  issue 6's compiler measurements of all eight blueprints at one commit, with cuBLAS
#      initialised before the window (session 22 measured them in two calls, 9 and 10), and
#      the first cold compiles with Triton's self-hash in a background thread (built in
#      session 22: bias_gelu 0.26 and mixed_precision_chain 0.29 of torch.compile's there)
#   5  the whole harness test suite on CUDA (the cheating gallery's CPU-tier cases included,
#      which earlier sessions ran on a GPU only in parts)
# Added in the twenty-third session, after calls 1-4:
#   6  the single-stream forward's new launch for 16-bit rows of 256+ columns (1 warp, two-probe
#      search; call 2's tile stage): the robotics GPU tests of the resample forward, the resample
#      forwards through the harness; then the float32 norm forwards at the six shapes call 3
#      tuned (their configs now shipped for the H200) through the harness
#   7  the robotics GPU tests (call 6 named files without GPU tests), float32 LayerNorm at
#      4096 x 16384 back on the tiled kernel with call 3's launch, and mlp_block,
#      layernorm_linear_gelu and causal_attention_scores' first results from disk again (call 4
#      ran every stage of them slower than session 22's calls 9-10, the inputs' set-up too)
#   8  a first result's import made cheaper (generated_modules: @triton.jit deferred to first
#      use, the entry's bytecode run instead of compiling the source; lookup: another model's
#      shipped file parsed only when needed): its tests on CUDA, then the three blueprints of
#      call 7 again (device time left: about 290 s)
# Usage: bash scripts/gpu/session23_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session23_calls.sh "$@"

case "$CALL" in
  1) gpu_tests column-sums 150 tests/blueprint/test_column_sums.py
     (export WARPFORGE_COLUMN_SUMS=1
      blueprint_suite blueprint-bwd-column-sums-call1 "blueprint.residual_rmsnorm_swiglu.bwd:130")
     blueprint_suite blueprint-bwd-call1 "blueprint.residual_rmsnorm_swiglu.bwd:130" \
       "blueprint.causal_attention_scores:100" ;;
  2) t0=$SECONDS
     timeout 400 python3 benchmarks/robotics_sweep.py --out "$OUT/robotics" --budget-s 320 \
       --stages search,tile,prefetch --only "fwd.bf16 B=64 S=4096" > "$OUT/robotics.log" 2>&1
     echo "robotics sweep: exit $? in $((SECONDS - t0)) s"; tail -50 "$OUT/robotics.log"
     cp "$OUT/robotics/robotics-sweep.json" "$OUT/keep/robotics-sweep-call2.json" 2>/dev/null ;;
  3) normfwd_fp32_grid ;;
  4) compiler_run compiler-suite-call4 560 --timeout 120 --warm-repeats 3 --no-profile \
       --replay-steps 10000
     python3 scripts/compiler_table.py "$OUT/keep/compiler-suite-call4.json" ;;
  5) t0=$SECONDS
     timeout 540 python3 -m pytest tests/harness -q -p no:cacheprovider -rfEs \
       > "$OUT/keep/tests-harness-cuda-call5.txt" 2>&1
     echo "harness tests on CUDA: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/tests-harness-cuda-call5.txt")" ;;
  6) gpu_tests robotics 120 tests/robotics/test_resample.py tests/robotics/test_resample_search.py
     t0=$SECONDS
     timeout 150 python3 -m warpforge bench --problem 'resample.fwd*' \
       --out "$OUT/keep/robotics-fwd-call6.json" > "$OUT/robotics-bench.log" 2>&1
     echo "robotics bench: exit $? in $((SECONDS - t0)) s"; tail -12 "$OUT/robotics-bench.log"
     export SUITE_PIECES="rms_norm.fwd:110 layer_norm.fwd:110 add_rms_norm.fwd:110"
     sweep_part fp32 fwd "M=16384,N=4096 M=8192,N=8192 M=16384,N=2048 M=32768,N=1024 M=4096,N=16384 M=32768,N=256" ;;
  7) gpu_tests robotics 130 tests/robotics/test_robotics_gpu.py
     export SUITE_PIECES="layer_norm.fwd:80"
     sweep_part fp32 fwd "M=4096,N=16384"
     compiler_run compiler-warm-call7 $((560 - SECONDS)) --problems blueprint.mlp_block \
       blueprint.layernorm_linear_gelu blueprint.causal_attention_scores --timeout 120 \
       --warm-repeats 5 --skip-torch-compile --no-profile --replay-steps 2000
     python3 scripts/compiler_table.py "$OUT/keep/compiler-warm-call7.json" ;;
  8) t0=$SECONDS
     timeout 70 python3 -m pytest -q -p no:cacheprovider -rfEs \
       tests/blueprint/test_generated_modules.py tests/blueprint/test_triton_direct.py \
       > "$OUT/keep/tests-generated-modules-cuda-call8.txt" 2>&1
     echo "tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/tests-generated-modules-cuda-call8.txt")"
     compiler_run compiler-warm-call8 $((270 - SECONDS)) --problems blueprint.mlp_block \
       blueprint.layernorm_linear_gelu blueprint.causal_attention_scores --timeout 120 \
       --warm-repeats 5 --skip-torch-compile --no-profile --replay-steps 500
     python3 scripts/compiler_table.py "$OUT/keep/compiler-warm-call8.json" ;;
  *) echo "CALL: expected 1-8, got $CALL" >&2; exit 2 ;;
esac
finish_call one
