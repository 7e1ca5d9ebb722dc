#!/usr/bin/env bash
# The thirteenth session's device calls, one per CALL, each under the 10-minute limit; results
# under benchmarks/results/session13-2026-11-25/. Carry .whl/ (Liger-Kernel) and set
# WARPFORGE_GIT_COMMIT. Writes OUT/keep/* (what comes back) and OUT/keep/logs.tgz.
#   1  the narrow norm backward GPU tests; benchmarks/norm_bwd_narrow_sweep.py in float32 (rows
#      of 16385-65536 columns had no split-kernel entry in float32: never measured)
#   2  the bf16 rope / fused linear cross-entropy part of the issue's sweep
#   3  the fp32 rope / fused linear cross-entropy part of the issue's sweep
#   4  the fp32 rows of 262144 columns that did not fit the harness's verification on 80 GB
#      (add_rms_norm.fwd/bwd, log_softmax.bwd) now that it frees a trial's tensors before the
#      repeat run: the forward and softmax-backward parts at N=262144
#   5  the same for the norm backward part at N=262144
# Usage: bash scripts/gpu/session13_calls.sh OUT CALL
set -uo pipefail
OUT="${1:?usage: session13_calls.sh OUT CALL}"
CALL="${2:?usage: session13_calls.sh OUT CALL}"
mkdir -p "$OUT/keep"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

source "$(dirname "$0")/calls_common.sh"

case "$CALL" in
  1) gpu_tests narrow 150 tests/ops/test_norm_bwd_narrow.py tests/ops/test_norm_split_bwd.py
     t0=$SECONDS
     SWEEP_DTYPES=float32 timeout $((570 - SECONDS)) python3 benchmarks/norm_bwd_narrow_sweep.py \
       sweep "$OUT/keep/norm-bwd-narrow-fp32-sweep.txt" > "$OUT/sweep.log" 2>&1
     echo "narrow sweep: exit $? in $((SECONDS - t0)) s"
     cat "$OUT/keep/norm-bwd-narrow-fp32-sweep.txt" ;;
  2) sweep_part bf16 rope ;;
  3) sweep_part fp32 rope ;;
  4) sweep_part fp32 fwd "N=262144"
     sweep_part fp32 smbwd "N=262144" ;;
  5) sweep_part fp32 normbwd "N=262144" ;;
  *) echo "CALL: expected 1-5, got $CALL" >&2; exit 2 ;;
esac
tar -czf "$OUT/keep/logs.tgz" -C "$OUT" --exclude=keep --exclude='*cache*' . 2>/dev/null
find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep -exec rm -rf {} +
