#!/usr/bin/env bash
# The device calls of the thirty-sixth session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session36-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/ (the tracked tree outgrew the device
# tool's 64 MB transfer): git sparse-checkout set --no-cone '/*' '!/benchmarks/results/';
# afterwards git sparse-checkout disable. No call reads the results.
#   1  what the thirty-fifth session changed but did not run on a GPU: every robotics GPU test
#      (the single-stream resample kernel shares the streams kernel's new grid-slot code), the
#      resample problems through the harness, align's host time with the cached launch plan
#      (benchmarks/align_host_profile.py) and both align problems through the harness.
#   2  the resample forwards through the harness from three source trees, twice in turn: this
#      one (the single-stream kernel's grid slot without the groups' run-time division), ab/head
#      (`git archive 58ab7a0d src`, the grouped slot of the thirty-fifth session) and ab/s24
#      (`git archive 1d8513d6 src`, the twenty-fourth session's code, 74.7 µs at B=64 S=4096):
#      call 1 timed the large bf16 shape at 81.0 µs (0.96x torch.compile). Make ab/ first
#      (listed in .git/info/exclude, so carried: carry [".whl", "ab"]).
#   3  the grid on two axes (work item within a group, group; no run-time division in any
#      streams launch): every robotics GPU test, then the resample forwards and both align
#      problems through the harness from this tree and ab/head (the one-axis grouped grid of
#      call 1), twice in turn.
#   4  the split norm forward's launches re-swept on the H200 at bf16 8192 x 131072 and 262144
#      (benchmarks/norm_split_fwd.py, kernel alone): LayerNorm runs there at 63-67% of copy
#      through the harness, RMSNorm at 80% (131072), add+RMSNorm (packed) at 92%; the launch
#      table was chosen on the H100.
#   5  LayerNorm's chunk moments in one reduction (norm_fwd_lag_kernel's ONE_PASS, shipped for
#      2-byte rows without a residual): the split forward's GPU tests, the same sweep with the
#      one-pass candidates, then layer_norm.fwd and rms_norm.fwd bf16 at 8192 x 131072 and
#      8192 x 262144 through the harness (which found no such rows: --sweep was missing).
#   6  LayerNorm's split forward as int32 pairs with the one-pass moments
#      (NORM_FWD_SPLIT_CENTER_OPTIONS, the fastest in call 5): the split forward's GPU tests and
#      layer_norm.fwd / rms_norm.fwd bf16 at 8192 x 131072 and 8192 x 262144 through the harness.
#   7  every GPU test of the tree at the session's final kernel code: tests/ops on six workers,
#      the rest on four, fused linear cross-entropy's weight past 2**31 elements alone (it runs
#      out of memory beside other workers).
#   8  whether LayerNorm's bias is what it costs over RMSNorm in the split forward: the shipped
#      launches of both with LayerNorm also without a bias (benchmarks/norm_split_fwd.py, kernel
#      alone, bf16 8192 x 131072 and 262144).
#   9  align's host time with fewer no-op dispatches a call (no .to() of tensors already in the
#      time dtype, no empty mask tensor, the device check only where devices differ, since folded
#      into check_same_device itself): the align
#      GPU tests and benchmarks/align_host_profile.py.
# Usage: bash scripts/gpu/session36_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session36_calls.sh "$@"

resample_bench() {  # the resample problems through the harness into OUT/keep/resample-callCALL.json
  local t0=$SECONDS
  timeout "$1" python3 -m warpforge bench --problem 'resample*' \
    --out "$OUT/keep/resample-call$CALL.json" > "$OUT/resample-bench.log" 2>&1
  echo "resample bench: exit $? in $((SECONDS - t0)) s"; tail -16 "$OUT/resample-bench.log"
}

host_profile() {  # benchmarks/align_host_profile.py into OUT/keep/align-host-profile-callCALL.*
  timeout 150 python3 benchmarks/align_host_profile.py --out "$OUT/host" \
    > "$OUT/keep/align-host-profile-call$CALL.txt" 2>&1
  echo "host profile: exit $?"; head -40 "$OUT/keep/align-host-profile-call$CALL.txt"
  cp "$OUT/host/align-host-profile.json" "$OUT/keep/align-host-profile-call$CALL.json"
}

