"""The kernel registry: one lookup through memory -> disk -> Redis, and build-once on a miss.

A disk hit is promoted to memory; a Redis hit is copied to disk and memory, so the next process on
the machine finds it locally. ``get_or_build`` builds on a full miss, stores the result in every
tier and returns it; threads of one process that miss the same key together build it once.
Processes are not serialised: several may build the same kernel at once, and the disk tier's
atomic publish keeps exactly one correct entry.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from warpforge import environment
from warpforge.cache import disk as disk_module
from warpforge.cache import memory as memory_module
from warpforge.cache.artifact import KernelArtifact
from warpforge.cache.disk import DiskTier, VerifyReport
from warpforge.cache.key import CacheKey
from warpforge.cache.memory import MemoryTier
from warpforge.cache.metrics import CacheMetrics, default_metrics
from warpforge.cache.redis_tier import RedisTier, RedisURLError, redact_url
from warpforge.optional import MissingDependencyError
from warpforge.validation import check_choice, describe

log = logging.getLogger(__name__)

CLEAR_TIERS: tuple[str, ...] = ("memory", "disk", "redis", "all")
_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?)i?b?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def env_size(name: str, default: int) -> int:
    """A byte count from environment variable ``name`` (``"4096"``, ``"512M"``, ``"2GiB"``)."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    match = _SIZE.fullmatch(raw)
    if match is None or int(match.group(1)) == 0:
        raise ValueError(
            f"{name}: expected a positive byte count such as 1073741824, 512M or 2GiB, got {raw!r}"
        )
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


REDIS_URL_VARIABLE = "WARPFORGE_REDIS_URL"
_WARNED_REDIS_URLS: set[str] = set()


def redis_tier_from_environment(*, strict: bool = False) -> RedisTier | None:
    """The Redis tier ``WARPFORGE_REDIS_URL`` names, or None when it is unset.

    A value that cannot be used (not a Redis URL, or redis-py not installed) raises
    ``ValueError`` naming the variable when ``strict``; otherwise it disables the tier with one
    warning per value, so a typo costs the fleet tier, not every kernel. A valid URL whose server
    is unreachable is not checked here: each lookup then misses (see :class:`RedisTier`).
    """
    url = os.environ.get(REDIS_URL_VARIABLE, "").strip()
    if not url:
        return None
    try:
        return RedisTier(url)
    except RedisURLError as exc:
        message = (
            f"{REDIS_URL_VARIABLE}: expected a redis://, rediss:// or unix:// URL such as "
            f"redis://host:6379/0, got {exc.url!r} ({exc.reason})"
        )
    except MissingDependencyError as exc:
        message = f"{REDIS_URL_VARIABLE} is set ({redact_url(url)!r}) but {exc}"
    if strict:
        raise ValueError(message)
    if url not in _WARNED_REDIS_URLS:
        _WARNED_REDIS_URLS.add(url)
        log.warning("kernel cache: %s; the Redis tier is off (memory and disk stay on)", message)
    return None


def _check_tier(name: str, tier: object, kind: type) -> None:
    if tier is not None and not isinstance(tier, kind):
        raise TypeError(f"{name}: expected a {kind.__name__} or None, got {describe(tier)}")


