#!/usr/bin/env bash
# Tenth session, lead: first harness pass over the sweep shapes that had no row yet (bf16)
set -u
OUT="${1:?}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export SUITE_CEILINGS=1 SUITE_MAX_TIME=0.3 SUITE_SWEEP=1 SUITE_DTYPE=bf16
ALL="M=32768,N=1024 M=16384,N=2048 M=8192,N=8192 M=4096,N=32768 M=8192,N=65536 M=8192,N=131072"
SUITE_BUDGET_S=400 SUITE_SHAPE="$ALL" bash scripts/gpu/bench_parts.sh "$OUT/a" sweepa \
  "rms_norm.fwd:65" "layer_norm.fwd:65" "add_rms_norm.fwd:65" "softmax.fwd:55" "log_softmax.fwd:55" \
  "softmax.bwd:60" "log_softmax.bwd:60"
SUITE_BUDGET_S=140 SUITE_SHAPE="M=32768,N=1024 M=16384,N=2048 M=8192,N=8192 M=4096,N=32768" \
  bash scripts/gpu/bench_parts.sh "$OUT/b" sweepb "rms_norm.bwd:45" "layer_norm.bwd:45" "add_rms_norm.bwd:45"
for f in "$OUT"/a/sweepa.json "$OUT"/b/sweepb.json; do [ -s "$f" ] && python3 scripts/results_table.py "$f"; done
tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude='*cache*' --exclude=logs.tgz . 2>/dev/null
