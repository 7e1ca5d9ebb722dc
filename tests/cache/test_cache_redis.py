"""The Redis tier against a real redis-server that each test starts on a free port."""

from __future__ import annotations

import json
import time

import pytest
from cache_samples import make_artifact, make_key

from warpforge.cache import (
    CacheMetrics,
    CorruptEntryError,
    DiskTier,
    KernelRegistry,
    MemoryTier,
    RedisTier,
)
from warpforge.cache.redis_tier import pack_entry, redact_url, unpack_entry


def test_round_trip_first_writer_wins_and_clear(redis_server):
    tier = RedisTier(redis_server.url, metrics=CacheMetrics())
    key = make_key("a")
    assert tier.get(key) is None
    assert tier.put(key, make_artifact("a"))
    assert tier.put(key, make_artifact("other"))  # NX: the first stored value stays
    assert tier.get(key) == make_artifact("a")
    assert tier.stats()["entries"] == 1
    assert tier.clear() == 1 and tier.get(key) is None
    assert tier.errors == 0


def test_redis_hit_is_copied_to_disk_and_memory(redis_server, tmp_path):
    key = make_key("shared")
    # Machine A compiled it and published to the fleet.
    RedisTier(redis_server.url).put(key, make_artifact("shared"))
    # Machine B: empty memory and disk.
    metrics = CacheMetrics()
    disk = DiskTier(tmp_path / "b")
    registry = KernelRegistry(
        memory=MemoryTier(), disk=disk, redis=RedisTier(redis_server.url), metrics=metrics
    )
    built = []
    got = registry.get_or_build(key, lambda: built.append(1) or make_artifact("wrong"))
    assert got == make_artifact("shared") and built == []
    assert DiskTier(tmp_path / "b").get(key) == make_artifact("shared")  # copied to disk
    assert key in registry.memory
    snap = metrics.snapshot()
    assert snap["hits"]["redis"] == 1 and snap["misses"]["memory"] == snap["misses"]["disk"] == 1
    # The next process on machine B hits its disk without asking Redis.
    redis_server.stop()
    fresh = KernelRegistry(
        memory=MemoryTier(), disk=disk, redis=RedisTier(redis_server.url), metrics=CacheMetrics()
    )
    assert fresh.get(key) == make_artifact("shared")
    assert fresh.metrics.snapshot()["hits"]["disk"] == 1 and fresh.redis.errors == 0


def _stored_entry(redis_server):
    """A tier with entry "a" stored: (metrics, tier, key, a raw client, the entry's Redis key)."""
    import redis

    metrics = CacheMetrics()
    tier = RedisTier(redis_server.url, metrics=metrics)
    key = make_key("a")
    tier.put(key, make_artifact("a"))
    return metrics, tier, key, redis.Redis.from_url(redis_server.url), tier.prefix + key.digest()


def test_corrupted_value_is_deleted_and_reported_as_miss(redis_server):
    metrics, tier, key, client, raw_key = _stored_entry(redis_server)
    blob = bytearray(client.get(raw_key))
    blob[-10] ^= 0x01
    client.set(raw_key, bytes(blob))
    assert tier.get(key) is None
    assert client.exists(raw_key) == 0
    assert metrics.snapshot()["corruptions"]["redis"] == 1
    client.set(raw_key, bytes(blob[:-3]))  # truncated
    assert tier.get(key) is None
    client.close()


def test_a_value_of_the_older_manifest_format_is_deleted_without_counting(redis_server):
    metrics, tier, key, client, raw_key = _stored_entry(redis_server)
    blob = client.get(raw_key)
    end = 12 + int.from_bytes(blob[4:12], "big")
    manifest = json.loads(blob[12:end])
    del manifest["header_sha256"]
    manifest["format"] = 1
    raw = json.dumps(manifest).encode()
    client.set(raw_key, blob[:4] + len(raw).to_bytes(8, "big") + raw + blob[end:])
    assert tier.get(key) is None and client.exists(raw_key) == 0
    assert metrics.snapshot()["corruptions"]["redis"] == 0
    assert tier.put(key, make_artifact("a")) and tier.get(key) == make_artifact("a")
    client.close()


def test_server_killed_mid_use_degrades_to_miss_without_crash(redis_server, tmp_path):
    metrics = CacheMetrics()
    registry = KernelRegistry(
        memory=MemoryTier(),
        disk=DiskTier(tmp_path / "d"),
        redis=RedisTier(redis_server.url, retry_after_s=30.0),
        metrics=metrics,
    )
    registry.get_or_build(make_key("a"), lambda: make_artifact("a"))
    assert registry.redis.get(make_key("a")) == make_artifact("a")
    redis_server.stop()
    start = time.monotonic()
    got = registry.get_or_build(make_key("b"), lambda: make_artifact("b"))
    assert got == make_artifact("b")
    assert registry.get(make_key("b")) == make_artifact("b")  # from memory
    for _ in range(20):  # backing off: no more connection attempts, no waiting
        assert registry.redis.get(make_key("c")) is None
    assert time.monotonic() - start < 5
    assert registry.redis.errors == 1 and metrics.snapshot()["errors"]["redis"] == 1
    assert registry.redis.stats()["available"] is False
    assert registry.stats()["disk"]["entries"] == 2


def test_unreachable_server_from_the_start(tmp_path):
    tier = RedisTier("redis://127.0.0.1:1/0", retry_after_s=0.0, metrics=CacheMetrics())
    assert tier.get(make_key("a")) is None
    assert tier.put(make_key("a"), make_artifact("a")) is False
    assert tier.clear() == 0
    assert tier.stats()["entries"] is None
    assert tier.errors == 4


@pytest.mark.parametrize(("section", "field"), [("metadata", "name"), ("key", "arch")])
def test_a_changed_key_or_metadata_in_a_value_is_corruption(section, field):
    key = make_key("a")
    blob = pack_entry(key.digest(), key, make_artifact("a"))
    end = 12 + int.from_bytes(blob[4:12], "big")
    manifest = json.loads(blob[12:end])
    manifest[section][field] = "tampered"
    raw = json.dumps(manifest).encode()
    tampered = blob[:4] + len(raw).to_bytes(8, "big") + raw + blob[end:]
    with pytest.raises(CorruptEntryError, match="key or metadata does not match"):
        unpack_entry(tampered, key.digest())


def test_pack_format_and_url_redaction():
    key = make_key("a")
    blob = pack_entry(key.digest(), key, make_artifact("a"))
    assert unpack_entry(blob, key.digest()) == make_artifact("a")
    assert redact_url("redis://user:s3cret@host:6379/0") == "redis://user:***@host:6379/0"
    assert redact_url("redis://host:6379/0") == "redis://host:6379/0"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"url": "http://x"}, ValueError, "url: expected a redis://"),
        ({"url": "redis://x", "socket_timeout_s": 0}, ValueError, "socket_timeout_s"),
        ({"url": "redis://x", "ttl_s": 1.5}, TypeError, "ttl_s: expected an int"),
    ],
)
def test_constructor_validation(kwargs, error, message):
    with pytest.raises(error, match=message):
        RedisTier(**kwargs)
