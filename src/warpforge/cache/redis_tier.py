"""The fleet tier: kernels shared through Redis, verified on read, never fatal.

Each entry is one Redis string under ``<prefix><digest>``, written with ``SET NX`` so the first
writer wins and a reader gets a whole value or nothing::

    b"WFK1" | manifest length (8 bytes, big-endian) | manifest JSON | file bytes in manifest order

The manifest is the disk tier's (SHA-256 and size per file, and over its key and metadata), and
every file is checked against it on read; a value that does not match is deleted and reported as
a miss (a value of the older manifest format is deleted too, without counting a corruption). Any Redis error
(refused connection, timeout, server gone) is logged, counted and turned into a miss; after one,
the tier stays quiet for ``retry_after_s`` so a dead server costs training nothing but a clock
read per lookup.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from warpforge.cache.artifact import (
    CorruptEntryError,
    KernelArtifact,
    OutdatedEntryError,
    artifact_from_manifest,
    build_manifest,
    parse_manifest,
)
from warpforge.cache.key import CacheKey
from warpforge.cache.metrics import CacheMetrics
from warpforge.optional import require
from warpforge.validation import check_positive, describe

log = logging.getLogger(__name__)

MAGIC = b"WFK1"
_HEADER = len(MAGIC) + 8
DEFAULT_PREFIX = "warpforge:kernel:"
DEFAULT_SOCKET_TIMEOUT_S = 0.25
DEFAULT_RETRY_AFTER_S = 5.0


URL_SCHEMES = ("redis", "rediss", "unix")


class RedisURLError(ValueError):
    """A URL that cannot name a Redis server; ``reason`` says why (password masked)."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = redact_url(url)
        self.reason = reason
        super().__init__(
            f"url: expected a redis://, rediss:// or unix:// URL such as redis://host:6379/0, "
            f"got {self.url!r} ({reason})"
        )


def redact_url(url: str) -> str:
    """``url`` with any password replaced, for logs and stats."""
    try:
        parts = urlsplit(url)
    except ValueError:  # unparseable (a bad IPv6 host): mask what looks like user:password@
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def pack_entry(digest: str, key: CacheKey, artifact: KernelArtifact) -> bytes:
    manifest = build_manifest(digest, key.as_dict(), artifact)
    return b"".join((MAGIC, len(manifest).to_bytes(8, "big"), manifest, *artifact.files.values()))


def unpack_entry(blob: bytes, digest: str) -> KernelArtifact:
    """Inverse of :func:`pack_entry`; raises :class:`CorruptEntryError` on any mismatch."""
    if len(blob) < _HEADER or blob[: len(MAGIC)] != MAGIC:
        raise CorruptEntryError("value does not start with the warpforge entry header")
    manifest_end = _HEADER + int.from_bytes(blob[len(MAGIC) : _HEADER], "big")
    if manifest_end > len(blob):
        raise CorruptEntryError("value is truncated inside the manifest")
    manifest = parse_manifest(blob[_HEADER:manifest_end], digest)
    files, offset = {}, manifest_end
    for name, entry in manifest["files"].items():
        files[name] = blob[offset : offset + entry["size"]]
        offset += entry["size"]
    if offset != len(blob):
        raise CorruptEntryError(f"value has {len(blob)} bytes, manifest accounts for {offset}")
    return artifact_from_manifest(manifest, files)


