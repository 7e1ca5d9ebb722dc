#!/usr/bin/env bash
# The device calls planned in the seventeenth session for the next one, on the H200
# (nvidia-h200), most useful first (30 minutes of device time hold about three of them). Carry
# .whl/ (Liger-Kernel) and set WARPFORGE_GIT_COMMIT. Each call comes back as OUT/call-N.tgz;
# results go under benchmarks/results/session18-h200-<date>/, tables via scripts/results_table.py.
#   1  issue 4's float32 norm backwards, never run on the H200
#   2  float32 softmax/log-softmax backward and swiglu/geglu on the H200
#   3  float32 cross entropy; then the whole-row kernels' launches kernel alone
#      (benchmarks/wide_rows_sweep.py; its float32 shape is 4096 x 32768): float32
#      layer_norm.fwd at 4096 x 16384 and 4096 x 32768 runs at 0.92x / 0.91x torch.compile
#      there (session17 normfwd-fp32-call6.json)
#   4  the rest of issue 6's blueprint suite on the H200 (the matmul blueprints and the
#      backward; the seventeenth session ran the other four), with the ceilings
#   (Ran 2026-11-28, 1-4. Planned in the eighteenth session from what they showed:)
#   5  the float32 rows under torch.compile on the H200: the cross entropy backward
#      (0.92-0.96x, ce-fp32-call3) and the swiglu/geglu forwards (0.98x, gated-fp32-call2)
#      against launch grids and torch.compile's own kernels (benchmarks/parity_sweep.py); then
#      the harness's float32 layer_norm.fwd at 32768 columns with its whole-row launch at 32
#      warps (289.1 us against 315.8 at 16, wide-rows-call3; 0.91x torch.compile at 16)
#      (Ran: the flat backward at 1024 / 4 warps fastest at every cross entropy shape, made the
#      float32 default; the float32 gated forwards at 256 / 4 warps; layer_norm.fwd 1.01x.)
#   6  the new float32 defaults: the cross entropy backward's launches again (a wider grid, and
#      4096 x 262144), the harness's float32 cross entropy backward and gated forwards, then the
#      GPU tests of cross entropy, the lean kernels and the activations
#      (Ran: backward 0.98-1.01x torch.compile at 95-98% of copy, gated forwards 1.00x; 10 GPU
#      tests read a constant the seventeenth session had moved, fixed with a check that tests
#      reach only defined names, tests/test_test_references.py.)
#   7  those 10 GPU tests again, then the norm GPU tests in what time is left
# Usage: bash scripts/gpu/session18_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session18_calls.sh "$@"

case "$CALL" in
  1) sweep_part fp32 normbwd ;;
  2) SUITE_PIECES="softmax.bwd:150 log_softmax.bwd:150" sweep_part fp32 smbwd
     sweep_part fp32 gated ;;
  3) sweep_part fp32 ce
     t0=$SECONDS
     timeout $((570 - SECONDS)) python3 benchmarks/wide_rows_sweep.py "$OUT/keep/wide-rows" \
       > "$OUT/wide-rows.log" 2>&1
     echo "wide rows sweep: exit $? in $((SECONDS - t0)) s"; tail -40 "$OUT/wide-rows.log" ;;
  4) SUITE_BUDGET_S=560 SUITE_CEILINGS=1 SUITE_DTYPE=bf16 \
       bash scripts/gpu/bench_parts.sh "$OUT/bp" blueprint \
       "blueprint.layernorm_linear_gelu:120" "blueprint.mlp_block:120" \
       "blueprint.causal_attention_scores:100" "blueprint.mixed_precision_chain:70" \
       "blueprint.residual_rmsnorm_swiglu.bwd:130" > "$OUT/bp.log" 2>&1
     cat "$OUT/bp/summary.txt"; cp "$OUT/bp/blueprint.json" "$OUT/keep/" 2>/dev/null
     python3 scripts/results_table.py "$OUT/keep/blueprint.json" ;;
  5) t0=$SECONDS
     timeout 380 python3 benchmarks/parity_sweep.py --out "$OUT/parity" \
       --only cross_entropy.bwd swiglu.fwd geglu.fwd > "$OUT/parity.log" 2>&1
     echo "parity sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/parity/parity_sweep.json" "$OUT/keep/parity-sweep.json" 2>/dev/null
     grep -vE "^\s*$" "$OUT/parity.log" | grep -vE "Warning|warn" | head -90
     SUITE_PIECES="layer_norm.fwd:100" sweep_part fp32 fwd "N=32768" ;;
  6) t0=$SECONDS
     timeout 100 python3 benchmarks/parity_sweep.py --out "$OUT/parity" --only cross_entropy.bwd \
       > "$OUT/parity.log" 2>&1
     echo "parity sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/parity/parity_sweep.json" "$OUT/keep/parity-sweep-ce.json" 2>/dev/null
     grep -vE "^\s*$" "$OUT/parity.log" | grep -vE "Warning|warn" | head -70
     SUITE_PIECES="cross_entropy.bwd:80" sweep_part fp32 ce
     SUITE_PIECES="swiglu.fwd:50 geglu.fwd:50" sweep_part fp32 gated
     gpu_tests ce $((560 - SECONDS)) tests/ops/test_cross_entropy.py tests/ops/test_lean_kernels.py \
       tests/ops/test_activations.py ;;
  7) gpu_tests ce-flag-words 120 tests/ops/test_cross_entropy.py -k flag_words
     gpu_tests norm $((370 - SECONDS)) tests/ops/test_norm.py ;;
  *) echo "CALL: expected 1-7, got $CALL" >&2; exit 2 ;;
esac
finish_call one
