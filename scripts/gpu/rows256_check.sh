#!/usr/bin/env bash
# Norm rows at 256 columns on the H100, in one device call (~3.5 minutes):
# 1. tune the forward norms (rms_norm, add_rms_norm, layer_norm; bf16 and fp32) exhaustively at
#    M=32768 N=256 and the fp32 RMSNorm backwards (no shipped entry at that shape) with a
#    budgeted search, configs compiled ahead, every trial into OUT/tune/tune.db
#    (scripts/gpu/tune_problems.py);
# 2. export them (`warpforge db export`) and compose the shipped table with the project's merge
#    (scripts/tune_merge.py shipped) into OUT/shipped-merged.json, which replaces the shipped H100
#    table of THIS copy of the tree, so that step 3 looks the configs up as a user would;
# 3. the harness benchmark of every norm problem at N=256, both dtypes, with the copy ceiling
#    (scripts/gpu/bench_parts.sh, SUITE_SHAPE=N=256), database lookups off;
# 4. a per-kernel device-time breakdown of add_rms_norm fwd+bwd bf16 (diagnostic);
# 5. the GPU tests of the norm files at N=256 and of the tunables, if time is left.
# Usage (repository root, on the GPU): bash scripts/gpu/rows256_check.sh OUT_DIR
set -uo pipefail
OUT="${1:?usage: rows256_check.sh OUT_DIR}"
mkdir -p "$OUT/tune" "$OUT/logs"
OUT="$(cd "$OUT" && pwd)"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-/tmp/wf-rows256-triton}"
export WARPFORGE_TUNE_DB=0 SUITE_CEILINGS=1
PY="${PYTHON:-python3}"
SHIPPED=src/warpforge/tune/shipped/nvidia-h100-80gb-hbm3-sm_90.json
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
start=$SECONDS
note() { echo "$* (at $((SECONDS - start)) s)" | tee -a "$SUMMARY"; }

"$PY" -c "import torch; n = torch.cuda.get_device_name(0); print(n); assert 'H100' in n" \
  >> "$SUMMARY" 2>&1 || { note "not an H100: the shipped H100 table is not touched"; exit 1; }

PROBLEMS=()
for kernel in rms_norm.fwd add_rms_norm.fwd layer_norm.fwd; do
  for dtype in bfloat16 float32; do PROBLEMS+=("$kernel:M=32768,N=256:$dtype"); done
done
PROBLEMS+=("rms_norm.bwd:M=32768,N=256:float32:${BWD_BUDGET_S:-15}")
PROBLEMS+=("add_rms_norm.bwd:M=32768,N=256:float32:${BWD_BUDGET_S:-15}")
DB="sqlite:///$OUT/tune/tune.db"
WARPFORGE_CACHE_DIR=/tmp/wf-rows256-tune timeout "${TUNE_TIMEOUT_S:-150}" "$PY" \
  scripts/gpu/tune_problems.py --db "$DB" --summary "$OUT/tune-summary.json" \
  --compile-workers "${COMPILE_WORKERS:-14}" --max-wall "${TUNE_MAX_WALL_S:-110}" \
  "${PROBLEMS[@]}" > "$OUT/logs/tune.log" 2>&1
note "tune: exit $?"
"$PY" -m warpforge db export "$OUT/shipped-rows256.json" --db "$DB" > "$OUT/logs/export.log" 2>&1
note "export: exit $?"
"$PY" -m warpforge db export "$OUT/tune/trials-rows256.json" --trials --db "$DB" \
  >> "$OUT/logs/export.log" 2>&1
note "export --trials: exit $?"
"$PY" scripts/tune_merge.py shipped "$OUT/shipped-merged.json" "$SHIPPED" \
  "$OUT/shipped-rows256.json" > "$OUT/logs/merge.log" 2>&1
rc=$?
note "merge: exit $rc"
[ "$rc" = 0 ] && cp "$OUT/shipped-merged.json" "$SHIPPED"

WARPFORGE_CACHE_DIR=/tmp/wf-rows256-bench TORCHINDUCTOR_CACHE_DIR=/tmp/wf-rows256-inductor \
  SUITE_SHAPE="N=256" SUITE_BUDGET_S="${BENCH_BUDGET_S:-150}" \
  bash scripts/gpu/bench_parts.sh "$OUT/bench" rows256-norms \
  "rms_norm.*:70" "add_rms_norm.*:70" "layer_norm.*:70" > "$OUT/logs/bench.log" 2>&1
note "bench: exit $?"
cp "$OUT/bench/rows256-norms.json" "$OUT/" 2>/dev/null

left() { echo $(( ${CHECK_WALL_S:-215} - (SECONDS - start) )); }
if [ "$(left)" -gt 25 ]; then
  TORCHINDUCTOR_CACHE_DIR=/tmp/wf-rows256-inductor timeout 30 "$PY" \
    scripts/gpu/norm_kernel_breakdown.py --op add_rms_norm --dtype bf16 > "$OUT/breakdown.txt" 2>&1
  note "breakdown: exit $?"
fi
if [ "$(left)" -gt 20 ]; then
  timeout "$(left)" "$PY" -m pytest -q -m gpu tests/ops/test_tunables.py tests/ops/test_norm.py \
    -k "256 or tuned_config" -p no:cacheprovider > "$OUT/gpu-tests.txt" 2>&1
  note "gpu tests: exit $?"
fi
cp -r "$OUT/bench/parts" "$OUT/bench/summary.txt" "$OUT"/bench/*.log "$OUT/logs/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT" logs tune
rm -rf "$OUT/tune" "$OUT/bench" "$OUT/logs"
note "done"
