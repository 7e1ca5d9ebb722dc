"""widebwd (session 11 helper): the WARPFORGE_NORM_BWD_NARROW table the kernel-alone sweep
(benchmarks/norm_bwd_narrow_sweep.py) supports for one dtype's rows (bfloat16 unless named),
printed as the variable's value.

Per op: the fastest candidate at 4096 x 32768 where it beats the default by more than 3%
(else the op keeps its kernels); its range starts at 16385 columns if it also beats the default
at 4096 x 16411, else at 32768; it reaches 65536 columns if it beats the default at 8192 x 65536
by more than 3%, else 65535.

    python scripts/gpu/widebwd_pick.py SWEEP.txt [bfloat16|float16|float32]
"""

from __future__ import annotations

import re
import sys

LINE = re.compile(r"^(\w+) (\d+)x(\d+) (\w+)\s+(.+?)\s+([\d.]+) us")
FAMILY = {"rms": "rms_norm", "add_rms": "add_rms_norm", "layer": "layer_norm"}
KERNEL = {"flags": "flags", "lag": "lag"}  # run 1 also timed "hold" (removed since)


ELEMENT_SIZE = {"bfloat16": 2, "float16": 2, "float32": 4}


def main(path: str, dtype: str = "bfloat16") -> None:
    size = ELEMENT_SIZE[dtype]
    times: dict[tuple[str, int, str], float] = {}
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines:
        m = LINE.match(line.strip())
        if m and m.group(1) == dtype:
            times[(m.group(4), int(m.group(3)), m.group(5))] = float(m.group(6))
    items = []
    for op, family in FAMILY.items():
        default = times.get((op, 32768, "default"))
        cands = {
            n: t for (o, N, n), t in times.items() if o == op and N == 32768 and n != "default"
        }
        if default is None or not cands:
            continue
        cands = {n: t for n, t in cands.items() if n.split()[0] in KERNEL}
        if not cands:
            continue
        name = min(cands, key=cands.get)
        if cands[name] > 0.97 * default:
            print(
                f"# {op}: default kept ({default} us, best {name} {cands[name]} us)",
                file=sys.stderr,
            )
            continue
        narrow = times.get((op, 16411, name), 1e30) < times.get((op, 16411, "default"), 0.0)
        wide = times.get((op, 65536, name), 1e30) < 0.97 * times.get((op, 65536, "default"), 0.0)
        kernel, launch, per_sm, pf = name.split()  # "lag 2048/8w x2 pf=0"
        block, warps = launch.rstrip("w").split("/")
        per_sm = per_sm.lstrip("x")
        prefetch = pf.split("=")[1]
        items.append(
            f"{family}:{size}={KERNEL[kernel]}/{block}/{warps}/{per_sm}/{prefetch}/"
            f"{16385 if narrow else 32768}/{65536 if wide else 65535}"
        )
        print(
            f"# {op}: {name} {cands[name]} us against default {default} us; "
            f"16411 {narrow}, 65536 {wide}",
            file=sys.stderr,
        )
    print(";".join(items) or "none")


if __name__ == "__main__":
    main(*sys.argv[1:3])
