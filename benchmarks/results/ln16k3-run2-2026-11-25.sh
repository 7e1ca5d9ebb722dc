#!/usr/bin/env bash
# helper ln16k3, second GPU call (from the carried tree, Liger installed to /tmp/site first):
# the pairs kernel's 16-byte poll against the old 8-byte one and the evict-last first read
# (--pairs --words, kernel alone), the profile of forward + backward (no materialized zero
# gradients now), the harness (layer_norm.bwd, every shape and dtype) at this tree (commit C,
# the same tree as A), the bf16 4096 x 16384 row at trees/B (keep_rows default) when the sweep
# timed keep_rows faster than the default, and the GPU tests. bash THIS $OUT
set -uo pipefail
OUT="${1:?OUT}"
ROOT=$PWD
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/ln16k3-triton
C=ae172ade788c02d8edb8dd293761c7ab332e876b
B=f283dd39ccbc7b9d1c532db4b31861912a358e0e
start=$SECONDS
t0=$SECONDS
PYTHONPATH=$ROOT/src:/tmp/site timeout 60 python3 benchmarks/ln_bwd_split_sweep.py --pairs --words --out "$OUT/sweep.json" > /tmp/sweep.txt 2>&1
echo "sweep: exit $? in $((SECONDS - t0)) s"; grep -A12 "^copy ceiling" /tmp/sweep.txt
t0=$SECONDS
PYTHONPATH=$ROOT/src timeout 45 python3 benchmarks/ln_bwd_profile.py --out "$OUT/profile.json" > /tmp/profile.txt 2>&1
echo "profile: exit $? in $((SECONDS - t0)) s"; tail -6 /tmp/profile.txt
t0=$SECONDS
(cd "$ROOT" && PYTHONPATH=/tmp/site WARPFORGE_GIT_COMMIT=$C SUITE_CEILINGS=1 SUITE_BUDGET_S=110 \
  bash scripts/gpu/bench_parts.sh /tmp/hA ln16k3-A "layer_norm.bwd:100" > /tmp/hA.log 2>&1)
cp /tmp/hA/ln16k3-A.json "$OUT/" 2>/dev/null
echo "harness A: $((SECONDS - t0)) s: $(tail -2 /tmp/hA/summary.txt | head -1)"
RUN_B=$(python3 - "$OUT/sweep.json" <<'PY'
import json, sys
rows = {r["contender"]: r.get("us") for c in json.load(open(sys.argv[1]))["cases"] for r in c["rows"]}
default = min(v for k, v in rows.items() if k.startswith("default") and v)
keep = rows.get("pairs b256 w1 x28 u3 hold_weight keep_rows")
print(1 if keep and keep < default - 3.0 else 0)  # only a clear win (device time is short)
PY
)
echo "run B: $RUN_B"
if [ "$RUN_B" = 1 ]; then
  t0=$SECONDS
  (cd "$ROOT/trees/B" && PYTHONPATH=/tmp/site WARPFORGE_GIT_COMMIT=$B SUITE_CEILINGS=1 SUITE_DTYPE=bf16 \
    SUITE_SHAPE="M=4096,N=16384" SUITE_BUDGET_S=60 bash scripts/gpu/bench_parts.sh /tmp/hB ln16k3-B "layer_norm.bwd:50" > /tmp/hB.log 2>&1)
  cp /tmp/hB/ln16k3-B.json "$OUT/" 2>/dev/null
  echo "harness B: $((SECONDS - t0)) s: $(tail -2 /tmp/hB/summary.txt | head -1)"
fi
t0=$SECONDS
PYTHONPATH=$ROOT/src:/tmp/site timeout 100 python3 -m pytest tests/ops/test_norm.py -m gpu -q -p no:cacheprovider \
  -k "pairs or bf16_forward_backward" > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu_tests.txt")"
grep -E "FAILED|Error" "$OUT/gpu_tests.txt" | head -10
PYTHONPATH=$ROOT/src timeout 30 python3 -m pytest tests/ops/test_norm.py -q -p no:cacheprovider \
  -k "fills_no_statistics" >> "$OUT/gpu_tests.txt" 2>&1
echo "fills test on cuda: $(tail -1 "$OUT/gpu_tests.txt")"
tar czf "$OUT/logs.tgz" -C /tmp sweep.txt profile.txt hA.log hA/summary.txt hA/layer_norm.bwd.log \
  $([ "$RUN_B" = 1 ] && echo hB.log hB/summary.txt hB/layer_norm.bwd.log) 2>/dev/null
for f in "$OUT"/ln16k3-*.json; do python3 scripts/results_table.py "$f" 2>/dev/null | grep -E "^\| layer|copy ceiling"; done
echo "total $((SECONDS - start)) s"