class KernelRegistry:
    """Compiled kernels by :class:`CacheKey`, through up to three tiers.

    ``memory`` defaults to a new :class:`MemoryTier`; ``disk`` and ``redis`` are optional.
    ``metrics`` defaults to the process-wide :func:`~warpforge.cache.metrics.default_metrics`;
    tiers given without their own metrics record into it too.
    """

    _default: ClassVar[KernelRegistry | None] = None
    _default_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        *,
        memory: MemoryTier | None = None,
        disk: DiskTier | None = None,
        redis: RedisTier | None = None,
        metrics: CacheMetrics | None = None,
    ) -> None:
        _check_tier("memory", memory, MemoryTier)
        _check_tier("disk", disk, DiskTier)
        _check_tier("redis", redis, RedisTier)
        _check_tier("metrics", metrics, CacheMetrics)
        self.memory = memory if memory is not None else MemoryTier()
        self.disk = disk
        self.redis = redis
        self.metrics = metrics if metrics is not None else default_metrics()
        for tier in (disk, redis):
            if tier is not None and tier.metrics is None:
                tier.metrics = self.metrics
        self._build_locks: dict[CacheKey, list[Any]] = {}
        self._build_locks_guard = threading.Lock()

    # --- construction from the environment ---
    @classmethod
    def from_environment(cls, *, strict: bool = False) -> KernelRegistry:
        """A new registry configured by the environment:

        ``WARPFORGE_CACHE_DIR`` (disk root is ``<it>/kernels``), ``WARPFORGE_CACHE_MAX_BYTES``
        (disk bound, default 2 GiB), ``WARPFORGE_CACHE_MEMORY_MAX_BYTES`` (default 256 MiB),
        ``WARPFORGE_CACHE_MEMORY_MAX_ENTRIES`` (default 1024), ``WARPFORGE_REDIS_URL`` (Redis
        tier, off when unset; an unusable value turns it off with a warning, or raises
        ``ValueError`` when ``strict``). A size that does not parse raises ``ValueError``.
        """
        if not isinstance(strict, bool):
            raise TypeError(f"strict: expected a bool, got {describe(strict)}")
        memory = MemoryTier(
            max_entries=env_size(
                "WARPFORGE_CACHE_MEMORY_MAX_ENTRIES", memory_module.DEFAULT_MAX_ENTRIES
            ),
            max_bytes=env_size("WARPFORGE_CACHE_MEMORY_MAX_BYTES", memory_module.DEFAULT_MAX_BYTES),
        )
        disk = DiskTier(
            environment.cache_dir() / "kernels",
            max_bytes=env_size("WARPFORGE_CACHE_MAX_BYTES", disk_module.DEFAULT_MAX_BYTES),
        )
        return cls(memory=memory, disk=disk, redis=redis_tier_from_environment(strict=strict))

    @classmethod
    def default(cls, *, refresh: bool = False) -> KernelRegistry:
        """The process-wide registry (built once from the environment; ``refresh`` rebuilds)."""
        with cls._default_lock:
            if cls._default is None or refresh:
                cls._default = cls.from_environment()
            return cls._default

    @property
    def tiers(self) -> tuple[Any, ...]:
        return tuple(t for t in (self.memory, self.disk, self.redis) if t is not None)

    # --- lookups ---
    def get(self, key: CacheKey) -> KernelArtifact | None:
        """The artifact for ``key`` from the first tier that has it, or None."""
        start = time.perf_counter_ns()
        if not isinstance(key, CacheKey):
            raise TypeError(f"key: expected a CacheKey, got {describe(key)}")
        artifact = self.memory.get(key)
        if artifact is not None:
            self.metrics.record_lookup("memory", time.perf_counter_ns() - start)
            return artifact
        return self._get_below_memory(key, start)

    def _get_below_memory(self, key: CacheKey, start: int) -> KernelArtifact | None:
        missed = ["memory"]
        if self.disk is not None:
            artifact = self.disk.get(key)
            if artifact is not None:
                self._remember(key, artifact)
                self.metrics.record_lookup("disk", time.perf_counter_ns() - start, missed)
                return artifact
            missed.append("disk")
        if self.redis is not None:
            artifact = self.redis.get(key)
            if artifact is not None:
                if self.disk is not None:
                    self.disk.put(key, artifact)
                self._remember(key, artifact)
                self.metrics.record_lookup("redis", time.perf_counter_ns() - start, missed)
                return artifact
            missed.append("redis")
        self.metrics.record_lookup("miss", time.perf_counter_ns() - start, missed)
        return None

    def _remember(self, key: CacheKey, artifact: KernelArtifact) -> None:
        evicted = self.memory.put(key, artifact)
        if evicted:
            self.metrics.record_eviction("memory", evicted)

    def put(self, key: CacheKey, artifact: KernelArtifact) -> dict[str, bool]:
        """Store in every tier; returns which tiers hold it afterwards (I/O failures are False)."""
        if not isinstance(key, CacheKey):
            raise TypeError(f"key: expected a CacheKey, got {describe(key)}")
        if not isinstance(artifact, KernelArtifact):
            raise TypeError(f"artifact: expected a KernelArtifact, got {describe(artifact)}")
        self._remember(key, artifact)
        stored = {"memory": key in self.memory}
        if self.disk is not None:
            stored["disk"] = self.disk.put(key, artifact)
        if self.redis is not None:
            stored["redis"] = self.redis.put(key, artifact)
        return stored

    @contextlib.contextmanager
    def _build_lock(self, key: CacheKey) -> Iterator[None]:
        """A lock per key, dropped when nobody waits on it (the dict stays small)."""
        with self._build_locks_guard:
            slot = self._build_locks.setdefault(key, [threading.Lock(), 0])
            slot[1] += 1
        try:
            with slot[0]:
                yield
        finally:
            with self._build_locks_guard:
                slot[1] -= 1
                if slot[1] == 0:
                    del self._build_locks[key]

    def get_or_build(self, key: CacheKey, build: Callable[[], KernelArtifact]) -> KernelArtifact:
        """The cached artifact for ``key``; on a full miss, ``build()`` it, store it, return it.

        Exceptions from ``build`` propagate (counted as a failed build) and nothing is stored.
        """
        if not callable(build):
            raise TypeError(
                f"build: expected a callable returning a KernelArtifact, got {describe(build)}"
            )
        artifact = self.get(key)
        if artifact is not None:
            return artifact
        with self._build_lock(key):
            # Another thread may have built it while this one waited for the lock, or another
            # process published it on disk since the lookup above: a second lookup, counted
            # (and a disk hit kept in memory) only when it finds the entry, as the first one
            # already counted the miss.
            start_ns = time.perf_counter_ns()
            artifact = self.memory.get(key)
            if artifact is not None:
                self.metrics.record_lookup("memory", time.perf_counter_ns() - start_ns)
                return artifact
            if self.disk is not None:
                artifact = self.disk.get(key)
                if artifact is not None:
                    self._remember(key, artifact)
                    elapsed_ns = time.perf_counter_ns() - start_ns
                    self.metrics.record_lookup("disk", elapsed_ns, ["memory"])
                    return artifact
            start = time.perf_counter()
            try:
                artifact = build()
            except BaseException:
                self.metrics.record_build(time.perf_counter() - start, ok=False)
                raise
            elapsed = time.perf_counter() - start
            if not isinstance(artifact, KernelArtifact):
                self.metrics.record_build(elapsed, ok=False)
                raise TypeError(
                    f"build: expected it to return a KernelArtifact, got {describe(artifact)}"
                )
            self.metrics.record_build(elapsed)
            self.put(key, artifact)
            return artifact

    # --- maintenance ---
    def stats(self) -> dict[str, Any]:
        """Per-tier contents and the metrics snapshot."""
        return {
            "memory": self.memory.stats(),
            "disk": self.disk.stats() if self.disk is not None else None,
            "redis": self.redis.stats() if self.redis is not None else None,
            "metrics": self.metrics.snapshot(),
        }

    def verify(self) -> VerifyReport:
        """Check every disk entry against its manifest; bad ones are quarantined and listed."""
        if self.disk is None:
            return VerifyReport(root=None, checked=0, ok=0)
        return self.disk.verify()

    def clear(self, tier: str = "all") -> dict[str, int]:
        """Delete entries from ``tier`` (memory, disk, redis or all); returns counts per tier."""
        check_choice("tier", tier, CLEAR_TIERS)
        removed: dict[str, int] = {}
        for candidate in self.tiers:
            if tier in ("all", candidate.name):
                removed[candidate.name] = candidate.clear()
        return removed
