#!/usr/bin/env bash
# Denser tuned shapes for the norm kernels (one GPU call, at most ~7 minutes on an H100):
# exhaustive searches of rms_norm, add_rms_norm and layer_norm (backward first, then forward) at
# the half-octave row lengths N=6144 and N=12288 (M=8192 and M=2048), bf16 first, then fp32,
# every trial into OUT/grid.db; then the project's own export of those results
# (OUT/shipped-grid.json, format v2 with each problem's measured configs) and of every trial
# (OUT/trials-grid.json). tune_check.sh's held-out shape (M=4096 N=8192) is never tuned here.
# Usage: bash scripts/gpu/tune_norm_grid.sh OUT_DIR        (from the repository root)
# Starts no new search after GRID_MAX_WALL seconds (default 420); what ran is in summary.txt.
# GRID_SHAPES (space-separated M=..,N=.. shapes), GRID_DTYPES and GRID_KERNELS override the
# shapes, dtypes and kernels above (the tenth session tuned the issue's sweep shapes with them).
set -uo pipefail
OUT="${1:-norm-grid-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
TRITON_CACHE_DIR="$(mktemp -d /tmp/wf-grid-triton.XXXXXX)"
WARPFORGE_CACHE_DIR="$(mktemp -d /tmp/wf-grid-cache.XXXXXX)"
export TRITON_CACHE_DIR WARPFORGE_CACHE_DIR
export WARPFORGE_TUNE_DB=0
PY="${PYTHON:-python3}"
DB="sqlite:///$OUT/grid.db"
MAX_WALL="${GRID_MAX_WALL:-420}"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
start=$SECONDS
SHAPES=()
for shape in ${GRID_SHAPES:-M=8192,N=6144 M=2048,N=12288}; do SHAPES+=(--shape "$shape"); done
for dtype in ${GRID_DTYPES:-bfloat16 float32}; do
  for kernel in ${GRID_KERNELS:-rms_norm.bwd add_rms_norm.bwd layer_norm.bwd rms_norm.fwd \
    add_rms_norm.fwd layer_norm.fwd}; do
    left=$((MAX_WALL - (SECONDS - start)))
    if [ "$left" -lt 20 ]; then
      echo "skipped $kernel $dtype (wall bound)" | tee -a "$SUMMARY"
      continue
    fi
    timeout "$left" "$PY" -m warpforge tune "$kernel" "${SHAPES[@]}" --dtype "$dtype" \
      --exhaustive --db "$DB" > "$OUT/tune-$kernel-$dtype.log" 2>&1
    echo "tune $kernel $dtype: exit $? at $((SECONDS - start)) s" | tee -a "$SUMMARY"
  done
done
"$PY" -m warpforge db export "$OUT/shipped-grid.json" --db "$DB" > "$OUT/export.log" 2>&1
echo "export: exit $?" | tee -a "$SUMMARY"
"$PY" -m warpforge db export "$OUT/trials-grid.json" --trials --db "$DB" >> "$OUT/export.log" 2>&1
echo "export --trials: exit $?" | tee -a "$SUMMARY"
rm -rf "$TRITON_CACHE_DIR" "$WARPFORGE_CACHE_DIR"
