#!/usr/bin/env bash
# Re-tune the shipped configs a kernel change left stale (`warpforge db stale`: tuned on an
# earlier source of their kernel, so lookups skip them), exhaustively at exactly their shapes and
# dtypes, every trial into OUT/refresh.db; then the project's own export (OUT/shipped-refresh.json)
# to compose with `python scripts/tune_merge.py shipped NEW.json OLD.json OUT/shipped-refresh.json
# --drop-stale` (no GPU).
# Usage (repository root, on the GPU): bash scripts/gpu/tune_refresh_stale.sh OUT_DIR
# SKIP_PROBLEMS: space-separated DTYPE:SHAPE problems tuned elsewhere (for example tune_check.sh's
# training shapes, "bfloat16:M=8192,N=4096"); REFRESH_MAX_WALL (default 400 s): no new kernel
# starts after it; what ran and what was skipped is in OUT/summary.txt.
set -uo pipefail
OUT="${1:?usage: tune_refresh_stale.sh OUT_DIR}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
TRITON_CACHE_DIR="$(mktemp -d /tmp/wf-refresh-triton.XXXXXX)"
WARPFORGE_CACHE_DIR="$(mktemp -d /tmp/wf-refresh-cache.XXXXXX)"
export TRITON_CACHE_DIR WARPFORGE_CACHE_DIR WARPFORGE_TUNE_DB=0
PY="${PYTHON:-python3}"
DB="sqlite:///$OUT/refresh.db"
MAX_WALL="${REFRESH_MAX_WALL:-400}"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
start=$SECONDS
"$PY" -m warpforge db stale --args > "$OUT/stale.txt" || { echo "db stale failed" | tee -a "$SUMMARY"; exit 1; }
echo "stale shipped configs: $(wc -l < "$OUT/stale.txt")" | tee -a "$SUMMARY"
declare -A SHAPES
while read -r kernel dtype shape; do
  case " ${SKIP_PROBLEMS:-} " in *" $dtype:$shape "*) echo "skip $kernel $dtype $shape (tuned elsewhere)" >> "$SUMMARY"; continue ;; esac
  SHAPES["$kernel $dtype"]+=" --shape $shape"
done < "$OUT/stale.txt"
for group in $(printf '%s\n' "${!SHAPES[@]}" | tr ' ' '|' | sort); do
  kernel="${group%|*}" dtype="${group#*|}"
  left=$((MAX_WALL - (SECONDS - start)))
  if [ "$left" -lt 20 ]; then
    echo "SKIPPED $kernel $dtype:${SHAPES[$kernel $dtype]} (wall bound)" | tee -a "$SUMMARY"
    continue
  fi
  # shellcheck disable=SC2086  # the shapes are separate --shape options
  timeout "$left" "$PY" -m warpforge tune "$kernel" ${SHAPES[$kernel $dtype]} --dtype "$dtype" \
    --exhaustive --db "$DB" > "$OUT/tune-$kernel-$dtype.log" 2>&1
  echo "tune $kernel $dtype:${SHAPES[$kernel $dtype]}: exit $? at $((SECONDS - start)) s" | tee -a "$SUMMARY"
done
"$PY" -m warpforge db export "$OUT/shipped-refresh.json" --db "$DB" > "$OUT/export.log" 2>&1
echo "export: exit $?" | tee -a "$SUMMARY"
rm -rf "$TRITON_CACHE_DIR" "$WARPFORGE_CACHE_DIR"
