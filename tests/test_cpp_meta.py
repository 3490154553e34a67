"""Result layouts from C++ meta functions (csrc/aten/cpp_meta.h, csrc/aten/composite_metas.h).

A tpu op needs its results' sizes, strides and dtypes before it is lowered; for a layout it has
not met, they come from a meta function. PyTorch's Meta kernel is Python reference code for most
ops (0.3-3 ms each, and a first call that imports torch._dynamo), so ops whose sizes change every
step (a growing sequence) paid it on every op. These tests hold the C++ paths to what PyTorch's
meta functions and CPU give, and check that ordinary training over new lengths never reaches the
Python ones.
"""
import importlib.util
import os

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

aten = torch.ops.aten
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def fresh_meta_results():
    """Results are cached by argument layout for the process: each test computes its own."""
    torch_tpu._C._forget_meta_results()
    yield


def layout(t):
    return tuple(t.shape), t.stride(), t.dtype


def meta_path_counts():
    m = torch_tpu.metrics()
    return m["meta_functions_cpp"], m["meta_functions_dispatched"]


def test_structured_meta_table_follows_the_installed_torch():
    spec = importlib.util.spec_from_file_location("gen", os.path.join(ROOT, "csrc", "aten", "gen_cpp_meta_table.py"))
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    from torch.utils import cpp_extension
    pairs = generator.pairs(os.path.join(cpp_extension.include_paths()[0], "ATen", "ops"))
    assert torch_tpu._C._cpp_meta_count() == len(pairs)
    names = {struct for _, _, struct in pairs}
    # The ops a transformer's training step spends its meta time on are all there.
    assert {"add_Tensor", "mul_Tensor", "addmm", "bmm", "cat", "gelu", "tril", "_softmax", "nll_loss_forward",
            "sum_dim_IntList", "addcdiv_", "lerp__Scalar"} <= names


STRUCTURED_CASES = [
    ("add", lambda t: torch.add(t(13, 7), t(7), alpha=2)),
    ("add scalar", lambda t: t(13, 7) + 3),
    ("mul broadcast", lambda t: t(13, 1, 5) * t(3, 5)),
    ("div transposed", lambda t: t(7, 13).t() / t(13, 7)),
    ("addmm", lambda t: torch.addmm(t(13), t(11, 5), t(5, 13))),
    ("bmm", lambda t: torch.bmm(t(3, 11, 5), t(3, 5, 13))),
    ("cat", lambda t: torch.cat([t(3, 13), t(5, 13)])),
    ("sum keepdim", lambda t: t(13, 7, 3).sum(1, keepdim=True)),
    ("mean", lambda t: t(13, 7).mean(-1)),
    ("softmax", lambda t: t(3, 13, 7).softmax(1)),
    ("log_softmax", lambda t: t(13, 7).log_softmax(-1)),
    ("gelu", lambda t: F.gelu(t(13, 11))),
    ("tril", lambda t: t(13, 11).tril(-2)),
    ("cumsum", lambda t: t(13, 7).cumsum(0)),
    ("argmax", lambda t: t(13, 7).argmax(1)),
    ("lerp_", lambda t: t(13, 7).lerp_(t(13, 7), 0.25)),
    ("addcdiv_", lambda t: t(13, 7).addcdiv_(t(13, 7), t(13, 7).abs() + 1, value=-0.5)),
    ("clamp", lambda t: t(13, 7).clamp(-0.5, 0.5)),
    ("pow", lambda t: t(13, 7).abs().pow(1.5)),
    ("comparison", lambda t: t(13, 7) < t(7)),
]


@pytest.mark.parametrize("case", STRUCTURED_CASES, ids=[c[0] for c in STRUCTURED_CASES])
def test_structured_ops_take_cpus_layout_from_the_cpp_meta_function(mode, case, no_fallback):
    _, build = case

    def run(device):
        g = torch.Generator().manual_seed(0)
        return build(lambda *s: torch.randn(*s, generator=g).to(device))

    torch_tpu.reset_metrics()
    got = run("tpu")
    cpp, _ = meta_path_counts()
    want = run("cpu")
    assert layout(got) == layout(want)
    torch.testing.assert_close(got.cpu(), want)
    assert cpp > 0


def f32(*sizes, dtype=torch.float32):
    return torch.randn(*sizes, generator=torch.Generator().manual_seed(sum(sizes) + len(sizes))).to(dtype)


def index(n, *sizes, dtype=torch.long):
    return torch.randint(0, n, sizes, generator=torch.Generator().manual_seed(n), dtype=dtype)


