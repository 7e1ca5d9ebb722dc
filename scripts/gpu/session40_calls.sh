#!/usr/bin/env bash
# The device calls of the fortieth session, on the H200 (nvidia-h200). Carry .whl/
# (Liger-Kernel; pytest-xdist and execnet for the test workers); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes back
# as OUT/call-N.tgz; results go under benchmarks/results/session40-h200-<date>/.
# Run from a sparse checkout without benchmarks/results/: git sparse-checkout set --no-cone '/*'
# '!/benchmarks/results/'; afterwards git sparse-checkout disable. No call reads the results.
#   1  the wrong row totals suspected in the split softmax backward (session 39's call 6: one
#      element of bf16 8 x 262144 far out of tolerance): benchmarks/softmax_bwd_totals.py over
#      50 seeds at that shape and others, then every GPU test at this commit (the tuned-config
#      test session 39 moved to 512 columns included).
#   2  the same totals under load, as in session 39's call 6 (the GPU tier's tests/ops on five
#      workers beside them), then the split softmax backward's launches on the H200, kernel
#      alone (benchmarks/softmax_bwd_split_sweep.py, only ever run on the H100: bf16 rows of
#      131072 and 262144 columns stay at 77-88% of copy here, 91% there).
#   3  call 2's finding shipped (bf16 rows of 131072 columns or more: one 16-warp program an SM
#      over 16384 columns, softmax_ops.BWD_SPLIT_WIDE_LAUNCHES): the split backward's GPU tests,
#      the harness rows it changes, then the same launch shape kernel alone where nothing has
#      measured it: the softmax backward of narrower bf16 rows and of float32 rows, the split
#      softmax forward (softmax_split_sweep.py) and the split norm forward (norm_split_fwd.py).
#   4  call 3's launches shipped (bf16 from 65536 columns, float32 from 262144): the harness rows
#      they change, then every GPU test (test_bf16_gpu now allows what the saved bf16 y's
#      rounding moves softmax's dx by).
#   5  the wide launch shape for the split cross-entropy forward + gradient, kernel alone
#      (benchmarks/ce_split_meeting_sweep.py; bf16 cross_entropy.fwd_bwd stays at 81-85% of copy
#      on the H200 at 32000-262144 classes).
#   6  the same question for the bf16 LayerNorm backward of 16384 columns (64 one-warp programs
#      a row, layer_norm_bwd_pairs_kernel; 79% of copy through the harness) and 32768 (69%):
#      benchmarks/ln_bwd_split_sweep.py --pairs --wide, chunks of 512-2048 columns on 2-8 warps.
#   7  call 6's 1024-column 4-warp pairs launch shipped for 2-byte LayerNorm rows of 16385-32768
#      columns on the H200 (norm.LAYER_NORM_BWD_PAIRS_WIDE_BY_MODEL): the harness row it
#      changes (layer_norm.bwd bf16 4096 x 32768), then the norm backward's GPU tests.
#   8  the same question for the bf16 norm backwards of 131072 and 262144 columns (the H200's
#      narrow-row table: the lagged flag-word kernel in 2048- or 4096-column programs),
#      benchmarks/norm_bwd_narrow_sweep.py with wider programs of more warps.
#   9  call 8's finding shipped (bf16 RMSNorm and add+RMSNorm backward past 131072 columns: the
#      lagged kernel in 8192-column 16-warp programs, NORM_BWD_NARROW_BY_MODEL): their harness
#      rows at 8192 x 262144, then the narrow-row backward's GPU tests at 262144 columns.
# Usage: bash scripts/gpu/session40_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session40_calls.sh "$@"

softmax_totals() {  # NAME SEEDS ARGS...: benchmarks/softmax_bwd_totals.py into OUT/keep/totals-NAME.json
  local name="$1" seeds="$2" t0=$SECONDS
  shift 2
  timeout 150 python3 benchmarks/softmax_bwd_totals.py --out "$OUT/keep/totals-$name.json" \
    --seeds "$seeds" "$@" > "$OUT/keep/totals-$name.txt" 2>&1
  echo "softmax totals $name: exit $? in $((SECONDS - t0)) s"
  grep -vE " 0 segments past [0-9.]+, 0 elements" "$OUT/keep/totals-$name.txt" | head -20
}

case "$CALL" in
1)
  softmax_totals bf16-8x262144 50
  softmax_totals fp16-8x262144 20 --dtype fp16
  softmax_totals bf16-300x262144 6 --rows 300
  softmax_totals bf16-64x131072 20 --rows 64 --cols 131072
  gpu_tests ops-call1 220 tests/ops -n 6 \
    --deselect tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements
  gpu_tests rest-call1 170 tests --ignore=tests/ops -n 4
  finish_call one
  ;;
