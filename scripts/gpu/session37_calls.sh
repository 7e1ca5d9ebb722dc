#!/usr/bin/env bash
# The device calls of the thirty-seventh session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session37-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/ (the tracked tree outgrew the device
# tool's 64 MB transfer): git sparse-checkout set --no-cone '/*' '!/benchmarks/results/';
# afterwards git sparse-checkout disable. No call reads the results.
#   1  LayerNorm forward moments from one reduction (WideLaunch.one_reduction, not shipped):
#      its GPU tests, then benchmarks/parity_sweep.py's one-reduction cases (the shipped
#      one-row-a-program launches and whole-row / looped launches, each with one reduction and
#      with two, against the op and the baselines; kernels compiled first by parallel warm-up
#      processes). That code was removed after the call (it never won by more than 0.5%).
#   2  the staged resample forward with a window of samples staged after the search
#      (StagedConfig.window): its GPU tests, then benchmarks/robotics_sweep.py's staged stage
#      (windowed tiles, the whole-row staged tiles, the gather kernel, the public API and
#      torch.compile) at the middle and large forward shapes, kernels compiled first by eight
#      warm-up processes side by side. That code was removed after the call (slower at every
#      shape).
#   3  LayerNorm's whole-row forward with fewer registers (WideLaunch.stats_reload: x read a
#      third time for the centred squares; one_reduction; register caps), kernel alone through
#      benchmarks/parity_sweep.py's stats-reload cases, after the whole-row norm GPU tests. Only
#      float32 4096 x 16384 gained (one reduction, x read again: 133.0 against 140.4 us); the
#      stats_reload option was removed after the call.
#   4  float32 LayerNorm of 8192-32768 columns through the whole-row kernel with its moments
#      from one reduction (WideLaunch.one_reduction, x held or read again, 16 and 32 warps) and
#      the looped launch, kernel alone (parity_sweep's one-reduction cases), after the
#      whole-row norm GPU tests (the one-reduction ones among them).
#   5  float32 LayerNorm of 8193-16384 columns shipped on the one-reduction whole-row launch
#      (NORM_FWD_ROW_LAUNCHES): the whole-row norm GPU tests, then layer_norm.fwd float32 at
#      4096 x 16384 (the launch) and 8192 x 8192 (unchanged) through the harness.
#   6  torch.compile's own kernels for the bf16 LayerNorm forward (benchmarks/inductor_code.py:
#      Inductor's generated source, launch, registers) at 4096 x 16384, where it beats the op
#      (71.9 against 74.8 us), 8192 x 8192 and 4096 x 32768; RMSNorm's at 4096 x 16384.
#   7  norm forwards compiled for their row length (WideLaunch.specialized: N and the row
#      strides compiled in, 32-bit row offsets, as torch.compile's kernels): their GPU tests,
#      then parity_sweep's specialized cases (bf16 LayerNorm and RMSNorm, float32 LayerNorm;
#      shipped, whole-row and looped launches, each specialized and not).
#   8  bf16 / fp16 LayerNorm of 16384 columns shipped on the specialized looped launch: the
#      whole-row norm GPU tests, layer_norm.fwd bf16 at 4096 x 16384 (the launch) and 8192 x 8192
#      (unchanged) through the harness, then parity_sweep's specialized cases at other bf16
#      LayerNorm widths and row counts (12288, 14336; 2048 and 16384 rows).
#   9  the specialized LayerNorm launch extended to 12288-16384 columns (call 8's widths): the
#      whole-row norm GPU tests, then parity_sweep's specialized cases at narrower bf16 LayerNorm
#      rows (8704-11264 columns) and bf16 RMSNorm at 10240 and 12288.
#  10  the looped softmax forward compiled for the row length (WideLaunch.specialized): its GPU
#      tests, then parity_sweep's softmax specialized cases (bf16 softmax / log-softmax at
#      4096 x 16384, 8192 x 8192, 4096 x 32768, 4096 x 12288). The option was removed after
#      the call (the tiled kernel stayed ahead at the issue's widths).
#  11  every GPU test under tests/ops at the session's final kernel code (six workers; fused
#      linear cross-entropy's weight past 2**31 elements left out: it runs out of memory beside
#      other workers, and its code did not change).
#  12  bf16 / fp16 RMSNorm of 8193-16384 columns on the specialized looped launch (4096-column
#      chunks, 16 warps, unrolled, 64 registers): the wide-row GPU tests, then rms_norm.fwd bf16
#      at 4096 x 16384 through the harness.
# Run call N at the commit benchmarks/results/session37-h200-2026-11-30/README.md names for it:
# the code each call measured is gone from later commits.
# Usage: bash scripts/gpu/session37_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session37_calls.sh "$@"

