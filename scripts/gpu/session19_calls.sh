#!/usr/bin/env bash
# Run in the nineteenth session: 1, 5, 6, 7, 8 (and the compiler bench of call 3 by hand, all
# eight forward blueprints; benchmarks/results/session19-h200-2026-11-29/README.md); 2 and 4
# wait for a later session.
# The device calls planned in the eighteenth session for the next one, on the H200
# (nvidia-h200), most useful first. Carry .whl/ (Liger-Kernel); set WARPFORGE_GIT_COMMIT to this
# machine's `git rev-parse HEAD` as a literal hash (calls_common.sh says why). Each call comes
# back as OUT/call-N.tgz; results go under benchmarks/results/session19-h200-<date>/.
#   1  first the harness's candidate workers on CUDA since the keeper process (a subreaper
#      that forks the worker; eighteenth session, run on the CPU only): the cheating gallery
#      and the harness GPU tests. Then the norm forwards under torch.compile on the H200
#      (rms_norm.fwd bf16 4096 x 32768 0.90x, layer_norm.fwd fp32 4096 x 16384 0.92x and
#      16384 x 4096 0.93x, rms_norm.fwd bf16 16384 x 4096 0.95x) against the whole-row, tile and
#      chunked launches (benchmarks/parity_sweep.py NORM_FWD_CASES), with torch.compile's
#      generated kernels, autotuned configs and SASS packed (normfwd-compile-dumps.tgz) to read
#      what it does there; and the float32 cross entropy backward (0.98x torch.compile at
#      16384 x 32000 and 8192 x 128256, ce-fp32-call6) with the flat stream's logits loaded
#      without evict_first ("plain"), as torch.compile loads them
#   2  exhaustive tuning on the H200 of the float32 norm forwards at the shapes where they run
#      under torch.compile (0.93-0.99x, session18 all-H200 table in docs/ops.md); compare with
#      scripts/shipped_on_trials.py, as the seventeenth session did for bf16
#   3  issue 6's compiler measurements on the H200, never run there (benchmarks/compiler_bench.py:
#      cold compile against torch.compile's, a new process's first result from the disk cache,
#      the in-memory hit lookup, the 10 000-call replay's hit ratio) for two blueprints
#   4  issue 5's large resample shapes on the H200 (72-75% of copy, 0.95-1.11x torch.compile,
#      session17 robotics-call4.json; 88-91% on the H100): the search and tile launches
#      (benchmarks/robotics_sweep.py) and the L2 prefetch of rows, since the H100's picks may
#      keep too few bytes in flight for the H200's bandwidth
#   5  (nineteenth session, after call 1) the keeper's tests on CUDA in time enough (call 1's
#      170 s ran out after 18 of the gallery's tests at ~10 s each, a CUDA worker apiece); the
#      norm forwards' whole-row kernel with x read again (RELOAD, as torch.compile's kernels read
#      a row) at the shapes of call 1 and five more; the float32 cross entropy backward's plain
#      loads (now shipped) at the two shapes call 1 did not time
#   6  the whole-row forward (held or read again, weight early or late) at the issue's sweep rows
#      of 2048-16384 columns call 5 did not time (RMSNorm and LayerNorm, bf16 and float32)
#   7  through the harness: bf16 RMSNorm and LayerNorm forwards (the row table
#      NORM_FWD_ROW_LAUNCHES and RMSNorm's read-again launch at 16385-32768 columns, from calls
#      5 and 6) and the float32 cross entropy backward (plain loads), the issue's sweep shapes
#   8  the same for the float32 RMSNorm and LayerNorm forwards
# Usage: bash scripts/gpu/session19_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session19_calls.sh "$@"