class RedisTier:
    """Kernel entries in the Redis server at ``url`` (e.g. ``redis://host:6379/0``)."""

    name = "redis"

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
        retry_after_s: float = DEFAULT_RETRY_AFTER_S,
        ttl_s: int | None = None,
        metrics: CacheMetrics | None = None,
    ) -> None:
        if not isinstance(url, str):
            raise TypeError(f"url: expected a str, got {describe(url)}")
        try:
            scheme = urlsplit(url).scheme
        except ValueError as exc:
            raise RedisURLError(url, str(exc)) from None
        if scheme not in URL_SCHEMES:
            raise RedisURLError(url, f"scheme {scheme!r}" if scheme else "no scheme")
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"prefix: expected a non-empty str, got {describe(prefix)}")
        self.url = url
        self.prefix = prefix
        self.socket_timeout_s = check_positive("socket_timeout_s", socket_timeout_s)
        self.retry_after_s = check_positive("retry_after_s", retry_after_s, allow_zero=True)
        if ttl_s is not None and (isinstance(ttl_s, bool) or not isinstance(ttl_s, int)):
            raise TypeError(f"ttl_s: expected an int or None, got {describe(ttl_s)}")
        if ttl_s is not None:
            check_positive("ttl_s", ttl_s)
        self.ttl_s = ttl_s
        self.metrics = metrics
        self.errors = 0
        self._down_until = 0.0
        self._client: Any = None
        self._lock = threading.Lock()
        self._redis = require("redis", extra="redis", feature="the Redis cache tier")
        try:  # redis-py parses the URL only when it connects, where a ValueError is no miss
            self._redis.connection.parse_url(url)
        except ValueError as exc:
            raise RedisURLError(url, str(exc)) from None

    def _connection(self) -> Any:
        with self._lock:
            if self._client is None:
                from redis.backoff import NoBackoff
                from redis.retry import Retry

                self._client = self._redis.Redis.from_url(
                    self.url,
                    socket_timeout=self.socket_timeout_s,
                    socket_connect_timeout=self.socket_timeout_s,
                    retry=Retry(NoBackoff(), 0),  # a miss is cheaper than waiting on retries
                    health_check_interval=0,
                )
            return self._client

    def _redis_key(self, digest: str) -> str:
        return self.prefix + digest

    def available(self) -> bool:
        """False while backing off after an error."""
        return time.monotonic() >= self._down_until

    def _failed(self, action: str, exc: Exception) -> None:
        self.errors += 1
        self._down_until = time.monotonic() + self.retry_after_s
        if self.metrics is not None:
            self.metrics.record_error(self.name)
        log.warning(
            "kernel cache: Redis %s at %s failed (%s: %s); treating it as a miss for %.1f s",
            action, redact_url(self.url), type(exc).__name__, exc, self.retry_after_s,
        )  # fmt: skip

    def get(self, key: CacheKey) -> KernelArtifact | None:
        if not isinstance(key, CacheKey):
            raise TypeError(f"key: expected a CacheKey, got {describe(key)}")
        if not self.available():
            return None
        digest = key.digest()
        try:
            blob = self._connection().get(self._redis_key(digest))
        except (self._redis.RedisError, OSError) as exc:
            self._failed("GET", exc)
            return None
        if blob is None:
            return None
        try:
            return unpack_entry(blob, digest)
        except CorruptEntryError as exc:
            if isinstance(exc, OutdatedEntryError):  # an older format: replaced, not counted
                log.info("kernel cache: deleting Redis entry %s: %s", digest, exc)
            else:
                log.warning("kernel cache: deleting corrupted Redis entry %s: %s", digest, exc)
                if self.metrics is not None:
                    self.metrics.record_corruption(self.name)
            try:
                self._connection().delete(self._redis_key(digest))
            except (self._redis.RedisError, OSError) as delete_exc:
                self._failed("DEL", delete_exc)
            return None

    def put(self, key: CacheKey, artifact: KernelArtifact) -> bool:
        """Store unless an entry exists (first writer wins); False on any Redis error."""
        if not isinstance(artifact, KernelArtifact):
            raise TypeError(f"artifact: expected a KernelArtifact, got {describe(artifact)}")
        if not self.available():
            return False
        digest = key.digest()
        try:
            self._connection().set(
                self._redis_key(digest), pack_entry(digest, key, artifact), nx=True, ex=self.ttl_s
            )
        except (self._redis.RedisError, OSError) as exc:
            self._failed("SET", exc)
            return False
        return True

    def _keys(self) -> list[bytes]:
        return list(self._connection().scan_iter(match=self.prefix + "*", count=1000))

    def clear(self) -> int:
        """Delete every entry under the prefix; returns how many (0 if unreachable)."""
        try:
            keys = self._keys()
            if keys:
                self._connection().delete(*keys)
        except (self._redis.RedisError, OSError) as exc:
            self._failed("clear", exc)
            return 0
        return len(keys)

    def stats(self) -> dict[str, Any]:
        entries: int | None
        try:
            entries = len(self._keys())
        except (self._redis.RedisError, OSError) as exc:
            self._failed("SCAN", exc)
            entries = None
        return {
            "url": redact_url(self.url),
            "prefix": self.prefix,
            "entries": entries,
            "errors": self.errors,
            "available": self.available(),
        }

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
