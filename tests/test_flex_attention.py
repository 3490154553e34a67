"""torch.nn.attention.flex_attention on tpu, eagerly in every mode and under torch.compile, against
plain attention written with ATen ops on the CPU (CPU's own flex_attention has no backward)."""
import math

import pytest
import torch
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention

import torch_tpu
from conftest import to_cpu


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def sliding_window(b, h, q_idx, kv_idx):
    return q_idx - kv_idx <= 4


def relative_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.05


def soft_cap(score, b, h, q_idx, kv_idx):
    return 5.0 * torch.tanh(score / 5.0)


def reference_attention(q, k, v, score_mod=None, mask_mod=None, scale=None, enable_gqa=False):
    """FlexAttention's definition in plain ops: score_mod and mask_mod evaluated on index grids."""
    batch, heads, q_len, kv_len = q.size(0), q.size(1), q.size(-2), k.size(-2)
    if enable_gqa:
        k = k.repeat_interleave(heads // k.size(1), dim=1)
        v = v.repeat_interleave(heads // v.size(1), dim=1)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = (q.float() @ k.float().transpose(-2, -1)) * scale
    b = torch.arange(batch).view(-1, 1, 1, 1)
    h = torch.arange(heads).view(1, -1, 1, 1)
    q_idx = torch.arange(q_len).view(1, 1, -1, 1)
    kv_idx = torch.arange(kv_len).view(1, 1, 1, -1)
    if score_mod is not None:
        scores = score_mod(scores, b, h, q_idx, kv_idx)
    if mask_mod is not None:
        mask = mask_mod(b, h, q_idx, kv_idx).expand_as(scores)
        scores = scores.masked_fill(~mask, float("-inf"))
    return (torch.softmax(scores, dim=-1).to(q.dtype) @ v).to(q.dtype)


def sample(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


CASES = {
    "causal": (None, causal),
    "causal_relative_bias": (relative_bias, causal),
    "soft_cap_no_mask": (soft_cap, None),
    "sliding_window_and_causal": (None, and_masks(causal, sliding_window)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_flex_attention_forward_and_backward_match_cpu(mode, case, no_fallback):
    score_mod, mask_mod = CASES[case]
    q, k, v = (sample(2, 2, 24, 16, seed=s) for s in range(3))
    upstream = sample(2, 2, 24, 16, seed=3)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    want = reference_attention(*leaves, score_mod, mask_mod)
    want.backward(upstream)

    tpu_leaves = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    block_mask = None if mask_mod is None else create_block_mask(mask_mod, 2, 2, 24, 24, device="tpu")
    got = flex_attention(*tpu_leaves, score_mod=score_mod, block_mask=block_mask)
    got.backward(upstream.to("tpu"))
    torch.testing.assert_close(to_cpu(got), want, atol=2e-5, rtol=2e-5)
    for tpu_leaf, leaf in zip(tpu_leaves, leaves):
        torch.testing.assert_close(to_cpu(tpu_leaf.grad), leaf.grad, atol=5e-5, rtol=5e-5)


def test_score_mod_capturing_a_learned_tensor_gets_its_gradient(mode, no_fallback):
    q, k, v = (sample(2, 3, 12, 8, seed=s) for s in range(3))
    head_bias = sample(3, seed=4).requires_grad_()
    tpu_head_bias = head_bias.detach().to("tpu").requires_grad_()

    def biased(bias):
        return lambda score, b, h, q_idx, kv_idx: score + bias[h] * (q_idx - kv_idx)

    reference_attention(q, k, v, biased(head_bias), causal).square().sum().backward()
    block_mask = create_block_mask(causal, None, None, 12, 12, device="tpu")
    got = flex_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), score_mod=biased(tpu_head_bias),
                         block_mask=block_mask)
    got.square().sum().backward()
    torch.testing.assert_close(to_cpu(tpu_head_bias.grad), head_bias.grad, atol=1e-4, rtol=1e-4)


def test_compiled_flex_attention_call_matches_cpu(no_fallback):
    q, k, v = (sample(2, 2, 32, 16, seed=s) for s in range(3))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    reference_attention(*leaves, soft_cap, causal).sum().backward()
    tpu_leaves = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    compiled = torch.compile(flex_attention, backend="tpu", fullgraph=True)
    block_mask = create_block_mask(causal, 2, 2, 32, 32, device="tpu")
    got = compiled(*tpu_leaves, score_mod=soft_cap, block_mask=block_mask)
    got.sum().backward()
    torch.testing.assert_close(to_cpu(got), reference_attention(q, k, v, soft_cap, causal), atol=2e-5, rtol=2e-5)
    for tpu_leaf, leaf in zip(tpu_leaves, leaves):
        torch.testing.assert_close(to_cpu(tpu_leaf.grad), leaf.grad, atol=5e-5, rtol=5e-5)


def test_flex_attention_grouped_query_heads_and_logsumexp_match_cpu(mode, no_fallback):
    q, k, v = sample(1, 4, 16, 8, seed=0), sample(1, 2, 16, 8, seed=1), sample(1, 2, 16, 8, seed=2)
    block_mask = create_block_mask(causal, 1, 4, 16, 16, device="tpu")
    with torch.no_grad():
        out, lse = flex_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), block_mask=block_mask,
                                  enable_gqa=True, return_lse=True)
        cpu_out, cpu_lse = flex_attention(q, k, v, block_mask=create_block_mask(causal, 1, 4, 16, 16, device="cpu"),
                                          enable_gqa=True, return_lse=True)
    torch.testing.assert_close(to_cpu(out), reference_attention(q, k, v, mask_mod=causal, enable_gqa=True))
    torch.testing.assert_close(to_cpu(out), cpu_out)
    torch.testing.assert_close(to_cpu(lse), cpu_lse)


def test_flex_attention_under_autocast_computes_in_the_autocast_dtype(mode, no_fallback):
    q, k, v = (sample(1, 2, 16, 8, seed=s) for s in range(3))
    with torch.autocast("tpu", dtype=torch.bfloat16):
        out = flex_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), score_mod=relative_bias)
    assert out.dtype == torch.bfloat16
    want = reference_attention(*(t.bfloat16() for t in (q, k, v)), relative_bias)
    torch.testing.assert_close(to_cpu(out), want, atol=2e-2, rtol=2e-2)


