#!/usr/bin/env bash
# Issue 7's GPU evidence in one call (at most 9 minutes on an H100): for the norms (rms_norm,
# add_rms_norm, layer_norm; forward and backward) and every generated kernel of the blueprint
# suite, in bf16:
#   * budgeted searches, first and with a cold Triton cache, on one held-out shape of
#     rms_norm.bwd and of the layernorm_linear_gelu matmul (the largest space of the suite):
#     60 s in this process; then, each in a fresh process with an empty Triton cache, a 20 s
#     search with no seed config (only where the 60 s one took longer than 20 s, i.e. where 20 s
#     cannot cover the space) and, where the 60 s search could not try every valid config, an exhaustive search
#     stopped after 90 s, so the JSON says how the budget compares with the whole search;
#   * exhaustive searches of the training shapes (norms: 3 given below; blueprint kernels: the
#     first 2 of their sweep), compiled ahead in worker processes;
#   * per held-out shape (one per kernel, never a training shape): the nearest-match config (the
#     consensus of the 3 nearest training shapes), the single nearest training shape's best (the
#     rule before the consensus) and the refined match (at most 10 trials descending from the
#     consensus and the 3 nearest training shapes' configs), all from the training results
#     alone, then the exhaustive search;
#   * all contenders re-timed interleaved; the budget search replayed on the measured times at
#     25% and 50% of the valid configs (no GPU time);
#   * the shipped-configs export of every exhaustive best.
# Usage: bash scripts/gpu/tune_check.sh OUT_DIR            (from the repository root)
#        bash scripts/gpu/tune_check.sh OUT_DIR --smoke    (CPU: resolves the whole plan, then runs
#                                                          a few kernels under the interpreter)
# Writes OUT_DIR/tune_bench.json (the evidence), OUT_DIR/shipped-<device>.json (commit it as
# src/warpforge/tune/shipped/<device>.json), tune.db/budget.db/refine.db (every trial),
# wf-probe-*/probe.json (the fresh-process searches), *.log and summary.txt (--smoke also writes
# plan.json). The bench starts no new search after TUNE_MAX_WALL seconds (default 440; a search
# already started finishes) and lists what it skipped in the JSON.
set -uo pipefail
OUT="${1:-${OUT:-tune-gpu-out}}"
MODE="${2:-gpu}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# Fresh caches: the budgeted searches must pay for every compile, as a user's first tuning does.
TRITON_CACHE_DIR="$(mktemp -d /tmp/wf-tune-triton.XXXXXX)"
WARPFORGE_CACHE_DIR="$(mktemp -d /tmp/wf-tune-cache.XXXXXX)"
export TRITON_CACHE_DIR WARPFORGE_CACHE_DIR
export WARPFORGE_TUNE_DB=0   # nothing outside this run's own databases informs it
PY="${PYTHON:-python3}"
CORES="$(nproc 2>/dev/null || echo 4)"
WORKERS="${TUNE_COMPILE_WORKERS:-$(( CORES > 4 ? CORES - 2 : 2 ))}"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
start=$SECONDS

BUDGET_KERNELS=(rms_norm.bwd blueprint.layernorm_linear_gelu.k1_linear_gelu)
KERNELS=(
  "${BUDGET_KERNELS[@]}"
  rms_norm.fwd add_rms_norm.fwd add_rms_norm.bwd layer_norm.fwd layer_norm.bwd
  'blueprint.bias_gelu.*' 'blueprint.residual_rmsnorm_swiglu.*'
  'blueprint.residual_rmsnorm_swiglu_backward.*' 'blueprint.layernorm_linear_gelu.k0_*'
  'blueprint.scaled_masked_softmax.*' 'blueprint.reduction_chain.*'
  'blueprint.mixed_precision_chain.*' 'blueprint.causal_attention_scores.*' 'blueprint.mlp_block.*'
)
PLAN=(
  --kernels "${KERNELS[@]}" --dtype bfloat16
  --budget 60 --budget-kernels "${BUDGET_KERNELS[@]}" --short-budget 20 --cold-exhaustive 90
  --refine-trials 10
  --train M=16384,N=1024 --train M=8192,N=4096 --train M=2048,N=16384 --heldout M=4096,N=8192
  --train-count 2 --heldout-count 1
)

if [ "$MODE" = "--smoke" ]; then
  "$PY" benchmarks/tune_bench.py --out "$OUT" --plan-only "${PLAN[@]}" > "$OUT/plan.log" 2>&1
  rc=$?
  echo "plan: exit $rc" | tee -a "$SUMMARY"
  if [ $rc -eq 0 ]; then
    TRITON_INTERPRET=1 timeout 300 "$PY" benchmarks/tune_bench.py --out "$OUT" --smoke \
      --kernels add_rms_norm.bwd 'blueprint.layernorm_linear_gelu.*' \
      --budget-kernels blueprint.layernorm_linear_gelu.k1_linear_gelu --budget 0.5 \
      --short-budget 0.2 --cold-exhaustive 1 --refine-trials 4 --compile-workers 1 > "$OUT/tune_bench.log" 2>&1
    rc=$?
    echo "tune_bench --smoke: exit $rc in $((SECONDS - start)) s" | tee -a "$SUMMARY"
  fi
else
  timeout 525 "$PY" benchmarks/tune_bench.py --out "$OUT" "${PLAN[@]}" \
    --compile-workers "$WORKERS" --max-wall "${TUNE_MAX_WALL:-440}" --reserve 30 \
    --trial-time 0.05 --retime-time 0.3 > "$OUT/tune_bench.log" 2>&1
  rc=$?
  echo "tune_bench: exit $rc in $((SECONDS - start)) s (compile workers: $WORKERS)" | tee -a "$SUMMARY"
fi
tail -n 60 "$OUT/tune_bench.log" >> "$SUMMARY" 2>/dev/null
ls "$OUT"/shipped-*.json > /dev/null 2>&1 || echo "no shipped-configs file was written" | tee -a "$SUMMARY"
rm -rf "$TRITON_CACHE_DIR" "$WARPFORGE_CACHE_DIR"
exit $rc
