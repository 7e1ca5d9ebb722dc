# Shared by the sessions' device-call scripts (scripts/gpu/session*_calls.sh): each sources this
# file, then sets OUT and CALL with start_call (older ones set OUT, with OUT/keep made, by hand)
# and ends with finish_call. Set WARPFORGE_GIT_COMMIT to this machine's `git rev-parse HEAD`, a
# literal hash in the call's command: the device copy's .git can stand at an older commit than
# the files it received (session18-h200-2026-11-28/PROVENANCE.md); reports also record
# source_sha256, which scripts/report_commit.py matches to a commit.
gpu_tests() {  # NAME LIMIT_S PATH...: pytest -m gpu into OUT/keep/gpu-tests-NAME.txt
  local name="$1" limit="$2" t0=$SECONDS
  shift 2
  timeout "$limit" python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs "$@" \
    > "$OUT/keep/gpu-tests-$name.txt" 2>&1
  echo "$name gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/gpu-tests-$name.txt")"
  grep -E "^FAILED|^ERROR|^E " "$OUT/keep/gpu-tests-$name.txt" | head -8
}

normfwd_sweep() {  # LIMIT_S NAME SHAPES CANDIDATES: benchmarks/norm_split_fwd.py sweep of the
  # named candidates at SHAPES ("bf16:MxN,...") into OUT/keep/NAME.txt and .json, its table printed
  timeout "$1" python3 benchmarks/norm_split_fwd.py sweep "$OUT/keep/$2" "$3" "$4" \
    > "$OUT/$2.log" 2>&1
  echo "norm fwd sweep $2: exit $?"; cut -c1-150 "$OUT/keep/$2.txt"
}

wide_sweep() {  # LIMIT_S MODE NAME: benchmarks/wide_rows_sweep.py MODE into OUT/keep/NAME.txt
  # and .json in LIMIT_S seconds, its table printed
  timeout "$1" python3 benchmarks/wide_rows_sweep.py "$2" "$OUT/keep/$3"
  echo "wide_rows_sweep.py $2: exit $?"
  cat "$OUT/keep/$3.txt"
}

sass_dump() {  # TRITON_CACHE DEST 'GLOB|GLOB...': cuobjdump -sass of the matching cubins into DEST
  local cache="$1" dest="$2" pattern="$3"
  mkdir -p "$dest"
  find "$cache" -name '*.cubin' 2>/dev/null | while read -r f; do
    local base
    base=$(basename "$f" .cubin)
    # shellcheck disable=SC2053  # the pattern is a glob on purpose
    if [[ "$base" == @($pattern) ]]; then
      timeout 20 cuobjdump -sass "$f" > "$dest/$base.$(basename "$(dirname "$f")" | cut -c1-8).sass" 2>&1
    fi
  done
}

norm_grid() {  # NAME DTYPES KERNELS SHAPES [WALL_S]: exhaustive tuning (tune_norm_grid.sh) in
  # WALL_S seconds or what time is left; OUT/keep/tune-NAME-shipped.json and tune-NAME-trials.json
  GRID_SHAPES="$4" GRID_DTYPES="$2" GRID_KERNELS="$3" GRID_MAX_WALL="${5:-$((540 - SECONDS))}" \
    bash "$(dirname "${BASH_SOURCE[0]}")/tune_norm_grid.sh" "$OUT/grid-$1" > "$OUT/grid-$1.log" 2>&1
  cat "$OUT/grid-$1/summary.txt"
  cp "$OUT/grid-$1/shipped-grid.json" "$OUT/keep/tune-$1-shipped.json"
  cp "$OUT/grid-$1/trials-grid.json" "$OUT/keep/tune-$1-trials.json"
}

SHORT_ROWS="M=16384,N=4096 M=8192,N=8192 M=16384,N=2048 M=32768,N=1024 M=4096,N=16384 M=32768,N=256"
# the issue's sweep rows of at most 16384 columns (the row kernels' tuned launches)

short_rows_tuned() {  # TUNABLE PART REPORT PIECES WALL_S [DTYPES]: TUNABLE tuned exhaustively
  # at SHORT_ROWS in DTYPES ("bf16 fp32" unless given; norm_grid, WALL_S), merged into this
  # tree's H200 shipped table (a copy in OUT/keep/shipped-merged-callCALL.json), then the issue
  # sweep's PART with PIECES at those rows through the harness on it:
  # OUT/keep/REPORT-DTYPE-callCALL.json and .png
  local grid="${1//./}" dtypes="${6:-bf16 fp32}" dtype shipped=src/warpforge/tune/shipped/nvidia-h200-sm_90.json
  local grid_dtypes="${dtypes//bf16/bfloat16}"
  norm_grid "$grid" "${grid_dtypes//fp32/float32}" "$1" "$SHORT_ROWS" "$5"
  python3 scripts/tune_merge.py shipped "$shipped" "$shipped" "$OUT/keep/tune-$grid-shipped.json"
  cp "$shipped" "$OUT/keep/shipped-merged-call$CALL.json"
  for dtype in $dtypes; do
    SUITE_PIECES="$4" sweep_part "$dtype" "$2" "$SHORT_ROWS"
    keep_report "$2-$dtype" "$3-$dtype"
  done
}

