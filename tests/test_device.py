"""The tpu device as PyTorch sees it: registration, torch.tpu, torch.accelerator, devices."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu


def run_python(code, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env,
                          timeout=300)


def test_import_torch_alone_autoloads_the_backend():
    result = run_python("import torch; x = torch.ones(3, device='tpu'); print((x * 2).sum().item())")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "6.0"


def test_torch_tpu_module_api():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 2
    assert torch.tpu.platform() == torch_tpu._C._platform()
    assert isinstance(torch.tpu.get_device_name(), str) and torch.tpu.get_device_name()
    torch.tpu.synchronize()
    assert torch.tpu.current_device() == 0


def test_accelerator_reports_tpu():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("tpu")
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    torch.accelerator.synchronize()
    torch.accelerator.set_device_index(1)
    try:
        assert torch.accelerator.current_device_index() == 1
        assert torch.empty(2, device="tpu").device == torch.device("tpu", 1)
    finally:
        torch.accelerator.set_device_index(0)


def test_set_device_and_device_context():
    torch.tpu.set_device(1)
    try:
        assert torch.tpu.current_device() == 1
    finally:
        torch.tpu.set_device(0)
    with torch.tpu.device(1):
        assert torch.tpu.current_device() == 1
    assert torch.tpu.current_device() == 0
    with pytest.raises((ValueError, RuntimeError), match="out of range"):
        torch.tpu.set_device(torch.tpu.device_count())


def test_tensor_methods(mode):
    x = torch.arange(4.0)
    t = x.tpu()
    assert t.is_tpu and not x.is_tpu
    assert t.device == torch.device("tpu", 0)
    assert torch.equal(t.cpu(), x)
    module = torch.nn.Linear(2, 2).tpu()
    assert module.weight.is_tpu


def test_second_device_and_device_to_device_copies(mode):
    x = torch.randn(5, 3)
    on1 = x.to("tpu:1")
    assert on1.device == torch.device("tpu", 1)
    assert torch.equal(on1.cpu(), x)
    back = (on1 * 2).to("tpu:0")
    assert back.device == torch.device("tpu", 0)
    torch.testing.assert_close(back.cpu(), x * 2)
    transposed = on1.t().to("tpu:0")
    torch.testing.assert_close(transposed.cpu(), x.t())


def test_mixing_devices_raises_like_cuda(mode):
    a = torch.ones(3, device="tpu:0")
    b = torch.ones(3, device="tpu:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + torch.ones(3)
    # A 0-dim CPU tensor is a scalar, as on CUDA.
    torch.testing.assert_close((a + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))


def test_missing_plugin_is_reported_on_first_use_not_at_import():
    code = ("import torch\n"
            "print('available', torch.tpu.is_available())\n"
            "try:\n"
            "    torch.ones(1, device='tpu')\n"
            "except RuntimeError as e:\n"
            "    print('error', e)\n")
    result = run_python(code, TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    assert result.returncode == 0, result.stderr
    assert "available False" in result.stdout
    assert "error" in result.stdout and "pip install" in result.stdout


def test_platform_selection_from_the_environment():
    result = run_python("import torch; print(torch.tpu.platform())", TORCH_TPU_PLATFORM="cpu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "cpu"
