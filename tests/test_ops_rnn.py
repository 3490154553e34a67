"""LSTM and GRU: ATen hands any non-CPU device the fused cell kernels, lowered here."""
import copy

import pytest
import torch


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.LSTMCell, torch.nn.GRUCell])
def test_recurrent_layers_match_cpu_forward_and_backward(cls, mode, no_fallback):
    torch.manual_seed(0)
    if cls in (torch.nn.LSTM, torch.nn.GRU):
        module = cls(6, 10, num_layers=2, batch_first=True)
        x = torch.randn(3, 5, 6, requires_grad=True)
    else:
        module = cls(6, 10)
        x = torch.randn(3, 6, requires_grad=True)
    tpu_module = copy.deepcopy(module).to("tpu")
    tpu_x = x.detach().to("tpu").requires_grad_()
    expected, actual = module(x), tpu_module(tpu_x)
    expected = expected[0] if isinstance(expected, tuple) else expected
    actual = actual[0] if isinstance(actual, tuple) else actual
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-5)
    expected.square().sum().backward()
    actual.square().sum().backward()
    torch.testing.assert_close(tpu_x.grad.cpu(), x.grad, rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(module.named_parameters(), tpu_module.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


def test_fused_cell_rejects_mismatched_gates(mode):
    gates = torch.randn(2, 12, device="tpu")
    with pytest.raises(RuntimeError):
        torch.ops.aten._thnn_fused_gru_cell(gates, gates, torch.randn(2, 5, device="tpu"))
