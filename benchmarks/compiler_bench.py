"""Blueprint compiler benchmark: cold compile, warm-cache first result, hit lookup, hit ratio.

    PYTHONPATH=src python benchmarks/compiler_bench.py --out DIR

Measures, for each blueprint of the suite (``warpforge.blueprint.problems``):

* **cold compile**: a fresh process with empty WARPFORGE_CACHE_DIR, TRITON_CACHE_DIR and
  TORCHINDUCTOR_CACHE_DIR runs ``warpforge.compile`` and the first call to a synchronised
  result; another fresh process does the same with
  ``torch.compile(mode="max-autotune-no-cudagraphs")`` on the reference function. One more
  fresh process runs warpforge's cold compile under cProfile (``warpforge_cold_profile``: code
  generation, the launch-config lookup, Triton's compile stages and ``ptxas``, per kernel).
* **warm first result**: a new process reusing the cold run's caches. The headline is timed
  from calling ``warpforge.compile`` to the synchronised result, in a process where torch, the
  CUDA context with cuBLAS's handles (one small linear layer run, as any model's forward has),
  the inputs, triton and warpforge are already there (as in a training job); every earlier
  stage is timed too (``stages``: interpreter start, torch import, CUDA context, BLAS
  initialised, inputs, triton import, warpforge import, compile returned, first call
  returned, synchronised). One more run leaves triton unimported (its import falls inside the
  window), one leaves cuBLAS uninitialised (its start-up, paid by blueprints lowered to
  cuBLASLt, falls inside the window),
  one runs the window under cProfile (``profile_top_cumulative``: where the time went), and
  one starts with an empty ``TRITON_CACHE_DIR`` (the binaries come from the registry entry).
* **in-memory hit lookup**: in a process of its own, p50/p99 (pooled and per round) of the
  per-call hit path alone (``CompiledBlueprint.lookup``), of a whole call (lookup + output
  allocation + Triton launch, host time), of ``warpforge.compile`` on an already compiled
  blueprint, of the kernel registry's memory tier, of the same math in eager torch, and of an
  empty call (the timer floor).
* **hit ratio**: a replay of 10 000 training-step calls over the suite with new blueprint variants
  swapped in during the run.

On a machine without CUDA it runs the tiny CPU shapes under Triton's interpreter so it can be
tested anywhere; only GPU numbers mean anything. Writes ``DIR/compiler_bench.json`` (``--name``
changes the stem, so subsets run separately can share a directory).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
TARGETS = {
    "cold_compile_ratio_max": 0.25,
    "warm_first_result_ms_max": 50.0,
    "hit_lookup_p99_us_max": 20.0,
    "hit_ratio_min": 0.99,
}


# ------------------------------------------------------------------------------ child process
def _child(args: argparse.Namespace) -> None:
    """One measurement in a fresh process; prints one JSON line.

    Stages are timed in order so the first-result claim starts from a defined point: process
    spawn -> interpreter running -> torch imported -> CUDA context ready (a tensor on the GPU,
    synchronised) -> cuBLAS initialised (a small linear layer in the problem's dtype; mode
    ``warm-blas-cold`` leaves it to the measured window) -> inputs made -> triton imported (mode ``warm``; mode ``warm-triton-cold``
    leaves it to the measured window) -> warpforge imported -> ``warpforge.compile`` returned
    -> first call returned (launch queued) -> synchronised result.
    """
    main_at = time.time()
    stages: dict[str, float] = {"interpreter_start_s": main_at - args.spawned_at}
    t = time.perf_counter()
    import torch

    stages["torch_import_s"] = time.perf_counter() - t
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    t = time.perf_counter()
    if device.type == "cuda":
        torch.zeros(1, device=device)  # creates the CUDA context
        sync()
    stages["cuda_context_s"] = time.perf_counter() - t
    stages["blas_init_s"] = None  # type: ignore[assignment]
    if device.type == "cuda" and args.mode != "warm-blas-cold":
        t = time.perf_counter()
        small = torch.ones(16, 16, device=device, dtype=getattr(torch, args.dtype))
        torch.nn.functional.linear(small, small, small[0])  # cuBLAS(Lt) handles, workspace
        sync()
        stages["blas_init_s"] = time.perf_counter() - t
    import warpforge.blueprint.problems
    from warpforge.harness import get_problem

    problem = get_problem(args.problem)
    dtype = getattr(torch, args.dtype)
    shape = json.loads(args.shape)
    generator = torch.Generator(device=device).manual_seed(0)
    t = time.perf_counter()
    inputs = problem.make_inputs(shape, dtype, device, generator)
    sync()
    stages["inputs_s"] = time.perf_counter() - t
    stages["triton_import_s"] = None  # type: ignore[assignment]
    if args.mode in ("warpforge", "cold-profile", "warm", "warm-profile", "warm-blas-cold"):
        t = time.perf_counter()
        import triton  # noqa: F401 - a package import, reported apart from the compile time

        stages["triton_import_s"] = time.perf_counter() - t
    t = time.perf_counter()
    import warpforge
    import warpforge.blueprint.compiler
    import warpforge.cache
    from warpforge.blueprint import problems, triton_startup

    stages["warpforge_import_s"] = time.perf_counter() - t
    import logging

    log_lines: list[str] = []  # why a warm launch left the fast path, if it did

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            log_lines.append(f"{record.levelname}: {record.getMessage()}"[:500])

    blueprint_logger = logging.getLogger("warpforge.blueprint")
    blueprint_logger.addHandler(_Collect(logging.INFO))
    blueprint_logger.setLevel(logging.INFO)
    builder = getattr(problems, f"{args.blueprint}_blueprint")
    ir = builder(args.dtype)
    profiler = None
    if args.mode in ("warm-profile", "cold-profile"):
        import cProfile

        profiler = cProfile.Profile()
    sync()
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    if args.mode == "torch.compile":
        fn = torch.compile(problem.reference, mode="max-autotune-no-cudagraphs")
        compiled_at = time.perf_counter()
        out = fn(*inputs)
    else:
        module = warpforge.compile(ir)
        compiled_at = time.perf_counter()
        out = module(*inputs)
    called_at = time.perf_counter()
    sync()
    done_at = time.perf_counter()
    if profiler is not None:
        profiler.disable()
    stages["compile_returned_s"] = compiled_at - start
    stages["first_call_returned_s"] = called_at - compiled_at
    stages["synchronised_s"] = done_at - called_at
    from warpforge.cache import default_metrics

    snapshot = default_metrics().snapshot()
    outs = out if isinstance(out, tuple) else (out,)
    result: dict[str, Any] = {
        "seconds": done_at - start,
        "stages": stages,
        "process_spawn_to_result_s": time.time() - args.spawned_at,
        "torch_import_s": stages["torch_import_s"],
        "triton_import_s": stages["triton_import_s"],
        "warpforge_import_s": stages["warpforge_import_s"],
        "disk_lookup_s": snapshot["lookup_latency"]["disk"]["sum_s"],
        # the kernels' first launch inside first_call_returned_s (the rest of it loads the
        # program: registry lookup, generated module, binaries, launch configs)
        "first_launch_s": snapshot["first_launches"]["sum_s"],
        "triton_startup_memo_used": bool(triton_startup._STATE["installed"]),
        "builds": snapshot["builds"]["count"],
        "disk_hits": snapshot["hits"]["disk"],
        "fallbacks": snapshot["fallbacks"],
        "direct_launch": snapshot.get("direct_launch", {}),
        "pycache_prefix": sys.pycache_prefix,
        "log": log_lines,
        "output_shapes": [list(o.shape) for o in outs],
    }
    if profiler is not None:
        result["profile_top_cumulative"] = _profile_rows(profiler, 60, "cumulative_ms")
        result["profile_top_self"] = _profile_rows(profiler, 25, "self_ms")
    print(json.dumps(result))


def _profile_rows(profiler: Any, limit: int, order: str) -> list[dict[str, Any]]:
    """The ``limit`` functions with the largest ``order`` time (``cumulative_ms`` or
    ``self_ms``): where the window went."""
    import pstats

    stats = pstats.Stats(profiler)
    rows = []
    for (filename, line, name), (_cc, calls, own, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        short = "/".join(Path(filename).parts[-3:]) if filename != "~" else "builtin"
        rows.append(
            {
                "function": f"{short}:{line}({name})",
                "calls": calls,
                "cumulative_ms": cumulative * 1e3,
                "self_ms": own * 1e3,
            }
        )
    rows.sort(key=lambda r: -r[order])
    return rows[:limit]


# Modules whose bytecode decides the warm window (imported inside it on Triton 3.6) or the
# stages before it: if their .pyc is missing next to the source, every process compiles them.
_BYTECODE_PROBES = (
    ("triton", "experimental/gluon/__init__.py"),
    ("triton", "experimental/gluon/language/_semantic.py"),
    ("triton", "compiler/compiler.py"),
    ("torch", "__init__.py"),
    ("torch", "_tensor.py"),
)


def bytecode_state() -> dict[str, Any]:
    """Whether the Python environment has cached bytecode for the modules the measurement
    imports, and whether it could write it (a normal ``pip install`` writes it)."""
    import importlib.util
    import sysconfig

    probes: dict[str, Any] = {}
    for package, relative in _BYTECODE_PROBES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        source = Path(next(iter(spec.submodule_search_locations))) / relative
        if not source.is_file():
            continue
        pyc = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
        folder = pyc.parent if pyc.parent.is_dir() else source.parent
        try:
            read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = None
        probes[f"{package}/{relative}"] = {
            "pyc_exists": pyc.is_file(),
            "folder_writable": (not read_only) and os.access(folder, os.W_OK),
            "filesystem_read_only": read_only,
        }
    missing = [name for name, probe in probes.items() if not probe["pyc_exists"]]
    return {
        "python": sys.executable,
        "purelib": sysconfig.get_paths().get("purelib"),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "dont_write_bytecode": sys.flags.dont_write_bytecode,
        "inherited_PYTHONPYCACHEPREFIX": os.environ.get("PYTHONPYCACHEPREFIX"),
        "probes": probes,
        "pyc_missing_for": missing,
    }


def _hit_lookup_child(args: argparse.Namespace) -> None:
    """In-memory hit path in a process of its own (no progress thread, no earlier children).

    GC stays enabled (a training job has it on); each loop is preceded by warm-up calls and a
    ``gc.collect()`` so a collection owed by the setup is not charged to the loop.
    """
    import gc

    import torch

    import warpforge
    from warpforge.blueprint.problems import bias_gelu_blueprint
    from warpforge.cache import CacheKey, KernelArtifact, KernelRegistry

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    samples, rounds = args.lookup_samples, 5
    ir = bias_gelu_blueprint("float32")
    module = warpforge.compile(ir)
    inputs = [torch.randn(8, 64, device=device), torch.randn(64, device=device)]
    module(*inputs)  # load (and on GPU compile) once
    registry = KernelRegistry()  # memory tier only: the registry's own hit path
    key = CacheKey.for_current_environment("bench", {"x": "float32"})
    registry.put(key, KernelArtifact({"kernels.py": b"# bench"}, {}))
    bias_add = torch.nn.functional.gelu

    def eager_call() -> None:
        bias_add(inputs[0] + inputs[1], approximate="tanh")

    cases: dict[str, Any] = {
        "timer_floor": lambda: None,
        "per_call_hit_path": lambda: module.lookup(inputs),
        "compile_of_compiled_blueprint": lambda: warpforge.compile(ir),
        "kernel_registry_memory_get": lambda: registry.get(key),
        "call_lookup_and_launch": lambda: module(*inputs),
        "eager_torch_same_math": eager_call,
    }
    with torch.no_grad():
        results = {}
        for name, call in cases.items():
            pooled: list[int] = []
            per_round = []
            for _ in range(rounds):
                for _ in range(max(10, samples // (rounds * 5))):
                    call()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                gc.collect()
                timings = []
                clock = time.perf_counter_ns
                for _ in range(max(1, samples // rounds)):
                    t = clock()
                    call()
                    timings.append(clock() - t)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                pooled += timings
                per_round.append(_percentiles(timings)["p99_us"])
            results[name] = {**_percentiles(pooled), "p99_us_per_round": per_round}
    results["what"] = (
        "per_call_hit_path = CompiledBlueprint.lookup: the call signature (type, shape, dtype, "
        "device per input) and one dict lookup, the work every call does before launching; "
        "call_lookup_and_launch = module(*inputs) host time (lookup + output allocation + "
        "Triton launch, no synchronisation); eager_torch_same_math = the same bias+GELU as two "
        "eager torch ops, for scale; timer_floor = an empty call. Separate process, GC on, "
        f"{rounds} rounds with warm-up and gc.collect() before each."
    )
    print(json.dumps(results))


def _run_child(
    mode: str,
    name: str,
    dtype: str,
    shape: dict,
    caches: dict[str, str],
    timeout: float,
    extra: tuple[str, ...] = (),
    bytecode: bool = True,
) -> dict[str, Any]:
    """One child process; ``bytecode=False`` leaves out the benchmark's bytecode prefix (the
    environment's own bytecode state, as a process of it gets without the prefix)."""
    blueprint = name.removeprefix("blueprint.")
    builder = {
        "scaled_masked_softmax": "masked_softmax",
        "causal_attention_scores": "attention_scores",
        "mixed_precision_chain": "mixed_precision",
    }.get(blueprint, blueprint)
    env = {
        **os.environ,
        **caches,
        **(_CHILD_BYTECODE_ENV if bytecode else {}),
        "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    if bytecode and _CHILD_BYTECODE_ENV:  # bytecode is written into the prefix, as pip would
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [
        sys.executable,
        __file__,
        "--spawned-at",
        repr(time.time()),
        "--child",
        "--mode",
        mode,
        "--problem",
        name,
        "--blueprint",
        builder,
        "--dtype",
        dtype,
        "--shape",
        json.dumps(shape),
        *extra,
    ]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:500]}
    return json.loads(done.stdout.strip().splitlines()[-1])


