#!/usr/bin/env bash
# helper ln16k3, first GPU call: where the harness row layer_norm.bwd bf16 4096 x 16384 spends
# its time (torch.profiler of forward + backward), the pairs kernel's lag 2 / L2 prefetch
# options against the default (kernel alone, --pairs --lag-l2), split forwards at 4096 x 16384
# (sweep16k), ncu of the default forward + pairs kernel and of the fastest new option, then the
# GPU tests of the pairs launches. Run from the carried tree: bash THIS $OUT
set -uo pipefail
OUT="${1:?OUT}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/ln16k3-triton
start=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv,noheader
t0=$SECONDS
timeout 60 python3 benchmarks/ln_bwd_profile.py --out "$OUT/profile.json" > /tmp/profile.txt 2>&1
echo "profile: exit $? in $((SECONDS - t0)) s"; tail -12 /tmp/profile.txt
t0=$SECONDS
timeout 100 python3 benchmarks/ln_bwd_split_sweep.py --pairs --lag-l2 --out "$OUT/sweep.json" > /tmp/sweep.txt 2>&1
echo "sweep: exit $? in $((SECONDS - t0)) s"; grep -A20 "^copy ceiling" /tmp/sweep.txt
t0=$SECONDS
timeout 50 python3 benchmarks/norm_split_fwd.py sweep16k "$OUT/fwd16k.json" > /tmp/fwd16k.txt 2>&1
echo "fwd16k: exit $? in $((SECONDS - t0)) s"; tail -18 /tmp/fwd16k.txt
# the fastest lag / L2 option at the default launch (256/1w x28), for ncu
BEST=$(python3 - "$OUT/sweep.json" <<'PY'
import json, sys
rows = [r for c in json.load(open(sys.argv[1]))["cases"] for r in c["rows"]]
rows = [r for r in rows if r.get("us") and r.get("launch") and r["launch"]["programs_per_sm"] == 28
        and r["launch"]["block"] == 256 and set(r["launch"]["options"]) & {"lag", "l2_ahead"}]
best = min(rows, key=lambda r: r["us"], default=None)
print(json.dumps(best["launch"]["options"]) if best else '{"l2_ahead": 1}')
PY
)
echo "ncu variant: $BEST"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section SourceCounters"
t0=$SECONDS
timeout 60 ncu --clock-control none --kernel-name regex:'layer_norm_bwd_pairs|norm_fwd_rows' --launch-skip 2 \
  --launch-count 2 $SECTIONS -o /tmp/ncu_default python3 benchmarks/ln_bwd_profile.py --driver > /tmp/ncu_default.log 2>&1
echo "ncu default: exit $? in $((SECONDS - t0)) s"
t0=$SECONDS
timeout 45 ncu --clock-control none --kernel-name regex:'layer_norm_bwd_pairs' --launch-skip 1 --launch-count 1 \
  ${SECTIONS% --section SourceCounters} -o /tmp/ncu_variant python3 benchmarks/ln_bwd_profile.py --driver --options "$BEST" > /tmp/ncu_variant.log 2>&1
echo "ncu variant: exit $? in $((SECONDS - t0)) s"
for r in default variant; do
  ncu -i /tmp/ncu_$r.ncu-rep --page details > "$OUT/ncu_$r.txt" 2>&1
done
timeout 20 ncu -i /tmp/ncu_default.ncu-rep --page source --csv --print-source sass --kernel-name regex:pairs \
  > /tmp/ncu_default_source.csv 2>&1
grep -E "layer_norm_bwd_pairs|norm_fwd_rows|Duration|DRAM Throughput|L2 Hit Rate|L1/TEX Hit Rate|Issued Warp Per Scheduler|Warp Cycles Per Issued|Achieved Active Warps|Registers Per" "$OUT"/ncu_default.txt "$OUT"/ncu_variant.txt | head -60
t0=$SECONDS
timeout 75 python3 -m pytest tests/ops/test_norm.py -m gpu -q -p no:cacheprovider \
  -k "pairs_backward_launches" > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu_tests.txt")"
grep -E "FAILED|Error" "$OUT/gpu_tests.txt" | head -10
tar czf "$OUT/logs.tgz" -C /tmp profile.txt sweep.txt fwd16k.txt ncu_default.log ncu_variant.log ncu_default_source.csv ncu_default.ncu-rep ncu_variant.ncu-rep 2>/dev/null
ls -la "$OUT"
echo "total $((SECONDS - start)) s"
