import errno
import json
import os
import threading
import time

import pytest
from cache_samples import make_artifact, make_key

from warpforge.cache import CacheMetrics, DiskTier, KernelRegistry, MemoryTier
from warpforge.cache import disk as disk_module
from warpforge.cache.artifact import MANIFEST_NAME


@pytest.fixture
def store(tmp_path) -> DiskTier:
    return DiskTier(tmp_path / "kernels", max_bytes=1 << 20, metrics=CacheMetrics())


def test_round_trip_and_layout(store):
    key, artifact = make_key("a"), make_artifact("a")
    assert store.get(key) is None
    assert store.put(key, artifact)
    digest = key.digest()
    entry = store.root / digest[:2] / digest
    assert sorted(os.listdir(entry)) == ["kernel.cubin", "kernel.py", MANIFEST_NAME]
    manifest = json.loads((entry / MANIFEST_NAME).read_bytes())
    assert manifest["digest"] == digest and manifest["key"] == key.as_dict()
    assert manifest["files"]["kernel.py"]["size"] == len(artifact.files["kernel.py"])
    assert store.get(key) == artifact
    assert os.listdir(store.root / disk_module.STAGING) == []  # nothing left behind
    # A second process-like reader (fresh tier object) sees the same entry.
    assert DiskTier(store.root).get(key) == artifact


def test_existing_verified_entry_is_kept(store):
    key = make_key("a")
    store.put(key, make_artifact("first"))
    assert store.put(key, make_artifact("second"))
    assert store.get(key) == make_artifact("first")


def _entry(store, key):
    return store.root / key.digest()[:2] / key.digest()


def _truncate(entry):
    path = entry / "kernel.py"
    path.write_bytes(path.read_bytes()[:-5])


def _flip(entry):
    path = entry / "kernel.cubin"
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))


def _delete(entry):
    (entry / "kernel.py").unlink()


def _garbage_manifest(entry):
    (entry / MANIFEST_NAME).write_bytes(b'{"format": 1, "files": {"kernel.py": ')


def _no_manifest(entry):
    (entry / MANIFEST_NAME).unlink()


def _wrong_digest_manifest(entry):
    manifest = json.loads((entry / MANIFEST_NAME).read_bytes())
    manifest["digest"] = "0" * 64
    (entry / MANIFEST_NAME).write_text(json.dumps(manifest))


def _edit_manifest(section, field, value):
    def damage(entry):
        manifest = json.loads((entry / MANIFEST_NAME).read_bytes())
        manifest[section][field] = value
        (entry / MANIFEST_NAME).write_text(json.dumps(manifest))

    return damage


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_edit_manifest("metadata", "entry_point", "kernel_b"), "key or metadata does not match"),
        (_edit_manifest("key", "arch", "sm_80"), "key or metadata does not match"),
        (_truncate, "has 59 bytes, manifest records 64"),
        (_flip, "does not match its SHA-256"),
        (_delete, "missing file"),
        (_garbage_manifest, "not valid JSON"),
        (_no_manifest, "manifest.json is missing"),
        (_wrong_digest_manifest, "manifest names digest"),
    ],
)
def test_corruption_is_quarantined_then_rebuilt(store, damage, reason):
    key = make_key("a")
    store.put(key, make_artifact("a"))
    damage(_entry(store, key))
    registry = KernelRegistry(memory=MemoryTier(), disk=store, metrics=store.metrics)
    builds = []
    result = registry.get_or_build(key, lambda: builds.append(1) or make_artifact("a"))
    assert result == make_artifact("a") and builds == [1]
    (quarantined,) = store.quarantined()
    assert quarantined.name.startswith(key.digest())
    assert reason in (quarantined / disk_module.REASON_NAME).read_text()
    assert store.metrics.snapshot()["corruptions"]["disk"] == 1
    # The rebuilt entry is on disk and verifies; a fresh reader loads the correct content.
    assert store.verify().clean
    assert DiskTier(store.root).get(key) == make_artifact("a")


def test_verify_reports_and_quarantines_every_bad_entry(store):
    keys = [make_key(str(i)) for i in range(5)]
    for key in keys:
        store.put(key, make_artifact(key.graph_hash))
    _flip(_entry(store, keys[1]))
    _garbage_manifest(_entry(store, keys[3]))
    report = store.verify()
    assert (report.checked, report.ok) == (5, 3)
    assert {c.digest for c in report.corrupted} == {keys[1].digest(), keys[3].digest()}
    assert all(os.path.isdir(c.quarantined_to) for c in report.corrupted)
    assert store.verify().clean and store.verify().checked == 3
    assert store.get(keys[1]) is None and store.get(keys[0]) == make_artifact(keys[0].graph_hash)


