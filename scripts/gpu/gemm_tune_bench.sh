#!/usr/bin/env bash
# The blueprint matmul kernels on the GPU in one call: a strict-compile smoke check, budgeted
# tuning of the matmul kernels of the three matmul-bearing suite problems (bf16, their bench
# shapes) into OUT/tune.db, the shipped-configs export of what was found, then the harness bench
# of the three problems against eager and torch.compile(max-autotune-no-cudagraphs) with those
# configs. Usage: bash scripts/gpu/gemm_tune_bench.sh OUT_DIR [TUNE_BUDGET_S]   (repository root)
# GEMM_TUNE_ONLY=REGEX tunes only the matching kernels (GEMM_TUNE_ENTRIES and GEMM_BENCH: other
# kernels and problems, below); GEMM_PYTEST=1 adds the GPU tests;
# GEMM_VARIANTS=SECONDS runs scripts/gpu/gemm_variants.py until that many seconds have passed.
set -uo pipefail
OUT="${1:-gemm-out}"
BUDGET="${2:-40}"
mkdir -p "$OUT/parts"
OUT="$(cd "$OUT" && pwd)"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export WARPFORGE_CACHE_DIR="${WARPFORGE_CACHE_DIR:-/tmp/wf-gemm-cache}"
export WARPFORGE_DB_URL="sqlite:///$OUT/tune.db"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-/tmp/wf-gemm-inductor}"
PY="${PYTHON:-python3}"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
start=$SECONDS

timeout 90 "$PY" scripts/gpu/gemm_smoke.py "$OUT/smoke.json" > "$OUT/smoke.log" 2>&1
echo "smoke: exit $? at $((SECONDS - start)) s" | tee -a "$SUMMARY"

TUNE=(
  "blueprint.causal_attention_scores.k1_matmul_mul_where_softmax B=4,NH=16,T=1024,DH=64"
  "blueprint.layernorm_linear_gelu.k1_linear_gelu T=8192,D=4096,N=4096"
  "blueprint.mlp_block.k0_linear_gelu T=8192,D=2048,F=8192"
  "blueprint.mlp_block.k1_linear_add T=8192,D=2048,F=8192"
)
BENCH=(blueprint.causal_attention_scores blueprint.layernorm_linear_gelu blueprint.mlp_block)
# GEMM_TUNE_ENTRIES ("KERNEL SHAPE" lines) and GEMM_BENCH ("PROBLEM ...") replace the lists
# above, for other generated kernels (the row kernels' tunables work the same way)
if [ -n "${GEMM_TUNE_ENTRIES:-}" ]; then mapfile -t TUNE <<< "$GEMM_TUNE_ENTRIES"; fi
if [ -n "${GEMM_BENCH:-}" ]; then read -ra BENCH <<< "$GEMM_BENCH"; fi
for entry in "${TUNE[@]}"; do
  kernel="${entry%% *}" shape="${entry##* }"
  if [ -n "${GEMM_TUNE_ONLY:-}" ] && ! [[ "$kernel" =~ $GEMM_TUNE_ONLY ]]; then
    continue  # tuned in an earlier run (its shipped entry applies)
  fi
  timeout $((BUDGET + 40)) "$PY" -m warpforge tune "$kernel" --shape "$shape" --dtype bfloat16 \
    --budget "$BUDGET" > "$OUT/tune-$kernel.log" 2>&1
  echo "tune $kernel: exit $? at $((SECONDS - start)) s" | tee -a "$SUMMARY"
done
timeout 30 "$PY" -m warpforge db export "$OUT/shipped-tuned.json" > "$OUT/export.log" 2>&1
echo "export: exit $?" | tee -a "$SUMMARY"

for name in "${BENCH[@]}"; do
  timeout 100 "$PY" -m warpforge bench --problem "$name" --out "$OUT/parts/$name.json" \
    --max-time 1 --dtype bf16 --no-ceilings > "$OUT/bench-$name.log" 2>&1
  echo "bench $name: exit $? at $((SECONDS - start)) s" | tee -a "$SUMMARY"
done
timeout 60 "$PY" scripts/merge_results.py "$OUT/blueprint-gemm.json" "$OUT"/parts/*.json > "$OUT/merge.log" 2>&1
echo "merge: exit $?; total $((SECONDS - start)) s" | tee -a "$SUMMARY"
if [ -n "${GEMM_PYTEST:-}" ]; then
  timeout 120 "$PY" -m pytest tests/blueprint/test_codegen.py -m gpu -q -p no:cacheprovider > "$OUT/pytest-gpu.log" 2>&1
  echo "gpu tests: exit $? at $((SECONDS - start)) s" | tee -a "$SUMMARY"
fi
if [ -n "${GEMM_VARIANTS:-}" ]; then
  left=$((GEMM_VARIANTS - (SECONDS - start)))
  [ "$left" -gt 20 ] && timeout "$left" "$PY" scripts/gpu/gemm_variants.py "$OUT/variants.json" > "$OUT/variants.log" 2>&1
  echo "variants: exit $? at $((SECONDS - start)) s" | tee -a "$SUMMARY"
fi
