"""Deterministic keys and artifacts for the kernel-cache tests (importable by spawned workers)."""

from __future__ import annotations

from warpforge.cache import CacheKey, KernelArtifact


def make_key(name: str, **specialisation: str) -> CacheKey:
    return CacheKey(
        graph_hash=f"graph-{name}",
        arch="sm_90",
        warpforge_version="0.1.0",
        triton_version="3.6.0",
        torch_version="2.11.0",
        specialisation=tuple(specialisation.items()) or (("x.dtype", "float32"),),
    )


def make_artifact(name: str, size: int = 64) -> KernelArtifact:
    """Deterministic content that differs per name (so a mix-up is visible)."""
    body = (f"# kernel {name}\n".encode() * (size // 8 + 1))[:size]
    return KernelArtifact(
        files={"kernel.py": body, "kernel.cubin": bytes(range(256)) * 2 + name.encode()},
        metadata={"entry_point": f"kernel_{name}", "signature": ["*fp32", "i32"], "name": name},
    )
