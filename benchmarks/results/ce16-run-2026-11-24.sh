#!/usr/bin/env bash
# run from .carry-ce16 with PYTHONPATH set; $OUT from the device machine
set -u
export TRITON_CACHE_DIR=/tmp/tc WARPFORGE_CACHE_DIR=/tmp/wc TORCHINDUCTOR_CACHE_DIR=/tmp/ic
mkdir -p $OUT/logs $OUT/sweep
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/logs/gpu.txt 2>&1
t0=$SECONDS
timeout ${SWEEP_S:-210} python3 benchmarks/ce_softmax_bf16_sweep.py --out $OUT/sweep --budget-s ${SWEEP_BUDGET:-180} --families fwd_grad,op,softmax > $OUT/logs/sweep.log 2>&1
echo "sweep rc $? in $((SECONDS-t0)) s"
t0=$SECONDS
SUITE_BUDGET_S=${BENCH_S:-180} SUITE_CEILINGS=1 SUITE_DTYPE=bf16 bash scripts/gpu/bench_parts.sh $OUT/x longrows "cross_entropy.fwd_bwd:200" "softmax.fwd:90" "log_softmax.fwd:90" > $OUT/logs/bench.log 2>&1
echo "bench rc $? in $((SECONDS-t0)) s"
python3 scripts/results_table.py $OUT/x/longrows.json > $OUT/logs/table.txt 2>&1
t0=$SECONDS
timeout ${TESTS_S:-150} python3 -m pytest tests/ops/test_cross_entropy.py tests/ops/test_split_rows.py tests/ops/test_softmax.py tests/ops/test_fused_linear_cross_entropy.py -m gpu -q -p no:cacheprovider > $OUT/logs/gpu-tests.log 2>&1
echo "tests rc $? in $((SECONDS-t0)) s"; tail -5 $OUT/logs/gpu-tests.log
cp $OUT/x/longrows.json $OUT/longrows.json 2>/dev/null
cat $OUT/sweep/ce_softmax_bf16_sweep.txt 2>/dev/null || tail -30 $OUT/logs/sweep.log
cat $OUT/logs/table.txt
tar czf $OUT/logs.tgz -C $OUT logs x 2>/dev/null
rm -rf $OUT/x $OUT/logs
