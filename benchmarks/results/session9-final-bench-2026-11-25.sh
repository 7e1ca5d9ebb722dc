#!/usr/bin/env bash
# Ninth session, lead's last device call: re-time the merged tree's changed rows and measure
# what had no harness number yet. Run from the repository root: bash THIS OUT_DIR
set -u
OUT="${1:?usage: THIS OUT_DIR}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
# the split softmax backward also takes rows of 16385-65536 columns: kernel alone against the
# one-program-per-row kernel there
timeout 110 python3 benchmarks/softmax_bwd_split_sweep.py --out "$OUT/smbwd-mid" --repeat 3 \
  --shapes 4096x32768:bf16,8192x65536:bf16,4096x32768:fp32,8192x65536:fp32 \
  --only chunked,default > "$OUT/smbwd-mid.log" 2>&1
echo "smbwd-mid sweep: exit $?"
export SUITE_CEILINGS=1 SUITE_MAX_TIME=0.5
SUITE_BUDGET_S=200 SUITE_DTYPE=bf16 SUITE_SHAPE="V=262144 V=128256 N=262144" bash scripts/gpu/bench_parts.sh \
  "$OUT/long" long "cross_entropy.fwd_bwd:100" "log_softmax.bwd:90"
SUITE_BUDGET_S=70 SUITE_SHAPE="S=50 S=500" bash scripts/gpu/bench_parts.sh "$OUT/robo" robo "resample.fwd.bf16:60"
SUITE_BUDGET_S=160 SUITE_SWEEP=1 SUITE_DTYPE=bf16 SUITE_SHAPE="M=8192,N=262144" bash scripts/gpu/bench_parts.sh \
  "$OUT/norms" norms "rms_norm.fwd:75" "layer_norm.fwd:75"
for f in "$OUT"/long/long.json "$OUT"/robo/robo.json "$OUT"/norms/norms.json; do
  [ -s "$f" ] && python3 scripts/results_table.py "$f"
done
tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude='*cache*' --exclude=logs.tgz . 2>/dev/null
