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
# Then the GPU tests written in the session for the issues' test gaps:
#   8  more than 2**31 elements (RoPE, LayerNorm, softmax/log-softmax forward and backward,
#      fused linear cross-entropy's weight), out-of-range targets with and without
#      WARPFORGE_CHECKS on each cross-entropy kernel, fused linear cross-entropy in a CUDA graph;
#      the gradchecks on CUDA; the robotics tests of "error", validation and float64 on CUDA.
#   9  every gpu-marked robotics test (resample's "error" policy changed for NaN queries).
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
  8) gpu_tests offsets-checks-call8 170 tests/ops/test_rope.py tests/ops/test_softmax.py \
       tests/ops/test_norm.py tests/ops/test_fused_linear_cross_entropy.py \
       tests/ops/test_cross_entropy.py -n 4 \
       -k "2_to_31 or 2_pow_31 or bad_target or cuda_graph_capture or checks"
     timeout 70 python3 -m pytest -q -p no:cacheprovider -rfEs tests/ops/test_gradcheck.py \
       tests/robotics/test_robotics_gpu.py -k "gradcheck or on_cuda" -n 4 \
       > "$OUT/keep/gpu-tests-gradcheck-robotics-call8.txt" 2>&1
     echo "gradcheck/robotics: exit $?: $(tail -1 "$OUT/keep/gpu-tests-gradcheck-robotics-call8.txt")"
     grep -E "^FAILED|^ERROR" "$OUT/keep/gpu-tests-gradcheck-robotics-call8.txt" | head -8 ;;
  9) gpu_tests robotics-call9 130 tests/robotics -n 4 ;;
  *) echo "CALL: expected 1 to 9, got $CALL" >&2; exit 2 ;;
esac
finish_call one
