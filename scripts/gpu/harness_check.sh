#!/usr/bin/env bash
# The harness' GPU check (issue 3), one call, a few minutes on an H100:
#   ceilings (fresh), the KernelBench suite twice (JSON each), run-to-run stability of the
#   medians, the roofline PNG, and the GPU-marked harness tests.
# Usage: bash scripts/gpu/harness_check.sh OUT_DIR     (run from the repository root)
#        HARNESS_GPU_FULL=1 first runs every harness test (the cheating gallery) on the GPU:
#        the untimed ones with 4 xdist workers, then the GPU-marked (timing) ones alone.
# Everything it produces lands in OUT_DIR: *.json reports, *.log, roofline.png, summary.txt.
set -uo pipefail
OUT="${1:-${OUT:-harness-gpu-out}}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export WARPFORGE_CACHE_DIR="$OUT/cache"   # fresh ceilings cache: measured on this machine now
PY="${PYTHON:-python}"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"

step() {  # step NAME TIMEOUT_S COMMAND...: run with a time limit, log, record exit code
    local name="$1" limit="$2"; shift 2
    local start=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: exit $rc in $((SECONDS - start)) s" | tee -a "$SUMMARY"
    return $rc
}

step env 60 "$PY" -m warpforge env --json
cp "$OUT/env.log" "$OUT/env.json"
if [ "${HARNESS_GPU_FULL:-0}" = 1 ]; then  # the whole harness suite (cheating gallery) on the GPU
    step pytest-gallery 300 "$PY" -m pytest tests/harness -m "not gpu" -n 4 -q -rs -p no:cacheprovider \
        --junitxml="$OUT/harness-gallery-gpu.xml"
fi
step ceilings 120 "$PY" -m warpforge ceilings --json --refresh
cp "$OUT/ceilings.log" "$OUT/ceilings.json"
step suite-run1 300 "$PY" -m warpforge suite benchmarks/kernelbench --out "$OUT/suite-run1.json" --max-time 1
step suite-run2 300 "$PY" -m warpforge suite benchmarks/kernelbench --out "$OUT/suite-run2.json" --max-time 1
step compare 60 "$PY" -m warpforge compare "$OUT/suite-run1.json" "$OUT/suite-run2.json" --threshold 0.02 --json
cp "$OUT/compare.log" "$OUT/compare.json"
step stability 60 "$PY" - "$OUT/suite-run1.json" "$OUT/suite-run2.json" <<'PY'
# Run-to-run stability: candidate median of run 2 / run 1 per pair; done when all within 2%.
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:3]]
rows = [{r["problem"]: r for r in run["results"]} for run in runs]
worst = 0.0
for name in sorted(rows[0]):
    a, b = rows[0][name]["times"].get("candidate"), rows[1].get(name, {}).get("times", {}).get("candidate")
    if not a or not b:
        print(f"{name}: not timed in both runs ({rows[0][name]['status']})")
        continue
    ratio = b["median_s"] / a["median_s"]
    worst = max(worst, abs(ratio - 1))
    print(f"{name}: run1 {a['median_s']*1e6:.1f} us, run2 {b['median_s']*1e6:.1f} us, ratio {ratio:.4f}")
print(f"worst deviation {worst:.2%}: {'within' if worst <= 0.02 else 'NOT within'} 2%")
sys.exit(0 if worst <= 0.02 else 1)
PY
step roofline 60 "$PY" -m warpforge roofline "$OUT/suite-run1.json" -o "$OUT/roofline.png"
step pytest-gpu 300 "$PY" -m pytest tests/harness -m gpu -q -rs -p no:cacheprovider \
    --junitxml="$OUT/harness-gpu-marked.xml"
echo "--- ceilings" >> "$SUMMARY"; cat "$OUT/ceilings.json" >> "$SUMMARY"
echo "--- stability" >> "$SUMMARY"; cat "$OUT/stability.log" >> "$SUMMARY"
tail -n 3 "$OUT/suite-run1.log" >> "$SUMMARY"
cat "$SUMMARY"
