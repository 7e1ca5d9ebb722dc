#!/usr/bin/env bash
# helper ln16k2, first GPU call: the kernel-alone sweep of layer_norm_bwd_pairs_kernel launches
# against the default and the former held default (--pairs), then the GPU tests of the pairs
# kernel and the bf16 default path.
set -uo pipefail
OUT="${1:?OUT}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/ln16k2-triton
start=$SECONDS
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
timeout 120 python3 benchmarks/ln_bwd_split_sweep.py --pairs --out "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
echo "sweep: exit $? in $((SECONDS - start)) s"
t0=$SECONDS
timeout 100 python3 -m pytest tests/ops/test_norm.py -m gpu -q -p no:cacheprovider \
  -k "pairs or bf16_forward_backward" > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu_tests.txt")"
grep -A30 "^copy ceiling" "$OUT/sweep.txt"
grep -E "FAILED|Error" "$OUT/gpu_tests.txt" | head -20
echo "total $((SECONDS - start)) s"
