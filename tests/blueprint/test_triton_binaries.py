"""Triton binaries stored beside a blueprint's registry entry and restored into Triton's cache."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from warpforge.blueprint import triton_binaries
from warpforge.cache import CacheKey, DiskTier, KernelRegistry

triton_cache = pytest.importorskip("triton.runtime.cache")
SRC = Path(__file__).resolve().parents[2] / "src"


def _fake_triton_entry(root: Path, seed: str) -> tuple[SimpleNamespace, Path, dict[str, bytes]]:
    """A folder laid out as Triton's FileCacheManager writes one compiled kernel."""
    digest = hashlib.sha256(seed.encode()).hexdigest()
    folder = root / triton_cache._base32(digest)
    folder.mkdir(parents=True)
    contents = {"k.cubin": os.urandom(64), "k.json": b'{"name": "k"}', "k.ptx": os.urandom(32)}
    for name, data in contents.items():
        (folder / name).write_bytes(data)
    group = {"child_paths": {name: str(folder / name) for name in contents}}
    (folder / "__grp__k.json").write_text(json.dumps(group))
    return SimpleNamespace(hash=digest), folder, contents


def test_collect_then_restore_gives_triton_its_own_cache_hit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_root = tmp_path / "triton-a"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(first_root))
    compiled, folder, contents = _fake_triton_entry(first_root, "kernel-1")
    artifact = triton_binaries.collect([compiled])
    assert artifact is not None
    assert artifact.metadata["triton_folders"] == [folder.name]

    # Another machine (or a cleared Triton cache): nothing there yet.
    second_root = tmp_path / "triton-b"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(second_root))
    assert triton_binaries.restore(artifact) == 1
    # Triton's own cache manager now finds the group, pointing at the restored files.
    group = triton_cache.FileCacheManager(folder.name).get_group("k.json")
    assert group is not None
    for name, data in contents.items():
        assert Path(group[name]).parent == second_root / folder.name
        assert Path(group[name]).read_bytes() == data
    assert triton_binaries.restore(artifact) == 0  # already there: left alone
    assert not [p for p in second_root.iterdir() if p.name.startswith(".warpforge-")]


def test_collect_needs_every_kernel_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    compiled, _, _ = _fake_triton_entry(tmp_path, "kernel-1")
    missing = SimpleNamespace(hash=hashlib.sha256(b"never compiled").hexdigest())
    assert triton_binaries.collect([compiled, missing]) is None
    assert triton_binaries.collect([None]) is None  # the interpreter returns no CompiledKernel
    assert triton_binaries.collect([]) is None


def test_binaries_entry_round_trips_through_the_disk_tier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    compiled, _, _ = _fake_triton_entry(tmp_path / "triton", "kernel-2")
    artifact = triton_binaries.collect([compiled])
    assert artifact is not None
    registry = KernelRegistry(disk=DiskTier(tmp_path / "kernels"))
    key = CacheKey.for_current_environment("graph", {"x.dtype": "float16"})
    binaries_key = triton_binaries.binaries_key(key)
    assert binaries_key != key and binaries_key.digest() != key.digest()
    assert triton_binaries.fetch(registry, binaries_key) is None
    triton_binaries.store(registry, binaries_key, artifact)
    assert triton_binaries.fetch(registry, binaries_key) == artifact
    assert registry.metrics.snapshot()["lookups"] == 0  # not counted as kernel lookups


def test_restore_rejects_foreign_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from warpforge.cache import KernelArtifact

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    bad = KernelArtifact({"t0.x": b"1"}, {"format": 1, "triton_folders": ["../escape"]})
    assert triton_binaries.restore(bad) == 0
    assert triton_binaries.restore(KernelArtifact({"t0.x": b"1"}, {"format": 99})) == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.gpu
def test_registry_hit_with_an_empty_triton_cache_does_not_recompile(tmp_path: Path) -> None:
    """The second process starts with an empty Triton cache and with ptxas (Triton's cubin
    stage) made to fail: it must get its kernel from the registry's stored binaries."""
    script = """
import json, sys, torch, warpforge
if sys.argv[1:] == ["no-ptxas"]:  # any compile would now fail the strict compile below
    from triton.backends.nvidia.compiler import CUDABackend

    def refuse(*args, **kwargs):
        raise RuntimeError("recompiled: ptxas ran")

    CUDABackend.make_cubin = refuse
from warpforge.blueprint import BlueprintBuilder
b = BlueprintBuilder("bias_gelu_binaries")
x = b.input("x", ("B", 96), "float16")
bias = b.input("bias", (96,), "float16")
b.output("y", b.op("gelu", b.op("add", x, bias), approximate="tanh"))
xs = (torch.randn(5, 96, device="cuda", dtype=torch.float16),
      torch.randn(96, device="cuda", dtype=torch.float16))
out = warpforge.compile(b.build(), strict=True)(*xs)
ref = torch.nn.functional.gelu(xs[0].float() + xs[1].float(), approximate="tanh")
torch.testing.assert_close(out.float(), ref, atol=2e-3, rtol=2e-3)
print("ok")
"""

    def run(triton_dir: Path, *args: str) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(SRC),
            "WARPFORGE_CACHE_DIR": str(tmp_path / "warpforge"),
            "TRITON_CACHE_DIR": str(triton_dir),
        }
        done = subprocess.run(
            [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]

    run(tmp_path / "triton-a")  # compiles; stores the binaries beside the source
    # empty Triton cache, no ptxas: restored from the registry
    run(tmp_path / "triton-b", "no-ptxas")
    compiled_a = {p.parent.name for p in (tmp_path / "triton-a").glob("*/__grp__*.json")}
    restored_b = {p.parent.name for p in (tmp_path / "triton-b").glob("*/__grp__*.json")}
    assert compiled_a and compiled_a <= restored_b
    for name in compiled_a:
        for path in (tmp_path / "triton-a" / name).iterdir():
            if path.suffix == ".cubin":
                assert (tmp_path / "triton-b" / name / path.name).read_bytes() == path.read_bytes()
