#!/usr/bin/env bash
# Run in the twentieth session: 1, 2 (SPLIT_TESTS=1), 3, 7, 6, 8 and the add+RMSNorm harness
# sweep by hand (benchmarks/results/session20-h200-2026-11-29/README.md); 4 and 5 wait for a
# later session (scripts/gpu/session21_calls.sh).
# The device calls planned in the nineteenth session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session20-h200-<date>/.
#   1  the norm GPU tests in full since the nineteenth session's dispatch (NORM_FWD_ROW_LAUNCHES:
#      rows of 1025-16384 columns through the whole-row kernel; its bf16 cases run only here;
#      session 19 ran the whole-row file's 82, then its limit stopped test_norm.py), and the
#      cross entropy GPU tests (the flat backward's loads changed to plain)
#   2  (SPLIT_TESTS=1: first test_norm_split_fwd.py's GPU tests, verbose, which call 1's limit
#      cut after 2 of 24) issue 6's row blueprints tuned on the H200 (their launches come from the H100's shipped
#      configs): scaled_masked_softmax at both bench shapes (0.89x torch.compile at
#      4 x 16 x 1024 x 1024 on the H200, 1.00x on the H100) and causal_attention_scores' fused
#      matmul + softmax kernel (0.96x), each then benched through the harness with what tuning
#      found (scripts/gpu/gemm_tune_bench.sh)
#   3  the same for mlp_block's two GEMMs (0.97x cuBLAS through eager on the H200)
#   4  issue 5's large resample shapes (session19_calls.sh 4: search, tile and prefetch launches)
#   5  exhaustive tuning of the float32 norm forwards (session19_calls.sh 2)
#   6  the cold compile of the two blueprints that compile GEMMs, profiled (compiler_bench.py's
#      warpforge_cold_profile): layernorm_linear_gelu took 31% of torch.compile's cold compile
#      on the H200 (target 25%; session19 compiler-suite.json), mlp_block 17%; then
#      add+RMSNorm's forwards held and read again (benchmarks/parity_sweep.py, never timed with
#      the whole-row kernel at 2048-16384 columns, nor read again at 32768)
#   7  (added in session 20) the one-tile kernel of a matmul with row ops: the blueprint codegen
#      GPU tests, causal_attention_scores tuned again with one-tile launches in its space, then
#      the three blueprints whose configs were tuned on the H200 benched (the others from
#      src/warpforge/tune/shipped/nvidia-h200-sm_90.json, calls 2-3)
#   8  (added in session 20, for the device time left) residual_rmsnorm_swiglu's row kernel tuned
#      on the H200 at both bench shapes (1.00x torch.compile at 8192 x 8192 in session 17), then
#      benched
# Usage: bash scripts/gpu/session20_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session20_calls.sh "$@"

case "$CALL" in
  1) gpu_tests norms 330 tests/ops/test_norm.py tests/ops/test_wide_rows.py \
       tests/ops/test_norm_split_fwd.py
     gpu_tests ce $((560 - SECONDS)) tests/ops/test_cross_entropy.py ;;
  2) if [ -n "${SPLIT_TESTS:-}" ]; then  # call 1 ran out of time in test_norm_split_fwd.py
       timeout 150 python3 -m pytest -m gpu -v -p no:cacheprovider --durations=0 \
         tests/ops/test_norm_split_fwd.py > "$OUT/keep/gpu-tests-split.txt" 2>&1
       echo "split gpu tests: exit $? in $SECONDS s: $(tail -1 "$OUT/keep/gpu-tests-split.txt")"
     fi
     blueprint_tune 45 \
       "blueprint.scaled_masked_softmax.k0_mul_add_softmax B=4,NH=16,T=1024
blueprint.scaled_masked_softmax.k0_mul_add_softmax B=1,NH=32,T=2048
blueprint.causal_attention_scores.k1_matmul_mul_where_softmax B=4,NH=16,T=1024,DH=64" \
       "blueprint.scaled_masked_softmax blueprint.causal_attention_scores" ;;
  3) blueprint_tune 60 \
       "blueprint.mlp_block.k0_linear_gelu T=8192,D=2048,F=8192
blueprint.mlp_block.k1_linear_add T=8192,D=2048,F=8192" "blueprint.mlp_block" ;;
  4) robotics_large ;;
  5) normfwd_fp32_grid ;;
  6) compiler_run compiler-gemm 400 --problems blueprint.layernorm_linear_gelu blueprint.mlp_block \
       --timeout 150
     t0=$SECONDS
     timeout $((560 - SECONDS)) python3 benchmarks/parity_sweep.py --out "$OUT/parity" \
       --only add_rms_norm.fwd > "$OUT/parity.log" 2>&1
     echo "parity sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/parity/parity_sweep.json" "$OUT/keep/parity-sweep-addrms.json" 2>/dev/null
     grep -vE "^\s*$|liger unavailable" "$OUT/parity.log" | head -120 ;;
  7) timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs tests/blueprint/test_codegen.py \
       > "$OUT/keep/gpu-tests-codegen.txt" 2>&1
     echo "codegen gpu tests: exit $? in $SECONDS s: $(tail -1 "$OUT/keep/gpu-tests-codegen.txt")"
     blueprint_tune 100 \
       "blueprint.causal_attention_scores.k1_matmul_mul_where_softmax B=4,NH=16,T=1024,DH=64" \
       "blueprint.causal_attention_scores blueprint.scaled_masked_softmax blueprint.mlp_block" ;;
  8) blueprint_tune 30 \
       "blueprint.residual_rmsnorm_swiglu.k0_add_rms_norm_silu_mul T=8192,H=8192
blueprint.residual_rmsnorm_swiglu.k0_add_rms_norm_silu_mul T=16384,H=4096" \
       "blueprint.residual_rmsnorm_swiglu" ;;
  *) echo "CALL: expected 1-8, got $CALL" >&2; exit 2 ;;
esac
finish_call one
