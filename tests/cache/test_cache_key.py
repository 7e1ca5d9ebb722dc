import dataclasses
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from warpforge import __version__, runtime
from warpforge.cache import CacheKey
from warpforge.cache.key import software_versions

text = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FFF), min_size=1, max_size=12)
spec = st.dictionaries(text, text, max_size=4).map(lambda d: tuple(d.items()))
keys = st.builds(
    CacheKey,
    graph_hash=text,
    arch=text,
    warpforge_version=text,
    triton_version=text,
    torch_version=text,
    specialisation=spec,
)
FIELDS = [f.name for f in dataclasses.fields(CacheKey)]


@settings(max_examples=60, deadline=None)
@given(keys)
def test_equal_fields_give_equal_digest(key):
    twin = CacheKey(**{name: getattr(key, name) for name in FIELDS})
    assert twin == key and hash(twin) == hash(key)
    assert twin.digest() == key.digest()
    assert re.fullmatch(r"[0-9a-f]{64}", key.digest())
    assert CacheKey.from_dict(key.as_dict()).digest() == key.digest()


@settings(max_examples=60, deadline=None)
@given(spec)
def test_specialisation_order_does_not_matter(pairs):
    a = CacheKey("g", "cpu", "1", "2", "3", pairs)
    b = CacheKey("g", "cpu", "1", "2", "3", tuple(reversed(pairs)))
    assert a.digest() == b.digest()


@settings(max_examples=80, deadline=None)
@given(keys, st.sampled_from([*FIELDS, "spec-value"]), text)
def test_any_field_change_changes_digest(key, field, new_text):
    values = {name: getattr(key, name) for name in FIELDS}
    if field == "specialisation":
        values[field] = (*key.specialisation, ("\x00extra", new_text))
    elif field == "spec-value":
        if not key.specialisation:
            values["specialisation"] = (("dtype", new_text),)
        else:
            name, value = key.specialisation[0]
            values["specialisation"] = ((name, value + new_text), *key.specialisation[1:])
    else:
        values[field] = getattr(key, field) + new_text
    changed = CacheKey(**values)
    assert changed != key
    assert changed.digest() != key.digest()


def test_field_boundaries_cannot_alias():
    # Moving characters from one field into the next must change the digest.
    a = CacheKey("ab", "c", "1", "2", "3")
    b = CacheKey("a", "bc", "1", "2", "3")
    assert a.digest() != b.digest()


def test_for_current_environment_fills_versions_and_arch():
    key = CacheKey.for_current_environment(
        "h", {"x.dtype": torch.float16, "n_mod_16": True, "bucket": 1024}, device="cpu"
    )
    assert key.arch == runtime.device_capabilities("cpu").arch == "cpu"
    assert key.warpforge_version == __version__
    assert key.torch_version == torch.__version__
    assert key.triton_version == software_versions()[1] != ""
    assert key.specialisation == (("bucket", "1024"), ("n_mod_16", "true"), ("x.dtype", "float16"))


def test_digest_is_cached_and_not_a_field():
    key = CacheKey("g", "cpu", "1", "2", "3")
    assert key.digest() is key.digest()
    assert "_digest" not in {f.name for f in dataclasses.fields(key)}
    assert key == CacheKey("g", "cpu", "1", "2", "3")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"graph_hash": ""}, ValueError, "graph_hash: expected a non-empty string"),
        ({"arch": 90}, TypeError, "arch: expected a str, got int 90"),
        ({"specialisation": (("a",),)}, TypeError, "specialisation: expected a tuple of"),
        ({"specialisation": (("a", "1"), ("a", "2"))}, ValueError, "expected unique names"),
    ],
)
def test_invalid_fields_are_rejected(kwargs, error, message):
    values = {"graph_hash": "g", "arch": "cpu", "warpforge_version": "1", "triton_version": "2",
              "torch_version": "3", **kwargs}  # fmt: skip
    with pytest.raises(error, match=re.escape(message)):
        CacheKey(**values)


def test_for_current_environment_rejects_bad_specialisation():
    with pytest.raises(TypeError, match="specialisation: expected a mapping"):
        CacheKey.for_current_environment("h", [("a", 1)])
    with pytest.raises(TypeError, match="specialisation: expected values"):
        CacheKey.for_current_environment("h", {"a": object()})


def test_pickled_key_matches_in_a_process_with_another_hash_seed():
    import os
    import pickle
    import subprocess
    import sys

    code = (
        "import pickle, sys; from warpforge.cache import CacheKey; "
        "sys.stdout.buffer.write(pickle.dumps(CacheKey('g', 'cpu', '1', '2', '3', (('a', 'b'),))))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": os.pathsep.join(sys.path)}
    blob = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, check=True)
    loaded = pickle.loads(blob.stdout)
    local = CacheKey("g", "cpu", "1", "2", "3", (("a", "b"),))
    assert hash(loaded) == hash(local) and loaded == local
    assert {local: 1}[loaded] == 1
    assert CacheKey.__hash__ is not object.__hash__ and "__hash__" in CacheKey.__dict__


def test_digest_format_is_pinned():
    # Changing the canonical form silently would orphan every stored entry or, worse, alias
    # old ones: bump KEY_FORMAT_VERSION and update this value together.
    key = CacheKey("g", "sm_90", "0.1.0", "3.6.0", "2.11.0", (("x.dtype", "float16"),))
    assert key.digest() == "9d901ed9e4f26f75d84e7bc1547e770e73715bd99ecb037f76b0013ba34886d8"


@pytest.mark.parametrize(
    ("value", "text"),
    [(True, "true"), (False, "false"), (None, "null"), (7, "7"), (0.5, "0.5"),
     ("fp16", "fp16"), (torch.bfloat16, "bfloat16"), (torch.device("cpu"), "cpu"),
     ((16, True), "[16,true]")],
)  # fmt: skip
def test_specialisation_value_spelling(value, text):
    from warpforge.cache.key import specialisation_value

    assert specialisation_value(value) == text
