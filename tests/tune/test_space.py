from __future__ import annotations

import random

import pytest

from warpforge.tune.space import (
    ConfigSpace,
    at_most,
    config_key,
    divisible,
    next_power_of_2,
    register_budget,
    relation,
    shared_memory_budget,
)


def _space() -> ConfigSpace:
    return ConfigSpace(
        {"BLOCK": (32, 64, 128, 256), "num_warps": (1, 2, 4), "num_stages": (1, 2, 3)},
        constraints=(
            at_most("BLOCK", lambda c, f: f["N"], "N"),
            divisible("N", "BLOCK"),
            shared_memory_budget(
                lambda c, f: c["BLOCK"] * c["num_stages"] * 256, budget_bytes=60_000
            ),
            register_budget(lambda c, f: c["BLOCK"] // (32 * c["num_warps"]) * 64, limit=255),
        ),
    )


def test_pruning_splits_the_product_and_every_rejection_has_a_reason() -> None:
    space = _space()
    valid, rejected = space.enumerate({"N": 128})
    assert len(valid) + len(rejected) == space.size == 36
    assert valid and rejected
    assert all(space.allows(c, {"N": 128}) for c in valid)
    assert all(r.reason for r in rejected)
    reasons = {r.reason.split(":")[0] for r in rejected + space.enumerate({"N": 96})[1]}
    assert reasons == {"divisible(N, BLOCK)", "shared_memory", "registers", "at_most(BLOCK)"}


def test_each_constraint_reports_the_numbers() -> None:
    space = _space()
    f = {"N": 96}
    assert space.rejection({"BLOCK": 32, "num_warps": 1, "num_stages": 1}, f) is None
    why = space.rejection({"BLOCK": 64, "num_warps": 4, "num_stages": 1}, f)
    assert why == "divisible(N, BLOCK): N=96 is not a multiple of BLOCK=64"
    why = space.rejection({"BLOCK": 256, "num_warps": 4, "num_stages": 2}, {"N": 512})
    assert why is not None and "shared_memory" in why and "131072" in why and "60000" in why
    why = space.rejection({"BLOCK": 128, "num_warps": 1, "num_stages": 1}, {"N": 512})
    assert why == "registers: estimated 256 registers per thread, the limit is 255"
    why = space.rejection({"BLOCK": 256, "num_warps": 4, "num_stages": 1}, {"N": 128})
    assert why is not None and "exceeds N (128)" in why


def test_divisible_checks_the_parameter_against_the_divisor() -> None:
    c = divisible("BLOCK", 48)
    assert c.reason({"BLOCK": 96}, {}) is None
    assert (
        c.reason({"BLOCK": 64}, {}) == "divisible(BLOCK, 48): BLOCK=64 is not a multiple of 48=48"
    )


def test_unknown_values_and_keys_are_rejected_with_reasons() -> None:
    space = _space()
    assert "not one of" in space.rejection(
        {"BLOCK": 48, "num_warps": 1, "num_stages": 1}, {"N": 96}
    )
    assert "do not match" in space.rejection({"BLOCK": 32}, {"N": 96})


def test_neighbours_move_one_parameter_one_step_and_stay_valid() -> None:
    space = ConfigSpace(
        {"a": (1, 2, 4, 8), "b": ("x", "y")},
        (relation("no_8y", lambda c, f: "8 with y" if c == {"a": 8, "b": "y"} else None),),
    )
    got = space.neighbours({"a": 4, "b": "x"}, {})
    assert {config_key(c) for c in got} == {
        config_key(c) for c in ({"a": 2, "b": "x"}, {"a": 8, "b": "x"}, {"a": 4, "b": "y"})
    }
    assert {"a": 8, "b": "y"} not in space.neighbours({"a": 8, "b": "x"}, {})


def test_sample_is_distinct_valid_and_seeded() -> None:
    space = _space()
    f = {"N": 256}
    a = space.sample(f, 5, random.Random(3))
    assert a == space.sample(f, 5, random.Random(3))
    assert len({config_key(c) for c in a}) == 5 and all(space.allows(c, f) for c in a)
    assert len(space.sample(f, 10_000, random.Random(0))) == len(space.valid_configs(f))


@pytest.mark.parametrize(
    ("parameters", "error"),
    [
        ({}, ValueError),
        ({"a": ()}, ValueError),
        ({"a": "abc"}, ValueError),
        ({"a": (1, 1)}, ValueError),
        ({1: (1,)}, TypeError),
    ],
)
def test_bad_spaces_are_refused(parameters: dict, error: type[Exception]) -> None:
    with pytest.raises(error, match="parameters"):
        ConfigSpace(parameters)


def test_constraints_must_be_constraint_objects() -> None:
    with pytest.raises(TypeError, match="constraints"):
        ConfigSpace({"a": (1,)}, constraints=(lambda c, f: None,))  # type: ignore[arg-type]


def test_next_power_of_2() -> None:
    assert [next_power_of_2(n) for n in (0, 1, 2, 3, 5, 64, 65)] == [1, 1, 2, 4, 8, 64, 128]
