#!/usr/bin/env bash
# helper ln16k2, second GPU call: the kernel-alone sweep of the pairs kernel's unrolled / held
# launches (--pairs), then the harness (layer_norm.bwd, every shape and dtype) with candidate
# default A, and the bf16 4096 x 16384 row with the two other candidate defaults the sweep
# timed fastest (trees/B..E: this branch's commits that differ from A only in the default
# launch), then the GPU tests. Run from the carried tree; Liger installed to /tmp/site first.
set -uo pipefail
OUT="${1:?OUT}"
ROOT=$PWD
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/ln16k2-triton
declare -A COMMIT=([A]=55e88e4b77ed38c2366ea9a272310cc90ab0ff25 [B]=a6f98c6cf279ccb47c2707477b465bc275d3eef7 [C]=1e39800e78fcedc91339b6e7bae83afad8a33b90 [D]=320d2729125a63f438be93256dcb4eb22e8a0261 [E]=1c3a474ed43143719a3c304b08b8ebcf9c0af7f5)
start=$SECONDS
PYTHONPATH=$ROOT/src:/tmp/site timeout 100 python3 benchmarks/ln_bwd_split_sweep.py --pairs --out "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
echo "sweep: exit $? in $((SECONDS - start)) s"
grep -A20 "^copy ceiling" "$OUT/sweep.txt"
PICK=$(python3 - "$OUT/sweep.json" <<'PY'
import json, sys
names = {"B": "pairs b256 w1 x28 u3 hold_weight", "C": "pairs b256 w1 x24 u1 hold_weight hold_rows",
         "D": "pairs b256 w1 x20 u3 hold_weight hold_rows", "E": "pairs b256 w1 x32 u1 hold_weight"}
rows = {r["contender"]: r.get("us") for c in json.load(open(sys.argv[1]))["cases"] for r in c["rows"]}
timed = sorted((rows[v], k) for k, v in names.items() if rows.get(v))
print(" ".join(k for _, k in timed[:2]))
PY
)
echo "harness candidates: A $PICK"
t0=$SECONDS
(cd "$ROOT" && PYTHONPATH=/tmp/site WARPFORGE_GIT_COMMIT=${COMMIT[A]} SUITE_CEILINGS=1 SUITE_BUDGET_S=110 \
  bash scripts/gpu/bench_parts.sh /tmp/hA ln16k2-A "layer_norm.bwd:100" > /tmp/hA.log 2>&1)
cp /tmp/hA/ln16k2-A.json "$OUT/" 2>/dev/null
echo "harness A: $((SECONDS - t0)) s: $(tail -2 /tmp/hA/summary.txt | head -1)"
for T in $PICK; do
  t0=$SECONDS
  (cd "$ROOT/trees/$T" && PYTHONPATH=/tmp/site WARPFORGE_GIT_COMMIT=${COMMIT[$T]} SUITE_CEILINGS=1 SUITE_DTYPE=bf16 \
    SUITE_SHAPE="M=4096,N=16384" SUITE_BUDGET_S=60 bash scripts/gpu/bench_parts.sh /tmp/h$T ln16k2-$T "layer_norm.bwd:50" > /tmp/h$T.log 2>&1)
  cp /tmp/h$T/ln16k2-$T.json "$OUT/" 2>/dev/null
  echo "harness $T: $((SECONDS - t0)) s: $(tail -2 /tmp/h$T/summary.txt | head -1)"
done
t0=$SECONDS
PYTHONPATH=$ROOT/src:/tmp/site timeout 70 python3 -m pytest tests/ops/test_norm.py -m gpu -q -p no:cacheprovider \
  -k "pairs or bf16_forward_backward" > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu_tests.txt")"
grep -E "FAILED|Error" "$OUT/gpu_tests.txt" | head -10
tar czf "$OUT/logs.tgz" -C /tmp hA.log hA/summary.txt hA/layer_norm.bwd.log $(for T in $PICK; do echo h$T.log h$T/summary.txt h$T/layer_norm.bwd.log; done) 2>/dev/null
for f in "$OUT"/ln16k2-*.json; do python3 scripts/results_table.py "$f" 2>/dev/null | grep -E "^\| layer|copy ceiling"; done
echo "total $((SECONDS - start)) s"
