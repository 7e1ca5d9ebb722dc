#!/usr/bin/env bash
# FLCE and RoPE on the GPU in one call (sixth session, issue 4): the GPU tests of both ops, the
# accumulator steps' memory, the variant sweep (benchmarks/flce_rope_sweep.py), then the harness
# rows: rope.* (both dtypes, copy ceiling measured in-run) and fused_linear_cross_entropy bf16.
# Usage (repository root): bash scripts/gpu/flce_rope_check.sh OUT_DIR [OLD_ROPE_KERNEL]
# STEPS (default "tests accumulator sweep rope flce"), also "memory" (benchmarks/flce_memory.py).
# Set WARPFORGE_GIT_COMMIT when the tree has no .git; Liger-Kernel on PYTHONPATH for baselines.
set -uo pipefail
OUT="${1:?usage: flce_rope_check.sh OUT_DIR [OLD_ROPE_KERNEL]}"
OLD_ROPE_KERNEL="${2:-}"
STEPS="${STEPS:-tests accumulator sweep rope flce}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export TORCHINDUCTOR_CACHE_DIR=/tmp/wf-inductor TRITON_CACHE_DIR=/tmp/wf-triton
DAY="${RESULT_DAY:-$(date -u +%F)}"
step() {  # name limit_s command...
  local name="$1" limit="$2"; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
}
has() { [[ " $STEPS " == *" $1 "* ]]; }
has tests && step gpu-tests 180 python3 -m pytest tests/ops/test_rope.py \
  tests/ops/test_fused_linear_cross_entropy.py -m gpu -q -p no:cacheprovider -rfE
has accumulator && step flce-accumulator-memory 40 python3 scripts/gpu/flce_accumulator_memory.py
has sweep && step flce-rope-sweep 150 python3 benchmarks/flce_rope_sweep.py "$OUT" all $OLD_ROPE_KERNEL
has rope && step rope-harness 150 python3 -m warpforge bench --problem 'rope.*' --max-time 1 \
  --out "$OUT/rope-$DAY-h100.json"
has flce && step flce-harness-bf16 120 python3 -m warpforge bench \
  --problem 'fused_linear_cross_entropy.*' --dtype bf16 --max-time 1 --no-ceilings \
  --out "$OUT/flce-$DAY-h100.json"
has memory && step flce-memory 100 python3 benchmarks/flce_memory.py --out "$OUT"
# the short version last
tail -n 2 "$OUT/gpu-tests.log" 2>/dev/null
cat "$OUT/flce-accumulator-memory.log" 2>/dev/null
grep -E " us$" "$OUT/flce-rope-sweep.log" 2>/dev/null
for report in "$OUT"/rope-*.json "$OUT"/flce-*.json; do
  [ -s "$report" ] && python3 scripts/results_table.py "$report" | grep -E "^\| (rope|fused)|copy ceiling"
done
grep -h "^warpforge_fused\|^torch_unfused\|^liger_fused" "$OUT/flce-memory.log" 2>/dev/null | cut -c1-200
cat "$OUT/summary.txt"
