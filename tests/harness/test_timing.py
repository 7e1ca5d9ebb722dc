import time

import pytest
import torch

from warpforge.harness import timing


def test_measure_cpu_reports_median_and_interval():
    def sleepy(x):
        time.sleep(0.002)
        return x

    m = timing.measure(sleepy, [(torch.randn(4),)], min_samples=5, max_time_s=0.5)
    assert m.clock == "cpu-wall"
    assert 0.0019 < m.median_s < 0.02
    assert m.ci_low_s <= m.median_s <= m.ci_high_s
    assert m.samples >= 5
    assert m.wall_total_s >= sum(m.samples_s) * 0.99


def test_measure_rotates_inputs():
    seen = []
    sets = [(torch.full((1,), float(i)),) for i in range(3)]
    timing.measure(
        lambda x: seen.append(int(x.item())), sets, min_samples=6, max_samples=6, warmup=0
    )
    assert seen == [0, 1, 2, 0, 1, 2]


def test_measure_rejects_empty_inputs():
    with pytest.raises(ValueError, match="input_sets"):
        timing.measure(lambda: None, [])


def test_bootstrap_interval_contains_median():
    samples = [1.0, 2.0, 3.0, 4.0, 100.0]
    low, high = timing.bootstrap_median_ci(samples)
    assert low <= 3.0 <= high


def test_timers_untouched_detects_patching(monkeypatch):
    assert timing.timers_untouched()
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert not timing.timers_untouched()


@pytest.mark.gpu
def test_measure_gpu_uses_events_and_flushes_l2():
    x = torch.randn(1 << 24, device="cuda")
    m = timing.measure(lambda a: a * 2, [(x,)], min_samples=10)
    assert m.clock == "cuda-events" and m.cold
    assert m.median_s > 0


@pytest.mark.gpu
def test_launch_hold_times_the_device_not_host_overhead():
    # a call with ~300 us of Python before one tiny kernel: events must report the kernel's
    # device time, and the host cost must appear separately as host_enqueue_s
    x = torch.randn(1024, device="cuda")

    def host_heavy(a):
        deadline = time.perf_counter() + 300e-6
        while time.perf_counter() < deadline:
            pass
        return a * 2

    m = timing.measure(host_heavy, [(x,)], min_samples=20, max_time_s=1.0)
    assert m.host_enqueue_s is not None and m.host_enqueue_s > 250e-6
    assert m.median_s < 100e-6, m.as_dict()
    assert m.launch_bound_samples <= m.samples // 10
