"""Copies between CPU and tpu and between tpu devices: any layout, any dtype."""
import pytest
import torch

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32,
          torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_preserves_values(mode, dtype):
    cpu = (torch.arange(24).reshape(4, 6) % 7 - 3).to(dtype)
    torch.testing.assert_close(cpu.to("tpu").cpu(), cpu)


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.int32), (torch.int64, torch.float16),
                                     (torch.float32, torch.bfloat16), (torch.bool, torch.float32),
                                     (torch.float64, torch.bool)], ids=str)
def test_dtype_conversion_in_every_direction(mode, src, dst):
    cpu = (torch.arange(12).reshape(3, 4) - 5).to(src)
    expected = cpu.to(dst)
    torch.testing.assert_close(cpu.to("tpu", dtype=dst).cpu(), expected)  # during upload
    torch.testing.assert_close(cpu.to("tpu").to(dst).cpu(), expected)  # on the device
    torch.testing.assert_close(cpu.to("tpu").to("cpu", dtype=dst), expected)  # during download


def test_non_contiguous_sources_and_destinations(mode):
    cpu = torch.randn(6, 8)
    tpu = torch.zeros(8, 6, device="tpu")
    tpu.t().copy_(cpu)  # non-contiguous destination
    torch.testing.assert_close(tpu.cpu(), cpu.t())
    torch.testing.assert_close(tpu[::2, 1:].cpu(), cpu.t()[::2, 1:])  # non-contiguous source
    host = torch.zeros(6, 8).t()
    host.copy_(tpu)  # into a non-contiguous CPU tensor
    torch.testing.assert_close(host, cpu.t())
    torch.testing.assert_close(torch.zeros(3, 8, device="tpu").copy_(torch.arange(8.0)).cpu(),
                               torch.arange(8.0).expand(3, 8))  # broadcasting copy


def test_non_blocking_copies(mode):
    cpu = torch.randn(100)
    tpu = cpu.to("tpu", non_blocking=True)
    back = tpu.to("cpu", non_blocking=True)
    torch.tpu.synchronize()
    torch.testing.assert_close(back, cpu)


def test_tpu_to_tpu_copies_across_devices_and_dtypes(mode):
    cpu = torch.randn(4, 5)
    a = cpu.to("tpu:0")
    b = torch.empty(5, 4, dtype=torch.float64, device="tpu:1")
    b.copy_(a.t())
    torch.testing.assert_close(b.cpu(), cpu.t().double())
    c = a.clone()
    c.add_(1)
    torch.testing.assert_close(a.cpu(), cpu)  # the clone is a separate storage


def test_empty_tensors(mode):
    e = torch.empty(0, 3, device="tpu")
    assert e.cpu().shape == (0, 3)
    assert torch.zeros(0, device="tpu").sum().item() == 0


def test_scalars_and_item(mode):
    t = torch.tensor(3.5, device="tpu")
    assert t.item() == 3.5
    assert torch.tensor([7], device="tpu").item() == 7
    assert bool(torch.tensor(True, device="tpu"))
    assert torch.arange(3, device="tpu").tolist() == [0, 1, 2]


def test_conjugate_and_negative_views_copy_their_values(mode):
    # These views keep the data and set a bit; a copy must carry the value the bit stands for.
    cpu = torch.complex(torch.arange(6.0), -torch.arange(6.0) - 1)
    on_tpu = cpu.to("tpu")
    torch.testing.assert_close(on_tpu.conj().cpu(), cpu.conj())  # download
    torch.testing.assert_close(cpu.conj().to("tpu").cpu(), cpu.conj())  # upload
    torch.testing.assert_close(on_tpu.conj().clone().cpu(), cpu.conj())  # on the device
    destination = torch.zeros(6, dtype=torch.complex64, device="tpu")
    destination.conj().copy_(on_tpu)  # into a conjugate view
    torch.testing.assert_close(destination.cpu(), cpu.conj())
    real = torch.arange(4.0)
    torch.testing.assert_close(torch._neg_view(real.to("tpu")).cpu(), -real)
    torch.testing.assert_close(torch._neg_view(real).to("tpu").cpu(), -real)


def test_inverse_fft_of_a_real_input_matches_cpu(mode):
    # ifft of a real input returns a conjugate view of a forward transform; copying it used to
    # recurse until the stack overflowed.
    x = torch.randn(16)
    for transform in (torch.fft.ifft, torch.fft.hfft, torch.fft.ihfft):
        torch.testing.assert_close(transform(x.to("tpu")).cpu(), transform(x))
