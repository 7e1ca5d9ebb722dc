#!/usr/bin/env bash
# The sixteenth session's device calls, on the H200 (nvidia-h200) the device tool now lends; the
# H100 that every earlier result was measured on is no longer lent. H200 rows form tables of
# their own (scripts/results_table.py keeps GPU models apart; `warpforge compare` refuses to mix
# them). Carry .whl/ (Liger-Kernel) and set WARPFORGE_GIT_COMMIT. Writes OUT/keep/* (what comes
# back). Results go under benchmarks/results/session16-h200-2026-11-28/.
#   1  the machine and its ceilings (warpforge env --json, warpforge ceilings --json); where each
#      tuned op's launch config comes from on the H200 (`warpforge db lookup ... --sweep`: the
#      H100's shipped table through the same-architecture fallback, expected "shipped for NVIDIA
#      H100 80GB HBM3/sm_90 ..."); the GPU tests of tests/harness and tests/tune (changed in the
#      fifteenth session, CPU-tested only; each test stopped after 80 s and the slowest listed,
#      since the fourteenth session's tune tests never finished); RoPE forward and backward
#      (Llama-3 shapes) in bf16 with static torch.compile baselines (never run); fp32
#      add_rms_norm.bwd at 8192 x 262144 (did not fit the H100's 80 GB)
#   2  issue 4's normbwd part in bf16 (rms_norm, layer_norm, add_rms_norm backward, every shape)
#   3  issue 4's fwd part in bf16, then RoPE in fp32 in what time is left
#   4  why the long rows run under 90% of copy on the H200 (the H100's split launches): the
#      split forward's candidate launches kernel alone (benchmarks/norm_split_fwd.py, bf16 and
#      fp32), the bf16 backward's of 32768-262144 columns (benchmarks/norm_bwd_narrow_sweep.py);
#      then exhaustive tuning of bf16 rms_norm.bwd and layer_norm.bwd at 16384 x 2048 and
#      32768 x 1024 on the H200 (74-79% of copy with the H100's configs)
#   5  the H200's own bf16 long-row backward choices (NORM_BWD_NARROW_BY_MODEL, from call 4):
#      their GPU tests, then the harness's normbwd at 65536-262144 columns; the harness and
#      compile-ahead GPU tests after this session's isolation and CompilePool changes; then
#      issue 4's smbwd part in bf16 in what time is left
# Usage: bash scripts/gpu/session16_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session16_calls.sh "$@"

case "$CALL" in
  1) python3 -m warpforge env --json > "$OUT/keep/env.json" 2>&1
     timeout 120 python3 -m warpforge ceilings --json > "$OUT/keep/ceilings.json" 2>&1
     echo "ceilings: exit $?"; head -c 600 "$OUT/keep/ceilings.json"; echo
     for op in rms_norm.fwd rms_norm.bwd add_rms_norm.fwd add_rms_norm.bwd layer_norm.fwd \
               layer_norm.bwd softmax.fwd cross_entropy.fwd; do
       COLUMNS=220 timeout 90 python3 -m warpforge db lookup "$op" --sweep --dtype bf16 \
         --dtype fp32 > "$OUT/lookup-$op.txt" 2>&1 &
     done
     wait
     cat "$OUT"/lookup-*.txt > "$OUT/keep/lookup-origins.txt"
     echo "lookup rows from the H100's table: $(grep -c 'shipped for NVIDIA H100' \
       "$OUT/keep/lookup-origins.txt")"
     gpu_tests harness 90 tests/harness
     PYTEST_ADDOPTS="--timeout=80 --durations=12" gpu_tests tune 170 tests/tune
     SUITE_PIECES="rope.*:100" sweep_part bf16 rope
     SUITE_PIECES="add_rms_norm.bwd:250" sweep_part fp32 normbwd "M=8192,N=262144" ;;
  2) sweep_part bf16 normbwd ;;
  3) sweep_part bf16 fwd
     SUITE_PIECES="rope.*:100" sweep_part fp32 rope ;;
  4) t0=$SECONDS
     timeout 130 python3 benchmarks/norm_split_fwd.py sweep "$OUT/keep/normfwd-split-sweep" \
       > "$OUT/fwd-sweep.log" 2>&1
     echo "forward split sweep: exit $? in $((SECONDS - t0)) s"; t0=$SECONDS
     SWEEP_SHAPES="4096x32768 8192x65536 8192x131072 8192x262144" \
     SWEEP_LAUNCHES="flags/4096/4/2/1 flags/4096/8/2/1 flags/8192/16/1/1 flags/8192/8/1/1 lag/2048/4/4/0 flags/2048/4/4/1 lag/4096/4/2/0" \
       timeout 200 python3 benchmarks/norm_bwd_narrow_sweep.py sweep \
       "$OUT/keep/normbwd-wide-bf16-sweep.txt" > "$OUT/bwd-sweep.log" 2>&1
     echo "backward wide sweep: exit $? in $((SECONDS - t0)) s"
     GRID_SHAPES="M=16384,N=2048 M=32768,N=1024" GRID_DTYPES=bfloat16 \
     GRID_KERNELS="rms_norm.bwd layer_norm.bwd" GRID_MAX_WALL=$((545 - SECONDS)) \
       bash scripts/gpu/tune_norm_grid.sh "$OUT/grid" > "$OUT/grid.log" 2>&1
     cat "$OUT/grid/summary.txt"
     cp "$OUT/grid/shipped-grid.json" "$OUT/keep/tune-normbwd-bf16-shipped.json"
     cp "$OUT/grid/trials-grid.json" "$OUT/keep/tune-normbwd-bf16-trials.json" ;;
  5) gpu_tests narrow 150 tests/ops/test_norm_bwd_narrow.py
     sweep_part bf16 normbwd "M=8192,N=65536 M=8192,N=131072 M=8192,N=262144"
     gpu_tests harness 90 tests/harness
     gpu_tests precompile 60 tests/tune/test_precompile.py
     sweep_part bf16 smbwd ;;
  *) echo "CALL: expected 1-5, got $CALL" >&2; exit 2 ;;
esac
finish_call
