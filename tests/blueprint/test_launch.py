"""Generated blueprint kernels read their launch configs from warpforge.tune."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from warpforge.blueprint import problems
from warpforge.blueprint.compiler import compile as compile_blueprint
from warpforge.blueprint.launch import (
    MATMUL_ROWS_SPACE,
    MATMUL_SPACE,
    ROWS_SPACE,
    matmul_default,
    matmul_sizes,
    rows_default,
)
from warpforge.harness.registry import get_problem
from warpforge.tune import lookup
from warpforge.tune.database import PerfDatabase
from warpforge.tune.search import Trial
from warpforge.tune.tunable import device_fingerprint, get_tunable, registered_tunables


@pytest.fixture(autouse=True)
def private_lookup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'perf.db'}"
    (tmp_path / "shipped").mkdir()
    monkeypatch.setattr(
        lookup, "_LOOKUP", lookup.ConfigLookup(database_url=url, shipped_dir=tmp_path / "shipped")
    )
    monkeypatch.setenv("WARPFORGE_TUNE_DB", "1")
    yield url


def _programs(module) -> list:
    return [p for p in module._programs.values() if hasattr(p, "_launches")]


def _bias_gelu(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(7, 33, generator=g), torch.randn(33, generator=g)


def _bias_gelu64(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return problems.bias_gelu_reference(x.double(), b.double())


def test_untuned_launch_is_the_heuristic() -> None:
    module = compile_blueprint(problems.bias_gelu_blueprint("float32"))
    x, b = _bias_gelu(0)
    torch.testing.assert_close(module(x, b).double(), _bias_gelu64(x, b), rtol=1e-5, atol=1e-5)
    ((key, config),) = _programs(module)[0]._launches.items()
    assert key[1] == (7, 33)
    assert config == rows_default(7, 33, whole_rows=False)


def test_a_stored_config_changes_the_launch_and_a_rejected_one_does_not(
    private_lookup: str,
) -> None:
    tunable = get_tunable("blueprint.bias_gelu.k0_add_gelu")
    features = tunable.features({"T": 7, "H": 33}, torch.float32)
    valid = [c for c in ROWS_SPACE.valid_configs(features) if c != rows_default(7, 33, False)]
    rejected = {"BLOCK_M": 1, "BLOCK_N": 16, "num_warps": 32}
    assert ROWS_SPACE.rejection(rejected, features) is not None
    with PerfDatabase(private_lookup) as db:
        for config, seconds, shape in ((valid[0], 1e-6, features), (rejected, 1e-7, None)):
            db.record_trial(
                kernel=tunable.name,
                source_hash=tunable.source_hash,
                device=device_fingerprint("cpu"),
                features=shape or {**features, "M": 8},
                trial=Trial(config, "ok", seconds),
            )
    module = compile_blueprint(problems.bias_gelu_blueprint("float32"))
    x, b = _bias_gelu(1)
    torch.testing.assert_close(module(x, b).double(), _bias_gelu64(x, b), rtol=1e-5, atol=1e-5)
    x8, b8 = torch.randn(8, 33), b
    torch.testing.assert_close(module(x8, b8).double(), _bias_gelu64(x8, b8), rtol=1e-5, atol=1e-5)
    launches = {key[1]: config for key, config in _programs(module)[0]._launches.items()}
    assert launches[(7, 33)] == valid[0]  # exact match
    # M=8's own entry is rejected by the space; its nearest valid neighbour (M=7) is used instead.
    assert launches[(8, 33)] == valid[0]


_SUITE_CASES = [
    ("blueprint.bias_gelu", problems.bias_gelu_blueprint, torch.float32),
    ("blueprint.scaled_masked_softmax", problems.masked_softmax_blueprint, torch.float32),
    ("blueprint.layernorm_linear_gelu", problems.layernorm_linear_gelu_blueprint, torch.float32),
    ("blueprint.causal_attention_scores", problems.attention_scores_blueprint, torch.float32),
    ("blueprint.mixed_precision_chain", problems.mixed_precision_blueprint, torch.float16),
]


@pytest.mark.parametrize(("problem_name", "builder", "dtype"), _SUITE_CASES)
def test_suite_tunables_use_the_keys_the_compiled_blueprint_looks_up(
    monkeypatch: pytest.MonkeyPatch, problem_name: str, builder, dtype: torch.dtype
) -> None:
    asked: dict[str, dict[str, object]] = {}
    real = lookup.checked_config_for

    def recording(kernel, features, default, **kwargs):
        asked[kernel] = dict(features)
        return real(kernel, features, default, **kwargs)

    monkeypatch.setattr(lookup, "checked_config_for", recording)
    problem = get_problem(problem_name)
    shape = problem.cpu_shapes[0]
    inputs = problem.make_inputs(
        shape, dtype, torch.device("cpu"), torch.Generator().manual_seed(0)
    )
    compile_blueprint(builder(str(dtype).removeprefix("torch.")))(*inputs)
    prefix = f"blueprint.{builder('float32').name}."
    tunables = {t.name: t for t in registered_tunables() if t.name.startswith(prefix)}
    assert set(asked) == set(tunables)
    for name, tunable in tunables.items():
        assert tunable.features(shape, dtype) == asked[name]


def test_suite_tunable_trials_are_correct_and_wrong_outputs_are_caught() -> None:
    from warpforge.tune.search import TuningProblem, check_output, evaluate_config

    tunable = get_tunable("blueprint.layernorm_linear_gelu.k1_linear_gelu")
    shape = tunable.cpu_shapes[0]
    problem = TuningProblem.build(tunable, shape, torch.float32, torch.device("cpu"), input_sets=1)
    config = tunable.default_config(problem.features)
    trial = evaluate_config(problem, config, lambda fn, sets, config: _instant(fn, sets))
    assert trial.status == "ok", trial.error
    (out,) = tunable.run(config, *problem.input_sets[0])
    assert check_output(problem, (out + 1e-2,)) is not None


def _instant(fn, sets):
    from warpforge.harness.timing import measure

    return measure(fn, sets, min_samples=2, max_samples=2, max_time_s=0.01)


def test_heuristics_lie_in_their_spaces_for_gpu_shapes() -> None:
    for n_rows, n_cols, whole in ((8192, 4096, True), (2048, 16384, True), (4096, 4096, False)):
        features = {"graph": "g", "M": n_rows, "N": n_cols, "whole_rows": whole}
        assert ROWS_SPACE.rejection(rows_default(n_rows, n_cols, whole), features) is None
    for dtype in ("bfloat16", "float32"):
        features = {"graph": "g", "B": 1, "M": 4096, "N": 4096, "K": 4096, "dtype": dtype}
        assert MATMUL_SPACE.rejection(matmul_default(features, on_gpu=True), features) is None
        assert 20 <= len(MATMUL_SPACE.valid_configs(features)) <= 110
    # attention scores: K = head dim, the row-pass kernel's own default
    for head_dim in (64, 40, 128):
        for n in (1024, 48):  # two passes, then one tile
            features = {"graph": "g", "B": 64, "M": 1024, "N": n, "K": head_dim,
                        "dtype": "bfloat16"}  # fmt: skip
            config = matmul_default(features, on_gpu=True, row_passes=True)
            assert MATMUL_ROWS_SPACE.rejection(config, features) is None, (n, head_dim)
            assert config["BLOCK_K"] >= head_dim  # one K block: the A tile is loaded once


def test_row_pass_matmuls_may_take_one_tile_spanning_the_row() -> None:
    features = {"graph": "g", "B": 64, "M": 1024, "N": 1024, "K": 64, "dtype": "bfloat16"}
    wide = [c for c in MATMUL_ROWS_SPACE.valid_configs(features) if c["BLOCK_N"] > 256]
    # one tile: BLOCK_N = N rounded up, K in one block (one stage), few rows within registers
    assert wide and all(c["BLOCK_N"] == 1024 and c["num_stages"] == 2 for c in wide)
    assert {(c["BLOCK_M"], c["num_warps"]) for c in wide} == {
        (16, 4),
        (16, 8),
        (16, 16),
        (32, 8),
        (32, 16),
    }
    assert not [c for c in MATMUL_SPACE.valid_configs(features) if c["BLOCK_N"] > 256]
    two_pass = {"BLOCK_M": 64, "BLOCK_N": 512, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
                "num_stages": 2}  # fmt: skip
    long_rows = {**features, "N": 4096}
    assert "only as one tile" in str(MATMUL_ROWS_SPACE.rejection(two_pass, long_rows))
    small_rows = {**two_pass, "BLOCK_M": 16, "BLOCK_N": 64}  # below 64 rows: one tile only
    assert "BLOCK_M=16 is below 64" in str(MATMUL_ROWS_SPACE.rejection(small_rows, long_rows))
    tunable = get_tunable("blueprint.causal_attention_scores.k1_matmul_mul_where_softmax")
    assert tunable.space is MATMUL_ROWS_SPACE
    plain = get_tunable("blueprint.mlp_block.k0_linear_gelu")
    assert plain.space is MATMUL_SPACE


def test_row_tuned_configs_keep_their_key_when_the_matmul_template_changes() -> None:
    from warpforge.blueprint.codegen import TEMPLATE_VERSIONS
    from warpforge.blueprint.launch import graph_identity

    ir = problems.layernorm_linear_gelu_blueprint("bfloat16")
    rows, matmul = graph_identity(ir, kind="rows"), graph_identity(ir, kind="matmul")
    assert rows.endswith(f"/g{TEMPLATE_VERSIONS['rows']}/l1")
    assert matmul.endswith(f"/g{TEMPLATE_VERSIONS['matmul']}/l1") and rows != matmul
    streaming = graph_identity(ir, kind="matmul_rows")  # a matmul with row ops: its own template
    assert streaming.endswith(f"/g{TEMPLATE_VERSIONS['matmul_rows']}/l1") and streaming != matmul
    layer_norm = get_tunable("blueprint.layernorm_linear_gelu.k0_layer_norm")
    linear = get_tunable("blueprint.layernorm_linear_gelu.k1_linear_gelu")
    assert layer_norm.source_hash != linear.source_hash


def test_whole_row_kernels_take_the_row_and_matmul_tiles_fit_shared_memory() -> None:
    features = {"graph": "g", "M": 64, "N": 1000, "whole_rows": True}
    assert {c["BLOCK_N"] for c in ROWS_SPACE.valid_configs(features)} == {1024}
    features = {"graph": "g", "B": 1, "M": 4096, "N": 4096, "K": 4096, "dtype": "float32"}
    big = {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
           "num_stages": 4}  # fmt: skip
    assert "shared memory" in str(MATMUL_SPACE.rejection(big, features))


def test_matmul_sizes_follow_the_launcher() -> None:
    assert matmul_sizes("linear", (4, 6, 24), (20, 24)) == (1, 24, 20, 24)
    assert matmul_sizes("matmul", (2, 3, 17, 16), (2, 3, 16, 17)) == (6, 17, 17, 16)
    assert matmul_sizes("matmul", (5, 8), (8, 3)) == (1, 5, 3, 8)


def test_configs_tuned_on_another_graph_are_stale(tmp_path: Path) -> None:
    """A blueprint's configs are keyed by the graph they were tuned on: one whose graph identity
    the generator no longer produces (an edited blueprint or template) is stale, and dropped
    when shipped files are merged."""
    from warpforge.tune.shipped import merge_shipped, read_shipped, stale_entries

    tunable = get_tunable("blueprint.scaled_masked_softmax.k0_mul_add_softmax")
    assert tunable.current_features is not None
    current = tunable.features(dict(tunable.cpu_shapes[0]), tunable.dtypes[0])
    earlier = {**current, "graph": "0123456789abcdef/g1/l1"}
    assert tunable.current_features(current) and not tunable.current_features(earlier)
    config = {"BLOCK_M": 1, "BLOCK_N": current["N"], "num_warps": 1}

    def entry(features: dict) -> dict:
        return {"source_hash": tunable.source_hash, "device": "NVIDIA H200/sm_90",
                "features": features, "config": config}  # fmt: skip

    path = tmp_path / "shipped.json"
    document = {"format": "warpforge.tune.configs", "version": 2,
                "kernels": {tunable.name: [entry(earlier), entry(current)]}}  # fmt: skip
    path.write_text(json.dumps(document))
    assert [e.features["graph"] for _, e in stale_entries(path)] == [earlier["graph"]]
    assert merge_shipped([path], tmp_path / "merged.json", drop_stale=True) == 1
    kept = read_shipped(tmp_path / "merged.json")[tunable.name]
    assert [e.features["graph"] for e in kept] == [current["graph"]]
