import pytest
import torch

from warpforge import runtime


def test_cpu_runs_under_interpreter_in_tests():
    # conftest asks for the interpreter on CPU machines; the policy must honour it
    if torch.cuda.is_available():
        pytest.skip("CPU tier only")
    assert runtime.interpreter_enabled()
    assert runtime.execution_path("cpu") is runtime.ExecutionPath.TRITON_INTERPRETER


def test_cpu_without_interpreter_uses_reference(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("WARPFORGE_INTERPRET", raising=False)
    assert runtime.execution_path("cpu") is runtime.ExecutionPath.TORCH_REFERENCE
    assert not runtime.uses_triton("cpu")


def test_cuda_device_runs_compiled_triton():
    assert runtime.execution_path("cuda") is runtime.ExecutionPath.TRITON_GPU


def test_unsupported_device_is_rejected():
    with pytest.raises(ValueError, match="device: expected a 'cuda' or 'cpu' device, got 'meta'"):
        runtime.execution_path("meta")


def test_cpu_capabilities():
    caps = runtime.device_capabilities("cpu")
    assert caps.arch == "cpu"
    assert not caps.is_gpu and not caps.has_tma


@pytest.mark.gpu
def test_gpu_capabilities_match_torch():
    caps = runtime.device_capabilities()
    props = torch.cuda.get_device_properties(0)
    assert caps.sm_count == props.multi_processor_count
    assert caps.compute_capability == (props.major, props.minor)
    assert caps.arch == f"sm_{props.major}{props.minor}"
    assert caps.has_tma == (props.major >= 9)
    assert caps.l2_bytes and caps.l2_bytes > 0
