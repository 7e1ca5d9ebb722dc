#!/usr/bin/env bash
# The one-call GPU check. On the GPU machine, from the repository root:
#   bash scripts/gpu_check.sh OUT_DIR [STAGE ...]
# Stages (default: all, in this order; each has its own time limit so one slow stage cannot eat
# the others): env tests harness ops robotics blueprint compiler cache tune flce
# Runs from the tree (PYTHONPATH=src): nothing is installed except carried wheels in .whl/.
# Each stage writes its log and JSON under OUT_DIR/run/; at the end they are packed into
# OUT_DIR/gpu-check.tar.gz (the device tool returns at most 8 files) and a summary is printed.
# Set WARPFORGE_GIT_COMMIT to the commit of the checkout when the tree has no .git.
set -uo pipefail

OUT_DIR="${1:-${OUT:-./gpu-out}}"
shift || true
STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(env tests harness ops robotics blueprint compiler cache tune flce)
RUN="$OUT_DIR/run"
mkdir -p "$RUN"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

export PYTHONUNBUFFERED=1
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
export WARPFORGE_CACHE_DIR="${WARPFORGE_CACHE_DIR:-/tmp/warpforge-gpu-cache}"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/wf-site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/wf-site"
fi
PY=python3
BENCH=("$PY" -m warpforge bench --max-time "${WARPFORGE_BENCH_MAX_TIME:-1}")
# WARPFORGE_BENCH_DTYPE=bf16 limits the built-in suites to one dtype (to fit a 10-minute call)
[ -n "${WARPFORGE_BENCH_DTYPE:-}" ] && BENCH+=(--dtype "$WARPFORGE_BENCH_DTYPE")

declare -A STATUS
run_stage() {  # name limit_s command...
  local name="$1" limit="$2"; shift 2
  local start=$SECONDS
  echo "=== stage $name (limit ${limit}s): $*"
  timeout "$limit" "$@" >"$RUN/$name.log" 2>&1
  local rc=$?
  STATUS[$name]="rc=$rc $((SECONDS - start))s"
  echo "=== stage $name: ${STATUS[$name]}"
  tail -n 30 "$RUN/$name.log"
}

for stage in "${STAGES[@]}"; do
  case "$stage" in
    env) run_stage env 60 "$PY" -m warpforge env --json && cp "$RUN/env.log" "$RUN/env.json" ;;
    tests) run_stage tests "${WARPFORGE_TESTS_LIMIT:-480}" "$PY" -m pytest -m gpu -q -p no:cacheprovider -rs --timeout 240 \
             -n 2 --dist loadfile --junitxml="$RUN/gpu-tests.xml" tests ;;
    harness) run_stage harness 540 bash scripts/gpu/harness_check.sh "$RUN/harness" ;;
    ops) SUITE_DTYPE="${WARPFORGE_BENCH_DTYPE:-}" run_stage ops 580 bash -c 'SUITE_BUDGET_S=560 bash scripts/gpu/ops_suite.sh "$1" all' _ "$RUN/ops" ;;
    robotics) run_stage robotics "${WARPFORGE_ROBOTICS_LIMIT:-400}" "${BENCH[@]}" --problem 'resample*,align*,voxelize*' \
                --out "$RUN/robotics.json" ;;
    blueprint) run_stage blueprint "${WARPFORGE_BLUEPRINT_LIMIT:-560}" bash scripts/gpu/blueprint_suite.sh "$RUN/blueprint" ;;
    compiler) run_stage compiler 540 "$PY" benchmarks/compiler_bench.py --out "$RUN" ;;
    cache) run_stage cache 120 "$PY" benchmarks/cache_bench.py --out "$RUN" ;;
    tune) run_stage tune 560 bash scripts/gpu/tune_check.sh "$RUN/tune" ;;
    flce) run_stage flce 300 "$PY" benchmarks/flce_memory.py --out "$RUN" ;;
    *) echo "unknown stage: $stage" >&2 ;;
  esac
done

tar -czf "$OUT_DIR/gpu-check-$(date +%H%M%S).tar.gz" -C "$RUN" . && rm -rf "$RUN"
echo "=== summary"
for stage in "${STAGES[@]}"; do echo "$stage: ${STATUS[$stage]:-not run}"; done
