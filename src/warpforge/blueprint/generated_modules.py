"""Importing a blueprint's generated source, with its ``@triton.jit`` deferred and its bytecode kept.

A new process's first result from the disk cache pays for importing the generated module. Two
parts of that import are avoided here (profiled on the H200's host, session22-h200-2026-11-29/
compiler-call9.json, ``warm_first_result_profile``):

- **``@triton.jit`` at import.** The decorator has Triton read the kernel's source back from the
  file (``inspect.getsource``): 7.0 ms for mlp_block's four kernels, of which a run launches one
  (its first group runs in cuBLAS, its second launches either the pointer or the TMA kernel).
  The imported file names a decorator that returns the function unchanged instead, and
  :func:`generated_kernel` applies ``triton.jit`` at a kernel's first use. Triton hashes the text
  from ``def`` on and the line the function starts at (its first decorator's), neither of which
  moves, so its cache keys, and the binaries stored for them, are unchanged.
- **Compiling the source to bytecode**: 7.6 ms for causal_attention_scores, 2.2 ms for
  mlp_block. Every process imports from its own folder (:mod:`warpforge.cache.loaded_sources`),
  so Python's bytecode cache never hits there; :func:`bytecode_of` marshals the code once, when
  the cache entry is built, and :func:`load_source_module` runs it, moved to the file's path,
  where the running Python reads that bytecode (its magic number) and the code is of this very
  text (a SHA-256 in the header); otherwise it compiles the source as before.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import sys
import threading
from types import CodeType, FunctionType, ModuleType
from typing import Any

JIT_DECORATOR = "@triton.jit"
DEFERRED_JIT = "@_warpforge_deferred_jit"
"""What the imported file has in place of ``@triton.jit``: keeps the line a function starts at."""
_DEFERRED_ATTRIBUTE = "__warpforge_deferred_jit__"
_CHECKSUM_ATTRIBUTE = "__warpforge_sha256__"
_JIT_LOCK = threading.Lock()


def deferred_text(source: bytes) -> tuple[bytes, tuple[str, ...]]:
    """``source`` with each ``@triton.jit`` line just above a top-level ``def`` replaced by
    :data:`DEFERRED_JIT`, and the names of those functions."""
    lines = source.decode().split("\n")
    names: list[str] = []
    for i in range(len(lines) - 1):
        if lines[i] == JIT_DECORATOR and lines[i + 1].startswith("def "):
            lines[i] = DEFERRED_JIT
            names.append(lines[i + 1][4:].split("(", 1)[0].strip())
    return "\n".join(lines).encode(), tuple(names)


def _header(text: bytes) -> bytes:
    return importlib.util.MAGIC_NUMBER + hashlib.sha256(text).digest()


def compile_text(text: bytes, filename: str) -> CodeType:
    """The module code of ``text`` (what a load without fitting bytecode runs)."""
    return compile(text, filename, "exec", dont_inherit=True)


def bytecode_of(source: bytes) -> bytes:
    """The module code of ``source`` as :func:`load_source_module` imports it, marshalled for
    this Python, behind a header naming its bytecode version and the text it was compiled from."""
    text, _ = deferred_text(source)
    return _header(text) + marshal.dumps(compile_text(text, "<warpforge generated>"))


def _relocated(code: CodeType, filename: str) -> CodeType:
    """``code`` and the code objects nested in it as if compiled from ``filename``."""
    consts = tuple(
        _relocated(c, filename) if isinstance(c, CodeType) else c for c in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


def _module_code(text: bytes, filename: str, bytecode: bytes | None) -> CodeType:
    header = _header(text)
    if bytecode is not None and bytecode.startswith(header):
        try:
            code = marshal.loads(bytecode[len(header) :])
        except (EOFError, ValueError, TypeError):
            code = None
        if isinstance(code, CodeType):
            return _relocated(code, filename)
    return compile_text(text, filename)


def load_source_module(source: bytes, digest: str, bytecode: bytes | None = None) -> ModuleType:
    """Import generated source from a file named by its cache digest, in this process's folder
    of loaded sources (:mod:`warpforge.cache.loaded_sources`: deleted when the process ends),
    with its kernels' ``@triton.jit`` deferred to :func:`generated_kernel`. ``bytecode``
    (:func:`bytecode_of` of ``source``, from the cache entry) is run instead of compiling the
    text where it fits this Python."""
    from warpforge.cache import loaded_sources

    name = f"warpforge_blueprint_{digest[:40]}"
    loaded = sys.modules.get(name)
    checksum = hashlib.sha256(source).hexdigest()
    if loaded is not None and getattr(loaded, _CHECKSUM_ATTRIBUTE, None) == checksum:
        return loaded
    text, deferred = deferred_text(source)
    path = loaded_sources.write_source(f"bp_{digest[:40]}", text)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise ImportError(f"cannot import generated kernels from {path}")
    module = importlib.util.module_from_spec(spec)
    module.__dict__[DEFERRED_JIT[1:]] = _unchanged
    sys.modules[name] = module
    try:
        exec(_module_code(text, str(path), bytecode), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    setattr(module, _DEFERRED_ATTRIBUTE, frozenset(deferred))
    setattr(module, _CHECKSUM_ATTRIBUTE, checksum)
    return module


def _unchanged(function: FunctionType) -> FunctionType:
    return function


def generated_kernel(module: ModuleType, name: str) -> Any:
    """The Triton kernel ``name`` of a module :func:`load_source_module` imported (jitted here
    at its first use, once per module)."""
    value = getattr(module, name)
    if not isinstance(value, FunctionType) or name not in getattr(module, _DEFERRED_ATTRIBUTE, ()):
        return value
    with _JIT_LOCK:
        value = getattr(module, name)
        if isinstance(value, FunctionType):  # not jitted by another thread meanwhile
            import triton

            value = triton.jit(value)
            setattr(module, name, value)
    return value
