"""Launching a blueprint's stored Triton binary directly, skipping Triton's JIT on a warm hit.

A new process that finds a blueprint in the kernel registry still pays Triton's ``JITFunction.run``
on its first launch of each kernel: the argument binder (on Triton 3.6 its first call imports
``triton.experimental.gluon``, ~0.18 s measured on the H100 without cached bytecode), the cache
key (hashing the kernel's source and its dependencies) and the file-cache lookup. None of that
can change the answer when the same kernel is launched with arguments Triton specialises the same
way, so the first process records what Triton picked and later processes launch that binary
through Triton's own ``CompiledKernel``, whose launcher is the one ``JITFunction.run`` calls.

**Recording** (:func:`describe_launch`, first successful GPU launch of a kernel in a process that
compiled or loaded it through the JIT): the kernel's name and parameter names, the launch options
(constexpr keyword arguments such as ``BLOCK_M``, and ``num_warps``/``num_stages``), warpforge's own
class of every positional argument (:func:`argument_class`) and what Triton chose for that
launch (its ``CompiledKernel``'s signature, constants, attributes and cache hash). The record is
kept only when Triton's choice is consistent with the classes (each pointer/int/float argument got
a type of that kind, a specialised ``1`` is an int equal to 1, a divisibility hint sits only on an
aligned pointer or an int divisible by 16) and with the options (every constexpr matches, the
binary's ``num_warps``/``num_stages`` are the ones asked for); otherwise nothing is recorded and
that kernel always goes through the JIT. The records travel in the registry entry that carries the
Triton binaries (:mod:`warpforge.blueprint.triton_binaries`), with :func:`environment`.

**Launching** (:class:`DirectLaunches`): when the program was loaded from the registry on CUDA and
the stored environment equals the current one, a launch whose (kernel, options, argument classes)
equals a record is sent through the recorded binary: ``CompiledKernel`` built from Triton's cache
folder (restored from the registry entry when missing), checked against the record (hash, name,
``num_warps``), and run with the arguments in the kernel's parameter order. Anything else (no
record, other argument classes, Triton hooks installed, a missing or different file, any
exception) launches through ``JITFunction.run`` as always: logged once per reason and counted in
``warpforge.cache`` metrics (``direct_launch``). ``WARPFORGE_TRITON_DIRECT_LAUNCH=0`` turns it off.

Argument classes are at least as fine as Triton's specialisation on NVIDIA GPUs (Triton 3.x): a
tensor's dtype and whether its data pointer is 16-byte aligned; a tensor descriptor's dtype and
block shape; an int's range (i32, i64, u64),
whether it equals 1 and whether it is divisible by 16; bool, float and None. Equal classes
therefore give Triton's equal specialisation, hence its equal cache key, hence the recorded
binary. The interpreter (CPU) never takes this path.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger("warpforge.blueprint")

SWITCH = "WARPFORGE_TRITON_DIRECT_LAUNCH"
FORMAT = 1
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas"})
"""Keyword arguments of a launch that are Triton options, not kernel parameters."""
_LOCATION_VARIABLES = frozenset(
    {
        "TRITON_CACHE_DIR",
        "TRITON_HOME",
        "TRITON_DUMP_DIR",
        "TRITON_OVERRIDE_DIR",
        "TRITON_LIBCUDA_PATH",
    }
)
"""TRITON_* variables that move files without changing what is compiled."""
_HOOKS = (
    "launch_enter_hook",
    "launch_exit_hook",
    "jit_cache_hook",
    "jit_post_compile_hook",
    "add_stages_inspection_hook",
)
_DIVISIBILITY = "tt.divisibility"
_INT32 = (-(2**31), 2**31 - 1)
_LOCK = threading.Lock()
_LOGGED: set[tuple[str, str]] = set()


def enabled() -> bool:
    """False when ``WARPFORGE_TRITON_DIRECT_LAUNCH`` is ``0``/``false``/``no``/``off``."""
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


# ------------------------------------------------------------------------ argument classes
def argument_class(value: object) -> tuple[Any, ...] | None:
    """warpforge's specialisation of one positional kernel argument (None: not supported).

    Tensor: ``("t", dtype, 16-byte aligned)``; int: ``("i", range, == 1, divisible by 16)``
    with range ``"i32"``/``"i64"``/``"u64"`` as Triton picks the type; a TMA tensor descriptor:
    ``("d", dtype, block shape, padding, tf32 rounding)``; bool, float and None by kind alone
    (Triton specialises none of them on the value).
    """
    kind = type(value)
    if kind is int:
        if _INT32[0] <= value <= _INT32[1]:  # type: ignore[operator]
            width = "i32"
        elif value >= 2**63:  # type: ignore[operator]
            width = "u64"
        else:
            width = "i64"
        return ("i", width, value == 1, value % 16 == 0)  # type: ignore[operator]
    if kind is bool:
        return ("b",)
    if kind is float:
        return ("f",)
    if value is None:
        return ("n",)
    if kind.__name__ == "TensorDescriptor":
        return _descriptor_class(value)
    data_ptr = getattr(value, "data_ptr", None)
    dtype = getattr(value, "dtype", None)
    if data_ptr is None or dtype is None:
        return None
    return ("t", str(dtype), data_ptr() % 16 == 0)


def _descriptor_class(descriptor: Any) -> tuple[Any, ...] | None:
    """A host-side ``TensorDescriptor`` (TMA): Triton types it ``tensordesc<dtype[block]>`` and
    builds the TMA map from its base, shape and strides at every launch, so the class is the
    base's dtype and the block shape (as text, to stay hashable through JSON), plus the padding
    and tf32 rounding the launcher reads."""
    base = getattr(descriptor, "base", None)
    block_shape = getattr(descriptor, "block_shape", None)
    dtype = getattr(base, "dtype", None)
    if dtype is None or not isinstance(block_shape, (list, tuple)):
        return None
    if not all(type(size) is int for size in block_shape):
        return None
    block = ", ".join(str(size) for size in block_shape)
    padding = getattr(descriptor, "padding", "zero")
    tf32 = bool(getattr(descriptor, "round_f32_to_tf32", False))
    return ("d", str(dtype), block, str(padding), tf32)


def argument_key(args: Sequence[object]) -> tuple[Any, ...] | None:
    """The classes of all positional arguments, or None if one is not supported."""
    classes = tuple([argument_class(a) for a in args])
    return None if None in classes else classes


def _options_key(options: Mapping[str, Any]) -> tuple[Any, ...]:
    # type() distinguishes True from 1: Triton compiles different kernels for them.
    return tuple(sorted((k, type(v).__name__, v) for k, v in options.items()))


# ------------------------------------------------------------------------ environment
def environment() -> dict[str, Any]:
    """What, besides the kernel and its arguments, enters Triton's cache key and could differ
    between two processes of one machine: Triton's files (the fingerprint of
    :mod:`~warpforge.blueprint.triton_startup`), its ``TRITON_*`` variables (except locations)
    and the debug switch. Records are used only where this is equal."""
    from warpforge.blueprint.triton_startup import process_fingerprint

    variables = {
        k: v
        for k, v in os.environ.items()
        if k.startswith("TRITON_") and k not in _LOCATION_VARIABLES
    }
    return {
        "triton_fingerprint": process_fingerprint(),
        "variables": dict(sorted(variables.items())),
        "debug": bool(_knob("runtime", "debug")),
    }


_KNOBS: list[Any] = []


def _knob(group: str, name: str) -> Any:
    """``triton.knobs.<group>.<name>`` or None (the module is looked up once: launches ask for
    hooks every time, and ``from triton import knobs`` per launch costs ~10 µs)."""
    if not _KNOBS:
        try:
            from triton import knobs
        except ImportError:
            knobs = None
        _KNOBS.append(knobs)
    return getattr(getattr(_KNOBS[0], group, None), name, None)


def _hooks_installed(kernel: Any) -> bool:
    """Triton hooks (profilers, pre-run hooks) expect the JIT path: leave those launches to it."""
    if getattr(kernel, "pre_run_hooks", None):
        return True
    for hook in _HOOKS:
        value = _knob("runtime", hook)
        # Triton 3.9 keeps launch hooks in a HookChain: installed once its list is not empty.
        if value is not None and getattr(value, "calls", True):
            return True
    return False


# ------------------------------------------------------------------------ recording
def _kernel_name(kernel: Any) -> str | None:
    fn = getattr(kernel, "fn", None)
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else None


def _json_scalar(value: object) -> bool:
    return value is None or type(value) in (bool, int, float, str)


def _single_index(path: object) -> int | None:
    """Triton keys constants and attributes by a path into the arguments: ``(i,)``."""
    if isinstance(path, tuple) and len(path) == 1 and type(path[0]) is int:
        return path[0]
    if type(path) is int:
        return path
    return None


def _consistent(cls: tuple[Any, ...], triton_type: object, divisible: bool, constant: Any) -> bool:
    """Whether Triton's choice for one argument fits warpforge's class of it."""
    if not isinstance(triton_type, str):
        return False
    if triton_type == "constexpr":  # Triton specialised the value itself
        return cls[0] == "n" or (cls[0] == "i" and cls[2] and constant == 1)
    if cls[0] == "t":
        return triton_type.startswith("*") and (cls[2] or not divisible)
    if cls[0] == "d":
        return (
            triton_type.startswith("tensordesc<")
            and f"[{cls[2]}]" in triton_type
            and (not divisible and constant is None)
        )
    if cls[0] == "i":
        return triton_type == cls[1] and (cls[3] or not divisible)
    if cls[0] == "b":
        return triton_type in ("i1", "u1") and not divisible
    if cls[0] == "f":
        return triton_type.startswith("fp") and not divisible
    return False


def describe_launch(
    kernel: Any, args: Sequence[object], options: Mapping[str, Any], compiled: Any
) -> dict[str, Any] | None:
    """The record of one JIT launch (``kernel[grid](*args, **options)`` returned ``compiled``),
    or None when Triton's choice cannot be vouched for from warpforge's argument classes."""
    try:
        return _describe(kernel, args, options, compiled)
    except Exception as error:  # a record is an optimisation only
        logger.debug("launch of %r not recorded: %s", kernel, error)
        return None


def _describe(
    kernel: Any, args: Sequence[object], options: Mapping[str, Any], compiled: Any
) -> dict[str, Any] | None:
    name = _kernel_name(kernel)
    src = getattr(compiled, "src", None)
    digest = getattr(compiled, "hash", None)
    metadata = getattr(compiled, "metadata", None)
    if name is None or src is None or not isinstance(digest, str) or metadata is None:
        return None
    arg_names = list(getattr(kernel, "arg_names", ()))
    signature = dict(getattr(src, "signature", {}))
    key = argument_key(args)
    constexpr_names = [k for k in options if k not in LAUNCH_OPTIONS]
    if (
        key is None
        or list(signature) != arg_names
        or len(args) + len(constexpr_names) != len(arg_names)
        or sorted(constexpr_names) != sorted(arg_names[len(args) :])
        or not all(_json_scalar(v) for v in options.values())
    ):
        return None
    constants: dict[int, Any] = {}
    for path, value in dict(getattr(src, "constants", {})).items():
        index = _single_index(path)
        if index is None or not _json_scalar(value):
            return None
        constants[index] = value
    attrs: dict[int, Any] = {}
    for path, value in dict(getattr(src, "attrs", {})).items():
        index = _single_index(path)
        if index is None or not isinstance(value, (list, tuple)):
            return None
        pairs = [list(p) for p in value]
        if any(len(p) != 2 or p[0] != _DIVISIBILITY or p[1] != 16 for p in pairs):
            return None  # an attribute warpforge's classes may not capture
        attrs[index] = pairs
    # Some Triton releases list every argument, with no pairs where nothing is specialised.
    divisible = {index for index, pairs in attrs.items() if pairs}
    types = list(signature.values())
    for index, cls in enumerate(key):
        if not _consistent(cls, types[index], index in divisible, constants.get(index)):
            return None
    for index in range(len(args), len(arg_names)):
        wanted = options[arg_names[index]]
        if types[index] != "constexpr" or index in divisible:
            return None
        if constants.get(index) != wanted or type(constants.get(index)) is not type(wanted):
            return None
    for option in ("num_warps", "num_stages"):
        if option in options and getattr(metadata, option, None) != options[option]:
            return None
    return {
        "kernel": name,
        "arg_names": arg_names,
        "options": dict(options),
        "key": [list(c) for c in key],
        # A list in parameter order: the registry stores metadata as JSON with sorted keys, and
        # Triton's launcher reads the signature in its dict order.
        "signature": types,
        "constants": [[i, v] for i, v in sorted(constants.items())],
        "attrs": [[i, v] for i, v in sorted(attrs.items())],
        "hash": digest,
    }


# ------------------------------------------------------------------------ launching
class _Record:
    """One recorded launch; its CompiledKernel is built at first use (per CUDA device)."""

    def __init__(self, record: Mapping[str, Any], folder: Path) -> None:
        self.record = record
        self.folder = folder
        self.arg_names = tuple(record["arg_names"])
        self.constexpr_names = self.arg_names[len(record["key"]) :]
        # Triton's signature: parameter name -> type, in parameter order (the launcher's order).
        self.signature = dict(zip(self.arg_names, record["signature"], strict=True))
        self.compiled: dict[int, Any] = {}

    def load(self, kernel: Any) -> Any:
        """Triton's CompiledKernel for the recorded binary, checked against the record."""
        from triton.compiler.compiler import ASTSource, CompiledKernel

        from warpforge.blueprint.triton_binaries import folder_for_hash

        record = self.record
        if tuple(getattr(kernel, "arg_names", ())) != self.arg_names:
            raise ValueError("the kernel's parameters differ from the record's")
        if folder_for_hash(record["hash"]) != self.folder.name:
            raise ValueError("the record's binary is not the one in its Triton cache folder")
        groups = list(self.folder.glob("__grp__*.json"))
        if len(groups) != 1:
            raise FileNotFoundError(f"no single Triton group file in {self.folder}")
        children = json.loads(groups[0].read_text()).get("child_paths")
        if not isinstance(children, dict) or not children:
            raise ValueError(f"Triton group file without child_paths: {groups[0]}")
        metadata_group = {}
        for child, path in children.items():
            located = Path(str(path))
            if located.parent != self.folder or not located.is_file():
                raise FileNotFoundError(f"Triton cache file {located} missing or elsewhere")
            metadata_group[child] = str(located)
        constants = {(i,): v for i, v in record["constants"]}
        attrs = {(i,): [list(p) for p in v] for i, v in record["attrs"]}
        src = ASTSource(kernel, dict(self.signature), constants, attrs)
        compiled = CompiledKernel(src, metadata_group, record["hash"])
        num_warps = record["options"].get("num_warps")
        if compiled.hash != record["hash"] or compiled.name != record["kernel"]:
            raise ValueError("the stored binary is not the recorded kernel")
        if num_warps is not None and compiled.metadata.num_warps != num_warps:
            raise ValueError("the stored binary was built for another num_warps")
        return compiled


