#!/usr/bin/env bash
# The device calls planned in the thirty-second session for the next one, on the H200
# (nvidia-h200). Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this machine's
# `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back as
# OUT/call-N.tgz; results go under benchmarks/results/session33-h200-<date>/.
# The thirty-second session re-timed the bf16 forward and softmax backward parts of issue 4's
# sweep at one commit (session32-h200-2026-11-30/fwd-bf16-call9, smbwd-bf16-call10: every row
# within 2.5% of the run it replaced). The tally's other rows were timed over sessions 16-31 on
# the code of their day; these calls re-time them at one commit, one part a call (each under
# the 10-minute limit; on the H200 the bf16 forward part took 260 s, the softmax backward
# rows 118 s):
#   1  the bf16 norm backwards (rms_norm, layer_norm, add_rms_norm forward+backward).
#   2  the bf16 cross-entropy part (forward, backward, forward+backward).
#   3  the bf16 swiglu/geglu and rope parts (fused linear cross-entropy left out: its pieces
#      take 300 s on their own).
# The float32 parts follow the same pattern (they move twice the bytes), added in the
# thirty-third session once calls 1-3 had taken 248, 149 and 97 s:
#   4  the float32 forward part (norms, add+RMSNorm, softmax, log-softmax).
#   5  the float32 norm backwards.
#   6  the float32 softmax/log-softmax backwards, then swiglu/geglu and rope.
#   7  the float32 cross-entropy part.
# Usage: bash scripts/gpu/session33_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session33_calls.sh "$@"

case "$CALL" in
  1) sweep_part bf16 normbwd
     keep_report normbwd-bf16 normbwd-bf16 ;;
  2) sweep_part bf16 ce
     keep_report ce-bf16 ce-bf16 ;;
  3) SUITE_PIECES="swiglu.*:120 geglu.*:120 rope.*:150" sweep_part bf16 gated
     keep_report gated-bf16 gated-rope-bf16 ;;
  4) sweep_part fp32 fwd
     keep_report fwd-fp32 fwd-fp32 ;;
  5) sweep_part fp32 normbwd
     keep_report normbwd-fp32 normbwd-fp32 ;;
  6) SUITE_PIECES="softmax.bwd:110 log_softmax.bwd:110" sweep_part fp32 smbwd
     keep_report smbwd-fp32 smbwd-fp32
     SUITE_PIECES="swiglu.*:90 geglu.*:90 rope.*:100" sweep_part fp32 gated
     keep_report gated-fp32 gated-rope-fp32 ;;
  7) sweep_part fp32 ce
     keep_report ce-fp32 ce-fp32 ;;
  *) echo "CALL: expected 1 to 7, got $CALL" >&2; exit 2 ;;
esac
finish_call one
