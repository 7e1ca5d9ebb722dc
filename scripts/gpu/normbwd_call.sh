#!/usr/bin/env bash
# normbwd GPU call (run from .carry-normbwd): GPU tests of the split norm backward and the
# row-summed harness verification, the kernel sweep, then the harness (bf16, SUITE_SHAPE) for
# the three norm backward problems, with the split backward off (HARNESS=before) or on (after).
set -uo pipefail
OUT="${OUT:?}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export WARPFORGE_CACHE_DIR=/tmp/wf-cache TORCHINDUCTOR_CACHE_DIR=/tmp/ind-cache TRITON_CACHE_DIR=/tmp/tr-cache
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p "$OUT/logs"
if [ "${TESTS:-1}" = 1 ]; then
  t0=$SECONDS
  timeout "${TESTS_S:-70}" python3 -m pytest ${TEST_FILES:-tests/ops/test_norm_split_bwd.py tests/ops/test_row_problems.py} \
    -q -x -k "${TEST_K:-gpu or public or giant or wrong_weight}" > "$OUT/logs/tests.log" 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s" | tee -a "$OUT/logs/steps.txt"
fi
if [ "${SWEEP:-1}" = 1 ]; then
  t0=$SECONDS
  timeout "${SWEEP_S:-80}" python3 benchmarks/norm_split_bwd.py sweep "$OUT/sweep.txt" > "$OUT/logs/sweep.log" 2>&1
  echo "sweep rc=$? $((SECONDS - t0)) s" | tee -a "$OUT/logs/steps.txt"
  [ -s "$OUT/sweep.txt" ] || cp "$OUT/logs/sweep.log" "$OUT/sweep.txt"
fi
for mode in ${HARNESS:-}; do
  t0=$SECONDS
  split=1; [ "$mode" = before ] && split=0
  var="SHAPE_$mode"; shapes="${!var:-M=8192,N=262144}"  # SHAPE_before / SHAPE_after
  var="BUDGET_$mode"; budget="${!var:-${HARNESS_BUDGET:-150}}"  # BUDGET_before / BUDGET_after
  # SUITE_FRESH: a warm machine keeps /tmp/h-* of an earlier call, which bench_parts.sh would
  # otherwise resume (the second call's "before" merely re-merged the first call's parts)
  SUITE_FRESH=1 WARPFORGE_NORM_BWD_SPLIT=$split SUITE_BUDGET_S=$budget SUITE_SWEEP=1 SUITE_CEILINGS=1 \
    SUITE_DTYPE=${SUITE_DTYPE:-bf16} SUITE_SHAPE="$shapes" \
    bash scripts/gpu/bench_parts.sh /tmp/h-$mode normbwd \
    "rms_norm.bwd:${LIMIT:-60}" "layer_norm.bwd:${LIMIT:-60}" "add_rms_norm.bwd:${LIMIT:-60}" \
    > "$OUT/logs/harness-$mode.log" 2>&1
  echo "harness $mode rc=$? $((SECONDS - t0)) s" | tee -a "$OUT/logs/steps.txt"
  cp /tmp/h-$mode/normbwd.json "$OUT/normbwd-$mode.json" 2>/dev/null
  mkdir -p "$OUT/logs/$mode"
  cp /tmp/h-$mode/*.log /tmp/h-$mode/summary.txt "$OUT/logs/$mode/" 2>/dev/null
  python3 scripts/results_table.py "$OUT/normbwd-$mode.json" > "$OUT/logs/table-$mode.txt" 2>&1
  cat "$OUT/logs/table-$mode.txt"
done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/sweep.txt" 2>/dev/null
