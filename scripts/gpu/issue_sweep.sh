#!/usr/bin/env bash
# Issue 4's sweep through the harness, one part per device call (each under the 10-minute limit):
#   fwd      rms_norm, layer_norm, add_rms_norm, softmax, log_softmax forward, the ten (M, N)
#            shapes from 32768 x 256 to 8192 x 262144
#   normbwd  rms_norm, layer_norm, add_rms_norm forward+backward, the same shapes
#   smbwd    softmax, log_softmax backward, the same shapes
#   ce       cross_entropy forward, backward, forward+backward: default and sweep vocabularies
#   gated    swiglu, geglu forward and backward, Llama-3 8B/70B shapes
#   rope     rope forward and backward, Llama-3 shapes; fused_linear_cross_entropy
# Usage (repository root, Liger-Kernel's wheel carried in .whl/):
#   SUITE_DTYPE=bf16|fp32 bash scripts/gpu/issue_sweep.sh OUT PART
# Writes OUT/keep/PART-DTYPE.json (merged harness report: device, versions, commit, date, copy
# ceiling), OUT/keep/PART-DTYPE.png (roofline) and OUT/logs.tgz, and removes the rest of OUT
# (only a few files come back from a device call). Set WARPFORGE_GIT_COMMIT to the full commit.
# SUITE_SHAPE narrows the shapes (e.g. "M=4096,N=32768"); SUITE_BUDGET_S the part's seconds;
# SUITE_PIECES replaces the part's problems.
# On the H100 the bf16 parts took 250-350 s of wall time each in the eleventh session
# (benchmarks/results/session11-sweep-2026-11-25/); fp32 parts move twice the bytes.
set -uo pipefail
OUT="${1:?usage: issue_sweep.sh OUT fwd|normbwd|smbwd|ce|gated|rope}"
PART="${2:?usage: issue_sweep.sh OUT fwd|normbwd|smbwd|ce|gated|rope}"
DTYPE="${SUITE_DTYPE:?SUITE_DTYPE: expected bf16 or fp32}"
case "$PART" in
  fwd) PIECES=("rms_norm.fwd:125" "layer_norm.fwd:125" "add_rms_norm.fwd:125" "softmax.fwd:110"
               "log_softmax.fwd:110") ;;
  normbwd) PIECES=("rms_norm.bwd:180" "layer_norm.bwd:180" "add_rms_norm.bwd:180") ;;
  smbwd) PIECES=("softmax.bwd:150" "log_softmax.bwd:150") ;;
  ce) PIECES=("cross_entropy.fwd:90" "cross_entropy.bwd:80" "cross_entropy.fwd_bwd:110") ;;
  gated) PIECES=("swiglu.*:150" "geglu.*:150") ;;
  rope) PIECES=("rope.*:150" "fused_linear_cross_entropy.*:300") ;;
  *) echo "PART: expected fwd, normbwd, smbwd, ce, gated or rope, got $PART" >&2; exit 2 ;;
esac
# SUITE_PIECES ("GLOB:LIMIT_S ...") replaces the part's pieces (a few problems of a part).
[ -n "${SUITE_PIECES:-}" ] && read -ra PIECES <<< "$SUITE_PIECES"
mkdir -p "$OUT/keep"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    2> /dev/null
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export SUITE_CEILINGS=1 SUITE_SWEEP=1 SUITE_MAX_TIME="${SUITE_MAX_TIME:-0.3}"
export SUITE_BUDGET_S="${SUITE_BUDGET_S:-555}"
name="$PART-$DTYPE"
bash "$(dirname "$0")/bench_parts.sh" "$OUT/$name" "$name" "${PIECES[@]}"
report="$OUT/$name/$name.json"
if [ -s "$report" ]; then
  cp "$report" "$OUT/keep/"
  python3 -m warpforge roofline "$report" -o "$OUT/keep/$name.png" > /dev/null 2>&1
  python3 scripts/results_table.py "$report"
fi
tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude='*cache*' --exclude=logs.tgz --exclude=keep . \
  2> /dev/null
find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep ! -name logs.tgz -exec rm -rf {} +
