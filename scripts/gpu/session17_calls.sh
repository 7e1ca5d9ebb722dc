#!/usr/bin/env bash
# The device calls planned in the sixteenth session for the next one, on the H200 (nvidia-h200).
# Carry .whl/ (Liger-Kernel) and set WARPFORGE_GIT_COMMIT; end the run command with
#   tar -czf $OUT/callN.tgz -C $OUT keep && rm -rf $OUT/keep
# (a call brings back only a few files: the sixteenth session's first call lost its JSON reports
# to that limit). Results go under benchmarks/results/session17-h200-<date>/.
#   1  issue 4's parts not yet measured on the H200 in bf16: cross entropy, then swiglu/geglu
#   2  the split softmax forward's candidate launches kernel alone (benchmarks/
#      softmax_split_sweep.py; its long rows ran at 78-80% of copy on the H200 with the H100's
#      launches), then fused linear cross entropy in bf16 through the harness
#   3  the fp32 forwards and norm backwards (issue 4's fwd and normbwd parts)
# Usage: bash scripts/gpu/session17_calls.sh OUT CALL
set -uo pipefail
OUT="${1:?usage: session17_calls.sh OUT CALL}"
CALL="${2:?usage: session17_calls.sh OUT CALL}"
mkdir -p "$OUT/keep"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

source "$(dirname "$0")/calls_common.sh"

case "$CALL" in
  1) SUITE_PIECES="cross_entropy.fwd:90 cross_entropy.bwd:80 cross_entropy.fwd_bwd:110" \
       sweep_part bf16 ce
     sweep_part bf16 gated ;;
  2) t0=$SECONDS
     timeout 200 python3 benchmarks/softmax_split_sweep.py --out "$OUT/keep/softmax-split" \
       --repeat 2 > "$OUT/softmax-sweep.log" 2>&1
     echo "softmax split sweep: exit $? in $((SECONDS - t0)) s"
     SUITE_PIECES="fused_linear_cross_entropy.*:300" sweep_part bf16 rope ;;
  3) sweep_part fp32 fwd "M=8192,N=8192 M=4096,N=32768 M=8192,N=65536 M=8192,N=262144"
     sweep_part fp32 normbwd "M=16384,N=2048 M=4096,N=32768 M=8192,N=65536 M=8192,N=262144" ;;
  *) echo "CALL: expected 1-3, got $CALL" >&2; exit 2 ;;
esac
tar -czf "$OUT/keep/logs.tgz" -C "$OUT" --exclude=keep --exclude='*cache*' . 2>/dev/null
find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep -exec rm -rf {} +
