#!/usr/bin/env bash
# The device calls planned in the sixteenth session for the next one, on the H200 (nvidia-h200).
# Carry .whl/ (Liger-Kernel) and set WARPFORGE_GIT_COMMIT. Everything kept comes back as one
# file, OUT/call-N.tgz (a call brings back only a few files: the sixteenth session's first call
# lost its JSON reports to that limit). Results go under benchmarks/results/session17-h200-<date>/.
#   1  exhaustive tuning on the H200 of the bf16 norm forwards (rms_norm.fwd, add_rms_norm.fwd,
#      layer_norm.fwd) at the seven shapes the H100's shipped table holds for them: on the H200
#      the H100's configs left short-row forwards under torch.compile (rms_norm.fwd 32768 x 256
#      0.93x, 16384 x 4096 0.95x, layer_norm.fwd 4096 x 16384 0.95x; session16 fwd-bf16-call3).
#      Ship the export as the H200's own table only where its trials beat the H100's configs,
#      and for every shape the H100's table holds: one config of the H200's own ends the
#      same-architecture fallback for that kernel, so a partial table would leave the other
#      shapes to nearest neighbours tuned on the H200 alone.
#   2  issue 4's fwd part in bf16 again (after shipping call 1's configs), then cross entropy
#   3  swiglu/geglu; the split softmax forward's launches kernel alone (benchmarks/
#      softmax_split_sweep.py; long rows at 78-80% of copy on the H200); fused linear cross
#      entropy in bf16 in what time is left
# Usage: bash scripts/gpu/session17_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session17_calls.sh "$@"

case "$CALL" in
  1) GRID_SHAPES="M=2048,N=12288 M=2048,N=16384 M=4096,N=16384 M=8192,N=4096 M=8192,N=6144 M=16384,N=1024 M=32768,N=256" \
     GRID_DTYPES=bfloat16 GRID_KERNELS="rms_norm.fwd layer_norm.fwd add_rms_norm.fwd" \
     GRID_MAX_WALL=540 bash scripts/gpu/tune_norm_grid.sh "$OUT/grid" > "$OUT/grid.log" 2>&1
     cat "$OUT/grid/summary.txt"
     cp "$OUT/grid/shipped-grid.json" "$OUT/keep/tune-normfwd-bf16-shipped.json"
     cp "$OUT/grid/trials-grid.json" "$OUT/keep/tune-normfwd-bf16-trials.json" ;;
  2) sweep_part bf16 fwd
     SUITE_PIECES="cross_entropy.fwd:90 cross_entropy.bwd:80 cross_entropy.fwd_bwd:110" \
       sweep_part bf16 ce ;;
  3) sweep_part bf16 gated
     t0=$SECONDS
     timeout 150 python3 benchmarks/softmax_split_sweep.py --out "$OUT/keep/softmax-split" \
       --repeat 2 > "$OUT/softmax-sweep.log" 2>&1
     echo "softmax split sweep: exit $? in $((SECONDS - t0)) s"
     SUITE_PIECES="fused_linear_cross_entropy.*:300" sweep_part bf16 rope ;;
  *) echo "CALL: expected 1-3, got $CALL" >&2; exit 2 ;;
esac
finish_call one
