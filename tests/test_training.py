"""Whole models: the issue's MLP and a small transformer train on tpu as they do on CPU."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.reference_models import Decoder


def train_mlp(device, steps=30):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(64, 32, generator=generator).to(device)
    y = torch.randint(0, 10, (64,), generator=generator).to(device)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_mlp_trains_like_cpu(mode, no_fallback):
    cpu_losses, cpu_params = train_mlp("cpu")
    tpu_losses, tpu_params = train_mlp("tpu")
    torch.testing.assert_close(tpu_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    assert tpu_losses[-1] < tpu_losses[0]
    for a, b in zip(tpu_params, cpu_params):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def tiny_decoder():
    return Decoder(vocab=50, dim=32, heads=4, layers=2, seq=16)


def test_small_transformer_forward_and_backward_match_cpu(mode, no_fallback):
    torch.manual_seed(0)
    cpu_model = tiny_decoder()
    tpu_model = tiny_decoder().to("tpu")
    tpu_model.load_state_dict(cpu_model.state_dict())
    tokens = torch.randint(0, 50, (3, 16), generator=torch.Generator().manual_seed(2))
    results = []
    for model, device in ((cpu_model, "cpu"), (tpu_model, "tpu")):
        logits = model(tokens.to(device))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 50), tokens.to(device)[:, 1:].reshape(-1))
        loss.backward()
        results.append((logits.detach().cpu(), loss.item(),
                        {n: p.grad.cpu() for n, p in model.named_parameters()}))
    (cpu_logits, cpu_loss, cpu_grads), (tpu_logits, tpu_loss, tpu_grads) = results
    torch.testing.assert_close(tpu_logits, cpu_logits, rtol=1e-4, atol=1e-4)
    assert abs(tpu_loss - cpu_loss) < 1e-4
    for name, grad in cpu_grads.items():
        torch.testing.assert_close(tpu_grads[name], grad, rtol=1e-3, atol=1e-4, msg=name)


def test_sgd_with_momentum_and_weight_decay(mode, no_fallback):
    results = []
    for device in ("cpu", "tpu"):
        torch.manual_seed(0)
        model = torch.nn.Linear(5, 3).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-2)
        x = torch.randn(8, 5).to(device)
        for _ in range(5):
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
        results.append([p.detach().cpu() for p in model.parameters()])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b)
