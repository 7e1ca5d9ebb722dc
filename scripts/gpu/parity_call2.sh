#!/usr/bin/env bash
# Call 2 of the parity helper: the harness rows of the changed ops (Liger installed by the
# caller), GPU tests of the changed files, and the softmax backward tile launches again.
# Usage (repo root, PYTHONPATH with src and Liger): bash scripts/gpu/parity_call2.sh OUT
set -uo pipefail
O="${1:?OUT}"
export PYTHONUNBUFFERED=1
S="$O/summary.txt"
SUITE_CEILINGS=1 SUITE_DTYPE=fp32 SUITE_BUDGET_S=150 bash scripts/gpu/bench_parts.sh /tmp/pa \
  parity-fp32 swiglu.fwd:45 geglu.fwd:45 cross_entropy.bwd:50 swiglu.bwd:40 geglu.bwd:40 \
  | tee -a "$S"
cp /tmp/pa/parity-fp32.json "$O/" 2>/dev/null
SUITE_CEILINGS=1 SUITE_SHAPE="N=256 N=4096" SUITE_BUDGET_S=90 \
  bash scripts/gpu/bench_parts.sh /tmp/pb parity-softmax softmax.bwd:50 log_softmax.bwd:50 \
  | tee -a "$S"
cp /tmp/pb/parity-softmax.json "$O/" 2>/dev/null
t=$SECONDS
timeout 60 python3 -m pytest -m gpu -q -x tests/ops/test_lean_kernels.py \
  tests/ops/test_activations.py tests/ops/test_softmax.py > "$O/gpu-tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t)) s" | tee -a "$S"
t=$SECONDS
timeout 40 python3 benchmarks/parity_sweep.py --out "$O" --max-time 0.8 --only \
  "softmax.bwd M=32768 N=256 torch.float32" "softmax backward alone M=32768 N=256 torch.float32" \
  > "$O/sweep2.txt" 2>&1
echo "sweep: exit $? in $((SECONDS - t)) s" | tee -a "$S"
tar czf "$O/logs.tgz" --exclude='*cache*' -C /tmp pa pb 2>/dev/null
for f in "$O"/parity-*.json; do python3 scripts/results_table.py "$f" | grep -v '^$'; done
tail -n 30 "$O/sweep2.txt"; tail -n 3 "$O/gpu-tests.txt"
