"""GPU-only measurement tests: events, CUDA graphs, NVML clocks, ceilings, a timed pair.

CPU counterparts of the timing logic are in test_timing.py; these need a CUDA device.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from warpforge.harness import bench, ceilings, timing

CHEATS = Path(__file__).parent / "cheats"


def test_interleaved_cpu_times_every_contender_and_checks_outputs() -> None:
    seen: list[str] = []
    sets = [(torch.randn(64),) for _ in range(3)]
    results = timing.measure_interleaved(
        {"a": lambda x: x * 2, "b": lambda x: x + 1},
        sets,
        min_samples=4,
        max_samples=4,
        warmup=1,
        on_output=lambda name, inputs, out: seen.append(name),
    )
    assert set(results) == {"a", "b"}
    assert all(m.samples == 4 and m.clock == "cpu-wall" for m in results.values())
    assert seen.count("a") == seen.count("b") == 4 + 1  # timed calls + warm-up, all checked
    with pytest.raises(ValueError, match="cuda_graph"):
        timing.measure(lambda x: x, sets, cuda_graph=True)
    with pytest.raises(ValueError, match="fns"):
        timing.measure_interleaved({}, sets)


@pytest.mark.gpu
def test_gpu_events_graphs_and_clocks() -> None:
    x = torch.randn(1 << 20, device="cuda")
    eager = timing.measure(lambda a: a * 2, [(x,)], max_time_s=0.5)
    graph = timing.measure(lambda a: a * 2, [(x,)], max_time_s=0.5, cuda_graph=True, cold=False)
    assert eager.clock == "cuda-events" and eager.cold and eager.event_wall_consistent
    assert graph.cuda_graph and not graph.cold
    assert graph.median_s < eager.median_s * 1.5
    m = eager.as_dict()
    assert "throttled_samples" in m
    if timing.ClockSampler(torch.device("cuda")).available:
        assert eager.clocks_mhz and min(eager.clocks_mhz) > 0


@pytest.mark.gpu
def test_gpu_ceilings_are_plausible(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(tmp_path))
    ceil, cached = ceilings.load_or_measure(torch.device("cuda"), refresh=True)
    assert ceil.is_gpu and not cached
    assert {"bf16", "fp16", "fp32", "tf32"} <= set(ceil.matmul_flops_per_s)
    assert ceil.matmul_flops_per_s["bf16"] > ceil.matmul_flops_per_s["fp32"]
    if "H100" in ceil.device:  # the acceptance numbers, within 10%
        assert 2.7e12 <= ceil.copy_bytes_per_s <= 3.3e12, ceil.copy_bytes_per_s
        assert 621e12 <= ceil.matmul_flops_per_s["bf16"] <= 814e12, ceil.matmul_flops_per_s


@pytest.mark.gpu
def test_gpu_pair_bench_times_with_events() -> None:
    row = bench.bench_pair(CHEATS / "ref_scale.py", CHEATS / "honest_scale.py", max_time_s=0.5)
    assert row["status"] == "ok", row
    assert row["times"]["candidate"]["clock"] == "cuda-events"
    assert row["speedup"]["vs"]["reference"]["value"] > 0
