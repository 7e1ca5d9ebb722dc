#!/usr/bin/env bash
# The device calls planned in the twenty-sixth session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session27-h200-<date>/; commit the
# merged shipped table (OUT/keep/shipped-merged-callN.json) as it came back before the report.
# Session 26 calls 11-12 tuned the float32 RMSNorm and LayerNorm backwards on the H200 for the
# first time (they ran the H100's configs): rms_norm.bwd 16384 x 4096 0.95x -> 1.04x
# torch.compile, 88 -> 96% of copy; these calls do the same for the other norm backwards
# (short_rows_tuned with one dtype).
#   1  add_rms_norm.bwd float32 at the six short rows (32768 x 256 at 78% of copy)
#   2  rms_norm.bwd bf16 (79-90% of copy at those rows; session 16 found the H100's configs the
#      fastest or next to it at two of them, so this may ship nothing)
#   3  layer_norm.bwd bf16 (48-82%)
#   4  add_rms_norm.bwd bf16 (59-93%)
# Added in session 27 (calls 1-4 ran first):
#   5  the looped norm forward (norm_fwd_looped_kernel: one row a program in chunks, statistics
#      in one pass) against the op and the baselines at the forwards under 90% of copy or under
#      torch.compile (bf16 LayerNorm 4096 x 16384 0.95x; benchmarks/parity_sweep.py)
#   6  the same after call 5 (LayerNorm's Welford division per element, 1.35x torch.compile's
#      time, replaced by per-lane shifted sums)
#   7  bf16 LayerNorm forward 4096 x 16384 under Nsight Compute: the op's row kernel, the looped
#      kernel (2048-column chunks, 8 warps: 89 us in call 6) and torch.compile's (72 us), whose
#      shapes are alike
#   8  the looped kernel after call 7 (torch.compile's: 31 registers, 88% occupancy, x read from
#      DRAM once; the looped: 40 and 67%, 12% more DRAM reads) with unmasked chunks where N is a
#      multiple of the chunk, and its output pass in order as well as backwards
#   9  bf16 LayerNorm on the looped kernel at 16385-32768 columns (call 8: 171.4 us at 4096 x
#      32768 against 176.2 for the whole-row kernel): forward and backward through the harness
#      there, then the GPU tests of the wide rows and of the norms
# Usage: bash scripts/gpu/session27_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session27_calls.sh "$@"

case "$CALL" in
  1) short_rows_tuned add_rms_norm.bwd normbwd addrmsbwd "add_rms_norm.bwd:200" 260 fp32 ;;
  2) short_rows_tuned rms_norm.bwd normbwd rmsbwd "rms_norm.bwd:200" 260 bf16 ;;
  3) short_rows_tuned layer_norm.bwd normbwd lnbwd "layer_norm.bwd:200" 260 bf16 ;;
  4) short_rows_tuned add_rms_norm.bwd normbwd addrmsbwd "add_rms_norm.bwd:200" 260 bf16 ;;
  5|6) t0=$SECONDS
     timeout 520 python3 benchmarks/parity_sweep.py --out "$OUT/ps" --max-time 1.0 \
       --only looped > "$OUT/keep/parity-looped-call$CALL.txt" 2>&1
     echo "parity sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/ps/parity_sweep.json" "$OUT/keep/parity-looped-call$CALL.json" 2>/dev/null
     cat "$OUT/keep/parity-looped-call$CALL.txt" ;;
  7) args=(--op layer_norm --M 4096 --N 16384 --dtype bf16 --forward --looped 2048 8)
     timeout 120 python3 scripts/gpu/norm_kernel_breakdown.py "${args[@]}" \
       > "$OUT/keep/breakdown-lnfwd-call7.txt" 2>&1
     cat "$OUT/keep/breakdown-lnfwd-call7.txt"
     name=ncu-layer_norm-fwd-4096x16384-bf16-call7
     timeout 300 ncu --profile-from-start off -k regex:norm --set full --import-source yes -f \
       -o "$OUT/keep/$name" python3 scripts/gpu/norm_kernel_breakdown.py "${args[@]}" --driver \
       --compile-too > "$OUT/$name.log" 2>&1
     echo "$name: exit $?"; tail -3 "$OUT/$name.log"
     ncu --import "$OUT/keep/$name.ncu-rep" --page details > "$OUT/keep/$name.txt" 2>&1
     ncu --import "$OUT/keep/$name.ncu-rep" --page raw --csv > "$OUT/keep/$name-raw.csv" 2>&1
     grep -E "^  [a-z_]+norm|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|L2 Hit Rate|L1/TEX Hit Rate|Block Limit" \
       "$OUT/keep/$name.txt" | head -80 ;;
  8) t0=$SECONDS
     timeout 400 python3 benchmarks/parity_sweep.py --out "$OUT/ps" --max-time 1.0 --only \
       "layer_norm.fwd M=4096 N=16384 torch.bfloat16 looped" \
       "layer_norm.fwd M=8192 N=8192 torch.bfloat16 looped" \
       "rms_norm.fwd M=4096 N=16384 torch.bfloat16 looped" \
       "layer_norm.fwd M=4096 N=32768 torch.bfloat16 looped" \
       > "$OUT/keep/parity-looped-call8.txt" 2>&1
     echo "parity sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/ps/parity_sweep.json" "$OUT/keep/parity-looped-call8.json" 2>/dev/null
     cat "$OUT/keep/parity-looped-call8.txt" ;;
  9) SUITE_PIECES="layer_norm.fwd:100 layer_norm.bwd:120" sweep_part bf16 fwd "M=4096,N=32768"
     keep_report fwd-bf16 ln-looped-bf16
     gpu_tests wide-rows-call9 150 tests/ops/test_wide_rows.py
     gpu_tests norm-call9 $((540 - SECONDS)) tests/ops/test_norm.py ;;
  *) echo "CALL: expected 1-9, got $CALL" >&2; exit 2 ;;
esac
finish_call one
