"""Ops without a lowering run on the CPU: correct, counted, warned about once, and forbiddable."""
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_tpu

# An op the tpu device does not lower yet (the Airy function Ai).
UNLOWERED = "aten::special_airy_ai.out"


def unlowered(x, y):
    return torch.special.airy_ai(x * y.abs().sum(0))


def test_fallback_computes_the_cpu_result_and_counts_it(mode):
    assert UNLOWERED.split("::")[1].split(".")[0] not in torch_tpu.lowered_ops()
    torch_tpu.reset_fallback_counts()
    x, y = torch.randn(4, 3), torch.randn(5, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = unlowered(x.to("tpu"), y.to("tpu"))
        second = unlowered(x.to("tpu"), y.to("tpu"))
    assert first.device.type == "tpu"
    torch.testing.assert_close(first.cpu(), unlowered(x, y))
    torch.testing.assert_close(second.cpu(), unlowered(x, y))
    counts = torch_tpu.fallback_counts()
    assert counts.get(UNLOWERED) == 2, counts
    ours = [w for w in caught if "is not lowered for the tpu device" in str(w.message)]
    assert len(ours) == 1, "the warning fires once per op"


def test_fallback_warning_can_be_silenced():
    torch_tpu.reset_fallback_counts()
    torch_tpu.set_fallback_warnings(False)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            unlowered(torch.randn(2, 3, device="tpu"), torch.randn(2, 3, device="tpu"))
        assert not [w for w in caught if "tpu" in str(w.message)]
    finally:
        torch_tpu.set_fallback_warnings(True)


def test_fallback_can_be_an_error():
    torch_tpu.set_fallback_error(True)
    try:
        with pytest.raises(NotImplementedError, match="special_airy_ai"):
            unlowered(torch.randn(2, 3, device="tpu"), torch.randn(2, 3, device="tpu"))
    finally:
        torch_tpu.set_fallback_error(False)
    env = dict(os.environ, TORCH_TPU_FALLBACK="error")
    code = ("import torch\n"
            "try:\n"
            "    torch.special.airy_ai(torch.randn(2, 3, device='tpu'))\n"
            "except NotImplementedError as e:\n"
            "    print('raised')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert "raised" in result.stdout, result.stdout + result.stderr


def test_in_place_fallback_writes_back_to_the_tpu_tensor(mode):
    torch_tpu.set_fallback_warnings(False)
    try:
        cpu = torch.tensor([12, 18, 7, 9, 30, 4])
        tpu = cpu.to("tpu")
        view = tpu[1:4]
        # gcd has no lowering yet: the in-place op runs on the CPU and writes through the view.
        assert "gcd" not in torch_tpu.lowered_ops()
        torch_tpu.reset_fallback_counts()
        view.gcd_(torch.full((3,), 6, device="tpu"))
        assert any("gcd" in name for name in torch_tpu.fallback_counts())
        expected = cpu.clone()
        expected[1:4].gcd_(torch.full((3,), 6))
        torch.testing.assert_close(tpu.cpu(), expected)
    finally:
        torch_tpu.set_fallback_warnings(True)


def test_integer_convolutions_fall_back_to_what_cpu_runs(mode):
    # PyTorch sends every tpu convolution to convolution_overrideable, whose CPU kernel only
    # raises; the integer convolutions that have no lowering must run CPU's convolution instead.
    torch_tpu.reset_fallback_counts()
    generator = torch.Generator().manual_seed(0)
    x = torch.randint(-5, 5, (2, 3, 8, 8), generator=generator)
    weight = torch.randint(-3, 3, (4, 3, 3, 3), generator=generator)
    bias = torch.randint(-3, 3, (4,), generator=generator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = torch.nn.functional.conv2d(x.to("tpu"), weight.to("tpu"), bias.to("tpu"), padding=1)
    assert actual.device.type == "tpu"
    torch.testing.assert_close(actual.cpu(), torch.nn.functional.conv2d(x, weight, bias, padding=1))
    assert torch_tpu.fallback_counts().get("aten::convolution_overrideable", 0) >= 1
