"""The candidate's own process: it runs the candidate and never holds the expected outputs.

The harness starts one *spawned* worker per candidate (a fresh interpreter, nothing inherited),
sends it inputs, and gets back outputs, the inputs as they were after the call, the PyTorch
operators and GPU kernels the call launched, and timings. Every message is serialised with
``torch.save`` into bytes, so tensors travel by value (never as shared-memory handles), and the
harness reads the worker's replies with ``torch.load(weights_only=True)``, so a candidate cannot
smuggle code into the harness process. A candidate that raises is reported; one that kills its
process or hangs is reported too, and the harness carries on. The worker leads a process group of
its own, which the harness kills when it ends the worker, and on Linux it is a child subreaper
(``process_tree.py``), so the processes the candidate started that left the group (``setsid``, a
daemon's double fork) are found and killed too: none outlives the worker. The spawned process is
a *keeper* that forks the worker: a subreaper too, it holds the orphans of a worker the
candidate killed and kills them (``_keeper_main``).

Inside the worker, before the candidate is imported:

* the timing functions are captured (importing ``warpforge.harness.timing``) and compared after
  every command, so patching them is seen;
* ``torch.empty``-family allocators are wrapped to fill new memory with the current *poison*
  byte (0xFF: NaN in every float format; or 0x41: a finite value), and on the GPU the caching
  allocator's free blocks are filled too, so reading memory the candidate never wrote shows up
  as a difference between two calls under two poisons.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from warpforge import runtime
from warpforge.harness import checks, process_tree

log = logging.getLogger(__name__)

POISON_NAN = 0xFF
POISON_FINITE = 0x41

# PyTorch functions and methods that allocate, move, view or describe data and compute nothing.
_NON_COMPUTE_FUNCTIONS = frozenset(
    {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "new_zeros",
     "new_full", "new_ones", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
     "zero_", "fill_", "copy_", "clone", "contiguous", "view", "view_as", "reshape", "as_strided",
     "t", "transpose", "permute", "expand", "expand_as", "squeeze", "unsqueeze", "flatten",
     "unflatten", "select", "narrow", "split", "chunk", "unbind", "detach", "data_ptr", "size",
     "stride", "storage_offset", "untyped_storage", "numel", "dim", "element_size",
     "is_contiguous", "is_floating_point", "is_complex", "__get__", "__len__", "__getitem__",
     "__setitem__", "__format__", "__repr__", "__hash__", "cpu", "cuda", "to", "numpy", "item",
     "tolist", "__array__", "__iter__", "nelement", "ndimension", "get_device", "__index__",
     "__int__", "__float__", "__bool__", "__reduce_ex__", "__deepcopy__", "__setstate__",
     "storage", "requires_grad_", "_set_grad_enabled", "set_grad_enabled", "is_set_to", "type", "pin_memory", "nbytes"}
)  # fmt: skip


def encode(obj: Any) -> bytes:
    """``obj`` as bytes, tensors by value."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def decode(data: bytes) -> Any:
    """Inverse of :func:`encode`, refusing anything but tensors and plain containers."""
    return torch.load(io.BytesIO(data), weights_only=True)


@dataclass(frozen=True)
class WorkerConfig:
    """What the worker needs to build the candidate."""

    candidate_path: str
    init_inputs: list[Any]
    init_seed: int
    device: str
    baseline_paths: tuple[str, ...] = ()
    reference_path: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "candidate_path": self.candidate_path,
            "init_inputs": list(self.init_inputs),
            "init_seed": self.init_seed,
            "device": self.device,
            "baseline_paths": list(self.baseline_paths),
            "reference_path": self.reference_path,
        }


class WorkerFailure(Exception):
    """The worker crashed, hung or could not load the candidate."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "crash", "timeout" or "load"


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Keep spawn from re-running the parent's ``__main__`` (e.g. ``python -m warpforge``).

    The worker's entry point lives in this importable module, so the child needs nothing from
    the parent's main script; without this, spawning under ``-m warpforge`` would re-run the CLI.
    """
    main = sys.modules.get("__main__")
    saved = {}
    for attr in ("__spec__", "__file__"):
        if main is not None and hasattr(main, attr):
            saved[attr] = getattr(main, attr)
            setattr(main, attr, None) if attr == "__spec__" else delattr(main, attr)
    try:
        yield
    finally:
        for attr, value in saved.items():
            setattr(main, attr, value)