case "$CALL" in
  1) t0=$SECONDS
     timeout 170 python3 -m pytest -q -p no:cacheprovider -rfEs \
       tests/harness/test_cheating_gallery.py tests/harness/test_gpu_measurements.py \
       > "$OUT/keep/gpu-tests-harness.txt" 2>&1
     echo "harness tests on CUDA: exit $? in $((SECONDS - t0)) s:" \
       "$(tail -1 "$OUT/keep/gpu-tests-harness.txt")"
     W="$OUT/w"
     mkdir -p "$W"
     export TORCHINDUCTOR_CACHE_DIR="$W/inductor" TRITON_CACHE_DIR="$W/triton"
     t0=$SECONDS
     TORCH_LOGS=output_code timeout $((520 - SECONDS)) python3 benchmarks/parity_sweep.py \
       --out "$OUT/parity" --only rms_norm.fwd layer_norm.fwd "cross_entropy.bwd M=16384" \
       "cross_entropy.bwd M=8192" \
       > "$OUT/parity.log" 2> "$W/parity.err"
     echo "parity sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/parity/parity_sweep.json" "$OUT/keep/parity-sweep-normfwd.json" 2>/dev/null
     grep -vE "^\s*$" "$OUT/parity.log" | head -80
     sass_dump "$TRITON_CACHE_DIR" "$W/sass" \
       '*triton_per*|*triton_red*|*triton_poi*|*norm_fwd*|*wide*|*cross_entropy_bwd*'
     ( cd "$W" && find . \( -name '*.py' -o -name '*.best_config' -o -name '*.ttgir' \
         -o -name '*.sass' -o -name '*.err' \) -print0 \
       | tar czf "$OUT/keep/normfwd-compile-dumps.tgz" --null -T - ) ;;
  2) norm_grid normfwd-fp32 float32 "rms_norm.fwd layer_norm.fwd add_rms_norm.fwd" \
       "M=16384,N=4096 M=8192,N=8192 M=16384,N=2048 M=32768,N=1024 M=4096,N=16384 M=32768,N=256" ;;
  3) t0=$SECONDS
     timeout 540 python3 benchmarks/compiler_bench.py --out "$OUT/compiler" --name compiler \
       --problems blueprint.bias_gelu blueprint.residual_rmsnorm_swiglu --timeout 200 \
       > "$OUT/compiler.log" 2>&1
     echo "compiler bench: exit $? in $((SECONDS - t0)) s"; tail -30 "$OUT/compiler.log"
     cp "$OUT/compiler/compiler.json" "$OUT/keep/" 2>/dev/null ;;
  4) robotics_large ;;
  5) t0=$SECONDS
     timeout 230 python3 -m pytest -q -p no:cacheprovider -rfEs \
       tests/harness/test_gpu_measurements.py tests/harness/test_cheating_gallery.py \
       -k "gpu or crash or exit_process or dies or keeper or honest or hanging" \
       > "$OUT/keep/gpu-tests-harness.txt" 2>&1
     echo "harness tests on CUDA: exit $? in $((SECONDS - t0)) s:" \
       "$(tail -1 "$OUT/keep/gpu-tests-harness.txt")"
     grep -E "^FAILED|^ERROR" "$OUT/keep/gpu-tests-harness.txt" | head
     t0=$SECONDS
     timeout $((560 - SECONDS)) python3 benchmarks/parity_sweep.py --out "$OUT/parity" \
       --only rms_norm.fwd layer_norm.fwd "cross_entropy.bwd M=4096" > "$OUT/parity.log" 2>&1
     echo "parity sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/parity/parity_sweep.json" "$OUT/keep/parity-sweep-reload.json" 2>/dev/null
     grep -vE "^\s*$|liger unavailable" "$OUT/parity.log" | head -150 ;;
  6) t0=$SECONDS
     timeout 540 python3 benchmarks/parity_sweep.py --out "$OUT/parity" --only \
       "rms_norm.fwd M=16384 N=2048" "rms_norm.fwd M=8192 N=8192 torch.bfloat16" \
       "rms_norm.fwd M=4096 N=16384" "rms_norm.fwd M=16384 N=4096 torch.float32" \
       "layer_norm.fwd M=16384 N=2048" "layer_norm.fwd M=16384 N=4096 torch.bfloat16" \
       "layer_norm.fwd M=4096 N=16384 torch.bfloat16" "layer_norm.fwd M=8192 N=8192 torch.float32" \
       > "$OUT/parity.log" 2>&1
     echo "parity sweep: exit $? in $((SECONDS - t0)) s"
     cp "$OUT/parity/parity_sweep.json" "$OUT/keep/parity-sweep-rows.json" 2>/dev/null
     grep -vE "^\s*$|liger unavailable" "$OUT/parity.log" | head -150 ;;
  7) export SUITE_PIECES="rms_norm.fwd:125 layer_norm.fwd:125"
     sweep_part bf16 fwd
     export SUITE_PIECES="cross_entropy.bwd:80"
     sweep_part fp32 ce ;;
  8) export SUITE_PIECES="rms_norm.fwd:125 layer_norm.fwd:125"
     sweep_part fp32 fwd ;;
  *) echo "CALL: expected 1-8, got $CALL" >&2; exit 2 ;;
esac
finish_call one
