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
#   2  bf16 softmax.bwd at 4096 x 16384 (0.97x Liger on its tuned row launch, session 25 call 4):
#      our forward + the tile backward (whole rows, 32-bit offsets, no predicates) at 8-32 warps
#      against the op and the problem's baselines (benchmarks/parity_sweep.py); a win there
#      goes into softmax_ops.BWD_TILE_LAUNCHES and through the harness
#      then (added in session 26, after call 1 showed the float32 errors to be rounding, see
#      tests/ops/test_softmax_split_bwd.py's ROUNDING_SPREADS) the split backward's GPU tests
#      once more against the allowance
#   3  RoPE's launches on the H200 (benchmarks/flce_rope_sweep.py rope: kernel alone, bf16 and
#      float32 at the issue's two shapes, against Liger's in-place rotation and a copy of the
#      same bytes); the fp32 rows run at 0.96x Liger with the launch measured on the H100
#   4  (added in session 26) where the bf16 norm backwards lose time on the H200 (0 of 18
#      rows >= 256 MB at 90% of copy; LayerNorm 63-67% past 32768 columns): each kernel's
#      device time of the forward + backward against torch.compile's at six rows, then Nsight
#      Compute (full set) on the backward kernels of LayerNorm 8192 x 65536 and RMSNorm
#      16384 x 2048
#   5  (added in session 26) RoPE's paired launches, which now load q's and k's tiles before
#      storing either, against the unpaired ones and Liger (benchmarks/flce_rope_sweep.py rope)
#   6  (after call 5: paired launches fastest, (16, 8, 4) in bf16 and (8, 8, 2) in float32,
#      now the default, rope._launch_config) RoPE's GPU tests, then its harness rows, forward
#      and backward, bf16 and float32
#   7  (after call 6: float32 rope.fwd 0.99-1.00x Liger) call 5's sweep with five more paired
#      launches of 1-4 warps and 4-8 heads
#   8  the long-row norm backward's split launches on the H200 (never swept there; bf16
#      LayerNorm 63-67% of copy past 32768 columns, call 4's Nsight Compute: 244 registers,
#      8 warps an SM, 48% of DRAM bandwidth): benchmarks/norm_split_bwd.py sweep, bf16, the
#      shipped 4096/4w x2 against 2048-column programs of 2 and 4 warps four an SM, 1024/1w x8,
#      8192/8w x1
#   9  the bf16 norm backward's rows kernel with its tile loop pipelined by Triton
#      (tl.range(num_stages=2|3): the next tiles' loads as asynchronous copies into shared
#      memory) against its default launch, RMSNorm and LayerNorm at the issue's five rows of
#      1024-16384 columns (benchmarks/pipelined_rows_sweep.py)
#  10  call 9 again after the shipped H100 backward configs were re-hashed: call 9's defaults
#      were the heuristic's (the kernel's new STAGES argument changed the source hash those
#      entries name, so lookups skipped them), not the tuned launches the op runs on the H200
#      (no win against them: the kernel's STAGES argument, the re-hash and the sweep script
#      were taken out again after call 10; calls 9 and 10 run only at commits 72e856d, ba6efd5)
#  11  the float32 RMSNorm backward tuned on the H200 for the first time (it runs the H100's
#      configs; 16384 x 4096 at 0.95x torch.compile, session18-h200-2026-11-28/
#      normbwd-fp32-call1.json): an
#      exhaustive search at the six short rows merged into the H200's shipped table, then the
#      harness's rms_norm.bwd rows in float32 on it
#  12  (after call 11: rms_norm.bwd float32 16384 x 4096 0.95x -> 1.04x torch.compile, every
#      short row at >= 90% of copy) the same for the float32 LayerNorm backward (81-92% of copy
#      at the short rows on the H100's configs)
# Usage: bash scripts/gpu/session26_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session26_calls.sh "$@"

