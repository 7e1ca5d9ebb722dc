#!/usr/bin/env bash
# The device calls planned in the twenty-seventh session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session28-h200-<date>/.
# Session 27 found why its looped norm forward (norm_fwd_looped_kernel) trails torch.compile's
# kernel of the same shape (bf16 LayerNorm 4096 x 16384: 82.6 against 71.7 us): torch.compile
# knows N when compiling, so its statistics loop is unrolled and a thread's loads are all in
# flight at once; with N known only at run time each chunk's load waits for the one before
# (sm_90 SASS, compiled offline; see the kernel's docstring). WideLaunch(unrolled=True) now
# unrolls that pass for the row's chunk count (CHUNKS, one compile per count); never timed.
#   1  the looped kernel, rolled and unrolled, against the op, torch.compile and Liger at the
#      ten looped cases of benchmarks/parity_sweep.py; then the wide-row GPU tests (the
#      unrolled launches' first compile by Triton 3.6). If an unrolled launch wins a row, give
#      it to NORM_FWD_ROW_LAUNCHES / NORM_FWD_WIDE_LAUNCHES and time the harness there
#      (sweep_part with SUITE_PIECES, as session 27's call 9 did).
# Usage: bash scripts/gpu/session28_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session28_calls.sh "$@"

case "$CALL" in
  1) t0=$SECONDS
     timeout 360 python3 benchmarks/parity_sweep.py --out "$OUT/ps" --max-time 1.0 \
       --only looped > "$OUT/keep/parity-looped-call1.txt" 2>&1
     echo "parity sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/ps/parity_sweep.json" "$OUT/keep/parity-looped-call1.json" 2>/dev/null
     cat "$OUT/keep/parity-looped-call1.txt"
     gpu_tests wide-rows-call1 $((560 - SECONDS)) tests/ops/test_wide_rows.py ;;
  *) echo "CALL: expected 1, got $CALL" >&2; exit 2 ;;
esac
finish_call one