parity_warm() {  # LIMIT_S SUBSTRING...: parity_sweep.py --warm of each case, all at once
  local limit="$1" t0=$SECONDS case
  shift
  for case in "$@"; do
    timeout "$limit" python3 benchmarks/parity_sweep.py --out "$OUT/warm-${case// /_}" --warm \
      --only "$case" > "$OUT/warm-${case// /_}.log" 2>&1 &
  done
  wait
  echo "warm-up: $((SECONDS - t0)) s"
}

ONE_REDUCTION_CASES=("M=16384 N=2048 torch.bfloat16 one" "M=16384 N=4096 torch.bfloat16 one"
  "M=8192 N=8192 torch.bfloat16 one" "M=4096 N=16384 torch.bfloat16 one"
  "M=4096 N=32768 torch.bfloat16 one" "M=8192 N=65536 torch.bfloat16 one"
  "M=16384 N=4096 torch.float32 one" "M=8192 N=8192 torch.float32 one"
  "M=4096 N=16384 torch.float32 one" "M=4096 N=32768 torch.float32 one")

case "$CALL" in
  1) gpu_tests one-reduction-call1 150 -n 4 tests/ops/test_wide_rows.py -k one_reduction
     parity_warm 150 "${ONE_REDUCTION_CASES[@]}"
     parity_cases one-reduction-call1 $((580 - SECONDS)) --only "${ONE_REDUCTION_CASES[@]}" ;;
  2) gpu_tests staged-window-call2 200 -n 4 tests/robotics/test_resample_staged.py -k window
     only="fwd.bf16 B=256,fwd.fp32 B=1024,fwd.bf16 B=64 S=4096"
     for part in 0 1 2 3 4 5 6 7; do
       timeout 200 python3 benchmarks/robotics_sweep.py --out "$OUT/warm" --stages staged \
         --only "$only" --warm-only "$part/8" > "$OUT/warm-$part.log" 2>&1 &
     done
     wait
     budget=$((500 - SECONDS))
     timeout $((budget + 60)) python3 benchmarks/robotics_sweep.py --out "$OUT/robotics" \
       --budget-s "$budget" --stages staged --only "$only" > "$OUT/robotics.log" 2>&1
     echo "robotics sweep: exit $?"; tail -70 "$OUT/robotics.log"
     cp "$OUT/robotics/robotics-sweep.json" "$OUT/keep/staged-window-call2.json" ;;
  3) gpu_tests wide-norm-call3 150 -n 4 tests/ops/test_wide_rows.py -k norm
     STATS_CASES=("M=16384 N=4096 torch.bfloat16 stats" "M=8192 N=8192 torch.bfloat16 stats"
       "M=4096 N=16384 torch.bfloat16 stats" "M=4096 N=32768 torch.bfloat16 stats"
       "M=8192 N=8192 torch.float32 stats" "M=4096 N=16384 torch.float32 stats")
     parity_warm 150 "${STATS_CASES[@]}"
     parity_cases stats-reload-call3 $((580 - SECONDS)) --only "${STATS_CASES[@]}" ;;
  4) gpu_tests wide-norm-call4 150 -n 4 tests/ops/test_wide_rows.py -k "norm or one_reduction"
     ONE_CASES=("M=4096 N=16384 torch.float32 one" "M=2048 N=16384 torch.float32 one"
       "M=16384 N=16384 torch.float32 one" "M=4096 N=12288 torch.float32 one"
       "M=4096 N=10240 torch.float32 one" "M=4096 N=32768 torch.float32 one"
       "M=4096 N=24576 torch.float32 one" "M=8192 N=8192 torch.float32 one")
     parity_warm 150 "${ONE_CASES[@]}"
     parity_cases one-reduction-call4 $((580 - SECONDS)) --only "${ONE_CASES[@]}" ;;
  5) gpu_tests wide-norm-call5 150 -n 4 tests/ops/test_wide_rows.py -k "norm or one_reduction"
     timeout $((570 - SECONDS)) python3 -m warpforge bench --problem layer_norm.fwd --dtype fp32 \
       --sweep --shape M=4096,N=16384 --shape M=8192,N=8192 \
       --out "$OUT/keep/lnfwd-fp32-call5.json" > "$OUT/bench.log" 2>&1
     echo "bench: exit $?"; grep -E "^│ layer" "$OUT/bench.log" ;;
  6) for problem in layer_norm.fwd rms_norm.fwd; do
       shapes=(--shape M=4096,N=16384)
       [ "$problem" = layer_norm.fwd ] && shapes+=(--shape M=8192,N=8192 --shape M=4096,N=32768)
       timeout 200 python3 benchmarks/inductor_code.py --out "$OUT/ind-$problem" \
         --problem "$problem" --dtype bf16 "${shapes[@]}" > "$OUT/ind-$problem.log" 2>&1
       echo "$problem: exit $?"; grep -E "^===|^cubin|num_warps|R0_BLOCK|XBLOCK" "$OUT/ind-$problem.log" | head -30
       cp "$OUT/ind-$problem/inductor-kernels.txt" "$OUT/keep/inductor-$problem-call6.txt"
     done ;;
  7) gpu_tests specialized-call7 150 -n 4 tests/ops/test_wide_rows.py -k "specialized or one_reduction"
     SPEC_CASES=("layer_norm.fwd M=4096 N=16384 torch.bfloat16 spec"
       "layer_norm.fwd M=8192 N=8192 torch.bfloat16 spec" "layer_norm.fwd M=4096 N=32768 torch.bfloat16 spec"
       "layer_norm.fwd M=16384 N=4096 torch.bfloat16 spec" "rms_norm.fwd M=4096 N=16384 torch.bfloat16 spec"
       "rms_norm.fwd M=8192 N=8192 torch.bfloat16 spec" "layer_norm.fwd M=4096 N=16384 torch.float32 spec")
     parity_warm 150 "${SPEC_CASES[@]}"
     parity_cases specialized-call7 $((580 - SECONDS)) --only "${SPEC_CASES[@]}" ;;
  8) gpu_tests wide-norm-call8 150 -n 4 tests/ops/test_wide_rows.py -k "norm or specialized or one_reduction"
     timeout 200 python3 -m warpforge bench --problem layer_norm.fwd --dtype bf16 --sweep \
       --shape M=4096,N=16384 --shape M=8192,N=8192 \
       --out "$OUT/keep/lnfwd-bf16-call8.json" > "$OUT/bench.log" 2>&1
     echo "bench: exit $?"; grep -E "^│ layer" "$OUT/bench.log"
     WIDTH_CASES=("layer_norm.fwd M=4096 N=12288 torch.bfloat16 spec"
       "layer_norm.fwd M=4096 N=14336 torch.bfloat16 spec" "layer_norm.fwd M=2048 N=16384 torch.bfloat16 spec"
       "layer_norm.fwd M=16384 N=16384 torch.bfloat16 spec")
     parity_warm 100 "${WIDTH_CASES[@]}"
     parity_cases specialized-widths-call8 $((580 - SECONDS)) --only "${WIDTH_CASES[@]}" ;;
  9) gpu_tests wide-norm-call9 150 -n 4 tests/ops/test_wide_rows.py -k "norm or specialized or one_reduction"
     NARROW_CASES=("layer_norm.fwd M=4096 N=8704 torch.bfloat16 spec"
       "layer_norm.fwd M=4096 N=9216 torch.bfloat16 spec" "layer_norm.fwd M=4096 N=10240 torch.bfloat16 spec"
       "layer_norm.fwd M=4096 N=11264 torch.bfloat16 spec" "rms_norm.fwd M=4096 N=12288 torch.bfloat16 spec"
       "rms_norm.fwd M=4096 N=10240 torch.bfloat16 spec")
     parity_warm 100 "${NARROW_CASES[@]}"
     parity_cases specialized-narrow-call9 $((580 - SECONDS)) --only "${NARROW_CASES[@]}" ;;
  10) gpu_tests softmax-specialized-call10 120 -n 4 tests/ops/test_wide_rows.py -k "specialized"
     SOFTMAX_CASES=("softmax.fwd M=4096 N=16384 torch.bfloat16 spec" "softmax.fwd M=8192 N=8192 torch.bfloat16 spec"
       "softmax.fwd M=4096 N=32768 torch.bfloat16 spec" "log_softmax.fwd M=4096 N=16384 torch.bfloat16 spec"
       "softmax.fwd M=4096 N=12288 torch.bfloat16 spec")
     parity_warm 90 "${SOFTMAX_CASES[@]}"
     parity_cases softmax-specialized-call10 $((400 - SECONDS)) --only "${SOFTMAX_CASES[@]}" ;;
  11) gpu_tests ops-call11 330 tests/ops -n 6 --deselect \
       tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements ;;
  12) gpu_tests wide-rows-call12 100 -n 4 tests/ops/test_wide_rows.py
     timeout 90 python3 -m warpforge bench --problem rms_norm.fwd --dtype bf16 --sweep \
       --shape M=4096,N=16384 --max-time 1 --out "$OUT/keep/rmsfwd-bf16-call12.json" > "$OUT/bench.log" 2>&1
     echo "bench: exit $?"; grep -E "^│ rms" "$OUT/bench.log" ;;
  *) echo "CALL: expected 1 to 12, got $CALL" >&2; exit 2 ;;
esac
finish_call one
