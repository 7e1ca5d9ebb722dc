"""Triton's start-up key: recorded after a launch, reused only while Triton's files are unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from warpforge.blueprint import triton_startup

triton_cache = pytest.importorskip("triton.runtime.cache")
triton_build = pytest.importorskip("triton.runtime.build")


@pytest.fixture
def clean_state() -> Iterator[None]:
    triton_startup.reset_for_tests()
    yield
    triton_startup.reset_for_tests()


def _original():  # type: ignore[no-untyped-def]
    function = triton_cache.triton_key
    return getattr(function, "__warpforge_original__", function)


def test_record_then_install_hands_triton_the_same_key(
    clean_state: None, fresh_blueprint_cache: Path
) -> None:
    original = _original()
    original.cache_clear()
    assert triton_startup.record() is False  # nothing computed yet: nothing to record
    triton_startup.reset_for_tests()
    real = original()  # what Triton computes by hashing its files
    assert triton_startup.record() is True
    memo = json.loads(triton_startup.memo_path().read_text())
    assert memo["triton_key"] == real
    assert memo["fingerprint"] == triton_startup.triton_fingerprint()
    assert triton_startup.record() is False  # once per process

    # A "new process": Triton has not hashed yet.
    triton_startup.reset_for_tests()
    original.cache_clear()
    assert triton_startup.install() is True
    assert triton_cache.triton_key() == real
    assert original.cache_info().currsize == 0  # the 500 MB hash did not run
    assert triton_startup.record() is False  # nothing new to record
    triton_startup.reset_for_tests()
    assert triton_cache.triton_key is original


def test_stale_or_missing_record_is_not_used(
    clean_state: None, fresh_blueprint_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = _original()
    original.cache_clear()
    assert triton_startup.install() is False  # no record yet
    triton_startup.reset_for_tests()
    path = triton_startup.memo_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"format": triton_startup._FORMAT, "fingerprint": "0" * 64, "triton_key": "x"})
    )
    assert triton_startup.install() is False  # Triton's files differ from the recorded ones
    assert triton_cache.triton_key is original
    triton_startup.reset_for_tests()
    path.write_text("{ torn")
    assert triton_startup.install() is False
    triton_startup.reset_for_tests()
    fingerprint = triton_startup.triton_fingerprint()
    path.write_text(
        json.dumps(
            {"format": triton_startup._FORMAT, "fingerprint": fingerprint, "triton_key": "k"}
        )
    )
    monkeypatch.setenv(triton_startup.SWITCH, "0")
    assert triton_startup.install() is False  # switched off
    assert triton_cache.triton_key is original


def test_fingerprint_changes_with_triton_files(
    clean_state: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = triton_startup.triton_fingerprint()
    real_stat = Path.stat

    def touched(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = real_stat(self, *args, **kwargs)
        if self.name.startswith("libtriton"):
            return type(result)((*result[:6], result[6] + 1, *result[7:]))  # size + 1
        return result

    monkeypatch.setattr(Path, "stat", touched)
    assert triton_startup.triton_fingerprint() != before


def test_the_loaded_libcuda_folder_is_read_from_the_process_maps() -> None:
    maps = "\n".join(
        [
            "7f00-7f10 r--p 00000000 08:01 123  /usr/lib/x86_64-linux-gnu/libc.so.6",
            "7f10-7f20 rw-p 00000000 00:00 0",
            "7f20-7f30 r-xp 00000000 08:01 456  /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
        ]
    )
    assert triton_startup.loaded_libcuda_folder(maps) == "/usr/lib/x86_64-linux-gnu"
    assert triton_startup.loaded_libcuda_folder(maps.splitlines()[0]) is None
    assert triton_startup.loaded_libcuda_folder("7f10-7f20 rw-p 00000000 00:00 0") is None


def test_a_libcuda_location_set_by_the_user_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton import knobs

    monkeypatch.setattr(knobs.nvidia, "libcuda_path", "/opt/mine")
    assert triton_startup.hint_libcuda_location() is False
    assert knobs.nvidia.libcuda_path == "/opt/mine"


def _original_platform_key():  # type: ignore[no-untyped-def]
    function = triton_build.platform_key
    return getattr(function, "__warpforge_original__", function)


def _clear(function) -> None:  # type: ignore[no-untyped-def]
    if hasattr(function, "cache_clear"):
        function.cache_clear()


def _write_memo(platform_part: dict[str, str] | None) -> None:
    payload = {
        "format": triton_startup._FORMAT,
        "fingerprint": triton_startup.triton_fingerprint(),
        "triton_key": "recorded-key",
    }
    if platform_part is not None:
        payload["platform"] = platform_part
    path = triton_startup.memo_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def test_platform_key_is_recorded_and_reused_without_running_file(
    clean_state: None, fresh_blueprint_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = _original_platform_key()
    _original().cache_clear()
    _original()()  # Triton hashed its files: a launch happened
    real = original()
    assert triton_startup.record() is True
    memo = json.loads(triton_startup.memo_path().read_text())
    assert memo["platform"] == {
        "executable": triton_startup.executable_fingerprint(),
        "platform_key": real,
    }

    # A "new process": neither key computed yet, and ``file`` must not run.
    triton_startup.reset_for_tests()
    _original().cache_clear()
    _clear(original)
    import platform

    def no_subprocess(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("platform.architecture() ran")

    monkeypatch.setattr(platform, "architecture", no_subprocess)
    assert triton_startup.install() is True
    assert triton_build.platform_key() == real
    assert triton_build.platform_key is not original
    triton_startup.reset_for_tests()
    assert triton_build.platform_key is original


def test_platform_key_of_another_executable_is_not_used(
    clean_state: None, fresh_blueprint_cache: Path
) -> None:
    original = _original_platform_key()
    _original().cache_clear()
    _clear(original)
    _write_memo({"executable": "x86_64 Linux /elsewhere/python 1 2", "platform_key": "other"})
    assert triton_startup.install() is True  # the Triton key itself still matches
    assert triton_build.platform_key is original
    triton_startup.reset_for_tests()
    _original().cache_clear()
    _write_memo(None)  # no platform part: the Triton key alone
    assert triton_startup.install() is True
    assert triton_build.platform_key is original
    triton_startup.reset_for_tests()
    _original().cache_clear()
    _write_memo({"executable": 3, "platform_key": "bad"})  # malformed: the whole record is ignored
    assert triton_startup.install() is False
    assert triton_build.platform_key is original


def test_hash_in_background_gives_triton_its_own_value(
    clean_state: None, fresh_blueprint_cache: Path
) -> None:
    """Without a record, the hash starts in a thread; Triton's call waits for it and gets the
    value its own function computes, which record() then stores as usual."""
    original = _original()
    original.cache_clear()
    assert triton_startup.install() is False  # no record: Triton will hash
    assert triton_startup.hash_in_background() is True
    assert triton_startup.hash_in_background() is False  # once a process
    assert triton_cache.triton_key is not original  # Triton's modules call the waiting wrapper
    value = triton_cache.triton_key()
    assert original.cache_info().currsize == 1 and value == original()
    assert triton_startup.record() is True
    assert json.loads(triton_startup.memo_path().read_text())["triton_key"] == value
    triton_startup.reset_for_tests()
    assert triton_cache.triton_key is original


def test_no_background_hash_when_recorded_computed_or_switched_off(
    clean_state: None, fresh_blueprint_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = _original()
    original()  # computed already in this process
    assert triton_startup.hash_in_background() is False
    triton_startup.reset_for_tests()
    original.cache_clear()
    monkeypatch.setenv(triton_startup.SWITCH, "0")
    assert triton_startup.hash_in_background() is False
    assert triton_cache.triton_key is original
