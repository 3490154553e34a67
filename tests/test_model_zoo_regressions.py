"""What the model-zoo sweep (python -m torch_tpu.tools.model_zoo) found wrong, each fixed where it
lived and pinned here against the CPU, in every eager mode and with no CPU fallback."""
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
