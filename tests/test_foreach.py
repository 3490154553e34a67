"""The _foreach_* ops (torch.optim's default path on tpu, clip_grad_norm_'s) match CPU in every
mode. Over lists of one floating dtype with contiguous entries each call is one recorded op (one
program in strict mode, one node of a fused graph); anything else takes PyTorch's per-tensor loop,
grouped into one program in strict mode."""
import pytest
import torch

import torch_tpu
from conftest import to_cpu, to_tpu

SIZES = [(3,), (4, 5), (2, 3, 2), ()]


def tensors(seed, positive=False):
    generator = torch.Generator().manual_seed(seed)
    out = [torch.randn(size, generator=generator) for size in SIZES]
    return [t.abs() + 0.5 for t in out] if positive else out


# Each case: (name, function of (self list, other list) returning what to compare).
CASES = [
    ("add_list", lambda a, b: torch._foreach_add(a, b, alpha=0.5)),
    ("add_scalar", lambda a, b: torch._foreach_add(a, 2.0)),
    ("mul_scalarlist", lambda a, b: torch._foreach_mul(a, [0.5, 2.0, -1.0, 3.0])),
    ("div_tensor", lambda a, b: torch._foreach_div(a, b[3])),
    ("sub_inplace", lambda a, b: torch._foreach_sub_(a, b) or a),
    ("addcmul_inplace", lambda a, b: torch._foreach_addcmul_(a, b, b, value=0.25) or a),
    ("addcdiv_scalarlist", lambda a, b: torch._foreach_addcdiv(a, b, [t.abs() + 1 for t in b], [1.0, 2.0, 3.0, 4.0])),
    ("lerp_scalar", lambda a, b: torch._foreach_lerp_(a, b, 0.3) or a),
    ("lerp_list", lambda a, b: torch._foreach_lerp(a, b, [t.sigmoid() for t in b])),
    ("sqrt_abs", lambda a, b: torch._foreach_sqrt(torch._foreach_abs(a))),
    ("exp_inplace", lambda a, b: torch._foreach_exp_(a) or a),
    ("maximum", lambda a, b: torch._foreach_maximum(a, b)),
    ("clamp_min_scalar", lambda a, b: torch._foreach_clamp_min(a, 0.1)),
    ("norm", lambda a, b: torch._foreach_norm(a, 2)),
    ("norm_inf", lambda a, b: torch._foreach_norm(a, float("inf"))),
    ("zero", lambda a, b: torch._foreach_zero_(a) or a),
    ("copy", lambda a, b: torch._foreach_copy_(a, b) or a),
    ("pow_scalar_and_tensor", lambda a, b: torch._foreach_pow(2.0, a)),
]


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_foreach_matches_cpu(mode, no_fallback, name, fn):
    a, b = tensors(0), tensors(1)
    expected = fn([t.clone() for t in a], [t.clone() for t in b])
    got = fn(to_tpu(a), to_tpu(b))
    torch.testing.assert_close(to_cpu(got), expected)


def test_a_foreach_call_runs_as_one_program_in_strict_mode():
    a, b = to_tpu(tensors(0)), to_tpu(tensors(1))
    with torch_tpu.eager_mode("strict"):
        torch.tpu.synchronize()
        torch_tpu.reset_metrics()
        torch._foreach_addcmul_(a, b, b, value=0.5)
        torch.tpu.synchronize()
        assert torch_tpu.metrics()["executions"] == 1
        # The second call with the same layouts finds the program.
        before = torch_tpu.metrics()["compiles"]
        torch._foreach_addcmul_(a, b, b, value=0.25)
        torch.tpu.synchronize()
        assert torch_tpu.metrics()["compiles"] == before
        assert torch_tpu.metrics()["executions"] == 2


def recorded_ops(fn):
    torch.tpu.synchronize()
    torch_tpu.reset_metrics()
    result = fn()
    torch.tpu.synchronize()
    return result, torch_tpu.metrics()["ops"]


@pytest.mark.parametrize("name,fn", [c for c in CASES if c[0] not in ("copy", "pow_scalar_and_tensor")],
                         ids=[c[0] for c in CASES if c[0] not in ("copy", "pow_scalar_and_tensor")])
def test_a_foreach_call_over_one_dtype_is_one_recorded_op(mode, name, fn):
    a, b = to_tpu(tensors(0)), to_tpu(tensors(1))
    extra = {"addcdiv_scalarlist": 2 * len(SIZES), "lerp_list": len(SIZES), "sqrt_abs": 1}.get(name, 0)
    _, ops = recorded_ops(lambda: fn(a, b))  # the list comprehensions in a case record their own ops
    assert ops == 1 + extra


# Each: lists the one-op path must not take, because its results would differ from the
# per-tensor loop's or its layouts are not the inputs'.
DECLINED = [
    ("repeated_self_entry", lambda a, b: torch._foreach_add_([a[0], a[0]], [b[0], b[0]]) or a),
    ("self_entry_read_at_another_index", lambda a, b: torch._foreach_mul_(a[:2], [a[1], a[0]]) or a),
    ("views_of_one_storage", lambda a, b: torch._foreach_add_([a[1][:2], a[1][2:4]], 1.0) or a),
    ("mixed_dtypes", lambda a, b: torch._foreach_mul([a[0], a[1].double()], 2.0)),
    ("integer_lists", lambda a, b: torch._foreach_add([t.round().long() for t in a], 3)),
    ("transposed_entries", lambda a, b: torch._foreach_add([a[0].t(), a[1].t()], [b[0].t(), b[1].t()])),
    ("broadcast_entries", lambda a, b: torch._foreach_add([a[0], a[1]], [b[0][:1], b[1][1:2]])),
    ("vector_of_scalars", lambda a, b: torch._foreach_addcmul(a, b, b, torch.tensor([1.0, 2.0, 3.0, 4.0]))),
    ("norm_in_float64", lambda a, b: torch._foreach_norm(a, 2, dtype=torch.float64)),
]


