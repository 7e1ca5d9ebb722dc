"""Benchmark-only launch override (not part of warpforge): with this folder first on
PYTHONPATH, every Python process started with ``WARPFORGE_BENCH_LAUNCHES`` set (JSON) swaps the
split-row launch tables before anything runs, so that a harness run (``bench_parts.sh``, whose
problems may run in child processes) measures a candidate default without editing the ops.

    {"ce_flag_words": [[block, warps, programs_per_sm, max_chunks], ...],
     "softmax": {"2": {"block": 8192, "num_warps": 4, "programs_per_sm": 4}}}

``ce_flag_words`` replaces ``cross_entropy.FLAG_WORDS_LAUNCHES``; ``softmax`` overrides, per
element size, the options the softmax forward's split plan takes (``split_launch`` or
``softmax_split_launch``, whichever ``softmax_ops`` has). Used by split4w (issue #4,
``benchmarks/results/split4w-2026-11-25-notes.md``)."""

import json
import os

_SPEC = os.environ.get("WARPFORGE_BENCH_LAUNCHES", "").strip()
if _SPEC:
    import importlib

    _config = json.loads(_SPEC)
    if _config.get("ce_flag_words"):
        _ce = importlib.import_module("warpforge.ops.cross_entropy")
        _ce.FLAG_WORDS_LAUNCHES = tuple(
            ({"block": b, "num_warps": w, "programs_per_sm": p}, most)
            for b, w, p, most in _config["ce_flag_words"]
        )
    if _config.get("softmax"):
        _sm = importlib.import_module("warpforge.ops.softmax_ops")
        _table = {int(size): options for size, options in _config["softmax"].items()}
        _name = "softmax_split_launch" if hasattr(_sm, "softmax_split_launch") else "split_launch"
        _original = getattr(_sm, _name)
        setattr(_sm, _name, lambda size: {**_original(size), **_table.get(size, {})})
    print(f"launch override applied: {_config}", file=__import__("sys").stderr)
