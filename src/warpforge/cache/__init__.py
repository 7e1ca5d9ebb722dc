"""The kernel registry: compiled kernels cached in memory, on disk and in Redis.

>>> from warpforge.cache import CacheKey, KernelArtifact, KernelRegistry
>>> registry = KernelRegistry()                     # memory only; KernelRegistry.default() adds disk/Redis
>>> key = CacheKey.for_current_environment("graph-hash", {"x.dtype": "float32"})
>>> artifact = registry.get_or_build(key, lambda: KernelArtifact({"kernel.py": b"..."}, {}))
>>> registry.get(key) == artifact
True
"""

from __future__ import annotations

from warpforge.cache import metrics
from warpforge.cache.artifact import CorruptEntryError, KernelArtifact, OutdatedEntryError
from warpforge.cache.disk import CorruptEntry, DiskTier, VerifyReport
from warpforge.cache.key import CacheKey
from warpforge.cache.memory import MemoryTier
from warpforge.cache.metrics import CacheMetrics, default_metrics, record_fallback
from warpforge.cache.redis_tier import RedisTier
from warpforge.cache.registry import KernelRegistry

__all__ = [
    "CacheKey",
    "CacheMetrics",
    "CorruptEntry",
    "CorruptEntryError",
    "DiskTier",
    "KernelArtifact",
    "KernelRegistry",
    "MemoryTier",
    "OutdatedEntryError",
    "RedisTier",
    "VerifyReport",
    "default_metrics",
    "metrics",
    "record_fallback",
]
