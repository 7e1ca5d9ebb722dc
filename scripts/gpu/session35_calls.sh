#!/usr/bin/env bash
# The device calls of the thirty-fifth session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session35-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/ (the tracked tree outgrew the device
# tool's 64 MB transfer): git sparse-checkout set --no-cone '/*' '!/benchmarks/results/';
# afterwards git sparse-checkout disable. No call reads the results.
#   1  align's grid row after row (every stream's programs of a batch row together, so the
#      partial 32-byte sectors where one stream's columns meet the next in the float32 output
#      are written close in time) against stream after stream (benchmarks/align_stream_count.py);
#      the align GPU tests and `warpforge compile --warm --device cuda`; both align problems
#      through the harness with a new baseline, torch.compile per stream + cat.
#   2  the grid in groups of 1 to 256 batch rows (stream after stream within a group): call 1 found
#      row after row 8-13% faster on the align problems (B = 256) but 5-19% slower on 8 and 16
#      synthetic streams (B = 64, a float64 stream among them).
#   3  the same groups of 1, 4 and 64 rows on 8 and 16 synthetic streams without the float64 one,
#      and on three with it (which of the two, stream count or float64 math, favours stream after
#      stream).
#   4  at the final default (row after row up to ROW_AFTER_ROW_MAX_STREAMS = 8 streams, stream
#      after stream above): the align GPU tests and both align problems through the harness.
#   5  with the output stored in vectors (each stream's strides, column and width passed divided
#      by the widest vector that divides them all): the align GPU tests, align_stream_count.py
#      (which times `align` storing one element at a time beside it) and the harness.
#   6  the grid orders again with the vector stores (groups of 1, 4 and every row).
#   7  vector against element stores on 4, 16 and 32 synthetic streams (call 6 found sixteen
#      faster storing one element at a time).
#   8  where align's host time goes (benchmarks/align_host_profile.py): the harness found 488 µs
#      to enqueue a call whose device time is 136.5 µs.
# Usage: bash scripts/gpu/session35_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session35_calls.sh "$@"

case "$CALL" in
  1) gpu_tests align-warm-call1 200 tests/robotics/test_robotics_gpu.py \
       tests/blueprint/test_blueprint_commands.py -k "align or streams or warm"
     align_stream_count 4,8,16,32 align.fwd,align8.fwd
     align_bench ;;
  2) ALIGN_GROUP_ROWS=1,2,4,8,16,64,256 align_stream_count 8,16 align.fwd,align8.fwd ;;
  3) for kinds in 0,1,2,3,4,6 0,1,5; do  # without the float64 stream; three streams with it
       timeout 200 python3 benchmarks/align_stream_count.py --out "$OUT/count-$kinds" \
         --counts "$([ "$kinds" = 0,1,5 ] && echo 3 || echo 8,16)" --problems "" --kinds "$kinds" \
         --group-rows 1,4,64 > "$OUT/keep/align-stream-count-kinds${kinds//,/}-call3.txt" 2>&1
       echo "kinds $kinds: exit $?"; cat "$OUT/keep/align-stream-count-kinds${kinds//,/}-call3.txt"
       cp "$OUT/count-$kinds/align-stream-count.json" \
         "$OUT/keep/align-stream-count-kinds${kinds//,/}-call3.json"
     done ;;
  4) gpu_tests align-call4 200 tests/robotics/test_robotics_gpu.py -k "align or streams"
     align_bench ;;
  5) gpu_tests align-call5 200 tests/robotics/test_robotics_gpu.py -k "align or streams"
     align_stream_count 8 align.fwd,align8.fwd
     align_bench ;;
  6) ALIGN_GROUP_ROWS=1,4,256 align_stream_count 8,16 align.fwd,align8.fwd ;;
  7) timeout 280 python3 benchmarks/align_stream_count.py --out "$OUT/count" --counts 4,16,32 \
       --problems "" > "$OUT/keep/align-stream-count-call7.txt" 2>&1
     echo "exit $?"; cat "$OUT/keep/align-stream-count-call7.txt"
     cp "$OUT/count/align-stream-count.json" "$OUT/keep/align-stream-count-call7.json" ;;
  8) timeout 150 python3 benchmarks/align_host_profile.py --out "$OUT/host" \
       > "$OUT/keep/align-host-profile-call8.txt" 2>&1
     echo "exit $?"; cat "$OUT/keep/align-host-profile-call8.txt"
     cp "$OUT/host/align-host-profile.json" "$OUT/keep/align-host-profile-call8.json" ;;
  *) echo "CALL: expected 1 to 8, got $CALL" >&2; exit 2 ;;
esac
finish_call one
