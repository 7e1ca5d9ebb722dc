#!/usr/bin/env bash
# The device calls planned in the fifteenth session (which had no device time left: 153 s),
# for the next session. The device lent now is an H200 (nvidia-h200), not the H100 every
# committed result was measured on: its numbers start a new table per GPU model
# (scripts/results_table.py keeps models apart; `warpforge compare` refuses to mix them).
# Carry .whl/ (Liger-Kernel) and set WARPFORGE_GIT_COMMIT. Writes OUT/keep/* (what comes back)
# and OUT/keep/logs.tgz. Results go under benchmarks/results/session15-h200-<date>/.
#   1  the machine and its ceilings (warpforge env --json, warpforge ceilings --json: the H200's
#      copy bandwidth and matmul peaks); where each tuned op's launch config comes from on the
#      H200 (`warpforge db lookup ... --sweep`: the H100's shipped table through the
#      same-architecture fallback, expected "shipped for NVIDIA H100 80GB HBM3/sm_90 ..."); the
#      GPU tests of tests/tune and tests/harness (both changed this session, CPU-tested only)
#   2  RoPE forward and backward (Llama-3 shapes) through the harness with static torch.compile
#      baselines, bf16 then fp32 (the fourteenth session's call 10, never run)
#   3+ issue 4's sweep on the H200, one part per call as before:
#      SUITE_DTYPE=bf16 bash scripts/gpu/issue_sweep.sh OUT fwd|normbwd|smbwd|ce|gated|rope
# Usage: bash scripts/gpu/session15_calls.sh OUT CALL
set -uo pipefail
OUT="${1:?usage: session15_calls.sh OUT CALL}"
CALL="${2:?usage: session15_calls.sh OUT CALL}"
mkdir -p "$OUT/keep"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

source "$(dirname "$0")/calls_common.sh"

case "$CALL" in
  1) python3 -m warpforge env --json > "$OUT/keep/env.json" 2>&1
     timeout 120 python3 -m warpforge ceilings --json > "$OUT/keep/ceilings.json" 2>&1
     echo "ceilings: exit $?"; head -c 600 "$OUT/keep/ceilings.json"; echo
     for op in rms_norm.fwd rms_norm.bwd add_rms_norm.fwd add_rms_norm.bwd layer_norm.fwd \
               layer_norm.bwd softmax.fwd cross_entropy.fwd; do
       COLUMNS=220 timeout 60 python3 -m warpforge db lookup "$op" --sweep --dtype bf16 \
         --dtype fp32 >> "$OUT/keep/lookup-origins.txt" 2>&1
     done
     grep -c "shipped for NVIDIA H100" "$OUT/keep/lookup-origins.txt"
     gpu_tests tune 150 tests/tune
     gpu_tests harness 200 tests/harness ;;
  2) SUITE_PIECES="rope.*:100" sweep_part bf16 rope
     SUITE_PIECES="rope.*:100" sweep_part fp32 rope ;;
  *) echo "CALL: expected 1-2 (then scripts/gpu/issue_sweep.sh parts), got $CALL" >&2; exit 2 ;;
esac
tar -czf "$OUT/keep/logs.tgz" -C "$OUT" --exclude=keep --exclude='*cache*' . 2>/dev/null
find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep -exec rm -rf {} +
