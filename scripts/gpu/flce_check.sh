#!/usr/bin/env bash
# Fused linear cross entropy on the GPU in one call: the ops GPU tests, the bf16 tolerance
# diagnosis over several gradient outputs, peak memory and time against the unfused path and
# Liger-Kernel (benchmarks/flce_memory.py), and the harness rows against torch.compile.
# Usage (repository root, Liger wheel in .whl/ optional): bash scripts/gpu/flce_check.sh OUT_DIR
# Set WARPFORGE_GIT_COMMIT when the tree has no .git.
set -uo pipefail
OUT="${1:?usage: flce_check.sh OUT_DIR}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/wf-site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/wf-site"
fi
step() {  # name limit_s command...
  local name="$1" limit="$2"; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
}
# FLCE_TESTS=all runs every ops GPU test (about 2 minutes) instead of the FLCE ones
TESTS=tests/ops/test_fused_linear_cross_entropy.py
[ "${FLCE_TESTS:-}" = all ] && TESTS=tests/ops
step gpu-tests 200 python3 -m pytest "$TESTS" -m gpu -q -p no:cacheprovider -rfE
step flce-bf16-tolerance-diag 60 python3 scripts/gpu/flce_bf16_tolerance_diag.py
step flce-accumulator-memory 60 python3 scripts/gpu/flce_accumulator_memory.py
step flce-memory 120 python3 benchmarks/flce_memory.py --out "$OUT"
# FLCE_DTYPES (default "bf16 fp32"): one dtype per piece, each builds its own torch.compile baseline
for dtype in ${FLCE_DTYPES:-bf16 fp32}; do
  SUITE_DTYPE=$dtype SUITE_BUDGET_S=290 step "flce-harness-$dtype" 300 \
    bash scripts/gpu/bench_parts.sh "/tmp/flce-$dtype" "flce-$dtype" 'fused_linear_cross_entropy.*:280'
  cp "/tmp/flce-$dtype/flce-$dtype.json" "$OUT/" 2>/dev/null
done
tail -n 3 "$OUT/gpu-tests.log"
cat "$OUT/flce-bf16-tolerance-diag.log" "$OUT/flce-accumulator-memory.log"