2)
  timeout 230 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE -n 5 tests/ops \
    --deselect tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements \
    > "$OUT/keep/gpu-tests-load-call2.txt" 2>&1 &
  tests_pid=$!
  sleep 20  # the workers past collection and compiling
  softmax_totals bf16-8x262144-loaded 150
  softmax_totals bf16-300x262144-loaded 10 --rows 300
  wait "$tests_pid"
  echo "tests beside them: exit $?: $(tail -1 "$OUT/keep/gpu-tests-load-call2.txt")"
  grep -E "^FAILED|^ERROR" "$OUT/keep/gpu-tests-load-call2.txt" | head
  timeout $((570 - SECONDS)) python3 benchmarks/softmax_bwd_split_sweep.py --out "$OUT/smbwd" \
    --shapes 8192x262144:bf16,8192x131072:bf16 --repeat 3 --only "default,8192/8 x2 p,8192/8 x2,\
4096/4 x4 p,4096/8 x3 p,16384/16 x1 p,8192/16 x2 p,4096/4 x5 p,8192/8 x3 p,16384/8 x1 p" \
    > "$OUT/smbwd.log" 2>&1
  echo "softmax bwd split sweep: exit $?"
  cp "$OUT/smbwd/"* "$OUT/keep/" 2>/dev/null
  cat "$OUT/keep/softmax_bwd_split_sweep.txt"
  finish_call one
  ;;
3)
  timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE -n 4 \
    tests/ops/test_softmax_split_bwd.py tests/ops/test_softmax.py > "$OUT/keep/gpu-tests-softmax-call3.txt" 2>&1
  echo "softmax gpu tests: exit $?: $(tail -1 "$OUT/keep/gpu-tests-softmax-call3.txt")"
  grep -E "^FAILED|^ERROR" "$OUT/keep/gpu-tests-softmax-call3.txt" | head
  timeout 200 python3 -m warpforge bench --problem "softmax.bwd,log_softmax.bwd" --dtype bf16 --sweep \
    --shape M=8192,N=131072 --shape M=8192,N=262144 --max-time 1 \
    --out "$OUT/keep/smbwd-bf16-call3.json" > "$OUT/bench-smbwd.log" 2>&1
  echo "bench softmax bwd bf16: exit $?"; grep -E "^│ (log_)?softmax" "$OUT/bench-smbwd.log"
  timeout 120 python3 benchmarks/softmax_bwd_split_sweep.py --out "$OUT/smbwd2" --repeat 3 \
    --shapes 4096x32768:bf16,8192x65536:bf16,8192x262144:fp32,8192x131072:fp32 \
    --only "default,8192/8 x2 p,8192/8 x2,16384/16 x1 p,16384/16 x1" > "$OUT/smbwd2.log" 2>&1
  echo "softmax bwd sweep: exit $?"
  cp "$OUT/smbwd2/softmax_bwd_split_sweep.txt" "$OUT/keep/softmax_bwd_split_sweep-call3.txt"
  cp "$OUT/smbwd2/softmax_bwd_split_sweep.json" "$OUT/keep/softmax_bwd_split_sweep-call3.json"
  grep -E "^(bf16|fp32)" "$OUT/keep/softmax_bwd_split_sweep-call3.txt"
  timeout 120 python3 benchmarks/softmax_split_sweep.py --out "$OUT/smfwd" --repeat 3 \
    --shapes 8192x262144:bf16,8192x131072:bf16 \
    --only "default,16384/16 x2,16384/16 x1,32768/32 x1,16384/16 x1 lag" > "$OUT/smfwd.log" 2>&1
  echo "softmax fwd sweep: exit $?"
  cp "$OUT/smfwd/softmax_split_sweep.txt" "$OUT/keep/softmax_split_sweep-call3.txt"
  cp "$OUT/smfwd/softmax_split_sweep.json" "$OUT/keep/softmax_split_sweep-call3.json"
  grep -E "^(bf16|fp32)" "$OUT/keep/softmax_split_sweep-call3.txt"
  timeout $((575 - SECONDS)) python3 benchmarks/norm_split_fwd.py sweep "$OUT/keep/normfwd-split-call3" \
    bf16:8192x262144,bf16:8192x131072 \
    "lag1 8192/8w x2 pf,lag1 8192/8w x2 pk 1p,lag1 16384/16w x1 pf,lag1 16384/16w x1 pk 1p" \
    > "$OUT/normfwd.log" 2>&1
  echo "norm fwd sweep: exit $?"; grep -vE "chunked" "$OUT/keep/normfwd-split-call3.txt"
  finish_call one
  ;;
