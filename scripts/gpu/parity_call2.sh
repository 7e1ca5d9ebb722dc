#!/usr/bin/env bash
# Call 2 of the parity helper: GPU tests of the changed files, the harness rows of the changed
# ops (Liger installed by the caller), and the softmax backward tile launches again.
# Usage (repo root, PYTHONPATH with src and Liger): bash scripts/gpu/parity_call2.sh OUT
set -uo pipefail
O="${1:?OUT}"
export PYTHONUNBUFFERED=1
S="$O/summary.txt"
t=$SECONDS
timeout 80 python3 -m pytest -m gpu -q -x tests/ops/test_lean_kernels.py \
  tests/ops/test_activations.py tests/ops/test_softmax.py > "$O/gpu-tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t)) s" | tee -a "$S"
SUITE_CEILINGS=1 SUITE_DTYPE=fp32 SUITE_BUDGET_S=170 bash scripts/gpu/bench_parts.sh /tmp/pa \
  parity-fp32 swiglu.fwd:60 geglu.fwd:60 cross_entropy.bwd:60 swiglu.bwd:60 geglu.bwd:60 \
  | tee -a "$S"
SUITE_CEILINGS=1 SUITE_SHAPE="N=256 N=4096 N=16384" SUITE_BUDGET_S=100 \
  bash scripts/gpu/bench_parts.sh /tmp/pb parity-softmax softmax.bwd:70 log_softmax.bwd:70 \
  | tee -a "$S"
cp /tmp/pa/parity-fp32.json /tmp/pb/parity-softmax.json "$O/" 2>/dev/null
t=$SECONDS
timeout 45 python3 benchmarks/parity_sweep.py --out "$O" --max-time 1.0 --only \
  "softmax backward alone M=32768 N=256 torch.float32" "softmax.bwd M=32768 N=256 torch.float32" \
  > "$O/sweep2.txt" 2>&1
echo "sweep: exit $? in $((SECONDS - t)) s" | tee -a "$S"
tar czf "$O/logs.tgz" --exclude='*cache*' -C /tmp pa pb 2>/dev/null
for f in "$O"/parity-*.json; do python3 scripts/results_table.py "$f" | grep -v '^$'; done
tail -n 40 "$O/sweep2.txt"; tail -n 3 "$O/gpu-tests.txt"