@pytest.mark.parametrize("name,fn", DECLINED, ids=[c[0] for c in DECLINED])
def test_lists_the_one_op_path_declines_match_cpu(mode, no_fallback, name, fn):
    generator = torch.Generator().manual_seed(2)
    a, b = ([torch.randn(size, generator=generator) for size in [(4, 5), (4, 5), (2, 3), ()]] for _ in range(2))
    expected = fn([t.clone() for t in a], [t.clone() for t in b])
    got, ops = recorded_ops(lambda: fn(to_tpu(a), to_tpu(b)))
    torch.testing.assert_close(to_cpu(got), expected)
    assert ops > 1


def test_in_place_foreach_over_row_blocks_of_one_storage_matches_cpu(mode, no_fallback):
    # Entries at offsets into one storage, each a 2-D block: the list lowering computes entries as
    # flat vectors, which must read and write each block where it lies, and leave the rest alone.
    generator = torch.Generator().manual_seed(3)
    whole, other = torch.randn(7, 4, 5, generator=generator), torch.randn(6, 4, 5, generator=generator)

    def update(whole, other):
        blocks = [whole[1], whole[3], whole[4:6]]
        weights = [other[0], other[1], other[2:4]]
        torch._foreach_lerp_(blocks, weights, 0.25)
        torch._foreach_addcmul_(blocks, weights, weights, value=0.5)
        torch._foreach_mul_(blocks, [other[4], other[5], other[0:2]])
        torch._foreach_div_(blocks, other[5, 0, 0].abs() + 1)  # a 0-dim tensor beside the 2-D entries
        return whole

    expected = update(whole.clone(), other.clone())
    torch.testing.assert_close(update(whole.to("tpu"), other.to("tpu")).cpu(), expected)


def test_a_fused_optimizer_step_records_a_few_list_ops():
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(6)]).to("tpu")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(3, 8, device="tpu")).sum().backward()
    optimizer.step()
    with torch_tpu.eager_mode("defer_and_fuse"):
        _, ops = recorded_ops(optimizer.step)
    # A dozen foreach calls over 12 parameters, not a dozen ops per parameter.
    assert ops <= 12


def test_foreach_of_mismatched_lists_raises_like_cpu(mode):
    with pytest.raises(RuntimeError) as cpu:
        torch._foreach_add(tensors(0), tensors(1)[:2])
    with pytest.raises(RuntimeError) as tpu:
        torch._foreach_add(to_tpu(tensors(0)), to_tpu(tensors(1)[:2]))
    assert str(tpu.value).split("\n")[0] == str(cpu.value).split("\n")[0]


def train(device, make_optimizer, clip=False):
    """A small model's parameters after four steps of `make_optimizer(parameters)`."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(device)
    optimizer = make_optimizer(model.parameters())
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(32, 8, generator=generator).to(device)
    y = torch.randn(32, 4, generator=generator).to(device)
    for _ in range(4):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1, foreach=True)
        optimizer.step()
    return [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("clip", [False, True])
def test_adamw_foreach_and_clip_grad_norm_match_cpu(mode, no_fallback, clip):
    tpu = train("tpu", lambda p: torch.optim.AdamW(p, lr=1e-2), clip)
    cpu = train("cpu", lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=False), clip)
    torch.testing.assert_close(tpu, cpu, rtol=1e-4, atol=1e-5)


def test_torch_optim_takes_its_foreach_path_on_tpu_as_on_cuda():
    """PyTorch lists tpu among its foreach devices: AdamW's default step reaches the foreach ops,
    and in strict mode the whole step is one program."""
    from torch.optim.optimizer import _default_to_fused_or_foreach

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)).to("tpu")
    assert _default_to_fused_or_foreach(list(model.parameters()), False, False) == (False, True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(3, 4, device="tpu")).sum().backward()
    optimizer.step()  # the first step also creates the state, one tensor at a time as on CUDA
    with torch_tpu.eager_mode("strict"):
        torch.tpu.synchronize()
        torch_tpu.reset_metrics()
        optimizer.step()
        torch.tpu.synchronize()
        metrics = torch_tpu.metrics()
    assert metrics["executions"] == 1 and metrics["flush_reasons"] == {"optimizer step": 1}


def train_compiled(device, make_optimizer):
    """Four steps with the model and the optimizer step under torch.compile (tpu: its backend)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(device)
    optimizer = make_optimizer(model.parameters())
    x = torch.randn(32, 8, generator=torch.Generator().manual_seed(1)).to(device)
    backend = "tpu" if device == "tpu" else "aot_eager"
    forward, step = torch.compile(model, backend=backend), torch.compile(optimizer.step, backend=backend)
    for _ in range(4):
        optimizer.zero_grad()
        forward(x).square().mean().backward()
        step()
    return [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("make_optimizer", [
    lambda p: torch.optim.AdamW(p, lr=1e-2),
    lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True),
    lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9),
], ids=["adamw_foreach", "adamw_fused", "sgd_momentum"])
def test_compiled_optimizer_steps_match_cpu(mode, no_fallback, make_optimizer):
    torch._dynamo.reset()
    tpu = train_compiled("tpu", make_optimizer)
    torch._dynamo.reset()
    cpu = train_compiled("cpu", make_optimizer)
    torch.testing.assert_close(tpu, cpu, rtol=1e-4, atol=1e-5)
