#!/usr/bin/env bash
# Tenth session, lead: the merged tree (normfwd, normbwd, ln16k3, parity) on the H100: GPU tests
# of the changed files, then the harness rows the helpers could not time. Repository root:
# bash THIS OUT
set -u
OUT="${1:?}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 215 python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs tests/ops/test_norm_split_bwd.py \
  tests/ops/test_norm_split_fwd.py tests/ops/test_lean_kernels.py tests/ops/test_softmax.py \
  tests/ops/test_activations.py tests/ops/test_cross_entropy.py tests/ops/test_norm.py \
  tests/ops/test_row_kernels_compile.py > "$OUT/gpu-tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu-tests.txt")"
export SUITE_CEILINGS=1 SUITE_MAX_TIME=0.3
SUITE_BUDGET_S=75 SUITE_DTYPE=bf16 SUITE_SHAPE="M=4096,N=16384 M=16384,N=4096" \
  bash scripts/gpu/bench_parts.sh "$OUT/ln" ln "layer_norm.bwd:70"
SUITE_BUDGET_S=150 SUITE_DTYPE=fp32 SUITE_SHAPE="tokens=8192 M=16384,V=32000 M=32768,N=256" \
  bash scripts/gpu/bench_parts.sh "$OUT/p32" p32 "swiglu.fwd:35" "swiglu.bwd:35" \
  "cross_entropy.bwd:30" "softmax.bwd:25" "log_softmax.bwd:25"
SUITE_BUDGET_S=50 SUITE_DTYPE=bf16 SUITE_SHAPE="M=32768,N=256" \
  bash scripts/gpu/bench_parts.sh "$OUT/p16" p16 "softmax.bwd:25" "log_softmax.bwd:25"
SUITE_BUDGET_S=60 SUITE_SWEEP=1 SUITE_DTYPE=bf16 SUITE_SHAPE="M=4096,N=32768" \
  bash scripts/gpu/bench_parts.sh "$OUT/af" af "add_rms_norm.fwd:30" "rms_norm.fwd:30"
for f in "$OUT"/ln/ln.json "$OUT"/p32/p32.json "$OUT"/p16/p16.json "$OUT"/af/af.json; do
  [ -s "$f" ] && python3 scripts/results_table.py "$f" | grep -E "^\| [a-z_]+\.|rows|geometric"
done
tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude='*cache*' --exclude=logs.tgz . 2>/dev/null
