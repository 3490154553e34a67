"""torch.fft on the device (lowering/fft.cpp: _fft_r2c, _fft_c2r and _fft_c2c on stablehlo.fft),
against CPU in every mode, forward and backward, with no CPU fallback."""
import pytest
import torch

from conftest import to_cpu


def real_sample(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def complex_sample(*shape, seed=0):
    return torch.complex(real_sample(*shape, seed=seed), real_sample(*shape, seed=seed + 100))


TRANSFORMS = {
    "fft": lambda x: torch.fft.fft(x),
    "fft_n_dim0": lambda x: torch.fft.fft(x, n=6, dim=0),
    "ifft_ortho": lambda x: torch.fft.ifft(x, norm="ortho"),
    "rfft": lambda x: torch.fft.rfft(x.real),
    "rfft_forward": lambda x: torch.fft.rfft(x.real, norm="forward"),
    "irfft": lambda x: torch.fft.irfft(x),
    "irfft_n": lambda x: torch.fft.irfft(x, n=9),
    "hfft": lambda x: torch.fft.hfft(x),
    "ihfft": lambda x: torch.fft.ihfft(x.real),
    "fft2": lambda x: torch.fft.fft2(x),
    "ifftn": lambda x: torch.fft.ifftn(x, dim=(0, 2)),
    "rfft2": lambda x: torch.fft.rfft2(x.real),
    "irfftn": lambda x: torch.fft.irfftn(x, s=(5, 8), dim=(1, 2)),
    "fftshift_of_fft": lambda x: torch.fft.fftshift(torch.fft.fft(x, dim=1), dim=1),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_transforms_match_cpu(mode, name, no_fallback):
    x = complex_sample(4, 5, 8, seed=1)
    fn = TRANSFORMS[name]
    want = fn(x)
    got = fn(x.to("tpu"))
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(to_cpu(got), want, atol=1e-4, rtol=1e-4)


def test_double_precision_transforms_match_cpu(mode, no_fallback):
    x = real_sample(3, 16, seed=2, dtype=torch.float64)
    for fn in (torch.fft.rfft, lambda t: torch.fft.irfft(torch.fft.rfft(t), n=16), torch.fft.fft):
        want = fn(x)
        torch.testing.assert_close(to_cpu(fn(x.to("tpu"))), want)


@pytest.mark.parametrize("name", ["rfft", "irfft", "fft2", "hfft"])
def test_gradients_match_cpu(mode, name, no_fallback):
    fn = TRANSFORMS[name]

    def grads(device):
        x = complex_sample(4, 5, 8, seed=3).to(device).requires_grad_()
        out = fn(x)
        weight = real_sample(*(out.shape + ((2,) if out.is_complex() else ())), seed=4).to(device)
        values = torch.view_as_real(out) if out.is_complex() else out
        (values * weight).sum().backward()
        return x.grad

    torch.testing.assert_close(to_cpu(grads("tpu")), grads("cpu"), atol=1e-4, rtol=1e-4)


def test_stft_and_istft_match_cpu(mode, no_fallback):
    signal = real_sample(2, 256, seed=5)
    window = torch.hann_window(64)

    def roundtrip(x, w):
        spec = torch.stft(x, n_fft=64, hop_length=16, window=w, return_complex=True)
        return spec, torch.istft(spec, n_fft=64, hop_length=16, window=w, length=256)

    spec, back = roundtrip(signal, window)
    spec_tpu, back_tpu = roundtrip(signal.to("tpu"), window.to("tpu"))
    torch.testing.assert_close(to_cpu(spec_tpu), spec, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(to_cpu(back_tpu), back, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("size,step", [(4, 2), (3, 3), (2, 5), (5, 1)])
def test_unfold_gradient_overlap_adds_on_the_device(mode, size, step, no_fallback):
    # istft's overlap-add is unfold's backward.
    def grad(device):
        x = real_sample(3, 17, 2, seed=6).to(device).requires_grad_()
        windows = x.unfold(1, size, step)
        (windows * real_sample(*windows.shape, seed=7).to(device)).sum().backward()
        return x.grad

    torch.testing.assert_close(to_cpu(grad("tpu")), grad("cpu"))