class DirectLaunches:
    """A program's recorded launches; :meth:`launch` runs one or says it did not."""

    def __init__(self, records: Mapping[tuple[Any, ...], _Record], label: str) -> None:
        self._records = dict(records)
        self._label = label

    def __len__(self) -> int:
        return len(self._records)

    @classmethod
    def from_metadata(
        cls, metadata: Mapping[str, Any], root: Path | None, label: str
    ) -> DirectLaunches | None:
        """The records of a Triton-binaries entry's metadata (None: none usable here)."""
        launches = metadata.get("launches")
        folders = metadata.get("triton_folders")
        if not enabled() or root is None or not isinstance(launches, list) or not launches:
            return None
        if not isinstance(folders, list) or metadata.get("launch_format") != FORMAT:
            return None
        if metadata.get("launch_environment") != environment():
            _count("stale", label, "Triton, its TRITON_* variables or debug switch changed")
            return None
        records: dict[tuple[Any, ...], _Record] = {}
        for record in launches:
            try:
                folder = folders[record["folder"]]
                if not isinstance(folder, str) or "/" in folder or folder.startswith("."):
                    continue
                key = (
                    record["kernel"],
                    _options_key(record["options"]),
                    tuple(tuple(c) for c in record["key"]),
                )
                records[key] = _Record(record, root / folder)
            except (KeyError, IndexError, TypeError, ValueError):
                continue
        return cls(records, label) if records else None

    def launch(
        self,
        kernel: Any,
        grid: Sequence[int],
        args: Sequence[object],
        options: Mapping[str, Any],
    ) -> bool:
        """Launch through the recorded binary; False (nothing launched) when no record applies
        or anything fails: the caller then launches through ``JITFunction.run``."""
        name = _kernel_name(kernel)
        record = self._records.get((name, _options_key(options), argument_key(args)))
        if record is None:
            _count("no-record", self._label, "no recorded launch for these arguments/options")
            return False
        if _hooks_installed(kernel):
            _count("hooks", self._label, "Triton hooks are installed")
            return False
        try:
            device, stream = _device_and_stream()
            compiled = record.compiled.get(device)
            if compiled is None:
                compiled = record.compiled[device] = record.load(kernel)
                _count("loaded", self._label, None)
            run = compiled.run  # builds the launcher and loads the module on first use
            full = list(args)
            full += [options[n] for n in record.constexpr_names]
            if len(full) != len(record.arg_names):
                raise ValueError("argument count differs from the kernel's parameters")
            grid_0 = grid[0]
            grid_1 = grid[1] if len(grid) > 1 else 1
            grid_2 = grid[2] if len(grid) > 2 else 1
            run(
                grid_0,
                grid_1,
                grid_2,
                stream,
                compiled.function,
                compiled.packed_metadata,
                None,  # launch metadata: only for launch hooks, which are not installed
                None,
                None,
                *full,
            )
        except Exception as error:
            self._drop(name, options, args)
            _count("error", self._label, f"{type(error).__name__}: {error}")
            logger.debug("direct launch of %s failed", name, exc_info=error)
            return False
        return True

    def _drop(self, name: str | None, options: Mapping[str, Any], args: Sequence[object]) -> None:
        self._records.pop((name, _options_key(options), argument_key(args)), None)


def _device_and_stream() -> tuple[int, Any]:
    """The current device and stream, asked of Triton's driver as ``JITFunction.run`` does."""
    from triton.runtime.driver import driver

    active = driver.active
    device = active.get_current_device()
    return device, active.get_current_stream(device)


def _count(outcome: str, label: str, reason: str | None) -> None:
    """Count a direct-launch outcome; log each fallback reason once per blueprint."""
    from warpforge.cache import default_metrics

    default_metrics().record_direct_launch(outcome)
    if reason is None:
        return
    with _LOCK:
        first = (label, outcome) not in _LOGGED
        _LOGGED.add((label, outcome))
    if first:
        logger.info(
            "blueprint %s: launching through Triton's JIT instead of the recorded binary (%s)",
            label,
            reason,
        )
