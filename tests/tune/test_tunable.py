from __future__ import annotations

import pytest
import torch
from tune_synthetic import make_synthetic

from warpforge.tune.tunable import (
    device_fingerprint,
    get_tunable,
    parse_dtype,
    register_tunable,
    registered_tunables,
    source_hash,
    unregister_tunable,
)
from warpforge.validation import parse_shape


def test_register_get_and_refuse_duplicates() -> None:
    k = register_tunable(make_synthetic("tunable_test"))
    try:
        assert get_tunable("tunable_test") is k
        assert k in registered_tunables()
        with pytest.raises(ValueError, match="already registered"):
            register_tunable(make_synthetic("tunable_test"))
        replacement = register_tunable(make_synthetic("tunable_test"), replace=True)
        assert get_tunable("tunable_test") is replacement
    finally:
        unregister_tunable("tunable_test")
    with pytest.raises(KeyError, match=r"no tunable kernel named 'tunable_test'.*row_sum"):
        get_tunable("tunable_test")


def test_register_validates() -> None:
    with pytest.raises(TypeError, match="kernel"):
        register_tunable("row_sum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        register_tunable(make_synthetic(""))


def test_source_hash_follows_the_source() -> None:
    def a(x: int) -> int:
        return x + 1

    def b(x: int) -> int:
        return x + 2

    assert source_hash(a) == source_hash(a) != source_hash(b)
    assert source_hash(a, "v1") != source_hash(a, "v2")
    assert len(source_hash(a)) == 16


def test_parse_shape_and_dtype() -> None:
    assert parse_shape("M=4096, N=7") == {"M": 4096, "N": 7}
    assert parse_dtype("bf16") is torch.bfloat16 and parse_dtype("torch.float16") is torch.float16
    for bad in ("", "M", "M=x", "M=0", "=3"):
        with pytest.raises(ValueError, match="shape"):
            parse_shape(bad)
    with pytest.raises(ValueError, match="dtype"):
        parse_dtype("int8")


def test_cpu_fingerprint_names_the_execution_path() -> None:
    assert device_fingerprint("cpu") in {"cpu/triton-interpreter", "cpu/torch-reference"}
