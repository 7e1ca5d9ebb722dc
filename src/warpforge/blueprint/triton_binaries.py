"""Compiled Triton binaries carried in the kernel registry, so a cache hit never recompiles.

The registry entry of a blueprint holds its generated source; Triton compiles that source at the
first launch and keeps the binaries in its own cache (``TRITON_CACHE_DIR``, default
``~/.triton/cache``). Where that cache is empty — a new machine that got the entry from Redis, a
cleared or per-job Triton cache — a registry hit would still pay Triton's full compile (about a
second per kernel). So after a blueprint's first successful GPU launch, the Triton cache folders
of its kernels are stored as a second registry entry (the program's key plus
``artifact=triton-binaries``), and before a first launch that entry, if present, is written back
into Triton's cache where it is missing. Triton then finds its own cache hit: the cache key it
computes is unchanged, and the entry's checksums were verified by the registry on the way.

Only Triton's default file cache is handled (not a custom ``knobs.cache.manager_class``); a
failure here never fails a launch, it only means Triton compiles as it would anyway.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from warpforge.cache import CacheKey, KernelArtifact

logger = logging.getLogger("warpforge.blueprint")

PART = ("artifact", "triton-binaries")
_FORMAT = 1
_GROUP_PREFIX = "__grp__"


def binaries_key(program_key: CacheKey) -> CacheKey:
    """The registry key of the binaries that belong to ``program_key``'s source."""
    return CacheKey(
        graph_hash=program_key.graph_hash,
        arch=program_key.arch,
        warpforge_version=program_key.warpforge_version,
        triton_version=program_key.triton_version,
        torch_version=program_key.torch_version,
        specialisation=(*program_key.specialisation, PART),
    )


def triton_cache_dir() -> Path | None:
    """Triton's file cache folder, or None when Triton uses a custom cache manager."""
    try:
        from triton import knobs
    except ImportError:  # older Triton: environment variable or the default location
        raw = os.environ.get("TRITON_CACHE_DIR") or os.path.join(
            os.environ.get("TRITON_HOME", os.path.expanduser("~")), ".triton", "cache"
        )
        return Path(raw)
    if getattr(knobs.cache, "manager_class", None) is not None:
        return None
    raw = knobs.cache.dir
    return Path(raw) if raw else None


def _folder_name(compiled: Any) -> str | None:
    """The folder Triton keeps ``compiled`` (a CompiledKernel) in: named by its cache hash."""
    return folder_for_hash(getattr(compiled, "hash", None))


def folder_for_hash(digest: object) -> str | None:
    """The name of the folder Triton's file cache keeps the kernel of cache hash ``digest`` in."""
    if not isinstance(digest, str):
        return None
    try:
        from triton.runtime.cache import _base32
    except ImportError:
        return digest
    try:
        return _base32(digest)
    except ValueError:
        return None


def collect(
    compiled_kernels: Iterable[Any], launches: Sequence[dict[str, Any] | None] | None = None
) -> KernelArtifact | None:
    """The Triton cache folders of ``compiled_kernels`` as one artifact (None if any is missing).

    ``launches`` (one launch record of ``triton_direct.describe_launch`` or None per compiled
    kernel) are kept in the metadata with the folder each one's binary is in, and the
    environment they are valid in."""
    root = triton_cache_dir()
    if root is None:
        return None
    files: dict[str, bytes] = {}
    folders: list[str] = []
    for index, compiled in enumerate(compiled_kernels):
        name = _folder_name(compiled)
        folder = root / name if name else None
        if folder is None or not any(folder.glob(f"{_GROUP_PREFIX}*.json")):
            return None
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.name != "lock" and not path.name.startswith("tmp."):
                files[f"t{index}.{path.name}"] = path.read_bytes()
        folders.append(name)  # type: ignore[arg-type]
    if not folders:
        return None
    metadata: dict[str, Any] = {"format": _FORMAT, "triton_folders": folders}
    recorded = [
        {**record, "folder": index}
        for index, record in enumerate(launches or ())
        if record is not None and index < len(folders)
    ]
    if recorded:
        from warpforge.blueprint import triton_direct

        metadata["launches"] = recorded
        metadata["launch_format"] = triton_direct.FORMAT
        metadata["launch_environment"] = triton_direct.environment()
    return KernelArtifact(files, metadata)


def restore(artifact: KernelArtifact) -> int:
    """Write the artifact's folders into Triton's cache where missing; returns how many."""
    root = triton_cache_dir()
    folders = artifact.metadata.get("triton_folders")
    if root is None or artifact.metadata.get("format") != _FORMAT or not isinstance(folders, list):
        return 0
    restored = 0
    for index, name in enumerate(folders):
        if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
            return restored
        target = root / name
        if any(target.glob(f"{_GROUP_PREFIX}*.json")):
            continue  # Triton has it already
        prefix = f"t{index}."
        staging = root / f".warpforge-{name}-{uuid.uuid4().hex}"
        try:
            staging.mkdir(parents=True)
            for file_name, content in artifact.files.items():
                if not file_name.startswith(prefix):
                    continue
                base = file_name[len(prefix) :]
                if base.startswith(_GROUP_PREFIX):
                    content = _relocated_group(content, target)
                (staging / base).write_bytes(content)
            try:
                os.rename(staging, target)  # atomic; replaces an empty folder Triton made
            except OSError:
                continue  # another process (or Triton) filled it meanwhile: theirs is as good
            restored += 1
        except (OSError, ValueError) as error:
            logger.debug("could not restore Triton binaries into %s: %s", target, error)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return restored


def _relocated_group(content: bytes, folder: Path) -> bytes:
    """Triton's group file lists absolute paths: point them at ``folder``."""
    group = json.loads(content)
    children = group.get("child_paths")
    if not isinstance(children, dict):
        raise ValueError("Triton group file without child_paths")
    group["child_paths"] = {
        child: str(folder / os.path.basename(str(path))) for child, path in children.items()
    }
    return json.dumps(group).encode()


def fetch(registry: Any, key: CacheKey) -> KernelArtifact | None:
    """The binaries entry from the disk or Redis tier, without counting it as a kernel lookup."""
    for tier in (registry.disk, registry.redis):
        if tier is not None:
            artifact = tier.get(key)
            if artifact is not None:
                return artifact
    return None


def store(registry: Any, key: CacheKey, artifact: KernelArtifact) -> None:
    """Publish the binaries entry to the disk and Redis tiers (failures are only logged)."""
    for tier in (registry.disk, registry.redis):
        if tier is not None:
            tier.put(key, artifact)