trees_bench() {  # LIMIT_S PROBLEMS NAME SUFFIX TREE=COMMIT...: the harness on PROBLEMS from
  # each source tree in turn, twice (the first TREE this tree's src/, the others ab/TREE/src),
  # into OUT/keep/NAME-TREE-roundR-SUFFIX.json
  local limit="$1" problems="$2" name="$3" suffix="$4" round pair tree commit src first
  shift 4
  for round in 1 2; do
    first=1
    for pair in "$@"; do
      tree="${pair%%=*}" commit="${pair#*=}" src=src
      [ "$first" = 1 ] || src="ab/$tree/src"
      first=0
      WARPFORGE_GIT_COMMIT="$commit" PYTHONPATH="$PWD/$src:/tmp/site" timeout "$limit" \
        python3 -m warpforge bench --problem "$problems" \
        --out "$OUT/keep/$name-$tree-round$round-$suffix.json" > "$OUT/$name-$tree-$round.log" 2>&1
      echo "$tree round $round: exit $?"; grep -E "^│ (resample|align)" "$OUT/$name-$tree-$round.log"
    done
  done
}

wide_norm_bench() {  # layer_norm.fwd, rms_norm.fwd bf16 at 8192 x 131072 and 262144 (harness)
  timeout $((580 - SECONDS)) python3 -m warpforge bench --problem 'layer_norm.fwd,rms_norm.fwd' \
    --dtype bf16 --sweep --shape M=8192,N=131072 --shape M=8192,N=262144 --max-time 1 \
    --out "$OUT/keep/normfwd-wide-call$CALL.json" > "$OUT/bench.log" 2>&1
  echo "bench: exit $?"; grep -E "^│ (layer|rms)" "$OUT/bench.log"
}

case "$CALL" in
  1) gpu_tests robotics-call1 200 -n 4 tests/robotics
     resample_bench 170
     host_profile
     align_bench ;;
  2) trees_bench 120 'resample.fwd*' resample call2 "flag=$WARPFORGE_GIT_COMMIT" \
       head=58ab7a0d322b175526b9852dd5d82f9c5a850629 s24=1d8513d6b62c149022d0c236d5f5c96485cf36a5 ;;
  3) gpu_tests robotics-call3 200 -n 4 tests/robotics
     trees_bench 150 'resample.fwd*,align*' robotics call3 "axes=$WARPFORGE_GIT_COMMIT" \
       head=58ab7a0d322b175526b9852dd5d82f9c5a850629 ;;
  4) timeout 450 python3 benchmarks/norm_split_fwd.py sweep "$OUT/keep/normfwd-wide-call4" \
       bf16:8192x131072,bf16:8192x262144 > "$OUT/normfwd.log" 2>&1
     echo "norm_split_fwd sweep: exit $?"; cat "$OUT/keep/normfwd-wide-call4.txt" ;;
  5) gpu_tests normsplit-call5 150 -n 4 tests/ops/test_norm_split_fwd.py
     timeout 200 python3 benchmarks/norm_split_fwd.py sweep "$OUT/keep/normfwd-onepass-call5" \
       bf16:8192x131072,bf16:8192x262144 > "$OUT/normfwd.log" 2>&1
     echo "norm_split_fwd sweep: exit $?"; grep -E "copy |layer|rms  .*lag1 8192/8w x2 pf" \
       "$OUT/keep/normfwd-onepass-call5.txt"
     wide_norm_bench ;;
  6) gpu_tests normsplit-call6 150 -n 4 tests/ops/test_norm_split_fwd.py
     wide_norm_bench ;;
  7) gpu_tests ops-call7 300 tests/ops -n 6 --deselect \
       tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements
     gpu_tests rest-call7 300 tests --ignore=tests/ops -n 4
     gpu_tests flce-wide-call7 120 tests/ops/test_fused_linear_cross_entropy.py -k beyond_2_pow_31 ;;
  8) timeout 200 python3 benchmarks/norm_split_fwd.py sweep "$OUT/keep/normfwd-bias-call8" \
       bf16:8192x131072,bf16:8192x262144 "lag1 8192/8w x2 pf,lag1 8192/8w x2 pk 1p" \
       > "$OUT/normfwd.log" 2>&1
     echo "norm_split_fwd sweep: exit $?"; cat "$OUT/keep/normfwd-bias-call8.txt" ;;
  9) gpu_tests align-call9 120 tests/robotics/test_robotics_gpu.py -k "align or streams or rows"
     host_profile ;;
  *) echo "CALL: expected 1 to 9, got $CALL" >&2; exit 2 ;;
esac
finish_call one
