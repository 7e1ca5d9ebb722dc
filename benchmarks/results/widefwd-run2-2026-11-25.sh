#!/usr/bin/env bash
# widefwd (issue #4): the second device call, from .carry-widefwd with PYTHONPATH (Liger + src) set
# by the caller. (1) the tables' launches (as call 1 picked them) against the current path at
# widths between 16384 and 32768 (benchmarks/wide_rows_sweep.py widths), to set their min_n;
# (2) the harness rows of softmax.bwd / log_softmax.bwd (bf16; 4096x32768, 4096x16384,
# 8192x65536) that call 1's budget skipped, with the bf16 backward on the whole-row kernel.
set -u
export TRITON_CACHE_DIR=/tmp/tc WARPFORGE_CACHE_DIR=/tmp/wc TORCHINDUCTOR_CACHE_DIR=/tmp/ic
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p $OUT/logs
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/logs/gpu.txt 2>&1
t0=$SECONDS
timeout 60 python3 benchmarks/wide_rows_sweep.py widths $OUT/widefwd-widths-2026-11-25-h100 > $OUT/logs/widths.log 2>&1
echo "widths rc $? in $((SECONDS-t0)) s"
cat $OUT/widefwd-widths-2026-11-25-h100.txt
SUITE_CEILINGS=1 SUITE_DTYPE=bf16 SUITE_SWEEP=1 SUITE_MAX_TIME=0.3 SUITE_BUDGET_S=105 \
  SUITE_SHAPE="M=4096,N=32768 M=4096,N=16384 M=8192,N=65536" \
  bash scripts/gpu/bench_parts.sh $OUT/h widefwd-harness2-2026-11-25-h100 "softmax.bwd:70" \
  "log_softmax.bwd:70"
cp $OUT/h/widefwd-harness2-2026-11-25-h100.json $OUT/ 2>/dev/null
python3 scripts/results_table.py $OUT/widefwd-harness2-2026-11-25-h100.json \
  > $OUT/widefwd-harness2-2026-11-25-h100.txt 2>&1
cat $OUT/widefwd-harness2-2026-11-25-h100.txt
tar --exclude='*cache*' -czf $OUT/widefwd-run2-logs-2026-11-25-h100.tgz -C $OUT logs h
rm -rf $OUT/logs $OUT/h
