#!/usr/bin/env bash
# The one-call GPU check. On the GPU machine, from the repository root:
#   bash scripts/gpu_check.sh [OUT_DIR] [STAGE ...]
# Stages (default: all): env tests bench kernelbench robotics compiler cache tune flce
# Runs from the tree (PYTHONPATH=src): nothing is installed except carried wheels in .whl/.
# Every stage writes its log and JSON under OUT_DIR/run/; at the end they are packed into
# OUT_DIR/gpu-check.tar.gz (the device tool returns at most 8 files) and summary lines printed.
set -uo pipefail

OUT_DIR="${1:-${OUT:-./gpu-out}}"
shift || true
STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(env tests bench kernelbench robotics compiler cache tune flce)
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

declare -A STATUS
run_stage() {  # name, command...
  local name="$1"; shift
  local start=$SECONDS
  echo "=== stage $name: $*"
  "$@" >"$RUN/$name.log" 2>&1
  local rc=$?
  STATUS[$name]="rc=$rc $((SECONDS - start))s"
  echo "=== stage $name: ${STATUS[$name]}"
  tail -n 25 "$RUN/$name.log"
}

for stage in "${STAGES[@]}"; do
  case "$stage" in
    env) run_stage env $PY -m warpforge env --json ;
         cp "$RUN/env.log" "$RUN/env.json" ;;
    tests) run_stage tests $PY -m pytest -m gpu -q -p no:cacheprovider -rs \
             --junitxml="$RUN/gpu-tests.xml" tests ;;
    bench) run_stage bench $PY -m warpforge bench --out "$RUN/bench.json" ;;
    kernelbench) run_stage kernelbench bash -c "$PY -m warpforge ceilings --json > '$RUN/ceilings.json' &&
           $PY -m warpforge suite benchmarks/kernelbench --out '$RUN/kernelbench-1.json' &&
           $PY -m warpforge suite benchmarks/kernelbench --out '$RUN/kernelbench-2.json' &&
           $PY -m warpforge roofline '$RUN/kernelbench-1.json' -o '$RUN/kernelbench-roofline.png'" ;;
    robotics) run_stage robotics $PY -m warpforge bench --problem 'robotics.*' --out "$RUN/robotics.json" ;;
    compiler) run_stage compiler $PY benchmarks/compiler_bench.py --out "$RUN" ;;
    cache) run_stage cache $PY benchmarks/cache_bench.py --out "$RUN" ;;
    tune) run_stage tune $PY benchmarks/tune_bench.py --out "$RUN" ;;
    flce) run_stage flce $PY benchmarks/flce_memory.py --out "$RUN" ;;
    *) echo "unknown stage: $stage" >&2 ;;
  esac
done

tar -czf "$OUT_DIR/gpu-check.tar.gz" -C "$RUN" . && rm -rf "$RUN"
echo "=== summary"
for stage in "${STAGES[@]}"; do echo "$stage: ${STATUS[$stage]:-not run}"; done
