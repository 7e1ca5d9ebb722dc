#!/usr/bin/env bash
# helper ln16k, second GPU call: the held-kernel sweep after the fix (--held), the harness
# (layer_norm.bwd, every shape and dtype, copy ceiling in-run) with the held default for 2-byte
# rows, then the GPU tests of the held kernel and of the default split path.
set -uo pipefail
OUT="${1:?OUT}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/ln16k-triton
start=$SECONDS
timeout 45 python3 benchmarks/ln_bwd_split_sweep.py --held --out "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
echo "sweep: exit $? in $((SECONDS - start)) s"
t0=$SECONDS
SUITE_CEILINGS=1 SUITE_BUDGET_S=100 bash scripts/gpu/bench_parts.sh /tmp/h ln16k "layer_norm.bwd:90" > /tmp/h.log 2>&1
cp /tmp/h/ln16k.json "$OUT/" 2>/dev/null
echo "harness: $((SECONDS - t0)) s: $(tail -2 /tmp/h/summary.txt | head -1)"
t0=$SECONDS
timeout 40 python3 -m pytest tests/ops/test_norm.py -m gpu -q -p no:cacheprovider \
  -k "held or (gpu_layer_norm_split_backward and not launches)" > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu_tests.txt")"
tar czf "$OUT/logs.tgz" -C /tmp h.log h/summary.txt h/layer_norm.bwd.log 2>/dev/null
grep -A40 "^copy ceiling" "$OUT/sweep.txt"
python3 scripts/results_table.py "$OUT/ln16k.json" 2>/dev/null | grep -E "^\\| layer|copy ceiling"
echo "total $((SECONDS - start)) s"