case "$CALL" in
  1) for run in 1 2 3; do
       gpu_tests "split-bwd-run$run" 120 tests/ops/test_softmax_split_bwd.py
     done
     gpu_tests tunables $((560 - SECONDS)) tests/ops/test_tunables.py ;;
  2) t0=$SECONDS
     timeout 400 python3 benchmarks/parity_sweep.py --out "$OUT/ps" --max-time 1.0 \
       --only "softmax.bwd M=4096 N=16384" > "$OUT/keep/parity-softmax-bwd-call2.txt" 2>&1
     echo "parity sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/ps/parity_sweep.json" "$OUT/keep/parity-softmax-bwd-call2.json" 2>/dev/null
     tail -12 "$OUT/keep/parity-softmax-bwd-call2.txt"
     gpu_tests split-bwd-allowance $((560 - SECONDS)) tests/ops/test_softmax_split_bwd.py ;;
  3|5|7) t0=$SECONDS
     timeout 300 python3 benchmarks/flce_rope_sweep.py "$OUT/rope" rope \
       > "$OUT/keep/rope-sweep-call$CALL.txt" 2>&1
     echo "rope sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/rope/flce_rope_sweep.json" "$OUT/keep/rope-sweep-call$CALL.json" 2>/dev/null
     cat "$OUT/keep/rope-sweep-call$CALL.txt" ;;
  4) for row in "layer_norm 8192 65536" "layer_norm 4096 32768" "layer_norm 16384 4096" \
       "rms_norm 16384 2048" "rms_norm 4096 16384" "rms_norm 8192 65536"; do
       set -- $row
       timeout 120 python3 scripts/gpu/norm_kernel_breakdown.py --op "$1" --M "$2" --N "$3" \
         --dtype bf16 >> "$OUT/keep/breakdown-bf16-call4.txt" 2>&1
     done
     cat "$OUT/keep/breakdown-bf16-call4.txt"
     for row in "layer_norm 8192 65536" "rms_norm 16384 2048"; do
       set -- $row
       name="ncu-$1-bwd-$2x$3-bf16"
       timeout 150 ncu -k regex:bwd --launch-skip 2 --launch-count 2 --set full \
         --import-source yes -f -o "$OUT/keep/$name" python3 scripts/gpu/norm_kernel_breakdown.py \
         --op "$1" --M "$2" --N "$3" --dtype bf16 --driver > "$OUT/$name.log" 2>&1
       echo "$name: exit $?"; tail -2 "$OUT/$name.log"
       ncu --import "$OUT/keep/$name.ncu-rep" --page details > "$OUT/keep/$name.txt" 2>&1
       ncu --import "$OUT/keep/$name.ncu-rep" --page raw > "$OUT/$name-raw.txt" 2>&1
       grep -E "smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio" \
         "$OUT/$name-raw.txt" | sort -k3 -g -r | head -12 > "$OUT/keep/$name-stalls.txt"
       grep -E "^  [a-z_]+bwd|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Executed Ipc|Grid Size|Block Size" \
         "$OUT/keep/$name.txt" | head -40
       cat "$OUT/keep/$name-stalls.txt"
     done ;;
  6) gpu_tests rope 150 tests/ops/test_rope.py
     for dtype in bf16 fp32; do
       SUITE_PIECES="rope.*:150" sweep_part "$dtype" rope
       mv "$OUT/keep/rope-$dtype.json" "$OUT/keep/rope-$dtype-call6.json" 2>/dev/null
       mv "$OUT/keep/rope-$dtype.png" "$OUT/keep/rope-$dtype-call6.png" 2>/dev/null
     done ;;
  8) t0=$SECONDS
     SWEEP_LAUNCHES="4096/4/2/1 2048/2/4/1 2048/4/4/1 1024/1/8/1 8192/8/1/1" timeout 400 \
       python3 benchmarks/norm_split_bwd.py sweep "$OUT/keep/normbwd-split-sweep-call8.txt" \
       > "$OUT/normbwd-split-sweep.log" 2>&1
     echo "norm split bwd sweep: exit $? in $((SECONDS - t0)) s"
     cat "$OUT/keep/normbwd-split-sweep-call8.txt"; tail -3 "$OUT/normbwd-split-sweep.log" ;;
  9|10) t0=$SECONDS
     timeout 420 python3 benchmarks/pipelined_rows_sweep.py \
       "$OUT/keep/pipelined-rows-sweep-call$CALL.json" > "$OUT/keep/pipelined-rows-sweep-call$CALL.txt" 2>&1
     echo "pipelined rows sweep: exit $? in $((SECONDS - t0)) s"
     cat "$OUT/keep/pipelined-rows-sweep-call$CALL.txt" ;;
  # (run then with these steps inline: the tune exports were named tune-rmsbwd-fp32-*.json and
  # tune-lnbwd-fp32-*.json)
  11) short_rows_tuned rms_norm.bwd normbwd rmsbwd "rms_norm.bwd:200" 260 fp32 ;;
  12) short_rows_tuned layer_norm.bwd normbwd lnbwd "layer_norm.bwd:200" 260 fp32 ;;
  *) echo "CALL: expected 1-12, got $CALL" >&2; exit 2 ;;
esac
finish_call one
