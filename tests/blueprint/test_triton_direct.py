"""Direct launches of recorded Triton binaries: argument classes, records, lookups, fallbacks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from warpforge.blueprint import triton_binaries, triton_direct
from warpforge.cache import default_metrics

ALIGNED = 16


def _fake_kernel(names: list[str], name: str = "k") -> SimpleNamespace:
    return SimpleNamespace(fn=SimpleNamespace(__name__=name), arg_names=names, pre_run_hooks=[])


def _compiled(
    signature: dict[str, str],
    constants: dict[tuple[int, ...], Any],
    attrs: dict[tuple[int, ...], Any],
    num_warps: int = 4,
    digest: str = "ab" * 32,
) -> SimpleNamespace:
    src = SimpleNamespace(signature=signature, constants=constants, attrs=attrs)
    return SimpleNamespace(
        src=src, hash=digest, metadata=SimpleNamespace(num_warps=num_warps, num_stages=3)
    )


DIV = [["tt.divisibility", 16]]
NAMES = ["x_ptr", "stride", "n", "y_ptr", "BLOCK", "INDEX_64"]


def _launch(x: torch.Tensor, stride: int, n: int, y: torch.Tensor) -> tuple[Any, ...]:
    options = {"BLOCK": 64, "INDEX_64": False, "num_warps": 4}
    return [x, stride, n, y], options


def _triton_choice(x_div: bool = True, stride_type: str = "constexpr", n_div: bool = True) -> Any:
    """What Triton 3.x picks for _launch(aligned x, 1, 32, aligned y): the stride 1 is a
    specialised constant, 32 and the pointers carry a divisibility hint."""
    types = ["*fp32", stride_type, "i32", "*fp32", "constexpr", "constexpr"]
    signature = dict(zip(NAMES, types, strict=True))
    constants: dict[tuple[int, ...], Any] = {(4,): 64, (5,): False}
    if stride_type == "constexpr":
        constants[(1,)] = 1
    attrs = {(3,): DIV}
    if x_div:
        attrs[(0,)] = DIV
    if n_div:
        attrs[(2,)] = DIV
    return _compiled(signature, constants, attrs)


def test_argument_classes_capture_what_triton_specialises_on() -> None:
    base = torch.randn(40)
    assert triton_direct.argument_class(base) == ("t", "torch.float32", True)
    assert triton_direct.argument_class(base[1:]) == ("t", "torch.float32", False)
    assert triton_direct.argument_class(base[4:]) == ("t", "torch.float32", True)
    assert triton_direct.argument_class(1) == ("i", "i32", True, False)
    assert triton_direct.argument_class(48) == ("i", "i32", False, True)
    assert triton_direct.argument_class(-7) == ("i", "i32", False, False)
    assert triton_direct.argument_class(2**31) == ("i", "i64", False, True)
    assert triton_direct.argument_class(-(2**31) - 1) == ("i", "i64", False, False)
    assert triton_direct.argument_class(2**63 + 1) == ("i", "u64", False, False)
    assert triton_direct.argument_class(True) == ("b",)  # not an int equal to 1
    assert triton_direct.argument_class(0.5) == ("f",)
    assert triton_direct.argument_class(None) == ("n",)
    assert triton_direct.argument_class("text") is None
    assert triton_direct.argument_key([base, 3]) is not None
    assert triton_direct.argument_key([base, object()]) is None


def test_tensor_descriptors_are_classed_by_dtype_and_block_shape() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    a = torch.randn(64, 48, dtype=torch.float16)
    described = triton_direct.argument_class(TensorDescriptor.from_tensor(a, [32, 16]))
    assert described is not None
    assert described[:3] == ("d", "torch.float16", "32, 16")
    # another base of the same dtype and block: the same class (Triton's type is the same)
    other = TensorDescriptor.from_tensor(torch.randn(128, 80, dtype=torch.float16), [32, 16])
    assert triton_direct.argument_class(other) == described
    assert triton_direct.argument_class(TensorDescriptor.from_tensor(a, [16, 16])) != described
    assert triton_direct.argument_class(TensorDescriptor.from_tensor(a.float(), [32, 16])) != (
        described
    )
    # the class survives the registry's JSON (lists) back into a hashable key
    key = triton_direct.argument_key([TensorDescriptor.from_tensor(a, [32, 16]), 3])
    assert key is not None
    assert tuple(tuple(c) for c in json.loads(json.dumps([list(c) for c in key]))) == key


def _descriptor_launch(block: list[int]) -> tuple[list[Any], dict[str, Any], Any]:
    from triton.tools.tensor_descriptor import TensorDescriptor

    a = TensorDescriptor.from_tensor(torch.randn(64, 32, dtype=torch.float16), [16, 16])
    args: list[Any] = [a, torch.randn(64), 32]
    options = {"BLOCK": 64, "num_warps": 4}
    signature = {
        "a_desc": f"tensordesc<fp16{block}>",
        "y_ptr": "*fp32",
        "n": "i32",
        "BLOCK": "constexpr",
    }
    compiled = _compiled(signature, {(3,): 64}, {(1,): DIV, (2,): DIV})
    return args, options, compiled


def test_a_tensor_descriptor_launch_is_recorded_when_triton_typed_it_as_classed() -> None:
    names = ["a_desc", "y_ptr", "n", "BLOCK"]
    args, options, compiled = _descriptor_launch([16, 16])
    record = triton_direct.describe_launch(_fake_kernel(names), args, options, compiled)
    assert record is not None and record["key"][0][:3] == ["d", "torch.float16", "16, 16"]
    args, options, compiled = _descriptor_launch([32, 16])  # Triton saw another block shape
    assert triton_direct.describe_launch(_fake_kernel(names), args, options, compiled) is None
    args, options, compiled = _descriptor_launch([16, 16])
    compiled.src.attrs[(0,)] = DIV  # a hint the descriptor's class does not capture
    assert triton_direct.describe_launch(_fake_kernel(names), args, options, compiled) is None


def test_a_consistent_launch_is_recorded_with_everything_needed_to_replay_it() -> None:
    x, y = torch.randn(64), torch.randn(64)
    args, options = _launch(x, 1, 32, y)
    record = triton_direct.describe_launch(_fake_kernel(NAMES), args, options, _triton_choice())
    assert record is not None
    assert record["kernel"] == "k" and record["arg_names"] == NAMES
    assert record["signature"] == ["*fp32", "constexpr", "i32", "*fp32", "constexpr", "constexpr"]
    assert record["options"] == options
    assert record["key"][1] == ["i", "i32", True, False]
    assert record["constants"] == [[1, 1], [4, 64], [5, False]]
    assert [i for i, _ in record["attrs"]] == [0, 2, 3]
    json.dumps(record)  # travels in the registry entry's JSON metadata


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"x": "unaligned"}, "a divisibility hint on an unaligned pointer"),
        ({"stride": 3}, "a specialised constant that is not 1"),
        ({"stride_type": "i64"}, "an int typed wider than its range"),
        ({"num_warps": 8}, "a binary built for another num_warps"),
        ({"block": 128}, "a constexpr that differs from the launch"),
        ({"extra_attr": True}, "an attribute the classes do not capture"),
        ({"missing_param": True}, "arguments that do not cover the parameters"),
        ({"renamed": True}, "a signature for other parameters"),
    ],
)
def test_an_inconsistent_launch_is_not_recorded(change: dict[str, Any], why: str) -> None:
    base = torch.randn(80)
    x = base[1:] if change.get("x") == "unaligned" else base[:64]
    args, options = _launch(x, change.get("stride", 1), 32, torch.randn(64))
    compiled = _triton_choice(stride_type=change.get("stride_type", "constexpr"))
    if change.get("stride_type") == "i64":
        args[1] = 5  # an i32 value
    compiled.metadata.num_warps = change.get("num_warps", 4)
    if "block" in change:
        options["BLOCK"] = change["block"]
    if change.get("extra_attr"):
        compiled.src.attrs[(2,)] = [*DIV, ["tt.pointer_range", 32]]
    names = list(NAMES)
    if change.get("missing_param"):
        args = args[:-1]
    if change.get("renamed"):
        names[0] = "a_ptr"
    record = triton_direct.describe_launch(_fake_kernel(names), args, options, compiled)
    assert record is None, why


def test_empty_attribute_lists_mean_no_hint() -> None:
    """Triton releases that list every argument in ``attrs`` give [] where nothing applies."""
    args, options = _launch(torch.randn(64), 1, 40, torch.randn(64))  # 40: not divisible
    choice = _triton_choice(n_div=False)
    choice.src.attrs.update({(1,): [], (2,): [], (4,): [], (5,): []})
    record = triton_direct.describe_launch(_fake_kernel(NAMES), args, options, choice)
    assert record is not None and record["key"][2] == ["i", "i32", False, False]


def test_a_launch_without_a_compiled_kernel_is_not_recorded() -> None:
    args, options = _launch(torch.randn(64), 1, 32, torch.randn(64))
    assert triton_direct.describe_launch(_fake_kernel(NAMES), args, options, None) is None


class _FakeCompiled:
    """Stands in for Triton's CompiledKernel: remembers what its launcher was called with."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.function = "function-handle"
        self.packed_metadata = ("packed",)
        self.fail = fail

    @property
    def run(self) -> Any:
        def launcher(*call: Any) -> None:
            if self.fail:
                raise RuntimeError("launch failed")
            self.calls.append(call)

        return launcher


