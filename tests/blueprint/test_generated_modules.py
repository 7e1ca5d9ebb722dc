"""Generated modules: @triton.jit deferred to first use, stored bytecode, and both used by compile()."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest
import torch
from blueprint_child_process import run_child

import warpforge
from warpforge.blueprint import BlueprintBuilder, KernelSourceGenerator, generated_modules
from warpforge.blueprint.generated_modules import (
    DEFERRED_JIT,
    bytecode_of,
    deferred_text,
    generated_kernel,
    load_source_module,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SOURCE = b"""import triton
import triton.language as tl

SCALE = 3.0


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 3.0, mask=mask)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def helper(value):
    return value * SCALE
"""


def _digest(source: bytes) -> str:
    return hashlib.sha256(source + os.urandom(8)).hexdigest()  # a module of its own per test


def _bias_gelu():  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("bias_gelu_bytecode")
    x = b.input("x", ("B", 40), "float32")
    bias = b.input("bias", (40,), "float32")
    b.output("y", b.op("gelu", b.op("add", x, bias), approximate="tanh"))
    return b.build()


def test_deferred_text_replaces_only_decorators_of_top_level_functions() -> None:
    source = b"@triton.jit\ndef a(x):\n    pass\n\n@triton.jit  \ndef b(x):\n    pass\n"
    source += b"class C:\n    @triton.jit\n    def c(self):\n        pass\n@triton.jit\n"
    text, names = deferred_text(source)
    lines = text.decode().split("\n")
    assert names == ("a",)
    assert lines[0] == DEFERRED_JIT and lines[1] == "def a(x):"
    assert lines[4] == "@triton.jit  " and lines[8] == "    @triton.jit"  # not exactly the line
    assert lines[-2] == "@triton.jit"  # no def follows
    assert len(lines) == len(source.decode().split("\n"))


def test_generated_kernels_are_jitted_at_first_use_once() -> None:
    import triton

    module = load_source_module(SOURCE, _digest(SOURCE))
    assert type(module.scale_kernel).__name__ == "function"  # not jitted at import
    kernel = generated_kernel(module, "scale_kernel")
    assert kernel is not module.__dict__.get("add_kernel")
    assert isinstance(kernel, triton.runtime.jit.KernelInterface)
    assert generated_kernel(module, "scale_kernel") is kernel  # once per module
    assert module.scale_kernel is kernel
    assert type(module.add_kernel).__name__ == "function"  # never asked for: never jitted
    assert generated_kernel(module, "helper") is module.helper  # not a deferred kernel
    assert generated_kernel(module, "SCALE") == 3.0
    # the module file keeps every line where the source has it
    lines = Path(module.__file__).read_text().split("\n")
    assert lines == SOURCE.decode().replace("@triton.jit", DEFERRED_JIT).split("\n")


def test_a_deferred_kernel_keeps_the_start_line_and_text_triton_hashes(tmp_path: Path) -> None:
    # Triton's cache key holds the text from `def` on and the line the function starts at
    # (its first decorator's): the same as when @triton.jit runs at import
    import triton

    path = tmp_path / "decorated_at_import.py"
    path.write_bytes(SOURCE)
    spec = importlib.util.spec_from_file_location("decorated_at_import", path)
    assert spec is not None and spec.loader is not None
    eager = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(eager)
    deferred = load_source_module(SOURCE, _digest(SOURCE)).add_kernel  # not jitted yet
    # JITFunction itself: under the interpreter triton.jit returns another class
    jit_eager = triton.runtime.jit.JITFunction(eager.add_kernel.fn)
    jit_deferred = triton.runtime.jit.JITFunction(deferred)
    assert jit_deferred.starting_line_number == jit_eager.starting_line_number
    assert jit_deferred.src == jit_eager.src


@pytest.mark.parametrize("with_bytecode", [False, True])
def test_a_deferred_kernel_runs(with_bytecode: bool) -> None:
    bytecode = bytecode_of(SOURCE) if with_bytecode else None
    module = load_source_module(SOURCE, _digest(SOURCE), bytecode)
    x, y = torch.randn(1000, device=DEVICE), torch.randn(1000, device=DEVICE)
    out = torch.full_like(x, float("nan"))
    generated_kernel(module, "add_kernel")[(4,)](x, y, out, 1000, BLOCK=256)
    torch.testing.assert_close(out, x + y)
    generated_kernel(module, "scale_kernel")[(4,)](x, out, 1000, BLOCK=256)
    torch.testing.assert_close(out, x * 3.0)


def test_stored_bytecode_is_run_moved_to_the_module_file(monkeypatch: pytest.MonkeyPatch) -> None:
    bytecode = bytecode_of(SOURCE)

    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("the stored bytecode fits: nothing to compile")

    monkeypatch.setattr(generated_modules, "compile_text", no_compile)
    module = load_source_module(SOURCE, _digest(SOURCE), bytecode)
    assert module.helper(2.0) == 6.0
    assert module.helper.__code__.co_filename == module.__file__
    assert module.scale_kernel.__code__.co_filename == module.__file__


@pytest.mark.parametrize(
    "damage",
    ["another source", "another Python", "truncated", "garbage after the header"],
)
def test_bytecode_that_does_not_fit_is_ignored(damage: str) -> None:
    other = SOURCE.replace(b"* SCALE", b"* SCALE * 2")
    header = len(importlib.util.MAGIC_NUMBER) + 32
    bytecode = {
        "another source": bytecode_of(other),
        "another Python": b"\x00\x00\r\n" + bytecode_of(SOURCE)[4:],
        "truncated": bytecode_of(SOURCE)[: header + 10],
        "garbage after the header": bytecode_of(SOURCE)[:header] + os.urandom(64),
    }[damage]
    module = load_source_module(SOURCE, _digest(SOURCE), bytecode)
    assert module.helper(2.0) == 6.0  # this source's code, compiled from its text


def test_a_new_process_runs_the_entrys_bytecode(fresh_blueprint_cache: Path) -> None:
    ir = _bias_gelu()
    x, bias = torch.randn(7, 40, device=DEVICE), torch.randn(40, device=DEVICE)
    warpforge.compile(ir, strict=True)(x, bias)
    entries = [p for p in fresh_blueprint_cache.rglob("kernels.bytecode")]
    assert len(entries) == 1
    script = """
import json, sys, torch
import warpforge
from warpforge.blueprint import BlueprintIR, generated_modules
def no_compile(*args, **kwargs):
    raise AssertionError("the entry's bytecode fits: nothing to compile")
generated_modules.compile_text = no_compile
ir = BlueprintIR.from_json(sys.stdin.read())
device = "cuda" if torch.cuda.is_available() else "cpu"
x, bias = torch.randn(3, 40, device=device), torch.randn(40, device=device)
out = warpforge.compile(ir, strict=True)(x, bias)
expected = torch.nn.functional.gelu(x + bias, approximate="tanh")
print(json.dumps({"error": (out - expected).abs().max().item()}))
"""
    done = run_child(script, ir, fresh_blueprint_cache)
    assert json.loads(done.stdout.strip().splitlines()[-1])["error"] < 1e-5


def test_generated_source_shown_to_users_keeps_its_decorators() -> None:
    source = KernelSourceGenerator(_bias_gelu()).source()
    assert "@triton.jit\ndef " in source and DEFERRED_JIT not in source