def test_eviction_keeps_the_store_under_max_bytes_and_drops_least_recent(tmp_path):
    probe = DiskTier(tmp_path / "probe")
    probe.put(make_key("p"), make_artifact("p", size=4000))
    entry_bytes = probe.stats()["bytes"]
    store = DiskTier(tmp_path / "kernels", max_bytes=int(entry_bytes * 3.5), metrics=CacheMetrics())
    keys = [make_key(str(i)) for i in range(3)]
    for n, key in enumerate(keys):
        store.put(key, make_artifact(key.graph_hash, size=4000))
        os.utime(_entry(store, key), (1000 + n, 1000 + n))  # distinct, old access times
    assert store.get(keys[0]) is not None  # a hit refreshes its access time: now most recent
    expected_after = [{"graph-0", "graph-2", "graph-3"}, {"graph-0", "graph-3", "graph-4"}]
    for i, expected in zip((3, 4), expected_after, strict=True):
        key = make_key(str(i))
        store.put(key, make_artifact(key.graph_hash, size=4000))
        assert store.stats()["bytes"] <= store.max_bytes
        present = {k.graph_hash for k in map(make_key, map(str, range(5))) if k in store}
        assert present == expected
    assert store.metrics.snapshot()["evictions"]["disk"] == 2
    assert store.verify().clean


def test_entry_larger_than_the_store_is_not_written(tmp_path):
    store = DiskTier(tmp_path / "kernels", max_bytes=100)
    assert store.put(make_key("a"), make_artifact("a")) is False
    assert store.stats()["entries"] == 0


def test_io_error_while_writing_is_a_counted_miss_not_a_crash(store, monkeypatch):
    def disk_full(path, content):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(disk_module, "_write_synced", disk_full)
    assert store.put(make_key("a"), make_artifact("a")) is False
    assert store.metrics.snapshot()["errors"]["disk"] == 1
    assert os.listdir(store.root / disk_module.STAGING) == []
    assert store.get(make_key("a")) is None


def test_concurrent_writers_of_one_key_leave_one_good_entry(store):
    key = make_key("race")
    results = []
    barrier = threading.Barrier(8)

    def writer(n):
        barrier.wait()
        results.append(store.put(key, make_artifact("race")))
        results.append(store.get(key) == make_artifact("race"))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 16
    report = store.verify()
    assert report.clean and report.checked == 1
    assert os.listdir(store.root / disk_module.STAGING) == []


def test_stale_staging_and_old_quarantine_are_cleaned_and_never_read(store):
    key = make_key("a")
    stale = store.root / disk_module.STAGING / f"{key.digest()}.1.dead"
    stale.mkdir(parents=True)
    (stale / "kernel.py").write_bytes(b"half-writ")
    old = time.time() - disk_module.STALE_STAGING_S - 10
    os.utime(stale, (old, old))
    store.put(make_key("q"), make_artifact("q"))
    _flip(_entry(store, make_key("q")))
    assert store.get(make_key("q")) is None
    (quarantined,) = store.quarantined()
    recent = store.root / disk_module.STAGING / "fresh.2.writing"
    recent.mkdir()
    assert store.get(key) is None
    store.put(make_key("b"), make_artifact("b"))  # runs the maintenance pass
    assert not stale.exists() and recent.exists() and quarantined.exists()
    ancient = time.time() - disk_module.QUARANTINE_KEEP_S - 10
    os.utime(quarantined, (ancient, ancient))
    store.put(make_key("c"), make_artifact("c"))
    assert store.quarantined() == []


def test_clear_removes_entries_and_quarantine(store):
    for name in "abc":
        store.put(make_key(name), make_artifact(name))
    _flip(_entry(store, make_key("a")))
    assert store.get(make_key("a")) is None
    assert store.clear() == 2
    assert store.stats()["entries"] == 0 and store.quarantined() == []


def test_constructor_validation(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="root: expected a directory"):
        DiskTier(tmp_path / "file")
    with pytest.raises(ValueError, match="max_bytes: expected a number > 0"):
        DiskTier(tmp_path, max_bytes=0)
    with pytest.raises(TypeError, match="root: expected a path"):
        DiskTier(42)


def test_tier_arguments_are_checked(store):
    with pytest.raises(TypeError, match="key: expected a CacheKey, got str"):
        store.get("ab" * 32)
    with pytest.raises(ValueError, match="key_or_digest: expected a CacheKey or a 64-character"):
        store.entry_dir("../../etc")
    with pytest.raises(TypeError, match="artifact: expected a KernelArtifact"):
        store.put(make_key("a"), b"x")
    with pytest.raises(TypeError, match="key: expected a CacheKey, got str"):
        MemoryTier().get("a")


def test_an_entry_of_the_older_manifest_format_is_a_quiet_miss_and_rebuilt(store):
    key = make_key("a")
    store.put(key, make_artifact("a"))
    path = _entry(store, key) / MANIFEST_NAME
    manifest = json.loads(path.read_bytes())
    del manifest["header_sha256"]  # what format 1 wrote
    manifest["format"] = 1
    path.write_text(json.dumps(manifest))
    registry = KernelRegistry(memory=MemoryTier(), disk=store, metrics=store.metrics)
    builds = []
    result = registry.get_or_build(key, lambda: builds.append(1) or make_artifact("a"))
    assert result == make_artifact("a") and builds == [1]
    assert store.quarantined() == [] and store.metrics.snapshot()["corruptions"]["disk"] == 0
    assert json.loads(path.read_bytes())["format"] == 2  # rewritten in the current format
    path.write_text(json.dumps(manifest))
    report = store.verify()  # dropped, not listed as corrupted
    assert report.clean and report.checked == 0 and not _entry(store, key).exists()