_CHILD_BYTECODE_ENV: dict[str, str] = {}
"""Set by main: ``PYTHONPYCACHEPREFIX`` for every child where the environment lacks bytecode
(those children also run without ``PYTHONDONTWRITEBYTECODE``, so the prefix gets written)."""


def _fresh_caches(root: Path, label: str) -> dict[str, str]:
    base = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=root))
    caches = {
        "WARPFORGE_CACHE_DIR": str(base / "warpforge"),
        "TRITON_CACHE_DIR": str(base / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(base / "inductor"),
    }
    for path in caches.values():
        Path(path).mkdir(parents=True)
    return caches


# ------------------------------------------------------------------------------ in-process parts
def _percentiles(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000.0

    return {
        "p50_us": pick(0.50),
        "p99_us": pick(0.99),
        "max_us": ordered[-1] / 1000.0,
        "samples": len(ordered),
    }


def _hit_lookup(caches: dict[str, str], samples: int, timeout: float) -> dict[str, Any]:
    """The in-memory hit path, measured in a process of its own (see _hit_lookup_child)."""
    return _run_child(
        "hit-lookup",
        "blueprint.bias_gelu",
        "float32",
        {},
        caches,
        timeout,
        ("--lookup-samples", str(samples)),
    )


def _replay(device: Any, steps: int, seed: int) -> dict[str, Any]:
    """Training-step calls over the suite's blueprints; variants are swapped in as a model grows."""
    import torch

    import warpforge
    from warpforge.blueprint import BlueprintBuilder
    from warpforge.blueprint import problems as p
    from warpforge.cache import default_metrics

    rng = random.Random(seed)
    dtype = "float32"
    shapes = {"T": 4, "H": 32, "D": 16, "N": 8, "F": 8, "V": 16, "B": 1, "NH": 2, "S": 8, "DH": 16}

    def inputs_for(ir: Any, rows: int) -> list[Any]:
        out = []
        for _name, schema in ir.inputs:
            dims = [
                rows if d == "T" else shapes.get(d, d) if isinstance(d, str) else d
                for d in schema.shape
            ]
            if schema.dtype == "bool":
                out.append(torch.ones(dims, dtype=torch.bool, device=device))
            else:
                out.append(torch.randn(dims, dtype=getattr(torch, schema.dtype), device=device))
        return out

    def variant(index: int) -> Any:
        # A "grown" sub-network: a new blueprint the registry has never seen.
        b = BlueprintBuilder(f"variant_{index}")
        x = b.input("x", ("T", "H"), dtype)
        b.output("y", b.op("silu", b.op("mul", x, scalar=1.0 + index / 64)))
        return b.build()

    suite = [
        p.bias_gelu_blueprint(dtype),
        p.residual_rmsnorm_swiglu_blueprint(dtype),
        p.masked_softmax_blueprint(dtype),
        p.layernorm_linear_gelu_blueprint(dtype),
        p.mlp_block_blueprint(dtype),
        p.reduction_chain_blueprint(dtype),
        p.mixed_precision_blueprint(dtype),
    ]
    active = list(suite)
    metrics = default_metrics()
    builds_before = metrics.snapshot()["builds"]["count"]
    misses = 0
    prepared_inputs: dict[tuple[int, int], list[Any]] = {}
    started = time.perf_counter()
    for step in range(steps):
        if step and step % 1000 == 0:
            active[rng.randrange(len(active))] = variant(step // 1000)
        ir = active[min(int(rng.expovariate(0.6)), len(active) - 1)]
        rows = rng.choice((4, 4, 4, 8))  # ragged batches; same specialisation bucket of H
        key = (id(ir), rows)
        if key not in prepared_inputs:
            prepared_inputs[key] = inputs_for(ir, rows)
        module = warpforge.compile(ir)
        misses += module.prepare(prepared_inputs[key])
    elapsed = time.perf_counter() - started
    builds = metrics.snapshot()["builds"]["count"] - builds_before
    return {
        "calls": steps,
        "in_process_misses": misses,
        "codegen_builds": builds,
        "hit_ratio": 1.0 - misses / steps,
        "seconds": elapsed,
        "what": "each call = warpforge.compile(blueprint) + resolving the program for the "
        "inputs' specialisation; a miss loads from the kernel registry or generates code",
    }


# ------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="directory for compiler_bench.json")
    parser.add_argument("--problems", nargs="*", help="subset of blueprint problem names")
    parser.add_argument(
        "--name", default="compiler_bench", help="output file stem (run subsets into one DIR)"
    )
    parser.add_argument(
        "--dtype", default=None, help="dtype (default: bfloat16 on GPU, float32 on CPU)"
    )
    parser.add_argument(
        "--skip-torch-compile", action="store_true", help="skip torch.compile cold runs"
    )
    parser.add_argument("--warm-repeats", type=int, default=3)
    parser.add_argument(
        "--concurrent-compile",
        action="store_true",
        help="also a cold compile with WARPFORGE_CONCURRENT_COMPILE=1 (kernels compiled at once)",
    )
    parser.add_argument(
        "--no-profile",
        action="store_true",
        help="skip the cProfile'd cold and warm runs per blueprint",
    )
    parser.add_argument("--lookup-samples", type=int, default=20000)
    parser.add_argument("--replay-steps", type=int, default=10000)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per child process")
    parser.add_argument(
        "--bytecode",
        choices=("auto", "prefix", "off"),
        default="auto",
        help="children's bytecode: 'prefix' runs them with PYTHONPYCACHEPREFIX=OUT/pycache, "
        "primed by one untimed child (what a normal install with written .pyc files gives); "
        "'auto' does so only where .pyc files are missing; 'off' never",
    )
    # child-process arguments
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--problem", help=argparse.SUPPRESS)
    parser.add_argument("--blueprint", help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    parser.add_argument("--spawned-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.mode == "hit-lookup":
            _hit_lookup_child(args)
        else:
            _child(args)
        return
    if args.out is None:
        parser.error("--out DIR is required")
    sys.path.insert(0, str(SRC))
    import torch
    from rich.progress import Progress

    import warpforge.blueprint.problems  # noqa: F401
    from warpforge.environment import environment_fingerprint
    from warpforge.harness import registered_problems

    cuda = torch.cuda.is_available()
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        os.environ.setdefault("WARPFORGE_INTERPRET", "1")
    device = torch.device("cuda" if cuda else "cpu")
    dtype = args.dtype or ("bfloat16" if cuda else "float32")
    # Forward blueprints only: a backward problem compiles the same blueprint plus its backward.
    problems = [
        p
        for p in registered_problems()
        if p.name.startswith("blueprint.") and not p.name.endswith(".bwd")
    ]
    if args.problems:
        problems = [
            p
            for p in problems
            if p.name in args.problems or p.name.removeprefix("blueprint.") in args.problems
        ]
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="warpforge-compiler-bench-"))
    results: list[dict[str, Any]] = []
    bytecode = bytecode_state()
    use_prefix = args.bytecode == "prefix" or (
        args.bytecode == "auto" and bool(bytecode["pyc_missing_for"])
    )
    bytecode["children_use_prefix"] = use_prefix
    if use_prefix:
        prefix = (args.out / "pycache").resolve()
        prefix.mkdir(parents=True, exist_ok=True)
        _CHILD_BYTECODE_ENV["PYTHONPYCACHEPREFIX"] = str(prefix)
        bytecode["prefix"] = str(prefix)
    with Progress() as progress:
        task = progress.add_task("cold/warm compiles", total=len(problems))
        if use_prefix and problems:
            # Untimed: writes the bytecode of everything a child imports into the prefix.
            first = problems[0]
            shape = dict((first.shapes if cuda else first.cpu_shapes)[0])
            use = dtype if getattr(torch, dtype) in first.dtypes else "float32"
            primers = ["warpforge"] + ([] if args.skip_torch_compile else ["torch.compile"])
            bytecode["primed_by"] = [
                {
                    "mode": mode,
                    "ok": "error"
                    not in _run_child(
                        mode, first.name, use, shape, _fresh_caches(scratch, "prime"), args.timeout
                    ),
                }
                for mode in primers
            ]
        for problem in problems:
            use = (
                dtype
                if getattr(torch, dtype) in problem.dtypes
                else str(problem.dtypes[0]).removeprefix("torch.")
            )
            shape = dict((problem.shapes if cuda else problem.cpu_shapes)[0])
            entry: dict[str, Any] = {"problem": problem.name, "dtype": use, "shape": shape}
            caches = _fresh_caches(scratch, "warpforge")
            entry["warpforge_cold"] = _run_child(
                "warpforge", problem.name, use, shape, caches, args.timeout
            )
            if args.concurrent_compile:  # the same cold compile, its kernels compiled at once
                entry["warpforge_cold_concurrent"] = _run_child(
                    "warpforge", problem.name, use, shape,
                    {**_fresh_caches(scratch, "warpforge-concurrent"),
                     "WARPFORGE_CONCURRENT_COMPILE": "1"},
                    args.timeout,
                )  # fmt: skip
            if not args.no_profile:  # where a cold compile's time goes, in caches of its own
                entry["warpforge_cold_profile"] = _run_child(
                    "cold-profile", problem.name, use, shape,
                    _fresh_caches(scratch, "warpforge-profile"), args.timeout,
                )  # fmt: skip
            warm = [
                _run_child("warm", problem.name, use, shape, caches, args.timeout)
                for _ in range(args.warm_repeats)
            ]
            entry["warm_first_result"] = warm
            ok_warm = [w["seconds"] * 1000 for w in warm if "seconds" in w]
            entry["warm_first_result_ms_median"] = statistics.median(ok_warm) if ok_warm else None
            if use_prefix:  # the same without the prefix: the environment's own bytecode state
                plain = [
                    _run_child("warm", problem.name, use, shape, caches, args.timeout, (), False)
                    for _ in range(args.warm_repeats)
                ]
                entry["warm_first_result_without_bytecode_prefix"] = plain
                ok_plain = [w["seconds"] * 1000 for w in plain if "seconds" in w]
                entry["warm_first_result_without_bytecode_prefix_ms_median"] = (
                    statistics.median(ok_plain) if ok_plain else None
                )
            # The same, with triton's import inside the window (a process that never used it).
            triton_cold = _run_child(
                "warm-triton-cold", problem.name, use, shape, caches, args.timeout
            )
            entry["warm_first_result_triton_not_imported"] = triton_cold
            entry["warm_first_result_including_triton_import_ms"] = (
                triton_cold["seconds"] * 1000 if "seconds" in triton_cold else None
            )
            # The same, with cuBLAS's start-up inside the window (no matmul run before it).
            blas_cold = _run_child("warm-blas-cold", problem.name, use, shape, caches, args.timeout)
            entry["warm_first_result_blas_not_initialised"] = blas_cold
            entry["warm_first_result_including_blas_init_ms"] = (
                blas_cold["seconds"] * 1000 if "seconds" in blas_cold else None
            )
            # Triton's own cache emptied: the kernels come from the registry entry's binaries.
            empty_triton = {**caches, "TRITON_CACHE_DIR": tempfile.mkdtemp(dir=scratch)}
            entry["warm_first_result_empty_triton_cache"] = _run_child(
                "warm", problem.name, use, shape, empty_triton, args.timeout
            )
            if not args.no_profile:
                entry["warm_first_result_profile"] = _run_child(
                    "warm-profile", problem.name, use, shape, caches, args.timeout
                )
            if not args.skip_torch_compile:
                entry["torch_compile_cold"] = _run_child(
                    "torch.compile",
                    problem.name,
                    use,
                    shape,
                    _fresh_caches(scratch, "inductor"),
                    args.timeout,
                )
                mine, theirs = (
                    entry["warpforge_cold"].get("seconds"),
                    entry["torch_compile_cold"].get("seconds"),
                )
                entry["cold_compile_ratio"] = mine / theirs if mine and theirs else None
                if args.concurrent_compile:
                    ahead = entry["warpforge_cold_concurrent"].get("seconds")
                    entry["cold_compile_ratio_concurrent"] = (
                        ahead / theirs if ahead and theirs else None
                    )
            results.append(entry)
            progress.advance(task)
        progress.add_task("hit lookup + replay", total=None)
        lookup = _hit_lookup(_fresh_caches(scratch, "lookup"), args.lookup_samples, args.timeout)
        os.environ["WARPFORGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="replay-", dir=scratch)
        replay = _replay(device, args.replay_steps, seed=0)
    report = {
        "benchmark": "blueprint compiler",
        "environment_fingerprint": environment_fingerprint(),
        "device_path": "triton-gpu"
        if cuda
        else "triton-interpreter (CPU: numbers are not meaningful)",
        "targets": TARGETS,
        "bytecode": bytecode,
        "blueprints": results,
        "hit_lookup": lookup,
        "replay": replay,
    }
    path = args.out / f"{args.name}.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=True))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
