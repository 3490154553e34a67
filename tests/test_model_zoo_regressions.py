"""What the model-zoo sweep (python -m torch_tpu.tools.model_zoo) found wrong, each fixed where it
lived and pinned here against the CPU, in every eager mode and with no CPU fallback."""
import copy

import pytest
import torch



def _histc_cases():
    g = torch.Generator().manual_seed(0)
    floats = torch.randn(200, generator=g)
    return [
        (floats, dict(bins=7)),                       # the data's own range
        (floats, dict(bins=5, min=-1, max=1)),        # values outside the range are dropped
        (floats.reshape(20, 10), dict(bins=3, min=-0.5, max=0.5)),
        (torch.ones(3), dict(bins=4)),                # an empty range widens by one each side
        (torch.tensor([0.0, 1.0, 2.0, 3.0]), dict(bins=3, min=0, max=3)),  # right edge: last bin
    ]


@pytest.mark.parametrize("case", range(5))
def test_histc_matches_cpu(mode, no_fallback, case):
    x, kwargs = _histc_cases()[case]
    expected = torch.histc(x, **kwargs)
    actual = torch.histc(x.to("tpu"), **kwargs)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_histc_of_integer_expert_ids_counts_tokens_per_expert(mode, no_fallback, dtype):
    # Mixture-of-experts routing (transformers' grouped experts) counts the tokens sent to each
    # expert with histc over integer ids on every device but the CPU, whose kernel has no
    # integer histc; the counts must equal the float histogram's.
    ids = torch.randint(0, 8, (64,), generator=torch.Generator().manual_seed(1)).to(dtype)
    expected = torch.histc(ids.float(), bins=8, min=0, max=7).to(dtype)
    actual = torch.histc(ids.to("tpu"), bins=8, min=0, max=7)
    assert actual.dtype == dtype
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
    torch.testing.assert_close(actual.cpu(), torch.bincount(ids, minlength=8).to(dtype))


def test_histc_bad_bins_raises_as_on_cpu(mode):
    with pytest.raises(RuntimeError, match="bins"):
        torch.histc(torch.ones(3), bins=0)
    with pytest.raises(RuntimeError, match="bins"):
        torch.histc(torch.ones(3, device="tpu"), bins=0)


class _TiedLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(11, 6)
        self.head = torch.nn.Linear(6, 11, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.embed(ids)))


def test_tied_weights_stay_tied_through_to_tpu_and_train_as_on_cpu(mode):
    # GPT-2, BERT, T5 and most language models share the embedding with the output projection;
    # moving the model must keep one parameter, or the two copies train apart.
    torch.manual_seed(0)
    cpu = _TiedLM()
    tpu = _TiedLM()
    tpu.load_state_dict(cpu.state_dict())
    tpu = tpu.to("tpu")
    assert tpu.head.weight is tpu.embed.weight
    assert len(list(tpu.parameters())) == len(list(cpu.parameters())) == 1
    ids = torch.tensor([[1, 2, 3], [4, 5, 10]])
    for model, device in ((cpu, "cpu"), (tpu, "tpu")):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(2):
            model(ids.to(device)).square().mean().backward()
            opt.step()
            opt.zero_grad()
    torch.testing.assert_close(tpu.embed.weight.cpu(), cpu.embed.weight, rtol=1e-5, atol=1e-6)
    back = tpu.cpu()
    assert back.head.weight is back.embed.weight and back.embed.weight.device.type == "cpu"


def test_shared_buffers_stay_shared_through_to_tpu(mode):
    a, b = torch.nn.Module(), torch.nn.Module()
    table = torch.arange(4.0)
    a.register_buffer("table", table)
    b.register_buffer("table", table)
    moved = torch.nn.ModuleList([a, b]).to("tpu")
    assert moved[0].table is moved[1].table and moved[0].table.device.type == "tpu"


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_training_updates_running_statistics_on_device(mode, no_fallback, momentum, compiled):
    # BatchNorm in training mode (every convolutional network's training step) updates its
    # running statistics in place; that used to take the CPU fallback. Eagerly it calls
    # native_batch_norm, in a torch.compile graph _native_batch_norm_legit: both have kernels.
    torch.manual_seed(0)
    cpu = torch.nn.BatchNorm2d(3, momentum=momentum).train()
    module = torch.nn.BatchNorm2d(3, momentum=momentum).train().to("tpu")
    tpu = torch.compile(module, backend="tpu") if compiled else module
    x = torch.randn(4, 3, 5, 5) * 2 + 1
    for step in range(2):
        xc = x.clone().requires_grad_()
        xt = x.to("tpu").requires_grad_()
        expected, actual = cpu(xc), tpu(xt)
        torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-5)
        seed = torch.randn_like(expected)
        expected.backward(seed)
        actual.backward(seed.to("tpu"))
        torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-5)
        x = x * 0.5 - 0.25
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(module, name).cpu(), getattr(cpu, name), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(module.weight.grad.cpu(), cpu.weight.grad, rtol=1e-4, atol=1e-5)
    tpu.eval()
    cpu.eval()
    torch.testing.assert_close(tpu(x.to("tpu")).cpu(), cpu(x), rtol=1e-4, atol=1e-5)


