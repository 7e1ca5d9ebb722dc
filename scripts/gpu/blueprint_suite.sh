#!/usr/bin/env bash
# The blueprint speed suite (issue 6) in bounded pieces (scripts/gpu/bench_parts.sh): one
# `warpforge bench` call per blueprint problem, bf16 unless SUITE_DTYPE says otherwise.
# torch.compile(mode="max-autotune-no-cudagraphs") baselines take long to build, so a slow one
# costs only its own row. Running it again with the same OUT_DIR resumes.
# The copy and matmul ceilings are measured (the first piece; later ones read the per-device
# cache) so each row has its share of one; SUITE_CEILINGS=0 leaves them out.
# Usage: bash scripts/gpu/blueprint_suite.sh OUT_DIR    -> OUT_DIR/blueprint.json (merged)
set -uo pipefail
OUT="${1:-${OUT:-blueprint-suite-out}}"
# problem : own time limit (s). Matmul blueprints autotune GEMMs under max-autotune.
SUITE_DTYPE="${SUITE_DTYPE:-bf16}" SUITE_CEILINGS="${SUITE_CEILINGS:-1}" exec bash "$(dirname "$0")/bench_parts.sh" "$OUT" blueprint \
  "blueprint.scaled_masked_softmax:60" \
  "blueprint.mixed_precision_chain:60" \
  "blueprint.causal_attention_scores:90" \
  "blueprint.layernorm_linear_gelu:100" \
  "blueprint.mlp_block:100" \
  "blueprint.residual_rmsnorm_swiglu.bwd:120" \
  "blueprint.bias_gelu:60" \
  "blueprint.reduction_chain:60" \
  "blueprint.residual_rmsnorm_swiglu:60"
