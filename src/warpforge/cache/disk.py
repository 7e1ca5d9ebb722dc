"""The on-disk tier: a content-addressed, size-bounded store shared by every process on a machine.

Layout under ``root`` (default ``$WARPFORGE_CACHE_DIR/kernels``)::

    <digest[:2]>/<digest>/manifest.json   SHA-256 + size of every file, the key, the metadata
    <digest[:2]>/<digest>/<file>...       e.g. kernel.py and compiled binaries
    staging/                              entries being written (never read)
    quarantine/<digest>.<time>.<id>/      entries that failed verification, with REASON.txt
    .lock                                 flock'ed by eviction, verify and clear (never by reads)

Writes are atomic: a writer stages the whole entry (files, then the manifest) in its own folder
under ``staging/`` on the same filesystem, fsyncs it, and publishes it with one ``rename`` of the
folder. A reader therefore sees a complete entry or none. If the destination already exists
(another process won the race) and verifies, the writer discards its copy; if it does not
verify, it is quarantined and the rename retried. Readers check every file against the manifest,
and anything that does not match (missing file, wrong size, wrong checksum, unreadable manifest)
is moved to ``quarantine/`` and reported as a miss, so it gets rebuilt, never loaded. The
manifest checksums its own key and metadata too; an entry of the older manifest format, which
did not, is deleted (not quarantined, not counted as a corruption) and rebuilt.

Eviction is least-recently-used by the entry folder's mtime, which a hit refreshes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warpforge.cache.artifact import (
    MANIFEST_NAME,
    CorruptEntryError,
    KernelArtifact,
    OutdatedEntryError,
    artifact_from_manifest,
    build_manifest,
    parse_manifest,
)
from warpforge.cache.key import CacheKey
from warpforge.cache.metrics import CacheMetrics
from warpforge.validation import check_positive, describe

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 2 * 1024**3
STAGING = "staging"
QUARANTINE = "quarantine"
LOCK_NAME = ".lock"
REASON_NAME = "REASON.txt"
# A staging folder this old belongs to a writer that died; eviction removes it.
STALE_STAGING_S = 3600.0
# Quarantined entries are kept this long for inspection, then eviction deletes them.
QUARANTINE_KEEP_S = 7 * 24 * 3600.0
_DIGEST = re.compile(r"[0-9a-f]{64}")
_PUBLISH_ATTEMPTS = 4


@dataclass(frozen=True)
class CorruptEntry:
    """An entry that failed verification, and where it was moved."""

    digest: str
    reason: str
    quarantined_to: str | None


@dataclass(frozen=True)
class VerifyReport:
    """Result of checking every entry of a disk tier."""

    root: str | None
    checked: int
    ok: int
    corrupted: tuple[CorruptEntry, ...] = field(default_factory=tuple)

    @property
    def clean(self) -> bool:
        return not self.corrupted

    def as_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "checked": self.checked,
            "ok": self.ok,
            "corrupted": [
                {"digest": c.digest, "reason": c.reason, "quarantined_to": c.quarantined_to}
                for c in self.corrupted
            ],
        }


class _Vanished(Exception):
    """The entry disappeared (evicted or replaced) while being read: a plain miss."""


def _write_synced(path: Path, content: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(content)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DiskTier:
    """Content-addressed kernel store under ``root``, bounded to ``max_bytes``."""

    name = "disk"

    def __init__(
        self,
        root: Path | str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        metrics: CacheMetrics | None = None,
    ) -> None:
        if not isinstance(root, (str, os.PathLike)):
            raise TypeError(f"root: expected a path, got {describe(root)}")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
            raise TypeError(f"max_bytes: expected an int, got {describe(max_bytes)}")
        check_positive("max_bytes", max_bytes)
        self.root = Path(root).expanduser()
        if self.root.exists() and not self.root.is_dir():
            raise ValueError(f"root: expected a directory, got the file {str(self.root)!r}")
        self.max_bytes = max_bytes
        self.metrics = metrics

    # --- paths ---
    def entry_dir(self, key_or_digest: CacheKey | str) -> Path:
        """Where the entry for a key (or a digest) lives, whether or not it exists."""
        if isinstance(key_or_digest, CacheKey):
            digest = key_or_digest.digest()
        elif isinstance(key_or_digest, str) and _DIGEST.fullmatch(key_or_digest):
            digest = key_or_digest
        else:
            raise ValueError(
                "key_or_digest: expected a CacheKey or a 64-character lowercase hex digest, "
                f"got {describe(key_or_digest)}"
            )
        return self.root / digest[:2] / digest

    def _iter_entries(self) -> Iterator[tuple[str, Path]]:
        if not self.root.is_dir():
            return
        for shard in sorted(self.root.iterdir()):
            if len(shard.name) != 2 or not shard.is_dir():
                continue
            for entry in sorted(shard.iterdir()):
                if entry.name.startswith(shard.name) and _DIGEST.fullmatch(entry.name):
                    yield entry.name, entry

    # --- reading ---
    def _read_entry(self, entry: Path, digest: str) -> KernelArtifact:
        """Load and verify one entry; raises CorruptEntryError, _Vanished or OSError."""
        try:
            inode = os.stat(entry).st_ino
        except FileNotFoundError:
            raise _Vanished from None
        try:
            raw = (entry / MANIFEST_NAME).read_bytes()
            manifest = parse_manifest(raw, digest)
            files = {}
            for name in manifest["files"]:
                try:
                    files[name] = (entry / name).read_bytes()
                except FileNotFoundError:
                    files.pop(name, None)  # reported as missing by artifact_from_manifest
            return artifact_from_manifest(manifest, files)
        except (CorruptEntryError, FileNotFoundError) as exc:
            # Evicted or replaced under us is a miss, not corruption.
            try:
                if os.stat(entry).st_ino != inode:
                    raise _Vanished from None
            except FileNotFoundError:
                raise _Vanished from None
            if isinstance(exc, FileNotFoundError):
                raise CorruptEntryError(f"{MANIFEST_NAME} is missing") from None
            raise

    def get(self, key: CacheKey) -> KernelArtifact | None:
        """The verified artifact for ``key``, or None (absent, corrupted -> quarantined, or I/O
        error)."""
        if not isinstance(key, CacheKey):
            raise TypeError(f"key: expected a CacheKey, got {describe(key)}")
        digest = key.digest()
        entry = self.entry_dir(digest)
        try:
            artifact = self._read_entry(entry, digest)
        except _Vanished:
            return None
        except OutdatedEntryError as exc:
            self._discard_outdated(entry, digest, str(exc))
            return None
        except CorruptEntryError as exc:
            self._quarantine(entry, digest, str(exc))
            return None
        except OSError as exc:
            log.warning("kernel cache: cannot read %s (%s); treating it as a miss", entry, exc)
            if self.metrics is not None:
                self.metrics.record_error(self.name)
            return None
        with contextlib.suppress(OSError):
            os.utime(entry)  # last access, for LRU eviction
        return artifact

    def __contains__(self, key: CacheKey) -> bool:
        """True when an entry is published for ``key`` (not verified: use ``get``)."""
        return (self.entry_dir(key) / MANIFEST_NAME).exists()

    # --- quarantine ---
    def _quarantine(self, entry: Path, digest: str, reason: str) -> str | None:
        """Move a bad entry out of the store; returns where it went (None if it was gone)."""
        if self.metrics is not None:
            self.metrics.record_corruption(self.name)
        target = self.root / QUARANTINE / f"{digest}.{int(time.time())}.{uuid.uuid4().hex[:8]}"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(entry, target)
        except FileNotFoundError:
            return None  # another reader quarantined it first
        except OSError as exc:
            log.error("kernel cache: cannot quarantine corrupted entry %s (%s)", entry, exc)
            return None
        with contextlib.suppress(OSError):
            (target / REASON_NAME).write_text(reason + "\n")
        log.warning("kernel cache: quarantined corrupted entry %s: %s", digest, reason)
        return str(target)

    def _discard_outdated(self, entry: Path, digest: str, reason: str) -> None:
        """Delete an entry of an older manifest format (a miss, rebuilt; not a corruption)."""
        if self._remove(entry):
            log.info("kernel cache: dropped entry %s: %s", digest, reason)

    def quarantined(self) -> list[Path]:
        folder = self.root / QUARANTINE
        return sorted(folder.iterdir()) if folder.is_dir() else []

    # --- writing ---
    def put(self, key: CacheKey, artifact: KernelArtifact) -> bool:
        """Publish ``artifact`` atomically; True when a verified entry for ``key`` exists after.

        Never raises for I/O problems (full disk, permissions): they are logged, counted as
        errors and reported by returning False, so a cache failure never stops training.
        """
        if not isinstance(key, CacheKey):
            raise TypeError(f"key: expected a CacheKey, got {describe(key)}")
        if not isinstance(artifact, KernelArtifact):
            raise TypeError(f"artifact: expected a KernelArtifact, got {describe(artifact)}")
        digest = key.digest()
        manifest = build_manifest(digest, key.as_dict(), artifact)
        if artifact.nbytes + len(manifest) > self.max_bytes:
            log.warning(
                "kernel cache: entry %s (%d bytes) exceeds the disk tier's max_bytes %d; not stored",
                digest, artifact.nbytes, self.max_bytes,
            )  # fmt: skip
            return False
        try:
            published = self._publish(digest, artifact, manifest)
        except OSError as exc:
            log.warning("kernel cache: cannot write entry %s (%s); not cached", digest, exc)
            if self.metrics is not None:
                self.metrics.record_error(self.name)
            return False
        if published:
            self.evict(protect=digest)
        return published

    def _publish(self, digest: str, artifact: KernelArtifact, manifest: bytes) -> bool:
        final = self.entry_dir(digest)
        staging = self.root / STAGING / f"{digest}.{os.getpid()}.{uuid.uuid4().hex}"
        staging.mkdir(parents=True)
        try:
            for name, content in artifact.files.items():
                _write_synced(staging / name, content)
            # The manifest is written last: a staged folder without one is never published.
            _write_synced(staging / MANIFEST_NAME, manifest)
            _fsync_dir(staging)
            final.parent.mkdir(parents=True, exist_ok=True)
            for _ in range(_PUBLISH_ATTEMPTS):
                try:
                    os.rename(staging, final)
                except OSError as exc:
                    if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                        raise
                else:
                    _fsync_dir(final.parent)
                    return True
                # Someone published first: keep theirs if it verifies, else replace it.
                try:
                    self._read_entry(final, digest)
                    return True
                except _Vanished:
                    continue
                except OutdatedEntryError as exc:
                    self._discard_outdated(final, digest, str(exc))
                except CorruptEntryError as exc:
                    self._quarantine(final, digest, str(exc))
            return False
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    # --- maintenance (under the lock file) ---
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / LOCK_NAME, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _remove(self, entry: Path) -> bool:
        """Take an entry out of the store atomically (rename), then delete it."""
        doomed = self.root / STAGING / f"removed.{entry.name}.{uuid.uuid4().hex}"
        try:
            doomed.parent.mkdir(parents=True, exist_ok=True)
            os.rename(entry, doomed)
        except FileNotFoundError:
            return False
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    @staticmethod
    def _entry_size(entry: Path) -> int:
        size = 0
        with contextlib.suppress(FileNotFoundError), os.scandir(entry) as it:
            for item in it:
                with contextlib.suppress(FileNotFoundError):
                    size += item.stat(follow_symlinks=False).st_size
        return size

    def _usage(self) -> list[tuple[float, int, str, Path]]:
        """(last access, bytes, digest, path) of every entry."""
        usage = []
        for digest, entry in self._iter_entries():
            try:
                mtime = entry.stat().st_mtime
            except FileNotFoundError:
                continue
            usage.append((mtime, self._entry_size(entry), digest, entry))
        return usage

    def _remove_stale(self) -> None:
        """Delete staging folders of writers that died, and old quarantined entries."""
        now = time.time()
        for folder, max_age in ((STAGING, STALE_STAGING_S), (QUARANTINE, QUARANTINE_KEEP_S)):
            path = self.root / folder
            if not path.is_dir():
                continue
            for item in path.iterdir():
                with contextlib.suppress(FileNotFoundError):
                    if item.stat().st_mtime < now - max_age:
                        shutil.rmtree(item, ignore_errors=True)

    def evict(self, *, protect: str | None = None) -> int:
        """Delete least-recently-used entries until the store fits ``max_bytes``; returns how many.

        Waits for the lock: a process already evicting may have measured the store before this
        process's entry was published, so skipping would leave the store over its bound.
        """
        try:
            with self._locked():
                self._remove_stale()
                usage = sorted(self._usage())
                total = sum(size for _, size, _, _ in usage)
                evicted = 0
                for _, size, digest, entry in usage:
                    if total <= self.max_bytes:
                        break
                    if digest == protect:
                        continue
                    if self._remove(entry):
                        evicted += 1
                    total -= size
        except OSError as exc:
            log.warning("kernel cache: eviction failed (%s)", exc)
            if self.metrics is not None:
                self.metrics.record_error(self.name)
            return 0
        if evicted and self.metrics is not None:
            self.metrics.record_eviction(self.name, evicted)
        return evicted

    def verify(self) -> VerifyReport:
        """Check every entry against its manifest; quarantine those that fail."""
        checked, ok, corrupted = 0, 0, []
        with self._locked():
            for digest, entry in list(self._iter_entries()):
                checked += 1
                try:
                    self._read_entry(entry, digest)
                except _Vanished:
                    checked -= 1
                    continue
                except OutdatedEntryError as exc:  # not damaged: dropped, not listed
                    self._discard_outdated(entry, digest, str(exc))
                    checked -= 1
                    continue
                except (CorruptEntryError, OSError) as exc:
                    corrupted.append(
                        CorruptEntry(digest, str(exc), self._quarantine(entry, digest, str(exc)))
                    )
                    continue
                ok += 1
        return VerifyReport(str(self.root), checked, ok, tuple(corrupted))

    def clear(self) -> int:
        """Delete every entry (and the quarantine); returns how many entries were removed."""
        removed = 0
        if not self.root.is_dir():
            return 0
        with self._locked():
            for _, entry in list(self._iter_entries()):
                removed += self._remove(entry)
            shutil.rmtree(self.root / QUARANTINE, ignore_errors=True)
        return removed

    def stats(self) -> dict[str, Any]:
        usage = self._usage()
        return {
            "root": str(self.root),
            "entries": len(usage),
            "bytes": sum(size for _, size, _, _ in usage),
            "max_bytes": self.max_bytes,
            "quarantined": len(self.quarantined()),
        }
