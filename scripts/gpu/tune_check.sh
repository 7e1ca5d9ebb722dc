#!/usr/bin/env bash
# Issue 7's GPU evidence, in two parts that each fit one device call (<= 10 minutes), or in one:
# for the norms (rms_norm, add_rms_norm, layer_norm; forward and backward) and every generated
# kernel of the blueprint suite, in bf16:
#   * budgeted searches, first and with a cold Triton cache, on one held-out shape of
#     rms_norm.bwd (part "norms") and of the layernorm_linear_gelu matmul (part "blueprints", the
#     largest space of the suite): 60 s in this process; then, each in a fresh process with an
#     empty Triton cache, a 20 s search with no seed config (only where the 60 s one took longer
#     than 20 s, i.e. where 20 s cannot cover the space) and, where the 60 s search could not try
#     every valid config, an exhaustive search stopped after 90 s, so the JSON says how the
#     budget compares with the whole search;
#   * exhaustive searches of the training shapes (norms: the 5 given below, whole and half
#     octaves of the row length; blueprint kernels: the first 2 of their sweep), compiled ahead
#     in worker processes;
#   * per held-out shape (one per kernel, never a training shape): the nearest-match config (the
#     consensus of the 3 nearest training shapes), the single nearest training shape's best (the
#     rule before the consensus) and the refined match (at most 10 trials descending from the
#     consensus and the 3 nearest training shapes' configs), all from the training results
#     alone, then the exhaustive search;
#   * all contenders re-timed interleaved; the budget search replayed on the measured times at
#     25% and 50% of the valid configs (no GPU time);
#   * the shipped-configs export of every training shape's exhaustive best (held-out shapes are
#     never exported).
# Usage (from the repository root):
#   bash scripts/gpu/tune_check.sh OUT_DIR norms        # ~4 minutes on an H100
#   bash scripts/gpu/tune_check.sh OUT_DIR blueprints   # ~6 minutes on an H100
#   python scripts/tune_merge.py MERGED_DIR NORMS_DIR BLUEPRINTS_DIR   # one report, no GPU
#   bash scripts/gpu/tune_check.sh OUT_DIR [all]        # both parts in one process (> 10 min)
#   bash scripts/gpu/tune_check.sh OUT_DIR --smoke      # CPU: resolves the whole plan, then runs
#                                                       # a few kernels under the interpreter
# Writes OUT_DIR/tune_bench.json (the evidence), OUT_DIR/shipped-<device>.json (merge it into
# src/warpforge/tune/shipped/<device>.json with scripts/tune_merge.py shipped),
# tune.db/budget.db/refine.db (every trial), wf-probe-*/probe.json (the fresh-process searches),
# *.log and summary.txt (--smoke, or TUNE_PLAN_ONLY=1 with a part, writes plan.json and runs
# nothing else). The bench starts no new search after
# TUNE_MAX_WALL seconds (default 450; a search already started finishes) and lists what it
# skipped in the JSON.
set -uo pipefail
OUT="${1:-${OUT:-tune-gpu-out}}"
MODE="${2:-all}"
NORM_BUDGET_KERNELS=(rms_norm.bwd)
NORM_KERNELS=(rms_norm.fwd rms_norm.bwd add_rms_norm.fwd add_rms_norm.bwd layer_norm.fwd layer_norm.bwd)
BLUEPRINT_BUDGET_KERNELS=(blueprint.layernorm_linear_gelu.k1_linear_gelu)
BLUEPRINT_KERNELS=(
  'blueprint.bias_gelu.*' 'blueprint.residual_rmsnorm_swiglu.*'
  'blueprint.residual_rmsnorm_swiglu_backward.*' 'blueprint.layernorm_linear_gelu.*'
  'blueprint.scaled_masked_softmax.*' 'blueprint.reduction_chain.*'
  'blueprint.mixed_precision_chain.*' 'blueprint.causal_attention_scores.*' 'blueprint.mlp_block.*'
)
case "$MODE" in
  norms) BUDGET_KERNELS=("${NORM_BUDGET_KERNELS[@]}") KERNELS=("${NORM_KERNELS[@]}") ;;
  blueprints) BUDGET_KERNELS=("${BLUEPRINT_BUDGET_KERNELS[@]}") KERNELS=("${BLUEPRINT_KERNELS[@]}") ;;
  all | --smoke)
    BUDGET_KERNELS=("${NORM_BUDGET_KERNELS[@]}" "${BLUEPRINT_BUDGET_KERNELS[@]}")
    KERNELS=("${NORM_KERNELS[@]}" "${BLUEPRINT_KERNELS[@]}") ;;
  *) echo "usage: $0 OUT_DIR [norms|blueprints|all|--smoke], got '$MODE'" >&2; exit 2 ;;
