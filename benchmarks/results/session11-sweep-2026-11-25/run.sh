#!/usr/bin/env bash
# Eleventh session, lead: the bf16 sweep re-timed with static torch.compile baselines
# (harness.compile_baseline). Rows the session's helpers re-time on their branches (4096 x 32768
# forward and softmax, 32768-65536 columns of the norm backwards) are left out here.
# Usage: bash run.sh OUT PART   (PART: fwd | normbwd | rest)
set -u
OUT="${1:?}" PART="${2:?}"
mkdir -p "$OUT/keep"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export SUITE_CEILINGS=1 SUITE_MAX_TIME=0.3 SUITE_SWEEP=1 SUITE_DTYPE=bf16
NOT32K="M=32768,N=256 M=32768,N=1024 M=16384,N=2048 M=16384,N=4096 M=8192,N=8192 M=4096,N=16384 M=8192,N=65536 M=8192,N=131072 M=8192,N=262144"
NOT32K64K="M=32768,N=256 M=32768,N=1024 M=16384,N=2048 M=16384,N=4096 M=8192,N=8192 M=4096,N=16384 M=8192,N=131072 M=8192,N=262144"
case "$PART" in
  fwd)
    SUITE_BUDGET_S=555 SUITE_SHAPE="$NOT32K" bash scripts/gpu/bench_parts.sh "$OUT/fwd" fwd \
      "rms_norm.fwd:125" "layer_norm.fwd:125" "add_rms_norm.fwd:125" "softmax.fwd:110" "log_softmax.fwd:110" ;;
  normbwd)
    SUITE_BUDGET_S=555 SUITE_SHAPE="$NOT32K64K" bash scripts/gpu/bench_parts.sh "$OUT/normbwd" normbwd \
      "rms_norm.bwd:170" "layer_norm.bwd:170" "add_rms_norm.bwd:170" ;;
  rest)
    SUITE_BUDGET_S=330 SUITE_SHAPE="$NOT32K" bash scripts/gpu/bench_parts.sh "$OUT/smbwd" smbwd \
      "softmax.bwd:140" "log_softmax.bwd:140"
    SUITE_BUDGET_S=220 SUITE_SHAPE= bash scripts/gpu/bench_parts.sh "$OUT/ce" ce \
      "cross_entropy.fwd:70" "cross_entropy.bwd:70" "cross_entropy.fwd_bwd:80" ;;
esac
for f in "$OUT"/*/*.json; do
  [ -s "$f" ] || continue
  cp "$f" "$OUT/keep/"
  python3 scripts/results_table.py "$f"
done
tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude='*cache*' --exclude=logs.tgz --exclude=keep . 2>/dev/null
# only a few files come back from $OUT: keep the reports and the logs' archive
find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep ! -name logs.tgz -exec rm -rf {} +
