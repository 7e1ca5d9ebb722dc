#!/usr/bin/env bash
# ce16b (issue #4): one device call. Run from .carry-ce16b with PYTHONPATH set; $OUT from the
# device machine. Sweep (correctness at the real shapes first), harness, GPU tests; the harness
# is skipped when the sweep fails (a meeting that never ends would hang it too).
set -u
export TRITON_CACHE_DIR=/tmp/tc WARPFORGE_CACHE_DIR=/tmp/wc TORCHINDUCTOR_CACHE_DIR=/tmp/ic
mkdir -p $OUT/logs $OUT/sweep
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/logs/gpu.txt 2>&1
t0=$SECONDS
timeout ${SWEEP_S:-110} python3 benchmarks/ce_split_meeting_sweep.py --out $OUT/sweep > $OUT/logs/sweep.log 2>&1
sweep_rc=$?
echo "sweep rc $sweep_rc in $((SECONDS-t0)) s"
cat $OUT/sweep/ce_split_meeting_sweep.txt 2>/dev/null || tail -20 $OUT/logs/sweep.log
if [ $sweep_rc = 0 ]; then
  t0=$SECONDS
  SUITE_BUDGET_S=${BENCH_S:-100} SUITE_CEILINGS=1 SUITE_DTYPE=bf16 bash scripts/gpu/bench_parts.sh $OUT/x ce16b "cross_entropy.fwd_bwd:90" > $OUT/logs/bench.log 2>&1
  echo "bench rc $? in $((SECONDS-t0)) s"
  python3 scripts/results_table.py $OUT/x/ce16b.json > $OUT/logs/table.txt 2>&1
  cp $OUT/x/ce16b.json $OUT/ce16b.json 2>/dev/null
  cat $OUT/logs/table.txt
fi
t0=$SECONDS
timeout ${TESTS_S:-90} python3 -m pytest tests/ops/test_cross_entropy.py tests/ops/test_split_rows.py tests/ops/test_row_kernels_compile.py -m gpu -q -p no:cacheprovider -x > $OUT/logs/gpu-tests.log 2>&1
echo "tests rc $? in $((SECONDS-t0)) s"; tail -4 $OUT/logs/gpu-tests.log
tar czf $OUT/logs.tgz -C $OUT logs x 2>/dev/null
rm -rf $OUT/x $OUT/logs
