#!/usr/bin/env bash
# The device calls planned in the twenty-fifth session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session26-h200-<date>/.
#   1  the split softmax backward's GPU tests three times over: session 25 call 5 saw
#      float32 log-softmax at 300 x 262144 wrong on the candidate launch of 4096-column chunks,
#      4 warps, 4 programs an SM, prefetching (64 chunks a row, the poll's two vectors of words);
#      the default plan and the launches before it passed (the test stopped there). The test
#      now checks every launch with and without prefetching, and names each wrong one's rows
#      and the row total each implies (a lost chunk partial shows as one chunk's sum of dy). Then
#      the tunables' GPU tests (the forward's test moved to 1024 columns, where the op runs its
#      tuned launch)
# Usage: bash scripts/gpu/session26_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session26_calls.sh "$@"

case "$CALL" in
  1) for run in 1 2 3; do
       gpu_tests "split-bwd-run$run" 120 tests/ops/test_softmax_split_bwd.py
     done
     gpu_tests tunables $((560 - SECONDS)) tests/ops/test_tunables.py ;;
  *) echo "CALL: expected 1, got $CALL" >&2; exit 2 ;;
esac
finish_call one