4)
  timeout 150 python3 -m warpforge bench --problem "softmax.bwd,log_softmax.bwd" --dtype bf16 --sweep \
    --shape M=8192,N=65536 --max-time 1 --out "$OUT/keep/smbwd-bf16-call4.json" > "$OUT/bench-bf16.log" 2>&1
  echo "bench softmax bwd bf16: exit $?"; grep -E "^│ (log_)?softmax" "$OUT/bench-bf16.log"
  timeout 150 python3 -m warpforge bench --problem "softmax.bwd,log_softmax.bwd" --dtype fp32 --sweep \
    --shape M=8192,N=262144 --max-time 1 --out "$OUT/keep/smbwd-fp32-call4.json" > "$OUT/bench-fp32.log" 2>&1
  echo "bench softmax bwd fp32: exit $?"; grep -E "^│ (log_)?softmax" "$OUT/bench-fp32.log"
  gpu_tests ops-call4 200 tests/ops -n 6 \
    --deselect tests/ops/test_fused_linear_cross_entropy.py::test_gpu_weight_beyond_2_pow_31_elements
  gpu_tests rest-call4 $((570 - SECONDS)) tests --ignore=tests/ops -n 4
  finish_call one
  ;;
5)
  timeout 240 python3 benchmarks/ce_split_meeting_sweep.py --out "$OUT/ce" --repeat 3 \
    --shapes 4096x262144:bf16,8192x128256:bf16,16384x32000:bf16 \
    --only "default,words 8192/8 x4,words 8192/8 x2,words 16384/16 x1,words 16384/16 x2,words 16384/8 x2" \
    > "$OUT/ce.log" 2>&1
  echo "ce sweep: exit $?"
  for f in "$OUT"/ce/*; do cp "$f" "$OUT/keep/$(basename "${f%.*}")-call5.${f##*.}"; done
  grep -E "^M=|^ *M=" "$OUT"/ce/*.txt | head -40
  finish_call one
  ;;
6)
  timeout 300 python3 benchmarks/ln_bwd_split_sweep.py --out "$OUT/keep/lnbwd-pairs-wide-call6.json" \
    --pairs --wide > "$OUT/keep/lnbwd-pairs-wide-call6.txt" 2>&1
  echo "ln bwd pairs sweep: exit $?"; grep -vE '^\{' "$OUT/keep/lnbwd-pairs-wide-call6.txt"
  grep -E '"error"' "$OUT/keep/lnbwd-pairs-wide-call6.txt" | cut -c1-300 | head -5
  finish_call one
  ;;
7)
  timeout 120 python3 -m warpforge bench --problem layer_norm.bwd --dtype bf16 --sweep \
    --shape M=4096,N=32768 --max-time 1 --out "$OUT/keep/lnbwd-bf16-call7.json" > "$OUT/bench.log" 2>&1
  echo "bench layer_norm.bwd bf16: exit $?"; grep -E "^│ layer" "$OUT/bench.log"
  gpu_tests norm-call7 $((330 - SECONDS)) tests/ops/test_norm.py tests/ops/test_norm_bwd_narrow.py -n 6
  finish_call one
  ;;
8)
  SWEEP_SHAPES="8192x131072 8192x262144" SWEEP_LAUNCHES="lag/2048/4/4/0 lag/4096/4/2/0 \
lag/8192/8/1/0 lag/4096/8/2/0 lag/8192/16/1/0 flags/8192/8/1/1" \
    timeout 110 python3 benchmarks/norm_bwd_narrow_sweep.py sweep "$OUT/keep/normbwd-wide-call8.txt" \
    > "$OUT/keep/normbwd-wide-call8.log" 2>&1
  echo "norm bwd sweep: exit $?"; cat "$OUT/keep/normbwd-wide-call8.log" | cut -c1-160 | tail -45
  finish_call one
  ;;
9)
  timeout 110 python3 -m warpforge bench --problem "rms_norm.bwd,add_rms_norm.bwd" --dtype bf16 --sweep \
    --shape M=8192,N=262144 --max-time 1 --out "$OUT/keep/normbwd-bf16-call9.json" > "$OUT/bench.log" 2>&1
  echo "bench norm bwd bf16: exit $?"; grep -E "^│ (add_)?rms" "$OUT/bench.log"
  gpu_tests narrow-call9 $((185 - SECONDS)) tests/ops/test_norm_bwd_narrow.py -k 262144 -n 6
  finish_call one
  ;;
*) echo "unknown call $CALL"; exit 2 ;;
esac