mask_cases = [torch.rand(13, 1, generator=torch.Generator().manual_seed(3)) > 0.5]
COMPOSITE_CASES = [
    ("layer_norm", aten.native_layer_norm.default, lambda: (f32(3, 13, 17), [17], f32(17), f32(17), 1e-5)),
    ("layer_norm 2 dims no affine", aten.native_layer_norm.default, lambda: (f32(3, 13, 17), [13, 17], None, None, 1e-5)),
    ("layer_norm bfloat16", aten.native_layer_norm.default,
     lambda: (f32(3, 13, 17, dtype=torch.bfloat16), [17], f32(17, dtype=torch.bfloat16), None, 1e-5)),
    ("layer_norm bfloat16 float weight", aten.native_layer_norm.default,
     lambda: (f32(3, 13, 17, dtype=torch.bfloat16), [17], f32(17), f32(17), 1e-5)),
    ("layer_norm_backward", aten.native_layer_norm_backward.default,
     lambda: (f32(3, 13, 17), f32(3, 13, 17), [17], f32(3, 13, 1), f32(3, 13, 1).abs(), f32(17), f32(17),
              [True, True, True])),
    ("layer_norm_backward partial", aten.native_layer_norm_backward.default,
     lambda: (f32(3, 13, 17), f32(3, 13, 17), [17], f32(3, 13, 1), f32(3, 13, 1).abs(), f32(17), f32(17),
              [True, False, True])),
    ("safe_softmax", aten._safe_softmax.default, lambda: (f32(2, 3, 13, 13), -1)),
    ("safe_softmax dtype", aten._safe_softmax.default, lambda: (f32(2, 13, 7, dtype=torch.bfloat16), 1, torch.float32)),
    ("where broadcast", aten.where.self, lambda: (mask_cases[0], f32(13, 7), f32(7))),
    ("where same", aten.where.self, lambda: (f32(13, 7) > 0, f32(13, 7), f32(13, 7))),
    ("index_select", aten.index_select.default, lambda: (f32(13, 7), 0, index(13, 5))),
    ("index_select int32 last dim", aten.index_select.default, lambda: (f32(3, 13), -1, index(13, 4, dtype=torch.int))),
    ("embedding_dense_backward", aten.embedding_dense_backward.default,
     lambda: (f32(2, 11, 13), index(17, 2, 11), 17, -1, False)),
]


def tpu_args(args):
    return [a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args]


def meta_args(args):
    return [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]


def tensors(result):
    return [r for r in (result if isinstance(result, (tuple, list)) else [result])]


@pytest.mark.parametrize("case", COMPOSITE_CASES, ids=[c[0] for c in COMPOSITE_CASES])
def test_composite_rules_give_pytorchs_meta_layouts(mode, case, no_fallback):
    _, op, make_args = case
    args = make_args()
    torch_tpu.reset_metrics()
    got = tensors(op(*tpu_args(args)))
    cpp, dispatched = meta_path_counts()
    want = tensors(op(*meta_args(args)))
    assert [None if g is None else layout(g) for g in got] == [None if w is None else layout(w) for w in want]
    assert cpp == 1 and dispatched == 0
    for g, c in zip(got, tensors(op(*args))):
        if g is not None:
            torch.testing.assert_close(g.cpu().to(c.dtype), c, atol=2e-2, rtol=2e-2)


BAD_CASES = [
    ("layer_norm shape", lambda t: aten.native_layer_norm(t(f32(3, 13)), [7], None, None, 1e-5)),
    ("layer_norm weight", lambda t: aten.native_layer_norm(t(f32(3, 13)), [13], t(f32(7)), None, 1e-5)),
    ("where condition dtype", lambda t: torch.where(t(f32(13)), t(f32(13)), t(f32(13)))),
    ("where broadcast", lambda t: torch.where(t(f32(13) > 0), t(f32(13)), t(f32(7)))),
    ("index_select dim", lambda t: torch.index_select(t(f32(13, 7)), 2, t(index(7, 3)))),
    ("index_select out of range", lambda t: torch.index_select(t(f32(13, 7)), 0, t(index(7, 3) + 20))),
    ("safe_softmax dim", lambda t: aten._safe_softmax(t(f32(13, 7)), 3)),
]


@pytest.mark.parametrize("case", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_arguments_the_rules_decline_raise_what_cpu_raises(mode, case):
    _, call = case
    with pytest.raises(Exception) as on_cpu:
        call(lambda t: t)
    with pytest.raises(type(on_cpu.value)):
        call(lambda t: t.to("tpu"))
        torch.tpu.synchronize()


class Block(torch.nn.Module):
    def __init__(self, vocab=61, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.tokens, self.positions = torch.nn.Embedding(vocab, dim), torch.nn.Embedding(64, dim)
        self.norm = torch.nn.LayerNorm(dim)
        self.qkv, self.out = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, vocab)

    def forward(self, idx):
        b, t = idx.shape
        x = self.tokens(idx) + self.positions(torch.arange(t, device=idx.device))
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(self.norm(x)).chunk(3, -1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, -1)
        return self.out(F.gelu(x + y))


def test_training_over_new_lengths_never_runs_a_python_meta_function(mode, no_fallback):
    torch.manual_seed(0)
    model = Block().to("tpu")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, length in enumerate([8, 9, 11, 14]):
        if step == 1:
            torch_tpu.reset_metrics()
        idx = torch.randint(0, 61, (2, length + 1), generator=torch.Generator().manual_seed(step)).to("tpu")
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 61), idx[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss.item()
    cpp, dispatched = meta_path_counts()
    assert cpp > 50
    assert dispatched == 0
