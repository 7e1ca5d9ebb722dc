#!/usr/bin/env bash
# Issue 4's fused ops through the harness in bounded pieces (scripts/gpu/bench_parts.sh), every
# dtype of each problem, against eager torch, torch.compile and Liger-Kernel (carry .whl).
# Two calls of at most 10 minutes cover it: `ops_suite.sh OUT norms` then `ops_suite.sh OUT rest`
# (same OUT_DIR; each writes its parts, the second merges all of them into OUT_DIR/ops.json).
set -uo pipefail
OUT="${1:?usage: ops_suite.sh OUT_DIR norms|rest|all}"
PART="${2:-all}"
NORMS=("rms_norm.*:120" "add_rms_norm.*:120" "layer_norm.*:120" "softmax.*:120" "log_softmax.*:90")
REST=("cross_entropy.*:200" "fused_linear_cross_entropy.*:240" "swiglu.*:60" "geglu.*:60"
      "rope.*:60")
case "$PART" in
  norms) PIECES=("${NORMS[@]}") ;;
  rest) PIECES=("${REST[@]}") ;;
  all) PIECES=("${NORMS[@]}" "${REST[@]}") ;;
  *) echo "second argument: expected norms, rest or all, got $PART" >&2; exit 2 ;;
esac
# the copy ceiling is measured once (cached under OUT_DIR/cache) and used by every piece
SUITE_CEILINGS="${SUITE_CEILINGS:-1}" exec bash "$(dirname "$0")/bench_parts.sh" "$OUT" ops "${PIECES[@]}"
