#!/usr/bin/env bash
# LayerNorm backward on the GPU in one call: the GPU tests of the norm and split-row code, the
# kernel sweep (benchmarks/ln_bwd_split_sweep.py) and the harness (`layer_norm.bwd`, every dtype,
# copy ceiling measured in-run) before and after: "before" runs this tree with the split-row
# backward off (WARPFORGE_SPLIT_ROWS=0: the kernels before it), or, with BEFORE_TREE=DIR (and
# BEFORE_COMMIT=HASH), the checkout in DIR as it is. Each step under its own time limit; a
# short table last.
#
# Usage: bash scripts/gpu/lnbwd_check.sh OUT_DIR [tests] [sweep] [before] [after]   (default: all)
# Writes OUT_DIR/gpu_tests.txt, sweep.json/.txt, lnbwd-before.json, lnbwd-after.json, logs.tgz.
set -uo pipefail
OUT="${1:?usage: lnbwd_check.sh OUT_DIR [tests] [sweep] [before] [after]}"
shift
STEPS=("${@:-tests sweep before after}")
STEPS=(${STEPS[*]})
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export WARPFORGE_CACHE_DIR=/tmp/lnbwd-cache TORCHINDUCTOR_CACHE_DIR=/tmp/lnbwd-inductor
export TRITON_CACHE_DIR=/tmp/lnbwd-triton
PY="${PYTHON:-python3}"
has() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }
start=$SECONDS
if has sweep; then
  t0=$SECONDS
  timeout "${SWEEP_LIMIT_S:-180}" "$PY" benchmarks/ln_bwd_split_sweep.py --out "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
  echo "sweep: exit $? in $((SECONDS - t0)) s"
fi
HERE="$PWD"
for mode in after before; do
  has "$mode" || continue
  t0=$SECONDS
  switch=1 tree="$HERE" commit="${WARPFORGE_GIT_COMMIT:-}"
  if [ "$mode" = before ]; then
    if [ -n "${BEFORE_TREE:-}" ]; then tree="$BEFORE_TREE" commit="${BEFORE_COMMIT:-}"; else switch=0; fi
  fi
  (cd "$tree" && WARPFORGE_GIT_COMMIT="$commit" WARPFORGE_SPLIT_ROWS=$switch SUITE_CEILINGS=1 \
    SUITE_BUDGET_S=200 bash scripts/gpu/bench_parts.sh "/tmp/lnbwd-$mode" "lnbwd-$mode" \
    "layer_norm.bwd:180" > "/tmp/lnbwd-$mode.log" 2>&1)
  cp "/tmp/lnbwd-$mode/lnbwd-$mode.json" "$OUT/" 2>/dev/null
  echo "harness $mode: $((SECONDS - t0)) s: $(tail -2 "/tmp/lnbwd-$mode/summary.txt" | head -1)"
done
if has tests; then  # last: what is left of the command's time (TESTS_LIMIT_S)
  t0=$SECONDS
  timeout "${TESTS_LIMIT_S:-200}" "$PY" -m pytest tests/ops/test_norm.py tests/ops/test_split_rows.py \
    -m gpu -q -p no:cacheprovider > "$OUT/gpu_tests.txt" 2>&1
  echo "gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu_tests.txt")"
fi
tar czf "$OUT/logs.tgz" -C /tmp $(cd /tmp && ls -d lnbwd-before lnbwd-after lnbwd-*.log 2>/dev/null | \
  grep -v cache) --exclude='*cache*' 2>/dev/null
echo "=== sweep (kernel alone)"; grep -A80 "^copy ceiling" "$OUT/sweep.txt" 2>/dev/null
for mode in before after; do
  [ -f "$OUT/lnbwd-$mode.json" ] && echo "=== harness $mode" && \
    "$PY" scripts/results_table.py "$OUT/lnbwd-$mode.json" | grep -E "^\| layer|copy ceiling"
done
echo "total $((SECONDS - start)) s"