normfwd_fp32_grid() {  # exhaustive tuning of the float32 norm forwards at the issue's rows
  norm_grid normfwd-fp32 float32 "rms_norm.fwd layer_norm.fwd add_rms_norm.fwd" "$SHORT_ROWS"
}

compiler_run() {  # NAME LIMIT_S ARGS...: benchmarks/compiler_bench.py --name NAME ARGS into OUT/keep
  local name="$1" limit="$2" t0=$SECONDS
  shift 2
  timeout "$limit" python3 benchmarks/compiler_bench.py --out "$OUT/compiler" --name "$name" \
    "$@" > "$OUT/compiler.log" 2>&1
  echo "compiler bench: exit $? in $((SECONDS - t0)) s"; tail -5 "$OUT/compiler.log"
  cp "$OUT/compiler/$name.json" "$OUT/keep/" 2>/dev/null
}

blueprint_tune() {  # BUDGET_S ENTRIES PROBLEMS: gemm_tune_bench.sh with these kernels/problems;
  # OUT/keep/blueprint-tuned-callCALL.json (harness) and shipped-tuned-callCALL.json
  GEMM_TUNE_ENTRIES="$2" GEMM_BENCH="$3" timeout $((570 - SECONDS)) bash scripts/gpu/gemm_tune_bench.sh \
    "$OUT/bp" "$1" > "$OUT/bp.log" 2>&1
  cat "$OUT/bp/summary.txt"
  cp "$OUT/bp/blueprint-gemm.json" "$OUT/keep/blueprint-tuned-call$CALL.json" 2>/dev/null
  cp "$OUT/bp/shipped-tuned.json" "$OUT/keep/shipped-tuned-call$CALL.json" 2>/dev/null
  python3 scripts/results_table.py "$OUT/bp/blueprint-gemm.json" 2>/dev/null | tail -12
}

robotics_large() {  # issue 5's large resample shapes: search, tile and prefetch launches
  # (ROBOTICS_BUDGET_S: the sweep's budget, 480 s unless set; the call stops 80 s after it)
  local t0=$SECONDS budget="${ROBOTICS_BUDGET_S:-480}"
  timeout $((budget + 80)) python3 benchmarks/robotics_sweep.py --out "$OUT/robotics" --budget-s "$budget" \
    --stages search,tile,prefetch --only "fwd.bf16 B=64 S=4096,fwd.fp32 B=1024" \
    > "$OUT/robotics.log" 2>&1
  echo "robotics sweep: exit $? in $((SECONDS - t0)) s"; tail -60 "$OUT/robotics.log"
  cp "$OUT/robotics/robotics-sweep.json" "$OUT/keep/" 2>/dev/null
}

sweep_part() {  # DTYPE PART [SHAPE]: a part of the issue's sweep in what time is left
  SUITE_DTYPE="$1" SUITE_SHAPE="${3:-}" SUITE_BUDGET_S=$((575 - SECONDS)) \
    bash scripts/gpu/issue_sweep.sh "$OUT/$2-$1" "$2" > "$OUT/$2-$1.log" 2>&1
  cp "$OUT/$2-$1/keep/"* "$OUT/keep/" 2>/dev/null
  cp "$OUT/$2-$1/logs.tgz" "$OUT/keep/logs-$2-$1.tgz" 2>/dev/null
  grep -E "^\| [a-z_]+\.|rows|exit" "$OUT/$2-$1.log" | head -60
}

keep_report() {  # FROM NAME: sweep_part's OUT/keep/FROM.json and .png as NAME-callCALL.*
  mv "$OUT/keep/$1.json" "$OUT/keep/$2-call$CALL.json" 2>/dev/null
  mv "$OUT/keep/$1.png" "$OUT/keep/$2-call$CALL.png" 2>/dev/null
}

parity_cases() {  # NAME LIMIT_S ARGS...: benchmarks/parity_sweep.py ARGS in LIMIT_S seconds,
  # its table in OUT/keep/parity-NAME.txt (printed) and its report in parity-NAME.json
  local name="$1" limit="$2" t0=$SECONDS
  shift 2
  timeout "$limit" python3 benchmarks/parity_sweep.py --out "$OUT/ps-$name" --max-time 1.0 "$@" \
    > "$OUT/keep/parity-$name.txt" 2>&1
  echo "parity sweep: exit $? in $((SECONDS - t0)) s"
  cp "$OUT/ps-$name/parity_sweep.json" "$OUT/keep/parity-$name.json" 2>/dev/null
  cat "$OUT/keep/parity-$name.txt"
}

