"""torch.optim's fused=True path on tpu (_fused_adam_, _fused_adamw_, _fused_sgd_) runs on the
device, matches CPU's fused kernels (GradScaler's grad_scale and found_inf included) in every
mode, and runs as one program per step in strict mode."""
import pytest
import torch

import torch_tpu
from conftest import to_cpu, to_tpu
from test_foreach import train

SIZES = [(5,), (3, 4), ()]


def state(seed):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(size, generator=generator) for size in SIZES]


def adam_lists(step, amsgrad=False):
    params, grads, exp_avgs = state(0), state(1), state(2)
    exp_avg_sqs = [t.abs() for t in state(3)]
    max_exp_avg_sqs = [t.abs() * 2 for t in state(4)] if amsgrad else []
    steps = [torch.tensor(float(step)) for _ in SIZES]
    return [params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps]


@pytest.mark.parametrize("op", [torch._fused_adam_, torch._fused_adamw_])
@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, True)])
@pytest.mark.parametrize("scaled", ["none", "finite", "found_inf"])
def test_fused_adam_matches_cpu(mode, no_fallback, op, amsgrad, maximize, scaled):
    cpu = adam_lists(step=3, amsgrad=amsgrad)
    tpu = [to_tpu(lists) for lists in cpu]
    extra = {}
    if scaled != "none":
        extra = {"grad_scale": torch.tensor(4.0), "found_inf": torch.tensor(1.0 if scaled == "found_inf" else 0.0)}
    options = dict(lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8, amsgrad=amsgrad, maximize=maximize)
    op(*cpu, **options, **extra)
    op(*tpu, **options, **{k: v.to("tpu") for k, v in extra.items()})
    for got, expected in zip(tpu[:5], cpu[:5]):
        torch.testing.assert_close(to_cpu(got), expected)


def test_fused_adam_with_stray_amsgrad_state_raises_like_cpu(mode):
    options = dict(lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError) as cpu:
        torch._fused_adamw_(*adam_lists(step=1, amsgrad=True), **options)
    with pytest.raises(RuntimeError) as tpu:
        torch._fused_adamw_(*[to_tpu(lists) for lists in adam_lists(step=1, amsgrad=True)], **options)
    assert str(tpu.value).split("  (")[0] == str(cpu.value).split("  (")[0]


SGD_OPTIONS = dict(weight_decay=0.0, lr=0.1, dampening=0.0, nesterov=False, maximize=False, is_first_step=False)


@pytest.mark.parametrize("momentum,lists", [(0.9, lambda s: (s(0), s(1), [])), (0.9, lambda s: (s(0), s(1)[:1], s(2))),
                                            (0.0, lambda s: (s(0), s(1), s(2)))],
                         ids=["no_buffers", "short_grads", "stray_buffers"])
def test_fused_sgd_with_mismatched_lists_raises_like_cpu(mode, momentum, lists):
    with pytest.raises(RuntimeError) as cpu:
        torch._fused_sgd_(*lists(state), momentum=momentum, **SGD_OPTIONS)
    with pytest.raises(RuntimeError) as tpu:
        torch._fused_sgd_(*[to_tpu(x) for x in lists(state)], momentum=momentum, **SGD_OPTIONS)
    assert str(tpu.value).split("  (")[0] == str(cpu.value).split("  (")[0]


@pytest.mark.parametrize("momentum,nesterov,first", [(0.0, False, False), (0.9, True, True), (0.9, False, False)])
@pytest.mark.parametrize("scaled", ["none", "found_inf"])
def test_fused_sgd_matches_cpu(mode, no_fallback, momentum, nesterov, first, scaled):
    cpu = [state(0), state(1), state(2) if momentum else []]
    tpu = [to_tpu(lists) for lists in cpu]
    extra = {}
    if scaled != "none":
        extra = {"grad_scale": torch.tensor(2.0), "found_inf": torch.tensor(1.0)}
    options = dict(weight_decay=0.01, momentum=momentum, lr=0.1, dampening=0.1, nesterov=nesterov,
                   maximize=False, is_first_step=first)
    torch._fused_sgd_(*cpu, **options, **extra)
    torch._fused_sgd_(*tpu, **options, **{k: v.to("tpu") for k, v in extra.items()})
    for got, expected in zip(tpu, cpu):
        torch.testing.assert_close(to_cpu(got), expected)


OPTIMIZERS = {
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True),
    "adam_amsgrad": lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True, weight_decay=0.01, fused=True),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True, fused=True),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_fused_optimizers_train_like_cpu(mode, no_fallback, name):
    make = OPTIMIZERS[name]
    torch.testing.assert_close(train("tpu", make), train("cpu", make), rtol=1e-4, atol=1e-5)


def test_a_fused_step_runs_as_one_program_in_strict_mode():
    lists = [to_tpu(lists) for lists in adam_lists(step=1)]
    options = dict(lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    with torch_tpu.eager_mode("strict"):
        torch.tpu.synchronize()
        torch_tpu.reset_metrics()
        torch._fused_adamw_(*lists, **options)
        torch.tpu.synchronize()
        assert torch_tpu.metrics()["executions"] == 1


@pytest.mark.parametrize("op", [torch._fused_adamw_, torch._fused_sgd_])
def test_a_fused_step_is_one_recorded_op(mode, op):
    if op is torch._fused_sgd_:
        lists = [to_tpu(state(0)), to_tpu(state(1)), to_tpu(state(2))]
        options = dict(weight_decay=0.1, momentum=0.9, lr=0.01, dampening=0.0, nesterov=False, maximize=False,
                       is_first_step=False)
    else:
        lists = [to_tpu(lists) for lists in adam_lists(step=1)]
        options = dict(lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    torch.tpu.synchronize()
    torch_tpu.reset_metrics()
    op(*lists, **options)
    torch.tpu.synchronize()
    assert torch_tpu.metrics()["ops"] == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("tensor_lr", [False, True])
def test_fused_adamw_in_half_precision_matches_cpu(mode, no_fallback, dtype, tensor_lr):
    cpu = adam_lists(step=2)
    cpu = [[t.to(dtype) for t in lists] for lists in cpu[:5]] + [cpu[5]]
    tpu = [to_tpu(lists) for lists in cpu]
    options = dict(beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False)
    lr = torch.tensor(0.01) if tensor_lr else 0.01
    torch._fused_adamw_(*cpu, lr=lr, **options)
    torch._fused_adamw_(*tpu, lr=lr.to("tpu") if tensor_lr else lr, **options)
    for got, expected in zip(tpu[:4], cpu[:4]):
        torch.testing.assert_close(to_cpu(got), expected)


def test_a_fused_step_with_its_step_counts_on_the_cpu_matches_cpu(mode, no_fallback):
    # The one-op path wants the counts on the device; these take the per-tensor update.
    cpu = adam_lists(step=3)
    tpu = [to_tpu(lists) for lists in cpu[:5]] + [cpu[5]]
    options = dict(lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False)
    torch._fused_adamw_(*cpu, **options)
    torch._fused_adamw_(*tpu, **options)
    for got, expected in zip(tpu[:4], cpu[:4]):
        torch.testing.assert_close(to_cpu(got), expected)
