#!/usr/bin/env bash
# The narrow-row norm backward on the H100, in one device call (~4 minutes plus the machine's
# start): 1. benchmarks/norm_narrow_bwd_sweep.py (kernels alone: the persistent rows kernel
# at the op's launch against norm_bwd_narrow_kernel at several launches; rms_norm, add_rms_norm,
# layer_norm; bf16 and fp32; 32768 x 256); 2. the harness at N=256 for every norm problem with
# the copy ceiling, WARPFORGE_NORM_NARROW_BWD=1024 (the forward rows are unaffected by the switch,
# so they also re-time the shipped N=256 forward configs); 3. the GPU tests of the norms at 256
# columns and of the narrow path. Results under OUT (at most 8 files come back from a device call:
# OUT/sweep.json, OUT/rows256-narrow.json, OUT/gpu-tests.txt, OUT/summary.txt, OUT/logs.tgz).
# Usage (repository root, on the GPU): bash scripts/gpu/rows256_narrow_check.sh OUT_DIR
set -uo pipefail
OUT="${1:?usage: rows256_narrow_check.sh OUT_DIR}"
mkdir -p "$OUT/logs"
OUT="$(cd "$OUT" && pwd)"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-/tmp/wf-narrow-triton}" WARPFORGE_TUNE_DB=0
PY="${PYTHON:-python3}"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
start=$SECONDS
note() { echo "$* (at $((SECONDS - start)) s)" | tee -a "$SUMMARY"; }

timeout 90 "$PY" benchmarks/norm_narrow_bwd_sweep.py --out "$OUT/sweep.json" --max-time 1 \
  > "$OUT/logs/sweep.log" 2>&1
note "sweep: exit $?"
cat "$OUT/logs/sweep.log" >> "$SUMMARY"
WARPFORGE_NORM_NARROW_BWD=1024 WARPFORGE_CACHE_DIR=/tmp/wf-narrow-bench \
  TORCHINDUCTOR_CACHE_DIR=/tmp/wf-narrow-inductor SUITE_CEILINGS=1 SUITE_SHAPE="N=256" \
  SUITE_BUDGET_S="${BENCH_BUDGET_S:-150}" bash scripts/gpu/bench_parts.sh "$OUT/bench" \
  rows256-narrow "rms_norm.*:55" "add_rms_norm.*:55" "layer_norm.*:55" > "$OUT/logs/bench.log" 2>&1
note "bench: exit $?"
cp "$OUT/bench/rows256-narrow.json" "$OUT/" 2>/dev/null
left=$(( ${CHECK_WALL_S:-240} - (SECONDS - start) ))
if [ "$left" -gt 20 ]; then
  timeout "$left" "$PY" -m pytest -q -m gpu tests/ops/test_norm.py -k "256 or narrow" \
    -p no:cacheprovider > "$OUT/gpu-tests.txt" 2>&1
  note "gpu tests: exit $?"
fi
cp -r "$OUT/bench/parts" "$OUT/bench/summary.txt" "$OUT"/bench/*.log "$OUT/logs/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT" logs
rm -rf "$OUT/bench" "$OUT/logs"
note "done"
