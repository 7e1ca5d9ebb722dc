#!/usr/bin/env bash
# A harness benchmark in bounded, resumable pieces: one `warpforge bench` call per problem glob,
# each with its own time limit (cut to what is left of the budget), then one merged report.
# A slow piece (a max-autotune baseline building, a huge shape) costs only its own rows; one
# stopped by its limit after its report was written (atomically) keeps that report.
#
# Usage: bash scripts/gpu/bench_parts.sh OUT_DIR REPORT_NAME GLOB:LIMIT_S [GLOB:LIMIT_S ...]
#   OUT_DIR/parts/GLOB.json    one harness report per piece (bench exit code in summary.txt)
#   OUT_DIR/REPORT_NAME.json   the merged report (scripts/merge_results.py)
#   OUT_DIR/*.log, OUT_DIR/summary.txt
# Environment: SUITE_BUDGET_S (default 520, under the 10-minute command limit): a piece is
# skipped (listed in summary.txt) when under 25 s remain; SUITE_FRESH=1 redoes parts already
# written (otherwise running again with the same OUT_DIR resumes, with warm compile caches under
# OUT_DIR); SUITE_CEILINGS=1 adds the speed-of-light check; SUITE_DTYPE (bf16, fp16, fp32;
# default: every dtype of the problem) picks the dtype; SUITE_SHAPE (space-separated size filters
# such as "N=256" or "M=32768,N=256"; default: every shape) keeps the rows of those shapes;
# SUITE_SWEEP=1 adds each problem's sweep shapes (`--sweep`; filter them with SUITE_SHAPE);
# SUITE_MAX_TIME (default 1) is the timing budget per row in seconds.
set -uo pipefail
OUT="${1:?usage: bench_parts.sh OUT_DIR REPORT_NAME GLOB:LIMIT_S ...}"
REPORT="${2:?usage: bench_parts.sh OUT_DIR REPORT_NAME GLOB:LIMIT_S ...}"
shift 2
PROBLEMS=("$@")
mkdir -p "$OUT/parts"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export WARPFORGE_CACHE_DIR="${WARPFORGE_CACHE_DIR:-$OUT/cache}"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$OUT/inductor-cache}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$OUT/triton-cache}"
PY="${PYTHON:-python3}"
BUDGET="${SUITE_BUDGET_S:-520}"
SUMMARY="$OUT/summary.txt"
CEILINGS=(--no-ceilings)
[ "${SUITE_CEILINGS:-0}" = 1 ] && CEILINGS=()
DTYPE=()
[ -n "${SUITE_DTYPE:-}" ] && DTYPE=(--dtype "$SUITE_DTYPE")
SHAPES=()
[ "${SUITE_SWEEP:-0}" = 1 ] && SHAPES=(--sweep)
for filter in ${SUITE_SHAPE:-}; do SHAPES+=(--shape "$filter"); done
: > "$SUMMARY"
start_all=$SECONDS

for entry in "${PROBLEMS[@]}"; do
  name="${entry%%:*}" limit="${entry##*:}"
  safe="$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_')"
  part="$OUT/parts/$safe.json"
  if [ -s "$part" ] && [ "${SUITE_FRESH:-0}" != 1 ]; then
    echo "$name: kept from an earlier run ($part)" | tee -a "$SUMMARY"
    continue
  fi
  left=$((BUDGET - (SECONDS - start_all) - 10))   # 10 s kept for the merge
  if [ "$left" -lt 25 ]; then
    echo "$name: SKIPPED, $left s of the budget left (run the script again to resume)" | tee -a "$SUMMARY"
    continue
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  rm -f "$part"  # a report found after the run is this run's (reports are written atomically)
  t0=$SECONDS
  timeout "$limit" "$PY" -m warpforge bench --problem "$name" --out "$part" \
    --max-time "${SUITE_MAX_TIME:-1}" "${DTYPE[@]}" "${SHAPES[@]}" "${CEILINGS[@]}" > "$OUT/$safe.log" 2>&1
  rc=$?
  case $rc in
    0) what="ok" ;;
    1) what="done, some row rejected or errored (see log)" ;;
    124)
      if [ -s "$part" ]; then
        what="TIMED OUT at $limit s after writing its whole report (kept)"
      else
        what="TIMED OUT at $limit s (no report; run again to resume with warm caches)"
      fi ;;
    *) what="failed (see log)" ;;
  esac
  echo "$name: exit $rc in $((SECONDS - t0)) s: $what" | tee -a "$SUMMARY"
done

shopt -s nullglob
parts=("$OUT"/parts/*.json)
if [ "${#parts[@]}" -gt 0 ]; then
  timeout 60 "$PY" scripts/merge_results.py "$OUT/$REPORT.json" "${parts[@]}" > "$OUT/merge.log" 2>&1
  echo "merge: exit $? (${#parts[@]} part(s)) -> $OUT/$REPORT.json" | tee -a "$SUMMARY"
else
  echo "merge: no parts to merge" | tee -a "$SUMMARY"
fi
echo "total: $((SECONDS - start_all)) s" | tee -a "$SUMMARY"
