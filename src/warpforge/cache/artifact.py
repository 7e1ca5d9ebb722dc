"""A compiled kernel as stored by the cache, and the manifest that makes corruption detectable.

Every tier that leaves the process (disk, Redis) stores a manifest next to the files: the SHA-256
and size of each file, the key, the artifact's metadata and a SHA-256 over the digest, key and
metadata. Readers rebuild the artifact only through :func:`parse_manifest` (which checks that
last checksum) and :func:`artifact_from_manifest` (which checks every file), so a torn,
truncated or bit-flipped entry, in a file or in the manifest, is reported as
:class:`CorruptEntryError` instead of being loaded.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from warpforge.validation import describe

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 2
"""2 adds ``header_sha256`` over the key and metadata; format 1 entries are misses (rebuilt)."""
# Plain file names only: no directories, no hidden files, nothing that escapes an entry's folder.
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")


class CorruptEntryError(Exception):
    """A stored entry does not match its manifest (the message says how)."""


class OutdatedEntryError(CorruptEntryError):
    """An entry in an older manifest format: nothing is wrong with it, but its key and metadata
    are not checksummed, so tiers drop it quietly (no corruption counted) and it is rebuilt."""


def _check_file_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"files: expected str file names, got {describe(name)}")
    if not _FILE_NAME.fullmatch(name) or name == MANIFEST_NAME:
        raise ValueError(
            "files: expected plain file names of letters, digits, '_', '.', '-' "
            f"(not starting with '.' or '-', at most 128 characters, not {MANIFEST_NAME!r}), "
            f"got {name!r}"
        )
    return name


def _canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@dataclass(frozen=True, eq=True)
class KernelArtifact:
    """Generated source (e.g. ``kernel.py``), optional compiled binaries, and JSON metadata.

    ``metadata`` is normalised through JSON on construction, so an artifact read back from disk
    or Redis compares equal to the one that was stored.
    """

    files: Mapping[str, bytes]
    metadata: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.files, Mapping):
            raise TypeError(
                f"files: expected a mapping of name -> bytes, got {describe(self.files)}"
            )
        if not self.files:
            raise ValueError("files: expected at least one file, got an empty mapping")
        files: dict[str, bytes] = {}
        for name, content in self.files.items():
            _check_file_name(name)
            if not isinstance(content, (bytes, bytearray, memoryview)):
                raise TypeError(f"files[{name!r}]: expected bytes, got {describe(content)}")
            files[name] = bytes(content)
        if not isinstance(self.metadata, Mapping):
            raise TypeError(f"metadata: expected a mapping, got {describe(self.metadata)}")
        try:
            metadata_json = _canonical_json(dict(self.metadata))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"metadata: expected JSON-serialisable values ({exc})") from None
        object.__setattr__(self, "files", MappingProxyType(dict(sorted(files.items()))))
        object.__setattr__(self, "metadata", MappingProxyType(json.loads(metadata_json)))
        object.__setattr__(
            self, "_nbytes", sum(len(c) for c in files.values()) + len(metadata_json)
        )

    __hash__ = None  # type: ignore[assignment]  # mappings inside: not hashable

    @property
    def nbytes(self) -> int:
        """Bytes of all files plus the metadata's JSON: what the memory tier's budget counts."""
        return self.__dict__["_nbytes"]


def file_checksum(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _header_checksum(digest: object, key: object, metadata: object) -> str:
    """SHA-256 of the manifest fields that the file checksums do not cover."""
    header = _canonical_json({"digest": digest, "key": key, "metadata": metadata})
    return hashlib.sha256(header.encode("ascii")).hexdigest()


def build_manifest(digest: str, key: Mapping[str, Any], artifact: KernelArtifact) -> bytes:
    """The manifest of ``artifact`` stored under ``digest``, as canonical JSON bytes."""
    # a JSON round trip first, so the checksum is over what a reader will decode (tuples: lists)
    key_json = json.loads(_canonical_json(dict(key)))
    metadata = dict(artifact.metadata)
    manifest = {
        "format": MANIFEST_FORMAT,
        "digest": digest,
        "key": key_json,
        "files": {
            name: {"sha256": file_checksum(content), "size": len(content)}
            for name, content in artifact.files.items()
        },
        "metadata": metadata,
        "header_sha256": _header_checksum(digest, key_json, metadata),
    }
    return _canonical_json(manifest).encode("ascii")


def parse_manifest(raw: bytes, digest: str) -> dict[str, Any]:
    """Decode and structurally check a manifest; raises :class:`CorruptEntryError`."""
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptEntryError(f"manifest is not valid JSON ({exc})") from None
    if isinstance(manifest, dict) and manifest.get("format") == 1:
        raise OutdatedEntryError("manifest format 1 does not checksum its key and metadata")
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise CorruptEntryError("manifest has no known format version")
    if manifest.get("digest") != digest:
        raise CorruptEntryError(
            f"manifest names digest {manifest.get('digest')!r}, stored under {digest!r}"
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise CorruptEntryError("manifest lists no files")
    for name, entry in files.items():
        if (
            not isinstance(name, str)
            or not _FILE_NAME.fullmatch(name)
            or not isinstance(entry, dict)
            or not isinstance(entry.get("sha256"), str)
            or not isinstance(entry.get("size"), int)
        ):
            raise CorruptEntryError(f"manifest entry for file {name!r} is malformed")
    if not isinstance(manifest.get("metadata"), dict):
        raise CorruptEntryError("manifest metadata is not an object")
    expected = _header_checksum(digest, manifest.get("key"), manifest["metadata"])
    if manifest.get("header_sha256") != expected:
        raise CorruptEntryError("manifest key or metadata does not match its SHA-256 checksum")
    return manifest


def check_file(manifest: Mapping[str, Any], name: str, content: bytes) -> None:
    """``content`` must have the size and SHA-256 the manifest records for ``name``."""
    expected = manifest["files"][name]
    if len(content) != expected["size"]:
        raise CorruptEntryError(
            f"file {name!r} has {len(content)} bytes, manifest records {expected['size']}"
        )
    if file_checksum(content) != expected["sha256"]:
        raise CorruptEntryError(f"file {name!r} does not match its SHA-256 checksum")


def artifact_from_manifest(
    manifest: Mapping[str, Any], files: Mapping[str, bytes]
) -> KernelArtifact:
    """The artifact, after checking that ``files`` are exactly the manifest's, byte for byte."""
    missing = sorted(set(manifest["files"]) - set(files))
    if missing:
        raise CorruptEntryError(f"missing file(s) {missing}")
    for name in manifest["files"]:
        check_file(manifest, name, files[name])
    return KernelArtifact(
        files={name: files[name] for name in manifest["files"]}, metadata=manifest["metadata"]
    )
