#!/usr/bin/env bash
# Tenth session, lead, second call on the merged tree: the two GPU tests that failed in call 1
# (the tile kernels' 64-bit paths, messages in full), the GPU tests call 1 did not reach
# (tests/ops/test_norm.py, test_row_kernels_compile.py), and the harness rows that ran past their
# limits there. Repository root: bash THIS OUT
set -u
OUT="${1:?}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTHONUNBUFFERED=1
timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=long \
  "tests/ops/test_lean_kernels.py::test_softmax_backward_tile_past_2_31_elements_gpu" \
  "tests/ops/test_lean_kernels.py::test_norm_forward_tile_past_2_31_elements_gpu" > "$OUT/wide-tests.txt" 2>&1
echo "wide tests: exit $?: $(tail -1 "$OUT/wide-tests.txt")"
t0=$SECONDS
timeout 130 python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs tests/ops/test_norm.py \
  tests/ops/test_row_kernels_compile.py > "$OUT/gpu-tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu-tests.txt")"
export SUITE_CEILINGS=1 SUITE_MAX_TIME=0.3
SUITE_BUDGET_S=95 SUITE_DTYPE=fp32 SUITE_SHAPE="M=32768,N=256" \
  bash scripts/gpu/bench_parts.sh "$OUT/s32" s32 "softmax.bwd:45" "log_softmax.bwd:45"
SUITE_BUDGET_S=95 SUITE_DTYPE=bf16 SUITE_SHAPE="M=32768,N=256" \
  bash scripts/gpu/bench_parts.sh "$OUT/s16" s16 "softmax.bwd:45" "log_softmax.bwd:45"
for f in "$OUT"/s32/s32.json "$OUT"/s16/s16.json; do
  [ -s "$f" ] && python3 scripts/results_table.py "$f" | grep -E "^\| [a-z_]+\.|rows|geometric"
done
mkdir -p "$OUT/keep" && cp "$OUT"/s32/s32.json "$OUT"/s16/s16.json "$OUT/keep/" 2>/dev/null
tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude='*cache*' --exclude=logs.tgz --exclude=keep . 2>/dev/null
