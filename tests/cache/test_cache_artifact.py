import json

import pytest

from warpforge.cache import CorruptEntryError, KernelArtifact
from warpforge.cache.artifact import artifact_from_manifest, build_manifest, parse_manifest


def test_artifact_normalises_and_counts_bytes():
    artifact = KernelArtifact({"b.bin": bytearray(b"\x00\x01"), "a.py": b"pass\n"}, {"t": (1, 2)})
    assert list(artifact.files) == ["a.py", "b.bin"]
    assert artifact.files["b.bin"] == b"\x00\x01" and type(artifact.files["b.bin"]) is bytes
    assert artifact.metadata == {"t": [1, 2]}  # JSON-normalised, as it reads back from disk
    assert artifact.nbytes == 2 + 5 + len(json.dumps({"t": [1, 2]}, separators=(",", ":")))
    with pytest.raises(TypeError):
        artifact.files["c"] = b""  # read-only view


@pytest.mark.parametrize(
    ("files", "metadata", "error", "message"),
    [
        ({}, {}, ValueError, "files: expected at least one file"),
        ({"../x": b""}, {}, ValueError, "files: expected plain file names"),
        ({".hidden": b""}, {}, ValueError, "files: expected plain file names"),
        ({"manifest.json": b""}, {}, ValueError, "files: expected plain file names"),
        ({"k.py": "text"}, {}, TypeError, "files['k.py']: expected bytes, got str"),
        ({"k.py": b""}, {"f": object()}, TypeError, "metadata: expected JSON-serialisable"),
        ({"k.py": b""}, [1], TypeError, "metadata: expected a mapping"),
    ],
)
def test_artifact_rejects_bad_input(files, metadata, error, message):
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        KernelArtifact(files, metadata)


def test_manifest_round_trip_and_each_kind_of_damage():
    artifact = KernelArtifact({"kernel.py": b"print(1)\n", "k.bin": b"\x7fELF"}, {"entry": "k"})
    raw = build_manifest("d" * 64, {"graph_hash": "g"}, artifact)
    manifest = parse_manifest(raw, "d" * 64)
    assert artifact_from_manifest(manifest, dict(artifact.files)) == artifact
    with pytest.raises(CorruptEntryError, match="not valid JSON"):
        parse_manifest(raw[:-3], "d" * 64)
    with pytest.raises(CorruptEntryError, match="names digest"):
        parse_manifest(raw, "e" * 64)
    with pytest.raises(CorruptEntryError, match="missing file"):
        artifact_from_manifest(manifest, {"kernel.py": b"print(1)\n"})
    with pytest.raises(CorruptEntryError, match="has 8 bytes, manifest records 9"):
        artifact_from_manifest(manifest, {"kernel.py": b"print(1)", "k.bin": b"\x7fELF"})
    with pytest.raises(CorruptEntryError, match="SHA-256"):
        artifact_from_manifest(manifest, {"kernel.py": b"print(2)\n", "k.bin": b"\x7fELF"})
