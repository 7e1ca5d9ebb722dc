#!/usr/bin/env bash
# ce16b (issue #4) second device call, from .carry-ce16b: src = commit A (2-byte rows: eight
# 4096-column flag-word programs an SM up to 64 chunks), src_b = commit B (the same up to 32
# chunks, then four 8192-column ones). The sweep times both launches at 4096 x 262144; the
# faster tree's default runs the harness; then the GPU test of the flag-word op plans.
# COMMIT_A / COMMIT_B from the caller.
set -u
export TRITON_CACHE_DIR=/tmp/tc WARPFORGE_CACHE_DIR=/tmp/wc TORCHINDUCTOR_CACHE_DIR=/tmp/ic
mkdir -p $OUT/logs $OUT/sweep
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/logs/gpu.txt 2>&1
t0=$SECONDS
timeout 40 python3 benchmarks/ce_split_meeting_sweep.py --out $OUT/sweep --shapes 4096x262144:bf16 --only "words 4096/4 x8,words 8192/8 x4" > $OUT/logs/sweep.log 2>&1
sweep_rc=$?
echo "sweep rc $sweep_rc in $((SECONDS-t0)) s"
cat $OUT/sweep/ce_split_meeting_sweep.txt 2>/dev/null || tail -20 $OUT/logs/sweep.log
pick=$(python3 - <<'PY'
import json, os
rows = json.load(open(os.environ["OUT"] + "/sweep/ce_split_meeting_sweep.json"))["rows"]
us = {r["contender"]: r["us"] for r in rows if r["shape"] == "M=4096 V=262144" and r.get("verified")}
a, b = us.get("bf16 words 4096/4 x8"), us.get("bf16 words 8192/8 x4")
print("A" if a is not None and (b is None or a <= b) else "B")
PY
)
echo "tree $pick"
if [ "$pick" = B ]; then mv src src_a && mv src_b src; export WARPFORGE_GIT_COMMIT=$COMMIT_B; else export WARPFORGE_GIT_COMMIT=$COMMIT_A; fi
export PYTHONPATH=$PWD/src:/tmp/site
if [ $sweep_rc = 0 ]; then
  t0=$SECONDS
  SUITE_BUDGET_S=90 SUITE_CEILINGS=1 SUITE_DTYPE=bf16 bash scripts/gpu/bench_parts.sh $OUT/x ce16b "cross_entropy.fwd_bwd:80" > $OUT/logs/bench.log 2>&1
  echo "bench rc $? in $((SECONDS-t0)) s"
  python3 scripts/results_table.py $OUT/x/ce16b.json > $OUT/logs/table.txt 2>&1
  cp $OUT/x/ce16b.json $OUT/ce16b.json 2>/dev/null
  cat $OUT/logs/table.txt
fi
t0=$SECONDS
timeout 25 python3 -m pytest tests/ops/test_cross_entropy.py -m gpu -k "flag_words" -q -p no:cacheprovider > $OUT/logs/gpu-tests.log 2>&1
echo "tests rc $? in $((SECONDS-t0)) s"; tail -3 $OUT/logs/gpu-tests.log
tar czf $OUT/logs.tgz -C $OUT logs x 2>/dev/null
rm -rf $OUT/x $OUT/logs