def _fake_triton_folder(root: Path, seed: str) -> SimpleNamespace:
    digest = hashlib.sha256(seed.encode()).hexdigest()
    from triton.runtime.cache import _base32

    folder = root / _base32(digest)
    folder.mkdir(parents=True)
    (folder / "k.json").write_text('{"name": "k"}')
    (folder / "k.cubin").write_bytes(b"\0binary")
    group = {"child_paths": {n: str(folder / n) for n in ("k.json", "k.cubin")}}
    (folder / "__grp__k.json").write_text(json.dumps(group))
    return SimpleNamespace(hash=digest)


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A binaries entry with one launch record, and a DirectLaunches whose binary is a fake."""
    pytest.importorskip("triton.runtime.cache")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    x, y = torch.randn(64), torch.randn(64)
    args, options = _launch(x, 1, 32, y)
    choice = _triton_choice()
    entry = _fake_triton_folder(tmp_path / "triton", "kernel")
    choice.hash = entry.hash
    record = triton_direct.describe_launch(_fake_kernel(NAMES), args, options, choice)
    artifact = triton_binaries.collect([entry], [record])
    assert artifact is not None and artifact.metadata["launches"][0]["folder"] == 0
    fake = _FakeCompiled()
    monkeypatch.setattr(triton_direct._Record, "load", lambda self, kernel: fake)
    monkeypatch.setattr(triton_direct, "_device_and_stream", lambda: (0, 1234))
    default_metrics().reset()
    return SimpleNamespace(artifact=artifact, fake=fake, args=args, options=options)


def _direct(artifact: Any) -> triton_direct.DirectLaunches | None:
    return triton_direct.DirectLaunches.from_metadata(
        artifact.metadata, triton_binaries.triton_cache_dir(), "unit"
    )


def test_a_matching_launch_runs_the_recorded_binary_with_arguments_in_parameter_order(
    recorded: Any,
) -> None:
    direct = _direct(recorded.artifact)
    assert direct is not None and len(direct) == 1
    x2, y2 = torch.randn(64), torch.randn(64)  # other tensors of the same classes
    args = [x2, 1, 48, y2]
    assert direct.launch(_fake_kernel(NAMES), (3, 2), args, recorded.options)
    (call,) = recorded.fake.calls
    assert call[:9] == (3, 2, 1, 1234, "function-handle", ("packed",), None, None, None)
    assert list(call[9:]) == [x2, 1, 48, y2, 64, False]
    assert default_metrics().snapshot()["direct_launch"] == {"loaded": 1}


def test_the_signature_keeps_parameter_order_through_the_registry_json(recorded: Any) -> None:
    """The registry stores metadata as JSON with sorted keys; Triton's launcher reads the
    signature in dict order, so it must come back in parameter order."""
    (stored,) = recorded.artifact.metadata["launches"]
    loaded = triton_direct._Record(stored, Path("unused"))
    assert list(loaded.signature) == NAMES
    assert list(loaded.signature.values())[:3] == ["*fp32", "constexpr", "i32"]
    short = {**stored, "signature": stored["signature"][:-1]}
    with pytest.raises(ValueError):
        triton_direct._Record(short, Path("unused"))
    metadata = {**recorded.artifact.metadata, "launches": [short]}
    assert _direct(SimpleNamespace(metadata=metadata)) is None


def test_other_argument_classes_or_options_go_through_the_jit(recorded: Any) -> None:
    direct = _direct(recorded.artifact)
    assert direct is not None
    kernel = _fake_kernel(NAMES)
    x, y = torch.randn(80), torch.randn(64)
    assert not direct.launch(kernel, (1,), [x[1:], 1, 32, y], recorded.options)  # unaligned
    assert not direct.launch(kernel, (1,), [x[:64], 2, 32, y], recorded.options)  # stride != 1
    assert not direct.launch(kernel, (1,), [x[:64], 1, 33, y], recorded.options)  # n % 16
    assert not direct.launch(kernel, (1,), [x[:64].half(), 1, 32, y], recorded.options)
    assert not direct.launch(kernel, (1,), [x[:64], 1, 32, y], {**recorded.options, "BLOCK": 32})
    assert not direct.launch(kernel, (1,), [x[:64], 1, 32, y], {**recorded.options, "num_warps": 8})
    assert not direct.launch(_fake_kernel(NAMES, "other"), (1,), recorded.args, recorded.options)
    assert recorded.fake.calls == []
    assert default_metrics().snapshot()["direct_launch"] == {"no-record": 7}


def test_hooks_leave_the_launch_to_the_jit(recorded: Any) -> None:
    direct = _direct(recorded.artifact)
    assert direct is not None
    kernel = _fake_kernel(NAMES)
    kernel.pre_run_hooks = [lambda *a, **k: None]
    assert not direct.launch(kernel, (1,), recorded.args, recorded.options)
    assert recorded.fake.calls == []
    assert default_metrics().snapshot()["direct_launch"] == {"hooks": 1}


def test_a_failing_launch_falls_back_and_drops_the_record(
    recorded: Any, caplog: pytest.LogCaptureFixture
) -> None:
    direct = _direct(recorded.artifact)
    assert direct is not None
    recorded.fake.fail = True
    kernel = _fake_kernel(NAMES)
    with caplog.at_level("INFO", logger="warpforge.blueprint"):
        assert not direct.launch(kernel, (1,), recorded.args, recorded.options)
        assert not direct.launch(kernel, (1,), recorded.args, recorded.options)
    assert default_metrics().snapshot()["direct_launch"] == {
        "loaded": 1,
        "error": 1,
        "no-record": 1,
    }
    assert sum("launch failed" in r.getMessage() for r in caplog.records) == 1


def test_records_from_another_triton_environment_are_not_used(
    recorded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")  # enters Triton's cache key
    assert _direct(recorded.artifact) is None
    assert default_metrics().snapshot()["direct_launch"] == {"stale": 1}
    monkeypatch.delenv("TRITON_ALWAYS_COMPILE")
    monkeypatch.setenv(
        "TRITON_CACHE_DIR", str(Path(recorded.artifact.metadata["triton_folders"][0]))
    )
    assert _direct(recorded.artifact) is not None  # a location only
    monkeypatch.setenv(triton_direct.SWITCH, "0")
    assert _direct(recorded.artifact) is None


def test_entries_without_records_or_with_foreign_folders_give_nothing(recorded: Any) -> None:
    metadata = dict(recorded.artifact.metadata)
    assert _direct(SimpleNamespace(metadata={**metadata, "launches": []})) is None
    assert _direct(SimpleNamespace(metadata={**metadata, "launch_format": 99})) is None
    bad = [{**metadata["launches"][0], "folder": 5}]
    assert _direct(SimpleNamespace(metadata={**metadata, "launches": bad})) is None
    escaping = {**metadata, "triton_folders": ["../escape"]}
    assert _direct(SimpleNamespace(metadata=escaping)) is None


def test_loading_checks_the_triton_folder_before_trusting_it(tmp_path: Path) -> None:
    pytest.importorskip("triton.compiler.compiler")
    record = {
        "arg_names": NAMES,
        "key": [["n"]] * 4,
        "constants": [],
        "attrs": [],
        "signature": ["*fp32", "i32", "i32", "*fp32", "constexpr", "constexpr"],
        "options": {},
        "hash": "ab" * 32,
        "kernel": "k",
    }
    with pytest.raises(ValueError, match="cache folder"):  # the hash names another folder
        triton_direct._Record(record, tmp_path / "elsewhere").load(_fake_kernel(NAMES))
    folder = tmp_path / triton_binaries.folder_for_hash(record["hash"])
    folder.mkdir()
    loader = triton_direct._Record(record, folder)
    with pytest.raises(ValueError, match="parameters"):
        loader.load(_fake_kernel(["a_ptr"]))
    with pytest.raises(FileNotFoundError, match="group file"):
        loader.load(_fake_kernel(NAMES))
    elsewhere = tmp_path / "other.cubin"
    elsewhere.write_bytes(b"x")
    group = {"child_paths": {"k.cubin": str(elsewhere)}}
    (folder / "__grp__k.json").write_text(json.dumps(group))
    with pytest.raises(FileNotFoundError, match="elsewhere"):
        loader.load(_fake_kernel(NAMES))


# ------------------------------------------------------------------------------------ GPU
def _jit_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count launches that go through Triton's JITFunction.run from here on."""
    from triton.runtime.jit import JITFunction

    calls: list[str] = []
    original = JITFunction.run

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(self.fn.__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(JITFunction, "run", counting)
    return calls


def _fresh_process_view() -> None:
    """What a new process sees: no compiled module in memory, the registry on disk."""
    from warpforge.blueprint.compiler import clear_compiled
    from warpforge.cache import KernelRegistry

    clear_compiled()
    KernelRegistry.default(refresh=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize(("rows", "cols"), [(1, 16), (5, 96), (7, 97), (33, 4099)])
def test_direct_launch_is_bitwise_the_jit_launch_for_bias_gelu(
    dtype: torch.dtype, rows: int, cols: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warpforge
    from warpforge.blueprint.problems import bias_gelu_blueprint

    ir = bias_gelu_blueprint(str(dtype).removeprefix("torch."))
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    bias = torch.randn(cols, device="cuda", dtype=dtype)
    by_jit = warpforge.compile(ir, strict=True)(x, bias)  # compiles, records the launch
    _fresh_process_view()
    default_metrics().reset()
    jit_calls = _jit_calls(monkeypatch)
    module = warpforge.compile(ir, strict=True)
    direct = module(x, bias)
    torch.cuda.synchronize()
    assert jit_calls == []
    assert default_metrics().snapshot()["direct_launch"] == {"loaded": 1}
    assert torch.equal(direct, by_jit)
    # New inputs of the same classes: the recorded binary again, still bitwise the JIT's.
    x2 = torch.randn_like(x)
    again = module(x2, bias)
    _fresh_process_view()
    monkeypatch.setenv(triton_direct.SWITCH, "0")
    assert torch.equal(again, warpforge.compile(ir, strict=True)(x2, bias))
    assert jit_calls  # switched off: the JIT path


@pytest.mark.gpu
def test_unaligned_inputs_fall_back_to_the_jit_and_stay_correct(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import warpforge
    from warpforge.blueprint.problems import bias_gelu_blueprint

    ir = bias_gelu_blueprint("float16")
    x = torch.randn(9, 64, device="cuda", dtype=torch.float16)
    bias = torch.randn(64, device="cuda", dtype=torch.float16)
    warpforge.compile(ir, strict=True)(x, bias)
    _fresh_process_view()
    default_metrics().reset()
    jit_calls = _jit_calls(monkeypatch)
    storage = torch.randn(9 * 64 + 1, device="cuda", dtype=torch.float16)
    shifted = storage[1:].view(9, 64)  # 2-byte offset: Triton drops the alignment hint
    out = warpforge.compile(ir, strict=True)(shifted, bias)
    expected = torch.nn.functional.gelu(shifted.float() + bias.float(), approximate="tanh")
    torch.testing.assert_close(out.float(), expected, atol=2e-3, rtol=2e-3)
    assert jit_calls
    assert default_metrics().snapshot()["direct_launch"].get("no-record", 0) >= 1


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize(("t", "d", "n"), [(1, 16, 16), (33, 80, 48), (67, 96, 131)])
def test_direct_launch_is_bitwise_the_jit_launch_for_a_matmul_blueprint(
    dtype: torch.dtype, t: int, d: int, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warpforge
    from warpforge.blueprint import cublas_epilogue
    from warpforge.blueprint.problems import layernorm_linear_gelu_blueprint

    # the Triton matmul kernel itself (bf16's bias + GELU group is otherwise lowered to cuBLASLt)
    monkeypatch.setattr(cublas_epilogue, "ENABLED", False)
    ir = layernorm_linear_gelu_blueprint(str(dtype).removeprefix("torch."))
    g = torch.Generator(device="cuda").manual_seed(t * 1000 + n)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device="cuda", generator=g).to(dtype)

    inputs = (rand(t, d), rand(d), rand(d), rand(n, d) / d**0.5, rand(n))
    by_jit = warpforge.compile(ir, strict=True)(*inputs)
    _fresh_process_view()
    default_metrics().reset()
    jit_calls = _jit_calls(monkeypatch)
    direct = warpforge.compile(ir, strict=True)(*inputs)
    torch.cuda.synchronize()
    assert jit_calls == []
    assert default_metrics().snapshot()["direct_launch"] == {"loaded": 2}  # row + matmul
    assert torch.equal(direct, by_jit)
