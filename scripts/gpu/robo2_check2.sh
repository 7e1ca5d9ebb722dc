#!/usr/bin/env bash
# robo2's second, short GPU call: ncu of the default kernel's value traffic at the three issue
# shapes (does a value row come from L1 or L2?), and the whole-row window at the small shape,
# its run-time branch removed (Triton 3.6 failed to compile it in the first call).
set -uo pipefail
: "${OUT:?}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
timeout 30 ncu --clock-control none --kernel-name resample_kernel --csv --metrics \
gpu__time_duration.sum,l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,dram__bytes_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
  python3 scripts/gpu/resample_window_probe.py --mode ncu > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
echo "ncu rc=$?"
timeout 25 python3 scripts/gpu/resample_window_probe.py --mode small --out "$OUT/small.json" \
  > "$OUT/small.log" 2>&1; echo "small rc=$?"
grep -v measurement "$OUT/small.log" | tail -30
grep -E "l1tex__t_sector_hit|lts__t_sectors_op_read|gpu__time|lts__throughput|warps_active" "$OUT/ncu.csv" | awk -F'","' '{print $1, $9, $13, $15}'
