#!/usr/bin/env bash
# The thirty-second session's device calls, on the H200 (nvidia-h200; call 8 on two): call 1
# planned in the thirty-first session, the others added as the session went. Set
# WARPFORGE_GIT_COMMIT to this machine's `git rev-parse HEAD` as a literal hash
# (calls_common.sh says why). Each call comes back as OUT/call-N.tgz; results go under
# benchmarks/results/session32-h200-<date>/.
# Session 31 capped the registers of the bf16/fp16 looped softmax, LayerNorm and RMSNorm
# forwards at 64 a thread from kernel-alone sweeps at 4096 and 8192 rows in bf16
# (session31-h200-2026-11-30/register-widths-call4, softmax-long-caps-call10), and mended a
# test that had asserted the interpreter's launch count of the split softmax backward on a GPU
# (test_autograd_backward_of_long_rows_takes_the_split_kernel), not re-run there for lack of
# device time.
#   1  that test on the GPU, then the capped launches against themselves uncapped at 132, 1056
#      and 16384 rows, bf16 and fp16, 24576 and 49152 columns (wide_rows_sweep.py
#      register-rows): if the cap loses at some row count, say so in the tables' docstrings
#      and weigh it against the 4096- and 8192-row wins.
#   2  whole-row launches of the bf16 softmax forward and backward at the issue's rows of
#      4096-16384 columns (wide_rows_sweep.py short-softmax; the op runs the tuned row
#      kernels there, 1-3% under Liger-Kernel in the harness) and one-row-a-program launches of
#      the norm and softmax forwards at 32768 x 256, bf16 and float32 (rows-256; 3-5% under
#      torch.compile there). Ran at 00f6bf1b; rows-256's microsecond kernels were timed
#      host-bound by the sweep (its RMSNorm 81.5 us against the harness's 13.0), so the mode
#      was removed.
#   3  the bf16 softmax backward's whole-row kernel holding y and dy in their own dtype or
#      reading them again for dx, at 8192-32768 columns (softmax-bwd-hold; Liger-Kernel's
#      backward, which holds them as bf16, led the op by 4% at 4096 x 16384 in call 2), then
#      the wide-row GPU tests on the kernel's new options. Ran at 77d3440b: neither option
#      gained (softmax-bwd-hold-call3.txt), and both were removed with the sweep mode.
#   4  looped launches with and without the register cap at bf16 8192 x 131072 and 262144,
#      RMSNorm, LayerNorm and softmax forwards, against the split kernels
#      (wide_rows_sweep.py longest-caps). Ran at 9d882d0c: the split kernels stayed faster
#      (log-softmax at 131072 within 1.5%), so nothing changed.
#   5  looped bf16 LayerNorm forward launches of 1024-4096-column chunks on 4-16 warps,
#      uncapped and capped at 32 or 40 registers a thread, at the issue's rows of 1024-16384
#      columns (wide_rows_sweep.py short-ln-caps; 0.95x torch.compile at 4096 x 16384). Ran at
#      8c4d13ed: none ahead of the op, in a run whose timings drifted between shapes.
#   6  every gpu-marked test of tests/ops, six pytest-xdist workers on the one GPU (carry
#      .whl/ with pytest-xdist and execnet beside Liger-Kernel).
#   7  every other gpu-marked test, four workers.
#   8  on two GPUs (nvidia-h200-x2): the two gpu-marked tests that need them (NCCL sharding
#      of the harness, a tuning run split with NCCL), skipped by call 7 on one GPU.
#   9  the issue sweep's bf16 forward part through the harness (RMSNorm, LayerNorm,
#      add+RMSNorm, softmax and log-softmax forwards at the ten shapes), all at this session's
#      commit: most of its rows in the tally were timed in sessions 16-25.
#  10  the issue sweep's bf16 softmax and log-softmax backward rows through the harness at one
#      commit, each piece capped at 110 s (the session's last device time).
# Usage: bash scripts/gpu/session32_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session32_calls.sh "$@"

case "$CALL" in
  1) timeout 120 python3 -m pytest -q -p no:cacheprovider -rfEs tests/ops/test_softmax_split_bwd.py \
       -k "long_rows_takes" > "$OUT/keep/gpu-tests-split-bwd-call1.txt" 2>&1
     echo "split backward test: exit $?: $(tail -n 1 "$OUT/keep/gpu-tests-split-bwd-call1.txt")"
     wide_sweep 400 register-rows register-rows-call1 ;;
  2) wide_sweep 200 short-softmax short-softmax-call2
     echo "rows-256 ran at 00f6bf1b: timed host-bound at 32768 x 256, removed" ;;
  3) echo "call 3 ran at 77d3440b; its sweep mode went with the kernel options it timed" >&2
     exit 2 ;;
  4) wide_sweep 400 longest-caps longest-caps-call4 ;;
  5) wide_sweep 400 short-ln-caps short-ln-caps-call5 ;;
  6) gpu_tests ops-call6 570 tests/ops -n 6 ;;
  7) gpu_tests rest-call7 570 tests --ignore=tests/ops -n 4 ;;
  8) gpu_tests two-gpus-call8 300 tests/harness/test_harness_commands.py \
       tests/tune/test_distributed.py -k "nccl or distributed or shard" ;;
  9) sweep_part bf16 fwd
     keep_report fwd-bf16 fwd-bf16 ;;
  10) SUITE_PIECES="softmax.bwd:110 log_softmax.bwd:110" sweep_part bf16 smbwd
      keep_report smbwd-bf16 smbwd-bf16 ;;
  *) echo "CALL: expected 1 to 10, got $CALL" >&2; exit 2 ;;
esac
finish_call one