@functools.cache
def _note_no_subreaper(reason: str) -> None:
    """Say once per reason that the group kill is all there is (not Linux, say)."""
    log.warning(
        "candidate workers are no child subreapers here (%s): a process a candidate moves out of "
        "its worker's process group (setsid, a daemon's double fork) is not ended after the run",
        reason,
    )


class CandidateProcess:
    """A spawned worker holding one candidate; commands go in, results come back by value."""

    def __init__(self, config: WorkerConfig, *, timeout_s: float = 300.0) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s: expected a number > 0, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        # the keeper's reports (the worker's id, its exit code), a few words of text: nothing
        # the candidate can write to (the worker closes its copy before loading it)
        self._status, status_child = context.Pipe(duplex=False)
        self._worker_pid: int | None = None
        self._worker_exit: int | None = None
        # without CUDA the worker runs Triton kernels under the interpreter (it inherits the
        # switch, which Triton reads at import)
        runtime.command_device()
        self._process = context.Process(
            target=_keeper_main,
            args=(child, status_child, encode(config.as_dict())),
            daemon=True,
        )
        self._processes_ended = False
        with _main_module_hidden():
            self._process.start()
        child.close()
        status_child.close()
        self.ready = self._receive(self.timeout_s + 60.0)  # + interpreter start and imports
        if not self.ready.get("ok"):
            self.close()
            raise WorkerFailure("load", str(self.ready.get("error")))
        if self.ready.get("subreaper_error"):
            _note_no_subreaper(self.ready["subreaper_error"])

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        try:
            if not self._conn.poll(timeout_s):
                self.close()
                raise WorkerFailure(
                    "timeout", f"the candidate's process did not answer within {timeout_s:.0f} s"
                )
            data = self._conn.recv_bytes()
        except (EOFError, OSError, ConnectionError):
            self._read_status(2.0, until_exit=True)  # the keeper reaps the worker at once
            self._end_processes()
            self._process.join(5)
            code = self._worker_exit if self._worker_exit is not None else self._process.exitcode
            raise WorkerFailure(
                "crash", f"the candidate's process died (exit code {code})"
            ) from None
        reply = decode(data)
        if not isinstance(reply, dict):
            raise WorkerFailure("crash", "the candidate's process sent a malformed reply")
        return reply

    def request(self, command: dict[str, Any], *, timeout_s: float | None = None) -> dict[str, Any]:
        """Send ``command``; return the worker's reply (WorkerFailure on crash or timeout)."""
        try:
            self._conn.send_bytes(encode(command))
        except (OSError, BrokenPipeError):
            raise WorkerFailure("crash", "the candidate's process is gone") from None
        return self._receive(self.timeout_s if timeout_s is None else timeout_s)

    def _read_status(self, timeout_s: float, *, until_exit: bool = False) -> None:
        """Take the keeper's reports that have come (waiting up to ``timeout_s`` for the
        worker's exit code with ``until_exit``): the worker's id, then its exit code."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic() if until_exit else 0.0
            if until_exit and self._worker_exit is not None:
                return
            try:
                if not self._status.poll(max(0.0, remaining)):
                    return
                kind, _, value = self._status.recv_bytes(64).decode().partition(" ")
            except (EOFError, OSError, UnicodeDecodeError):
                return  # the keeper is gone (or it runs the worker itself: nothing comes)
            with contextlib.suppress(ValueError):
                if kind == "worker":
                    self._worker_pid = int(value)
                elif kind == "exit":
                    self._worker_exit = int(value)

    def close(self) -> None:
        # the worker holds nothing worth a clean shutdown; killing it skips torch's slow teardown
        self._end_processes()
        self._process.join(5)
        self._conn.close()
        self._status.close()

    def _end_processes(self) -> None:
        """Kill the worker and whatever the candidate started and left running (a forked child,
        a pool, a daemon in a session of its own), so nothing touches files after the run or
        loads the device while the next contender is timed.

        In this order: the worker is stopped (its threads fork no more); every descendant of the
        keeper is killed, the worker among them (the keeper, a subreaper, holds the orphans of
        a worker that died, and the worker, one too, those of the processes it started); then
        the process group (the only net where there is no subreaper), and the keeper. All
        before the keeper is reaped, while its pid (the group's id, the subtree's root) cannot
        be reused. Where there is no keeper (no subreaper), the spawned process is the worker
        and is stopped itself."""
        pid = self._process.pid
        if self._processes_ended or pid is None:
            return
        self._processes_ended = True
        self._read_status(0.0)
        target = pid if self._worker_pid is None else self._worker_pid
        # a worker the keeper has reaped is left alone: its id may name another process by now
        reaped = self._worker_exit is not None or (
            target != pid and target not in process_tree.living_descendants(pid)
        )
        if hasattr(signal, "SIGSTOP") and not reaped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(target, signal.SIGSTOP)
        try:
            process_tree.end_descendants(pid)
        finally:
            if hasattr(os, "killpg"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)  # no group yet: the keeper died before it
            self._process.kill()  # stopped, it must not wait outside its group for the join

    def __enter__(self) -> CandidateProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# The worker side: everything below runs in the spawned process.


class _Poison:
    """Fills memory returned by the torch.empty family with the current poison byte."""

    byte: int | None = None

    @classmethod
    def fill(cls, tensor: torch.Tensor) -> torch.Tensor:
        if cls.byte is not None and isinstance(tensor, torch.Tensor) and tensor.numel():
            raw = torch.empty(0, dtype=torch.uint8, device=tensor.device)
            raw.set_(tensor.untyped_storage())
            raw.fill_(cls.byte)
        return tensor


_ALLOCATORS = (
    (torch, ("empty", "empty_like", "empty_strided")),
    (torch.Tensor, ("new_empty", "new_empty_strided")),
)


def _install_allocation_poison() -> list[tuple[Any, str, Any]]:
    """Wrap the torch.empty family to fill new memory with ``_Poison.byte``; return originals."""

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        def poisoned(*args: Any, **kwargs: Any) -> Any:
            return _Poison.fill(fn(*args, **kwargs))

        return poisoned

    originals = []
    for owner, names in _ALLOCATORS:
        for name in names:
            original = getattr(owner, name)
            originals.append((owner, name, original))
            setattr(owner, name, wrap(original))
    return originals


@contextlib.contextmanager
def poisoned_memory(byte: int, device: torch.device) -> Iterator[None]:
    """In this process: new allocations (and, on GPU, the allocator's free blocks) hold ``byte``.

    Used for warpforge's own (trusted) kernels, verified in the harness process; candidates get
    the same treatment inside their worker.
    """
    originals = _install_allocation_poison()
    _Poison.byte = byte
    try:
        if device.type == "cuda":
            _poison_cuda_free_blocks(byte, device)
            torch.cuda.synchronize()
        yield
    finally:
        _Poison.byte = None
        for owner, name, original in originals:
            setattr(owner, name, original)


def _poison_cuda_free_blocks(byte: int, device: torch.device) -> None:
    """Fill the caching allocator's free blocks so stale results read back as poison (GPU)."""
    held = []
    blocks = [
        block["size"]
        for segment in torch.cuda.memory_snapshot()
        for block in segment.get("blocks", [])
        if block.get("state") == "inactive"
    ]
    for size in sorted(blocks, reverse=True):
        with contextlib.suppress(RuntimeError):
            held.append(torch.empty(size, dtype=torch.uint8, device=device).fill_(byte))
    # a fresh block for outputs the candidate allocates beyond the cache
    with contextlib.suppress(RuntimeError):
        held.append(torch.empty(64 * 2**20, dtype=torch.uint8, device=device).fill_(byte))
    del held


def _storage_range(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def overlaps_inputs(out: torch.Tensor, inputs: Sequence[Any]) -> bool:
    lo, hi = _storage_range(out)
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.device == out.device:
            x_lo, x_hi = _storage_range(x)
            if lo < x_hi and x_lo < hi and hi > lo:
                return True
    return False


def plain_copy(value: Any) -> torch.Tensor | None:
    """A plain CPU copy of an output (subclasses unwrapped), or None if it is not a tensor."""
    if not isinstance(value, torch.Tensor):
        return None
    with contextlib.suppress(Exception):
        plain = value.as_subclass(torch.Tensor) if type(value) is not torch.Tensor else value
        return plain.detach().to("cpu", copy=True)
    return None


class _OpRecorder:
    """Records the PyTorch functions and tensor methods called inside a block.

    A ``TorchFunctionMode`` sees every ``torch.*`` call, tensor method and operator at the Python
    level, however it was named (``getattr(torch, "mat" + "mul")`` is still ``matmul``), and a
    module call such as ``nn.Linear`` shows up as ``linear``.
    """

    def __init__(self) -> None:
        from torch.overrides import TorchFunctionMode

        recorder = self

        class _Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                name = getattr(func, "__name__", None) or str(func)
                recorder.calls.add(name)
                return func(*args, **(kwargs or {}))

        self.calls: set[str] = set()
        self.mode = _Mode()

    def compute_ops(self) -> list[str]:
        return sorted(name for name in self.calls if name not in _NON_COMPUTE_FUNCTIONS)


class _Worker:
    def __init__(self, config: dict[str, Any]) -> None:
        from warpforge.harness import kernelbench, timing

        self.timing = timing
        self.device = torch.device(config["device"])
        if self.device.type == "cuda" and self.device.index is not None:
            # the candidate's kernels launch on the current device: make it this one (a torchrun
            # rank on cuda:1 otherwise hands Triton cuda:1 tensors while cuda:0 is current)
            torch.cuda.set_device(self.device)
        self.config = config
        self._originals = _install_allocation_poison()
        self.candidate_file = os.path.realpath(config["candidate_path"])
        module = kernelbench.load_module(config["candidate_path"], role="candidate")
        cls = kernelbench.model_class(module, config["candidate_path"], role="candidate")
        self.model = kernelbench.build_model(
            cls, config["init_inputs"], seed=config["init_seed"], device=self.device
        )
        self.slots: list[tuple[tuple[Any, ...], tuple[torch.Tensor | None, ...]]] = []

    def _call(self, inputs: tuple[Any, ...]) -> Any:
        with torch.no_grad():
            return self.model(*inputs)

    def run(self, command: dict[str, Any]) -> dict[str, Any]:
        inputs = tuple(
            x.to(self.device) if isinstance(x, torch.Tensor) else x for x in command["inputs"]
        )
        if self.device.type == "cuda":
            _poison_cuda_free_blocks(command["poison"], self.device)
            torch.cuda.synchronize()
        _Poison.byte = command["poison"]
        threads_before = set(threading.enumerate())
        recorder = _OpRecorder()
        kernels: list[str] = []
        try:
            if self.device.type == "cuda":
                result, kernels = self._profiled(inputs, recorder)
            else:
                with recorder.mode:
                    result = self._call(inputs)
        finally:
            _Poison.byte = None
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        outputs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        contiguous, strides = checks.output_layout(outputs)
        reply = {
            "outputs": [plain_copy(o) for o in outputs],
            "types": [f"{type(o).__module__}.{type(o).__qualname__}" for o in outputs],
            "plain": [type(o) is torch.Tensor for o in outputs],
            "devices": [str(o.device) if isinstance(o, torch.Tensor) else "" for o in outputs],
            "contiguous": contiguous,
            "strides": strides,
            "aliasing": [
                isinstance(o, torch.Tensor) and overlaps_inputs(o, inputs) for o in outputs
            ],
            "inputs_after": [
                plain_copy(x) if isinstance(x, torch.Tensor) else None for x in inputs
            ],
            "ops": recorder.compute_ops(),
            "kernels": kernels,
            "threads_left": len(
                [t for t in set(threading.enumerate()) - threads_before if self._started_here(t)]
            ),
        }
        if command.get("keep"):
            self.slots.append((inputs, tuple(plain_copy(o) for o in outputs)))
        return reply

    def _started_here(self, thread: threading.Thread) -> bool:
        """True for a live thread running code from the candidate's file (not a library's):
        its target (through ``functools.partial``, bound methods, callable objects and a
        ``threading.Timer``'s function) is the candidate's, or a frame on its stack now is (a
        thread pool's worker running the candidate's task)."""
        if not thread.is_alive():
            return False
        target = getattr(thread, "_target", None) or getattr(thread, "function", None)
        if self._in_candidate_file(target or type(thread).run):
            return True
        frame = sys._current_frames().get(thread.ident or -1)
        while frame is not None:
            if os.path.realpath(frame.f_code.co_filename) == self.candidate_file:
                return True
            frame = frame.f_back
        return False

    def _in_candidate_file(self, fn: Any) -> bool:
        for _ in range(16):  # unwrap partials, methods and callable objects, a bounded depth
            if isinstance(fn, functools.partial):
                fn = fn.func
            elif hasattr(fn, "__func__"):
                fn = fn.__func__
            elif hasattr(fn, "__code__"):
                return os.path.realpath(fn.__code__.co_filename) == self.candidate_file
            elif callable(fn) and not isinstance(fn, type):
                fn = type(fn).__call__
            else:
                return False
        return False

    def _profiled(self, inputs: tuple[Any, ...], recorder: _OpRecorder) -> tuple[Any, list[str]]:
        """The call under the profiler (kernels launched, check 10) and the operator trace."""
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            with recorder.mode:  # inside the profiler, so its own calls are not traced
                result = self._call(inputs)
            torch.cuda.synchronize()
        names = sorted(
            {
                evt.name
                for evt in prof.events()
                if str(getattr(evt, "device_type", "")).endswith("CUDA")
            }
        )
        return result, names

    def loop(self, command: dict[str, Any]) -> dict[str, Any]:
        """Call the candidate repeatedly, like a timing loop, checking every output."""
        mismatches = []
        calls = int(command["calls"])
        for i in range(calls):
            inputs, expected = self.slots[i % len(self.slots)]
            output = self._call(inputs)
            if not checks.matches_verified(output, expected, command.get("repeat_atol", 0.0)):
                mismatches.append(i)
        return {"calls": calls, "mismatches": mismatches}

    def time(self, command: dict[str, Any]) -> dict[str, Any]:
        """Time candidate, reference and baselines interleaved; check every candidate output."""
        from warpforge.harness import kernelbench

        contenders: dict[str, Any] = {"candidate": lambda *inputs: self._call(inputs)}
        init = self.config["init_inputs"]
        seed = self.config["init_seed"]
        if self.config.get("reference_path"):
            ref = kernelbench.load_reference(self.config["reference_path"])
            ref_model = kernelbench.build_model(
                ref.model_class, init, seed=seed, device=self.device
            )
            contenders["reference"] = _no_grad(ref_model)
        skipped: dict[str, str] = {}
        for path in self.config.get("baseline_paths", []):
            name = f"baseline:{os.path.basename(path)}"
            try:
                module = kernelbench.load_module(path, role="baseline")
                cls = kernelbench.model_class(module, path, role="baseline")
                contenders[name] = _no_grad(
                    kernelbench.build_model(cls, init, seed=seed, device=self.device)
                )
            except Exception as exc:  # a broken baseline is reported, the run goes on
                skipped[name] = f"{type(exc).__name__}: {exc}"
        # verified outputs moved next to the candidate's, so checking each timed call is cheap
        expected = {
            id(inputs): tuple(o.to(self.device) if o is not None else None for o in out)
            for inputs, out in self.slots
        }
        mismatches: list[int] = []
        calls = [0]
        atol = command.get("repeat_atol", 0.0)

        def check(name: str, inputs: tuple[Any, ...], output: Any) -> None:
            if name != "candidate":
                return
            if not checks.matches_verified(output, expected[id(inputs)], atol):
                mismatches.append(calls[0])
            calls[0] += 1

        # the plain allocators while timing: the poison wrappers would cost the candidate time
        wrappers = [(owner, name, getattr(owner, name)) for owner, name, _ in self._originals]
        for owner, name, original in self._originals:
            setattr(owner, name, original)
        try:
            measurements = self.timing.measure_interleaved(
                contenders,
                [inputs for inputs, _ in self.slots],
                cold=command.get("cold", True),
                max_time_s=command.get("max_time_s", 2.0),
                min_samples=command.get("min_samples", self.timing.MIN_SAMPLES),
                cuda_graph=command.get("cuda_graph", False),
                on_output=check,
            )
        finally:
            for owner, name, wrapper in wrappers:
                setattr(owner, name, wrapper)
        return {
            "measurements": {
                name: m.as_dict() | {"samples_s": list(m.samples_s)}
                for name, m in measurements.items()
            },
            "skipped": skipped,
            "checked_calls": calls[0],
            "mismatches": mismatches,
        }


def _no_grad(model: torch.nn.Module) -> Any:
    def call(*inputs: Any) -> Any:
        with torch.no_grad():
            return model(*inputs)

    return call


def _keeper_main(conn: Any, status_conn: Any, config_bytes: bytes) -> None:
    """Entry point of the spawned process, the *keeper*: a child subreaper that forks the worker
    and outlives it. A candidate that kills its own worker leaves its processes orphaned; they
    are re-parented to the keeper (not to init), which kills them as soon as it has reaped the
    worker, and the harness kills whatever is left in the keeper's subtree when it ends the
    worker. The keeper reports the worker's id, then its exit code, on ``status_conn``. Where it
    cannot be a subreaper (not Linux) it runs the worker itself."""
    if hasattr(os, "setpgid"):
        # a process group of its own, made before the candidate runs: every process it starts
        # joins it, and the harness kills the group when it ends the worker
        os.setpgid(0, 0)
    try:
        process_tree.become_subreaper()
    except OSError:
        status_conn.close()
        _worker_main(conn, config_bytes)  # it reports why there is no subreaper
        return
    keeper = os.getpid()
    worker = os.fork()
    if worker == 0:
        code = 1
        try:
            status_conn.close()
            # a candidate that kills the keeper ends its worker with it: a crash, seen at once
            process_tree.die_with_parent(keeper)
            _worker_main(conn, config_bytes)
            code = 0
        finally:
            os._exit(code)  # never back into the keeper's code
    conn.close()  # the worker holds the only other end: the harness sees EOF when it dies
    with contextlib.suppress(OSError):
        status_conn.send_bytes(f"worker {worker}".encode())
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        if pid == worker:
            with contextlib.suppress(OSError):
                status_conn.send_bytes(f"exit {os.waitstatus_to_exitcode(status)}".encode())
            # the worker's orphans are the keeper's children now: end them all, then go
            process_tree.end_descendants(os.getpid())
            process_tree.reap_children()
            return


def _worker_main(conn: Any, config_bytes: bytes) -> None:
    """The worker: load the candidate, then serve commands."""
    subreaper_error = None
    try:
        # before the candidate runs: orphans among the processes it starts, in whatever group
        # or session, are re-parented to this process instead of the keeper or init, so this
        # process ends them all when it closes
        process_tree.become_subreaper()
    except OSError as exc:
        subreaper_error = str(exc)
    try:
        _serve(conn, decode(config_bytes), subreaper_error)
    finally:
        # the harness asked to close or went away: end what the candidate started while this
        # process still holds it
        process_tree.end_descendants(os.getpid())
        process_tree.reap_children()


def _serve(conn: Any, config: dict[str, Any], subreaper_error: str | None) -> None:
    """Load the candidate, report that it loaded (or why not), then answer commands."""
    try:
        worker = _Worker(config)
    except BaseException as exc:  # report why the candidate failed to load, then exit
        # a LoadError already names the file's role ("candidate: ..."); anything else is the
        # candidate's model failing to build
        from warpforge.harness.kernelbench import LoadError

        if isinstance(exc, LoadError):
            message = str(exc)
        else:
            message = f"candidate: {type(exc).__name__}: {exc}"
        conn.send_bytes(encode({"ok": False, "error": message}))
        return
    conn.send_bytes(
        encode(
            {
                "ok": True,
                "timers_ok": worker.timing.timers_untouched(),
                "subreaper_error": subreaper_error,
            }
        )
    )
    handlers = {"run": worker.run, "loop": worker.loop, "time": worker.time}
    while True:
        try:
            command = decode(conn.recv_bytes())
        except (EOFError, OSError):
            return
        if command.get("op") == "close":
            return
        try:
            reply = handlers[command["op"]](command)
            reply["error"] = None
        except BaseException as exc:  # the candidate raised: report it, keep serving
            reply = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=8)[-4000:],
            }
        reply["timers_ok"] = worker.timing.timers_untouched()
        conn.send_bytes(encode(reply))
