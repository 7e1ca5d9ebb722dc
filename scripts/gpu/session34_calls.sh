#!/usr/bin/env bash
# The device calls planned in the thirty-third session for the next one, on the H200
# (nvidia-h200). Carry .whl/ (Liger-Kernel; pytest-xdist and execnet for the test workers);
# set WARPFORGE_GIT_COMMIT to this machine's `git rev-parse HEAD` as a literal hash
# (calls_common.sh says why). Each call comes back as OUT/call-N.tgz; results go under
# benchmarks/results/session34-h200-<date>/.
# The thirty-third session re-timed the issue sweep on one version of the kernel code (all but
# fused linear cross-entropy's two rows), added GPU tests (run there) and, after its device time
# was spent, gave `rope` gradients for learned cos/sin tables (CPU-checked only):
#   1  every gpu-marked test of tests/ops (the new ones included), then the tests of the
#      learned tables and the gradchecks, which are not gpu-marked (they take the `device`
#      fixture: CUDA there).
#   2  every other gpu-marked test (the two that need two GPUs skip; run them on
#      nvidia-h200-x2 with `-k nccl` if the tree's tuning code changed).
#   3  align of any number of streams in one launch (the thirty-fourth session's change): compile
#      time, errors and time by stream count (benchmarks/align_stream_count.py), then both
#      align problems through the harness (the issue's three streams and eight).
#   4  fused linear cross-entropy through the harness (its two rows are the tally's last ones
#      timed on older code).
#   5  the align GPU tests again (sixteen streams now, some repeating a kind) and the stream-count
#      check up to 16 streams, whose report call 3 lost when 64 streams outlasted its limit (the
#      script now writes its report after every count).
#   6  after streams of one kind came to share one tile of the kernel: the align GPU tests, the
#      stream count up to 64 streams (seven kinds) and both align problems through the harness.
#   7  align_stream_count.py timed by the harness's interleaved timing, with align8.fwd's
#      streams, against a tile per stream (call 6 found align8.fwd 12% slower than in call 3).
#   8  with a tile per stream again up to OWN_TILE_MAX_STREAMS (16) streams, a tile per kind
#      above: the align GPU tests (both ways) and both align problems through the harness.
# The tracked tree outgrew the device tool's 64 MB transfer: run the calls from a sparse checkout
# without benchmarks/results/ (git sparse-checkout set --no-cone '/*' '!/benchmarks/results/';
# afterwards git sparse-checkout disable), which no call reads.
# Usage: bash scripts/gpu/session34_calls.sh OUT CALL
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
start_call session34_calls.sh "$@"

case "$CALL" in
  1) gpu_tests ops-call1 330 tests/ops -n 6
     timeout 120 python3 -m pytest -q -p no:cacheprovider -rfEs tests/ops/test_gradcheck.py \
       tests/ops/test_rope.py -k "gradcheck or learned" -n 4 \
       > "$OUT/keep/gpu-tests-gradcheck-learned-call1.txt" 2>&1
     echo "gradcheck/learned tables: exit $?: $(tail -1 "$OUT/keep/gpu-tests-gradcheck-learned-call1.txt")"
     # does this Triton compile kernels taking tuples of tensors, ints and constexprs (what an
     # align launch of any number of streams needs)?
     # (from a file: Triton reads a kernel's source back from its file, not from standard input)
     cat > "$OUT/tuple_check.py" <<'PY'
import torch, triton, triton.language as tl

@triton.jit
def _part(pid, first, x_ptr, o_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    local = pid - first
    if (local >= 0) & (local < tl.cdiv(n, BLOCK)):
        offs = local * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
        tl.store(o_ptr + offs, (x * SCALE).to(o_ptr.dtype.element_ty), mask=offs < n)

@triton.jit
def parts(xs, outs, ns, firsts, SCALES: tl.constexpr, BLOCKS: tl.constexpr):
    pid = tl.program_id(0)
    for i in tl.static_range(len(xs)):
        _part(pid, firsts[i], xs[i], outs[i], ns[i], SCALES[i], BLOCKS[i])

for count in (1, 3, 9):
    xs = tuple((torch.randn(37 * i + 5, device="cuda")).to(torch.bfloat16 if i % 2 else torch.float32) for i in range(count))
    outs = tuple(torch.full_like(x, float("nan")) for x in xs)
    blocks = tuple(16 << (i % 3) for i in range(count))
    firsts, first = [], 0
    for x, b in zip(xs, blocks):
        firsts.append(first)
        first += -(-x.numel() // b)
    parts[(first,)](xs, outs, tuple(x.numel() for x in xs), tuple(firsts), SCALES=tuple(range(2, 2 + count)), BLOCKS=blocks)
    for i, (x, o) in enumerate(zip(xs, outs)):
        assert torch.equal(o, (x.float() * (2 + i)).to(x.dtype)), (count, i)
print("tuple arguments ok on triton", triton.__version__)
PY
     timeout 120 python3 "$OUT/tuple_check.py" > "$OUT/keep/tuple-arguments-call1.txt" 2>&1
     echo "tuple arguments: exit $?: $(tail -1 "$OUT/keep/tuple-arguments-call1.txt")" ;;
  2) gpu_tests rest-call2 400 tests --ignore=tests/ops -n 4
     # alone: beside five other workers' tests it ran out of memory in call 1
     gpu_tests flce-wide-call2 150 tests/ops/test_fused_linear_cross_entropy.py -k beyond_2_pow_31 ;;
  3) align_stream_count 2,4,8,16,32,64
     align_bench ;;
  4) SUITE_PIECES="fused_linear_cross_entropy.*:400" sweep_part bf16 rope
     keep_report rope-bf16 flce-bf16 ;;
  5) gpu_tests align-call5 200 tests/robotics/test_robotics_gpu.py -k "align or streams"
     align_stream_count 2,4,8,16 ;;
  6) gpu_tests align-call6 200 tests/robotics/test_robotics_gpu.py -k "align or streams"
     align_stream_count 2,4,8,16,32,64
     align_bench ;;
  7) align_stream_count 2,4,8,16,32,64 ;;
  8) gpu_tests align-call8 200 tests/robotics/test_robotics_gpu.py -k "align or streams"
     align_bench ;;
  *) echo "CALL: expected 1 to 8, got $CALL" >&2; exit 2 ;;
esac
finish_call one
