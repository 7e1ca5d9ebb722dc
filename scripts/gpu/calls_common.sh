# Shared by the sessions' device-call scripts (scripts/gpu/session*_calls.sh): each sets OUT
# (with OUT/keep made) and sources this file.
gpu_tests() {  # NAME LIMIT_S PATH...: pytest -m gpu into OUT/keep/gpu-tests-NAME.txt
  local name="$1" limit="$2" t0=$SECONDS
  shift 2
  timeout "$limit" python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs "$@" \
    > "$OUT/keep/gpu-tests-$name.txt" 2>&1
  echo "$name gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/gpu-tests-$name.txt")"
  grep -E "^FAILED|^ERROR|^E " "$OUT/keep/gpu-tests-$name.txt" | head -8
}

sweep_part() {  # DTYPE PART [SHAPE]: a part of the issue's sweep in what time is left
  SUITE_DTYPE="$1" SUITE_SHAPE="${3:-}" SUITE_BUDGET_S=$((575 - SECONDS)) \
    bash scripts/gpu/issue_sweep.sh "$OUT/$2-$1" "$2" > "$OUT/$2-$1.log" 2>&1
  cp "$OUT/$2-$1/keep/"* "$OUT/keep/" 2>/dev/null
  cp "$OUT/$2-$1/logs.tgz" "$OUT/keep/logs-$2-$1.tgz" 2>/dev/null
  grep -E "^\| [a-z_]+\.|rows|exit" "$OUT/$2-$1.log" | head -60
}
