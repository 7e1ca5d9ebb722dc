#!/usr/bin/env bash
# Twelfth session, first call: the GPU tests of the tree merged in the eleventh session (never
# run on the GPU) with the aligned-slices cross-entropy backward merged in, then the bf16
# cross-entropy rows at 4096 x 50257 twice through the harness: the aligned-slices backward off
# (WARPFORGE_CE_ALIGNED_BWD=0, the row kernel) and on.
set -uo pipefail
OUT="${1:?usage: session12_call1.sh OUT}"
mkdir -p "$OUT/keep"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs -x \
  tests/ops/test_cross_entropy.py tests/ops/test_lean_kernels.py tests/ops/test_wide_rows.py \
  tests/ops/test_norm_bwd_narrow.py tests/ops/test_norm_split_bwd.py \
  tests/ops/test_norm_split_fwd.py tests/ops/test_row_kernels_compile.py \
  > "$OUT/keep/gpu-tests.txt" 2>&1
echo "gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/gpu-tests.txt")"
for mode in 0 1; do
  t0=$SECONDS
  WARPFORGE_CE_ALIGNED_BWD=$mode SUITE_DTYPE=bf16 SUITE_SHAPE="M=4096,V=50257" SUITE_BUDGET_S=150 \
    bash scripts/gpu/issue_sweep.sh "$OUT/ce$mode" ce > "$OUT/keep/ce-aligned-bwd-$mode.txt" 2>&1
  mv "$OUT/ce$mode/keep/ce-bf16.json" "$OUT/keep/ce-bf16-aligned-bwd-$mode.json"
  mv "$OUT/ce$mode/logs.tgz" "$OUT/keep/ce-logs-$mode.tgz"
  echo "ce aligned bwd=$mode: $((SECONDS - t0)) s"
  tail -12 "$OUT/keep/ce-aligned-bwd-$mode.txt"
done
