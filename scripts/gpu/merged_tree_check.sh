#!/usr/bin/env bash
# One call on the GPU after merging helpers' branches: the GPU tests of the merged tree, the
# blueprint compiler's warm first result, then harness pieces (scripts/gpu/bench_parts.sh), each
# step under its own time limit so one slow step cannot eat the others.
#
# Usage: bash scripts/gpu/merged_tree_check.sh OUT_DIR [GLOB:LIMIT_S ...]
# Environment: TESTS (default "tests/ops tests/robotics tests/blueprint tests/nn
# tests/test_dispatch.py"), TESTS_LIMIT_S (300), COMPILER_LIMIT_S (150; 0 skips it),
# SUITE_DTYPE / SUITE_CEILINGS / SUITE_BUDGET_S / SUITE_MAX_TIME as bench_parts.sh takes them.
# Writes OUT_DIR/gpu-tests.txt, OUT_DIR/compiler/compiler-warm.json, OUT_DIR/bench/bench.json
# and OUT_DIR/logs.tgz (every log), and prints a short summary last.
set -uo pipefail
OUT="${1:?usage: merged_tree_check.sh OUT_DIR [GLOB:LIMIT_S ...]}"
shift
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export WARPFORGE_CACHE_DIR="${WARPFORGE_CACHE_DIR:-/tmp/merged-check-cache}"
PY="${PYTHON:-python3}"
SUMMARY=()
start=$SECONDS

read -r -a test_paths <<< "${TESTS:-tests/ops tests/robotics tests/blueprint tests/nn tests/test_dispatch.py}"
t0=$SECONDS
timeout "${TESTS_LIMIT_S:-300}" "$PY" -m pytest -m gpu -q -p no:cacheprovider -rfEs \
  "${test_paths[@]}" > "$OUT/gpu-tests.txt" 2>&1
SUMMARY+=("gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu-tests.txt")")

if [ "${COMPILER_LIMIT_S:-150}" -gt 0 ]; then
  t0=$SECONDS
  timeout "${COMPILER_LIMIT_S:-150}" "$PY" benchmarks/compiler_bench.py --out "$OUT/compiler" \
    --name compiler-warm --problems bias_gelu layernorm_linear_gelu --skip-torch-compile \
    --lookup-samples 5000 --replay-steps 1000 > "$OUT/compiler.log" 2>&1
  SUMMARY+=("compiler warm start: exit $? in $((SECONDS - t0)) s")
fi

if [ "$#" -gt 0 ]; then
  t0=$SECONDS
  bash "$(dirname "$0")/bench_parts.sh" "$OUT/bench" bench "$@"
  SUMMARY+=("harness: $((SECONDS - t0)) s")
fi

tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude=logs.tgz --exclude=cache --exclude='*-cache' \
  --exclude=pycache . 2>/dev/null
echo "=== summary ($((SECONDS - start)) s)"
printf '%s\n' "${SUMMARY[@]}"
[ -s "$OUT/compiler/compiler-warm.json" ] && "$PY" - "$OUT/compiler/compiler-warm.json" <<'EOF'
import json, sys
for b in json.load(open(sys.argv[1]))["blueprints"]:
    runs = [round(r["seconds"] * 1e3, 1) for r in b.get("warm_first_result", [])]
    print(b["problem"], "warm first result ms:", runs, "median", b.get("warm_first_result_ms_median"))
EOF
[ -s "$OUT/bench/bench.json" ] && "$PY" scripts/results_table.py "$OUT/bench/bench.json"
exit 0