def test_flex_attention_keeps_pytorchs_input_checks_on_tpu(mode):
    q, k, v = (torch.randn(1, 2, 8, 4, device="tpu") for _ in range(3))
    with pytest.raises(ValueError, match="same number of heads"):
        flex_attention(q, k[:, :1], v[:, :1])
    block_mask = create_block_mask(causal, 1, 2, 8, 8, device="tpu")
    with pytest.raises(ValueError, match="block_mask was created for"):
        flex_attention(torch.randn(1, 2, 16, 4, device="tpu"), k, v, block_mask=block_mask)


class FlexLlama(torch.nn.Module):
    """A Llama-style decoder as Meta's reference code and PyTorch's large-scale training library
    write it: RMSNorm, rotary embeddings in complex numbers, FlexAttention with a causal block
    mask and a score_mod, SwiGLU. `attention="reference"` computes the same attention in plain
    ops (for the CPU, whose flex_attention has no backward)."""

    def __init__(self, vocab=64, dim=32, heads=4, layers=2, length=16, attention="flex"):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.embed = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict({
                "attn_norm": torch.nn.RMSNorm(dim), "qkv": torch.nn.Linear(dim, 3 * dim, bias=False),
                "out": torch.nn.Linear(dim, dim, bias=False), "mlp_norm": torch.nn.RMSNorm(dim),
                "gate_up": torch.nn.Linear(dim, 4 * dim, bias=False), "down": torch.nn.Linear(2 * dim, dim, bias=False),
            }) for _ in range(layers))
        self.norm = torch.nn.RMSNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        head_dim = dim // heads
        angles = torch.outer(torch.arange(length, dtype=torch.float32),
                             1.0 / 10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

    def rotate(self, x):
        b, t, h, _ = x.shape
        x_complex = torch.view_as_complex(x.float().reshape(b, t, h, -1, 2))
        return torch.view_as_real(x_complex * self.freqs_cis[:t].view(1, t, 1, -1)).flatten(3).type_as(x)

    def attend(self, q, k, v, block_mask):
        if self.attention == "flex":
            return flex_attention(q, k, v, score_mod=relative_bias, block_mask=block_mask)
        return reference_attention(q, k, v, relative_bias, causal)

    def forward(self, tokens, block_mask=None):
        b, t = tokens.shape
        x = self.embed(tokens)
        for block in self.blocks:
            q, k, v = block["qkv"](block["attn_norm"](x)).view(b, t, 3, self.heads, -1).unbind(2)
            q, k = self.rotate(q), self.rotate(k)
            attended = self.attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask)
            x = x + block["out"](attended.transpose(1, 2).reshape(b, t, -1))
            gate, up = block["gate_up"](block["mlp_norm"](x)).chunk(2, dim=-1)
            x = x + block["down"](torch.nn.functional.silu(gate) * up)
        return self.head(self.norm(x))


def train_flex_llama(device, attention, compiled=False, steps=3):
    torch.manual_seed(0)
    model = FlexLlama(attention=attention).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    forward = torch.compile(model, backend="tpu") if compiled else model
    block_mask = create_block_mask(causal, None, None, 16, 16, device=device) if attention == "flex" else None
    losses = []
    for step in range(steps):
        tokens = torch.randint(0, 64, (2, 17), generator=torch.Generator().manual_seed(step)).to(device)
        logits = forward(tokens[:, :-1], block_mask)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


@pytest.fixture
def fallback_is_an_error():
    """As TORCH_TPU_FALLBACK=error: an op without a tpu lowering raises instead of running on the CPU."""
    torch_tpu.set_fallback_error(True)
    yield
    torch_tpu.set_fallback_error(False)


def test_llama_with_complex_rotary_and_flex_attention_trains_like_cpu(mode, fallback_is_an_error):
    losses, params = train_flex_llama("tpu", "flex")
    cpu_losses, cpu_params = train_flex_llama("cpu", "reference")
    torch.testing.assert_close(losses, cpu_losses, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(params, cpu_params, atol=1e-4, rtol=1e-4)


def test_compiled_llama_with_flex_attention_trains_like_cpu_and_is_replayed(fallback_is_an_error):
    torch_tpu.reset_metrics()
    losses, params = train_flex_llama("tpu", "flex", compiled=True, steps=4)
    metrics = torch_tpu.metrics()
    cpu_losses, cpu_params = train_flex_llama("cpu", "reference", steps=4)
    torch.testing.assert_close(losses, cpu_losses, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(params, cpu_params, atol=1e-4, rtol=1e-4)
    # The forward and backward graphs are recorded on the first step, then replayed.
    assert metrics["compiled_graph_calls"] == 8
    assert metrics["graph_replays"] == 6
