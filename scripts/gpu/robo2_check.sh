#!/usr/bin/env bash
# Session-8 helper robo2's one GPU call (issue #5): GPU tests of the window / claim paths, ncu
# of the resample kernel's value traffic, a sweep of the variants, the sorted-query timing, and
# the harness (resample forward rows and align, copy ceiling). Every step under its own timeout.
set -uo pipefail
: "${OUT:?}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_CACHE_DIR=/tmp/robo2-triton
mkdir -p "$OUT/logs"
PY=python3
nvidia-smi --query-gpu=name,clocks.sm --format=csv > "$OUT/logs/gpu.txt" 2>&1
timeout 50 $PY -m pytest -q -p no:cacheprovider -m gpu tests/robotics/test_resample_window.py \
  tests/robotics/test_robotics_gpu.py -k "window or cuda_matches or bfloat16 or every_search or widths or int64" \
  > "$OUT/logs/tests.log" 2>&1; echo "tests rc=$?" | tee -a "$OUT/logs/steps.txt"
tail -3 "$OUT/logs/tests.log"
timeout 65 $PY benchmarks/robotics_sweep.py --out "$OUT/sweep" --stages window --only resample.fwd \
  --no-compile --budget-s 55 --time-per-stage 1.0 > "$OUT/logs/sweep.log" 2>&1
echo "sweep rc=$?" | tee -a "$OUT/logs/steps.txt"
timeout 30 ncu --clock-control none --kernel-name resample_kernel --csv --metrics \
gpu__time_duration.sum,l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,dram__bytes_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
  $PY scripts/gpu/resample_window_probe.py --mode ncu > "$OUT/logs/ncu.csv" 2> "$OUT/logs/ncu.err"
echo "ncu rc=$?" | tee -a "$OUT/logs/steps.txt"
timeout 25 $PY scripts/gpu/resample_window_probe.py --mode time --out "$OUT/sorted.json" \
  > "$OUT/logs/sorted.log" 2>&1; echo "sorted rc=$?" | tee -a "$OUT/logs/steps.txt"
SUITE_CEILINGS=1 SUITE_MAX_TIME=0.5 SUITE_BUDGET_S=95 timeout 100 bash scripts/gpu/bench_parts.sh \
  "$OUT/h" robo2 "resample.fwd*:70" "align*:35" > "$OUT/logs/harness.log" 2>&1
echo "harness rc=$?" | tee -a "$OUT/logs/steps.txt"
cp "$OUT/h/robo2.json" "$OUT/harness.json" 2>/dev/null
cp "$OUT/sweep/robotics-sweep.json" "$OUT/sweep.json" 2>/dev/null
cp -r "$OUT/h/summary.txt" "$OUT/h/"*.log "$OUT/logs/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs" "$OUT/h" "$OUT/sweep"
python3 scripts/results_table.py "$OUT/harness.json" 2>/dev/null | tail -12
grep -A12 '"old default"' "$OUT/sorted.json" | head -3
