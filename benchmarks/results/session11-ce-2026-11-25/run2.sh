#!/usr/bin/env bash
# Eleventh session, lead, second call: short rows several a program, the flat backward and aligned forward for unaligned rows (one-launch
# reduction, aligned chunks for rows off 16-byte boundaries): GPU tests, the kernel sweep, and the
# harness rows of all three cross-entropy problems at the sweep shapes, bf16 and fp32.
set -u
OUT="${1:?}"
mkdir -p "$OUT/keep"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/src PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
timeout 200 python3 -m pytest tests/ops/test_cross_entropy.py tests/ops/test_lean_kernels.py -m gpu -q -p no:cacheprovider \
  > "$OUT/keep/gpu-tests.txt" 2>&1
tail -3 "$OUT/keep/gpu-tests.txt"
timeout 150 python3 benchmarks/ce_fwd_sweep.py --out "$OUT/keep" > "$OUT/sweep.log" 2>&1 || tail -20 "$OUT/sweep.log"
export SUITE_CEILINGS=1 SUITE_MAX_TIME=0.3 SUITE_SWEEP=1
export SUITE_SHAPE="M=32768,V=256 M=4096,V=50257"  # 151936: code paths unchanged since run.sh
for dt in bf16 fp32; do
  SUITE_DTYPE=$dt SUITE_BUDGET_S=140 bash scripts/gpu/bench_parts.sh "$OUT/$dt" "ce-$dt" \
    "cross_entropy.fwd:45" "cross_entropy.bwd:40" "cross_entropy.fwd_bwd:75"
  [ -s "$OUT/$dt/ce-$dt.json" ] && cp "$OUT/$dt/ce-$dt.json" "$OUT/keep/" && python3 scripts/results_table.py "$OUT/$dt/ce-$dt.json"
done
grep -E "^(bfloat16|float32) .*(default|op)" "$OUT/keep/ce_fwd_sweep.txt"
tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude='*cache*' --exclude=logs.tgz --exclude=keep . 2>/dev/null
find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep ! -name logs.tgz -exec rm -rf {} +
