#!/usr/bin/env bash
# Twelfth session, fourth call: the cross-entropy GPU tests with the float32 aligned split on 4
# warps, then the float32 cross-entropy part of the issue's sweep (never re-timed against
# static torch.compile baselines before).
set -uo pipefail
OUT="${1:?usage: session12_call4.sh OUT}"
mkdir -p "$OUT/keep"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs -x tests/ops/test_cross_entropy.py \
  > "$OUT/keep/gpu-tests-ce.txt" 2>&1
echo "ce gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/gpu-tests-ce.txt")"
grep -E "^FAILED|^ERROR|^E " "$OUT/keep/gpu-tests-ce.txt" | head -8
SUITE_DTYPE=fp32 SUITE_BUDGET_S=$((575 - SECONDS)) bash scripts/gpu/issue_sweep.sh "$OUT/ce" ce \
  > "$OUT/ce.log" 2>&1
cp "$OUT/ce/keep/"* "$OUT/keep/" 2>/dev/null
grep -E "cross_entropy|rows|exit" "$OUT/ce.log" | head -24
tar -czf "$OUT/keep/logs.tgz" -C "$OUT" --exclude=keep --exclude='*cache*' . 2>/dev/null
find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep -exec rm -rf {} +