esac
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

# Norm shapes: row lengths of whole and half octaves (1K, 4K, 6K, 12K, 16K columns) at 16-48 M
# elements; the held-out shape's row length (8K) is none of them. Blueprint kernels take no
# given shape (their sizes have other names): the first 2 of their sweep train, every third
# sweep shape is held out.
PLAN=(
  --kernels "${KERNELS[@]}" --dtype bfloat16
  --budget 60 --budget-kernels "${BUDGET_KERNELS[@]}" --short-budget 20 --cold-exhaustive 90
  --refine-trials 10
  --train M=16384,N=1024 --train M=8192,N=4096 --train M=8192,N=6144 --train M=2048,N=12288
  --train M=2048,N=16384 --heldout M=4096,N=8192
  --train-count 2 --heldout-count 1
)

if [ -n "${TUNE_PLAN_ONLY:-}" ]; then
  # What a part would run (kernels, shapes, valid configs), in seconds and without a GPU.
  "$PY" benchmarks/tune_bench.py --out "$OUT" --plan-only "${PLAN[@]}" > "$OUT/plan.log" 2>&1
  rc=$?
  echo "plan ($MODE): exit $rc" | tee -a "$SUMMARY"
elif [ "$MODE" = "--smoke" ]; then
  "$PY" benchmarks/tune_bench.py --out "$OUT" --plan-only "${PLAN[@]}" > "$OUT/plan.log" 2>&1
  rc=$?
  echo "plan: exit $rc" | tee -a "$SUMMARY"
  if [ $rc -eq 0 ]; then
    TRITON_INTERPRET=1 timeout 300 "$PY" benchmarks/tune_bench.py --out "$OUT" --smoke \
      --kernels add_rms_norm.fwd 'blueprint.layernorm_linear_gelu.*' \
      --budget-kernels blueprint.layernorm_linear_gelu.k1_linear_gelu --budget 0.5 \
      --short-budget 0.2 --cold-exhaustive 1 --refine-trials 4 --compile-workers 1 > "$OUT/tune_bench.log" 2>&1
    rc=$?
    echo "tune_bench --smoke: exit $rc in $((SECONDS - start)) s" | tee -a "$SUMMARY"
  fi
else
  MAX_WALL="${TUNE_MAX_WALL:-450}"  # + the last search, re-timing and export: < 10 min a part
  timeout $((MAX_WALL + 110)) "$PY" benchmarks/tune_bench.py --out "$OUT" "${PLAN[@]}" \
    --compile-workers "$WORKERS" --max-wall "$MAX_WALL" --reserve 30 \
    --trial-time 0.05 --retime-time 0.3 > "$OUT/tune_bench.log" 2>&1
  rc=$?
  echo "tune_bench ($MODE): exit $rc in $((SECONDS - start)) s (compile workers: $WORKERS)" | tee -a "$SUMMARY"
fi
tail -n 60 "$OUT/tune_bench.log" >> "$SUMMARY" 2>/dev/null
[ -n "${TUNE_PLAN_ONLY:-}" ] || ls "$OUT"/shipped-*.json > /dev/null 2>&1 || echo "no shipped-configs file was written" | tee -a "$SUMMARY"
rm -rf "$TRITON_CACHE_DIR" "$WARPFORGE_CACHE_DIR"
exit $rc