def test_compiled_view_of_a_result_laid_out_otherwise_than_traced(mode, no_fallback):
    # An elementwise op over a transposed and a contiguous operand: FakeTensor, which traced the
    # graph, and the device's meta functions (CPU's) lay the result out differently, and the
    # backward graph's view of it was impossible on the device (a gated-delta-rule model's
    # softplus backward). The compiled graphs view by reshaping.
    import torch.nn.functional as F

    def loss(h, w):
        return (F.softplus((h * 1.5).view(2, 8, 4)).transpose(1, 2) * w).sum()
    torch.manual_seed(0)
    h, w = torch.randn(16, 4, requires_grad=True), torch.randn(2, 4, 8)
    loss(h, w).backward()
    on_tpu = h.detach().to("tpu").requires_grad_()
    torch.compile(loss, backend="tpu")(on_tpu, w.to("tpu")).backward()
    torch.testing.assert_close(on_tpu.grad.cpu(), h.grad)


def test_batch_norm_with_one_running_statistic_raises_as_on_cpu(mode):
    x = torch.randn(4, 3, 5)
    for device in ("cpu", "tpu"):
        with pytest.raises(ValueError, match="running_mean and running_var"):
            torch.native_batch_norm(x.to(device), None, None, torch.zeros(3, device=device),
                                    None, True, 0.1, 1e-5)


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_forward_and_backward_match_cpu(mode, no_fallback, dim):
    # The positional convolution of wav2vec2, HuBERT and WavLM is weight-normalised.
    torch.manual_seed(0)
    v = torch.randn(4, 3, 5)
    g = torch.randn([v.shape[d] if d == dim else 1 for d in range(3)])
    cv, cg = v.clone().requires_grad_(), g.clone().requires_grad_()
    tv, tg = v.to("tpu").requires_grad_(), g.to("tpu").requires_grad_()
    expected = torch._weight_norm(cv, cg, dim)
    actual = torch._weight_norm(tv, tg, dim)
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-6)
    seed = torch.randn_like(expected)
    expected.backward(seed)
    actual.backward(seed.to("tpu"))
    torch.testing.assert_close(tv.grad.cpu(), cv.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(tg.grad.cpu(), cg.grad, rtol=1e-4, atol=1e-5)


def test_weight_norm_parametrized_conv_trains_as_on_cpu(mode, no_fallback):
    torch.manual_seed(0)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 4, 3, padding=1), dim=2)
    tpu = copy.deepcopy(conv).to("tpu")
    x = torch.randn(2, 4, 7)
    conv(x).square().mean().backward()
    tpu(x.to("tpu")).square().mean().backward()
    for (name, p), q in zip(conv.named_parameters(), tpu.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5, msg=name)


_WINDOWS = [
    ((2, 3, 7, 6), dict(kernel_size=3, padding=1)),
    ((2, 3, 7, 6), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 0), stride=(2, 3))),
    ((3, 5, 5), dict(kernel_size=2)),  # unbatched
]


@pytest.mark.parametrize("case", range(len(_WINDOWS)))
def test_unfold_and_fold_with_gradients_match_cpu(mode, no_fallback, case):
    # nn.Unfold (im2col; its backward is col2im) in ConvBERT's span-based convolution.
    shape, kwargs = _WINDOWS[case]
    torch.manual_seed(case)
    x = torch.randn(*shape)
    cx, tx = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    expected = torch.nn.functional.unfold(cx, **kwargs)
    actual = torch.nn.functional.unfold(tx, **kwargs)
    torch.testing.assert_close(actual.cpu(), expected)
    seed = torch.randn_like(expected)
    expected.backward(seed)
    actual.backward(seed.to("tpu"))
    torch.testing.assert_close(tx.grad.cpu(), cx.grad, rtol=1e-5, atol=1e-5)
    folded = torch.nn.functional.fold(seed.to("tpu"), shape[-2:], **kwargs)
    torch.testing.assert_close(folded.cpu(), torch.nn.functional.fold(seed, shape[-2:], **kwargs),
                               rtol=1e-5, atol=1e-5)


def test_unfold_with_a_window_larger_than_the_input_raises_as_on_cpu(mode):
    x = torch.randn(1, 2, 3, 3)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="must be at least one"):
            torch.nn.functional.unfold(x.to(device), kernel_size=5)


def test_view_as_real_and_view_as_complex_share_storage_as_on_cpu(mode):
    # FNet mixes tokens with an FFT and keeps its real part through view_as_real.
    z = torch.randn(3, 4, dtype=torch.cfloat)
    t = z.to("tpu")
    real = torch.view_as_real(t)
    assert real.shape == (3, 4, 2) and real.stride() == torch.view_as_real(z).stride()
    torch.testing.assert_close(real.cpu(), torch.view_as_real(z), rtol=0, atol=0)
    torch.testing.assert_close(torch.view_as_real(t[1:, 1:]).cpu(), torch.view_as_real(z[1:, 1:]),
                               rtol=0, atol=0)
    real[0, 0, 1] = 5.0  # a write through the real view is seen by the complex tensor
    z_written = z.clone()
    z_written[0, 0] = complex(z[0, 0].real.item(), 5.0)
    torch.testing.assert_close(t.cpu(), z_written, rtol=0, atol=0)
    x = torch.randn(2, 6, 2)
    torch.testing.assert_close(torch.view_as_complex(x.to("tpu")[:, ::2]).cpu(),
                               torch.view_as_complex(x[:, ::2]), rtol=0, atol=0)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="complex tensors"):
            torch.view_as_real(torch.randn(3, device=device))
        with pytest.raises(RuntimeError, match="last dimension of size 2"):
            torch.view_as_complex(torch.randn(3, 3, device=device))
