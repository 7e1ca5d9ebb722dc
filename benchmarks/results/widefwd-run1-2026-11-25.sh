#!/usr/bin/env bash
# widefwd (issue #4): the one device call, from .carry-widefwd with PYTHONPATH (Liger + src) set by
# the caller and $OUT from the device machine. (1) kernel sweep of the whole-row launches against
# the current path and Liger (benchmarks/wide_rows_sweep.py); (2) the picks written into the
# carried tables (benchmarks/wide_rows_pick.py; the edited norm.py / softmax_ops.py kept in the
# logs); (3) the GPU tests of tests/ops/test_wide_rows.py (bf16, the >2**31-element test) on the
# picked tables; (4) the harness rows (bf16, 4096x32768, 4096x16384, 8192x65536) with the picks.
set -u
export TRITON_CACHE_DIR=/tmp/tc WARPFORGE_CACHE_DIR=/tmp/wc TORCHINDUCTOR_CACHE_DIR=/tmp/ic
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p $OUT/logs
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/logs/gpu.txt 2>&1
t0=$SECONDS
timeout 120 python3 benchmarks/wide_rows_sweep.py $OUT/widefwd-sweep-2026-11-25-h100 > $OUT/logs/sweep.log 2>&1
echo "sweep rc $? in $((SECONDS-t0)) s"
python3 benchmarks/wide_rows_pick.py $OUT/widefwd-sweep-2026-11-25-h100.json src > $OUT/logs/pick.txt 2>&1
echo "pick rc $?"; cat $OUT/logs/pick.txt
cp src/warpforge/ops/norm.py src/warpforge/ops/softmax_ops.py $OUT/logs/
t0=$SECONDS
timeout 60 python3 -m pytest tests/ops/test_wide_rows.py -m gpu -k "bf16 or more_than" -q -x \
  -p no:cacheprovider > $OUT/logs/gpu-tests.log 2>&1
echo "tests rc $? in $((SECONDS-t0)) s"; tail -3 $OUT/logs/gpu-tests.log
SUITE_CEILINGS=1 SUITE_DTYPE=bf16 SUITE_SWEEP=1 SUITE_MAX_TIME=0.3 SUITE_BUDGET_S=230 \
  SUITE_SHAPE="M=4096,N=32768 M=4096,N=16384 M=8192,N=65536" \
  bash scripts/gpu/bench_parts.sh $OUT/h widefwd-harness-2026-11-25-h100 "rms_norm.fwd:70" \
  "layer_norm.fwd:70" "softmax.fwd:70" "add_rms_norm.fwd:70" "log_softmax.fwd:70" \
  "softmax.bwd:70" "log_softmax.bwd:70"
cp $OUT/h/widefwd-harness-2026-11-25-h100.json $OUT/ 2>/dev/null
python3 scripts/results_table.py $OUT/widefwd-harness-2026-11-25-h100.json \
  > $OUT/widefwd-harness-2026-11-25-h100.txt 2>&1
cat $OUT/widefwd-harness-2026-11-25-h100.txt
tar --exclude='*cache*' -czf $OUT/widefwd-logs-2026-11-25-h100.tgz -C $OUT logs h
rm -rf $OUT/logs $OUT/h
