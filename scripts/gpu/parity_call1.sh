#!/usr/bin/env bash
# Call 1 of the parity helper (issue #4, rows at 0.98-0.99x torch.compile): fill the compile
# caches in 4 parallel warm-up processes, then time everything in one process
# (benchmarks/parity_sweep.py), and pack torch.compile's generated code (Inductor .py and
# .best_config), the PTX of both sides and the SASS of the kernels compared.
# Usage (repo root, PYTHONPATH with src and Liger): bash scripts/gpu/parity_call1.sh OUT
set -uo pipefail
source "$(dirname "$0")/calls_common.sh"
O="${1:?OUT}"
W="$O/w"
mkdir -p "$W"
export TORCHINDUCTOR_CACHE_DIR="$W/inductor" TRITON_CACHE_DIR="$W/triton" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$O/gpu.txt" 2>&1
t0=$SECONDS
i=0
for group in "swiglu geglu" "softmax" "rms_norm" "layer_norm cross_entropy"; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  timeout 100 python3 benchmarks/parity_sweep.py --warm --out "$W/warm$i" --only $group \
    > "$W/warm$i.log" 2>&1 &
done
wait
echo "warm-up: $((SECONDS - t0)) s" | tee -a "$O/summary.txt"
t1=$SECONDS
TORCH_LOGS=output_code timeout 200 python3 benchmarks/parity_sweep.py --out "$O" --max-time 1.0 \
  > "$O/sweep.txt" 2> "$W/sweep.err"
echo "sweep: exit $? in $((SECONDS - t1)) s" | tee -a "$O/summary.txt"
sass_dump "$TRITON_CACHE_DIR" "$W/sass" \
  '*swiglu_fwd*|*triton_poi*|*triton_per*|*triton_red*|*softmax_bwd*|*norm_fwd*|*cross_entropy_bwd*'
( cd "$W" && find . \( -name '*.py' -o -name '*.best_config' -o -name '*.ptx' -o -name '*.json' \
    -o -name '*.ttgir' -o -name '*.sass' -o -name '*.log' -o -name '*.err' \) -print0 \
  | tar czf "$O/dumps.tgz" --null -T - )
ls -la "$O" | tee -a "$O/summary.txt"
