"""Pick the whole-row launches from a ``wide_rows_sweep.py`` result and write them into the
dispatch tables (``norm.NORM_FWD_WIDE_LAUNCHES``, ``softmax_ops.FWD_WIDE_LAUNCHES`` /
``BWD_WIDE_LAUNCHES``) of the source tree given, so the harness then runs what the sweep chose.

    python benchmarks/wide_rows_pick.py SWEEP.json SRC_DIR     # prints the tables it wrote

At 4096 x 32768 (bf16 for 2-byte, float32 for 4-byte elements) a kernel takes its fastest
whole-row launch only where that is more than 1% faster than the current path (the split or
chunked kernel) and its output agrees with it; softmax and log-softmax share one launch (the
fastest by their summed times, each no slower than the current path).
"""

from __future__ import annotations

import json
import re
import sys

M, N = 4096, 32768
DTYPES = {"bfloat16": 2, "float32": 4}
TOL = {"bfloat16": 0.07, "float32": 1e-3}
FIELDS = {"16w": 16, "32w": 32}


def launch_source(label: str) -> str:
    """``"32w early stream"`` -> ``WideLaunch(32, early_w=True, stream=True)``."""
    words = label.split()
    args = [str(FIELDS[next(w for w in words if w in FIELDS)])]
    if "early" in words:
        args.append("early_w=True")
    if "stream" in words:
        args.append("stream=True")
    return f"WideLaunch({', '.join(args)})"


def times(rows, dtype, op):
    """label -> us of the verified rows of one op at (M, N)."""
    out = {}
    for r in rows:
        if (r["dtype"], r["M"], r["N"], r["op"]) != (dtype, M, N, op):
            continue
        if r["launch"] not in ("current", "liger") and r["max_abs_diff_vs_current"] > TOL[dtype]:
            continue
        out[r["launch"]] = r["us"]
    return out


def pick(rows, dtype, ops):
    """The launch label for these ops (summed), or None (keep the current path)."""
    per_op = [times(rows, dtype, op) for op in ops]
    if not all("current" in t for t in per_op):
        return None
    labels = set.intersection(*(set(t) for t in per_op)) - {"current", "liger"}
    if not labels:
        return None
    best = min(labels, key=lambda lab: sum(t[lab] for t in per_op))
    total = sum(t[best] for t in per_op)
    current = sum(t["current"] for t in per_op)
    if total < 0.99 * current and all(t[best] <= t["current"] for t in per_op):
        return best
    return None


def main(sweep: str, src: str) -> None:
    with open(sweep) as f:
        rows = json.load(f)["rows"]
    norm_entries, fwd_entries, bwd_entries = [], [], []
    for dtype, size in DTYPES.items():
        for op, kernel in (("rms", "rms_norm.fwd"), ("add_rms", "add_rms_norm.fwd"),
                           ("layer", "layer_norm.fwd")):  # fmt: skip
            if (label := pick(rows, dtype, [op])) is not None:
                norm_entries.append(f'    ({size}, "{kernel}"): {launch_source(label)},')
        if (label := pick(rows, dtype, ["softmax", "log_softmax"])) is not None:
            fwd_entries.append(f"{size}: {launch_source(label)}")
        if (label := pick(rows, dtype, ["softmax.bwd", "log_softmax.bwd"])) is not None:
            bwd_entries.append(f"{size}: {launch_source(label)}")

    path = f"{src}/warpforge/ops/norm.py"
    with open(path) as f:
        text = f.read()
    table = "NORM_FWD_WIDE_LAUNCHES: dict[tuple[int, str], WideLaunch] = {"
    new = table + ("\n" + "\n".join(norm_entries) + "\n}" if norm_entries else "}")
    text, n = re.subn(re.escape(table) + r".*?\n?\}", lambda _: new, text, count=1, flags=re.S)
    assert n == 1
    with open(path, "w") as f:
        f.write(text)
    print(new)

    path = f"{src}/warpforge/ops/softmax_ops.py"
    with open(path) as f:
        text = f.read()
    for name, entries in (("FWD_WIDE_LAUNCHES", fwd_entries), ("BWD_WIDE_LAUNCHES", bwd_entries)):
        line = f"{name}: dict[int, WideLaunch] = {{{', '.join(entries)}}}"
        text, n = re.subn(rf"^{name}: dict\[int, WideLaunch\] = \{{.*?\}}$", lambda _, line=line: line,
                          text, count=1, flags=re.M)  # fmt: skip
        assert n == 1, name
        print(line)
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