blueprint_suite() {  # NAME GLOB:LIMIT...: bench_parts.sh with the ceilings, bf16, into
  # OUT/bp-NAME (its own folder: bench_parts.sh resumes parts it finds there) and OUT/keep
  local name="$1"
  shift
  SUITE_BUDGET_S=$((560 - SECONDS)) SUITE_CEILINGS=1 SUITE_DTYPE=bf16 \
    bash scripts/gpu/bench_parts.sh "$OUT/bp-$name" "$name" "$@" > "$OUT/bp-$name.log" 2>&1
  cat "$OUT/bp-$name/summary.txt"; cp "$OUT/bp-$name/$name.json" "$OUT/keep/" 2>/dev/null
  python3 scripts/results_table.py "$OUT/keep/$name.json"
}

start_call() {  # SCRIPT OUT CALL: sets OUT and CALL, makes OUT/keep, puts src/ on PYTHONPATH
  OUT="${2:?usage: $1 OUT CALL}"
  CALL="${3:?usage: $1 OUT CALL}"
  mkdir -p "$OUT/keep"
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
}

finish_call() {  # [one]: the logs into OUT/keep/logs.tgz and the rest of OUT removed; with
  # "one", OUT/keep itself packed as OUT/call-CALL.tgz (a call brings back only a few files)
  tar -czf "$OUT/keep/logs.tgz" -C "$OUT" --exclude=keep --exclude='*cache*' . 2>/dev/null
  find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep -exec rm -rf {} +
  if [ "${1:-}" = one ]; then
    tar -czf "$OUT/call-$CALL.tgz" -C "$OUT" keep && rm -rf "$OUT/keep"
  fi
}

align_stream_count() {  # COUNTS [PROBLEMS]: benchmarks/align_stream_count.py into
  # OUT/keep/*-callCALL.* (ALIGN_GROUP_ROWS: its --group-rows)
  local t0=$SECONDS
  timeout 300 python3 benchmarks/align_stream_count.py --out "$OUT/count" --counts "$1" \
    --problems "${2:-align8.fwd}" --group-rows "${ALIGN_GROUP_ROWS:-}" \
    > "$OUT/keep/align-stream-count-call$CALL.txt" 2>&1
  echo "align stream count: exit $? in $((SECONDS - t0)) s"; cat "$OUT/keep/align-stream-count-call$CALL.txt"
  cp "$OUT/count/align-stream-count.json" "$OUT/keep/align-stream-count-call$CALL.json" 2>/dev/null
}

align_bench() {  # both align problems through the harness into OUT/keep/align-callCALL.json
  local t0=$SECONDS
  timeout $((570 - SECONDS)) python3 -m warpforge bench --problem 'align*' \
    --out "$OUT/keep/align-call$CALL.json" > "$OUT/align-bench.log" 2>&1
  echo "align bench: exit $? in $((SECONDS - t0)) s"; tail -14 "$OUT/align-bench.log"
}

ce_meeting_sweep() {  # LIMIT_S SHAPES ONLY: benchmarks/ce_split_meeting_sweep.py (3 passes) at
  # SHAPES ("4096x50257:bf16,...") over the contenders ONLY into OUT/keep/*-callCALL.*, printed
  timeout "$1" python3 benchmarks/ce_split_meeting_sweep.py --out "$OUT/ce" --repeat 3 \
    --shapes "$2" --only "$3" > "$OUT/ce.log" 2>&1
  echo "ce sweep: exit $?"
  for f in "$OUT"/ce/*; do cp "$f" "$OUT/keep/$(basename "${f%.*}")-call$CALL.${f##*.}"; done
  grep -E "^M=|^ *M=" "$OUT"/ce/*.txt | head -40
}

sweep_bench() {  # LIMIT_S REPORT PROBLEMS DTYPE [ARGS...]: `warpforge bench --sweep` of PROBLEMS in
  # DTYPE (ARGS: --shape filters) into OUT/keep/REPORT-callCALL.json, its rows printed
  local limit="$1" report="$2" problems="$3" dtype="$4"
  shift 4
  timeout "$limit" python3 -m warpforge bench --problem "$problems" --dtype "$dtype" --sweep \
    --max-time 1 "$@" --out "$OUT/keep/$report-call$CALL.json" > "$OUT/bench.log" 2>&1
  echo "bench $problems $dtype: exit $?"; grep -E "^│ [a-z_]+\." "$OUT/bench.log"
}
