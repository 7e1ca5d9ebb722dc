"""The in-process tier: an LRU of artifacts bounded by entry count and by bytes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from warpforge.cache.artifact import KernelArtifact
from warpforge.cache.key import CacheKey
from warpforge.validation import check_positive, describe

DEFAULT_MAX_ENTRIES = 1024
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


def _check_limit(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {describe(value)}")
    check_positive(name, value)
    return value


class MemoryTier:
    """Least-recently-used artifacts of this process, keyed by :class:`CacheKey` itself.

    Keying by the frozen key (field-wise hash and equality) rather than by its digest keeps the
    SHA-256 off the hit path: a key built fresh for every call still hits in a dict lookup.

    Both bounds hold after every ``put``: the least recently used entries are dropped until the
    entry count is at most ``max_entries`` and the bytes (:attr:`KernelArtifact.nbytes`) at most
    ``max_bytes``. An artifact larger than ``max_bytes`` on its own is not kept.
    """

    name = "memory"

    def __init__(
        self, max_entries: int = DEFAULT_MAX_ENTRIES, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.max_entries = _check_limit("max_entries", max_entries)
        self.max_bytes = _check_limit("max_bytes", max_bytes)
        self._entries: OrderedDict[CacheKey, KernelArtifact] = OrderedDict()
        self._nbytes = 0
        self._evictions = 0
        self._lock = threading.Lock()

    def get(self, key: CacheKey) -> KernelArtifact | None:
        if not isinstance(key, CacheKey):
            raise TypeError(f"key: expected a CacheKey, got {describe(key)}")
        with self._lock:
            artifact = self._entries.get(key)
            if artifact is not None:
                self._entries.move_to_end(key)
            return artifact

    def put(self, key: CacheKey, artifact: KernelArtifact) -> int:
        """Store ``artifact``; returns how many other entries were evicted to make room."""
        if not isinstance(artifact, KernelArtifact):
            raise TypeError(f"artifact: expected a KernelArtifact, got {describe(artifact)}")
        if not isinstance(key, CacheKey):
            raise TypeError(f"key: expected a CacheKey, got {describe(key)}")
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._nbytes -= old.nbytes
            if artifact.nbytes > self.max_bytes:
                return 0
            self._entries[key] = artifact
            self._nbytes += artifact.nbytes
            evicted = 0
            while len(self._entries) > self.max_entries or self._nbytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._nbytes -= dropped.nbytes
                evicted += 1
            self._evictions += evicted
            return evicted

    def discard(self, key: CacheKey) -> bool:
        with self._lock:
            artifact = self._entries.pop(key, None)
            if artifact is not None:
                self._nbytes -= artifact.nbytes
            return artifact is not None

    def clear(self) -> int:
        """Drop every entry; returns how many there were."""
        with self._lock:
            count = len(self._entries)
            self._entries.clear()
            self._nbytes = 0
            return count

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: CacheKey) -> bool:
        return key in self._entries

    @property
    def nbytes(self) -> int:
        return self._nbytes

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "entries": len(self._entries),
                "bytes": self._nbytes,
                "max_entries": self.max_entries,
                "max_bytes": self.max_bytes,
                "evictions": self._evictions,
            }
