#!/usr/bin/env bash
# Ran once, at commit 06ba1e8 (the lanes kernel exists only at 06ba1e8-81cb494; reverted, see
# ce262k-2026-11-25-notes.md).
# ce262k (issue #4) device call 1, from .carry-ce262k with PYTHONPATH=$PWD/src and $OUT from the
# device machine. (1) kernel-alone sweep (ce_split_meeting_sweep.py, float64-verified, median of
# 3 round-robin passes): the flag-word kernel at both long shapes and at the same bytes with 16 /
# 32 / 64 chunks a row (16384 x 65536, 8192 x 131072, 4096 x 262144: one launch, 4096/4 x8), the
# 64-chunk code path at 32 chunks (cp64), and the new lanes kernel (one warp meeting a row);
# (2) GPU tests of the lanes kernel; (3) ncu (WarpStateStats, SourceCounters) of one launch each
# of the current 262144 and 128256 launches and the lanes kernel at 262144.
set -u
export TRITON_CACHE_DIR=/tmp/tc WARPFORGE_CACHE_DIR=/tmp/wc PYTHONUNBUFFERED=1
mkdir -p $OUT/logs $OUT/sweep
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/logs/gpu.txt 2>&1
big="262144:words 8192/8 x4,262144:lanes 8192/8 x4,262144:lanes 8192/8 x4 nodefer,262144:words 4096/4 x8,262144:lanes 4096/4 x8,262144:lanes 4096/4 x8 pairs,262144:lanes 8192/4 x4"
mid="128256:words 4096/4 x8,128256:lanes 4096/4 x8,128256:lanes 8192/8 x4,128256:words 4096/4 x8 cp64"
diag="131072:words 4096/4 x8,65536:words 4096/4 x8"
t0=$SECONDS
timeout ${SWEEP_S:-110} python3 benchmarks/ce_split_meeting_sweep.py --out $OUT/sweep --repeat 3 \
  --shapes 4096x262144:bf16,8192x128256:bf16,8192x131072:bf16,16384x65536:bf16 \
  --only "$big,$mid,$diag" > $OUT/logs/sweep.log 2>&1
echo "sweep rc $? in $((SECONDS-t0)) s"
cat $OUT/sweep/ce_split_meeting_sweep.txt 2>/dev/null || tail -20 $OUT/logs/sweep.log
t0=$SECONDS
timeout ${TESTS_S:-40} python3 -m pytest tests/ops/test_cross_entropy.py -m gpu -k "lane_kernel" -q \
  -p no:cacheprovider > $OUT/logs/gpu-tests.log 2>&1
echo "tests rc $? in $((SECONDS-t0)) s"; tail -3 $OUT/logs/gpu-tests.log
t0=$SECONDS
timeout ${NCU_S:-50} ncu --clock-control none -f -o $OUT/logs/ce262k --section WarpStateStats \
  --section SourceCounters --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum \
  -k regex:fwd_grad_ python3 benchmarks/ce_split_meeting_sweep.py --out /tmp/ncu --once \
  --shapes 4096x262144:bf16,8192x128256:bf16 \
  --only "262144:words 8192/8 x4,262144:lanes 8192/8 x4,128256:words 4096/4 x8" > $OUT/logs/ncu.log 2>&1
echo "ncu rc $? in $((SECONDS-t0)) s"; tail -3 $OUT/logs/ncu.log
ncu -i $OUT/logs/ce262k.ncu-rep --csv --page details > $OUT/ncu-details.csv 2> $OUT/logs/ncu-import.err
ncu -i $OUT/logs/ce262k.ncu-rep --csv --page source --print-source sass > $OUT/ncu-source.csv 2>> $OUT/logs/ncu-import.err
ls -la $OUT $OUT/logs
tar czf $OUT/logs.tgz -C $OUT logs 2>/dev/null && rm -rf $OUT/logs
