#!/usr/bin/env bash
# helper ln16k, first GPU call: the held-kernel sweep (benchmarks/ln_bwd_split_sweep.py --held),
# the GPU tests of the held kernel, and an ncu look at the default and the best bf16 launch.
set -uo pipefail
OUT="${1:?OUT}"
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/ln16k-triton
start=$SECONDS
timeout 110 python3 benchmarks/ln_bwd_split_sweep.py --held --out "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
echo "sweep: exit $? in $((SECONDS - start)) s"
t0=$SECONDS
timeout 55 python3 -m pytest tests/ops/test_norm.py -m gpu -k "held" -q -p no:cacheprovider > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu_tests.txt")"
cat > /tmp/ncu_one.py <<'PY'
import json, re, sys, torch
from warpforge.ops import norm
from warpforge.ops._split_rows import split_row_plan
rows = json.load(open(sys.argv[1]))["cases"][0]["rows"]
best = min((r for r in rows if r.get("us") and r["contender"].startswith("held")), key=lambda r: r["us"])
b, w, x, r = map(int, re.match(r"held b(\d+) w(\d+) x(\d+) r(\d+)", best["contender"]).groups())
print("profiling", best["contender"], best["us"], flush=True)
M, N = 4096, 16384
xx = torch.randn(M, N, device="cuda").to(torch.bfloat16); dy = torch.randn_like(xx); ww = torch.randn(N, device="cuda").to(torch.bfloat16)
mean, rstd = xx.float().mean(-1), torch.rsqrt(xx.float().var(-1, unbiased=False) + 1e-5)
norm.layer_norm_backward(dy, xx, ww, mean, rstd, True, True)
plan = split_row_plan(M, N, "cuda", block=b, num_warps=w, programs_per_sm=x, prefetch="prefetch" in best["contender"])
norm.layer_norm_backward(dy, xx, ww, mean, rstd, True, True, plan, 1, r, " hold" in best["contender"])
torch.cuda.synchronize()
PY
t0=$SECONDS
timeout 45 ncu --kernel-name regex:'layer_norm_bwd_(lag|held)_kernel' --launch-count 2 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section SchedulerStats \
  --section MemoryWorkloadAnalysis python3 /tmp/ncu_one.py "$OUT/sweep.json" > "$OUT/ncu.txt" 2>&1
echo "ncu: exit $? in $((SECONDS - t0)) s"
grep -A60 "^copy ceiling" "$OUT/sweep.txt"
echo "total $((SECONDS - start)) s"
