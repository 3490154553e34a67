"""CTC loss on the device (lowering/ctc_loss.cpp, aten/ctc_loss_kernel.cpp) against CPU's, in every
mode: padded and concatenated targets, repeated labels, lengths that differ per batch element,
every reduction, zero_infinity, gradients, and CPU's errors for bad lengths."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from conftest import to_cpu


def ctc_sample(steps=12, batch=3, classes=6, longest=4, seed=0, dtype=torch.float32, repeats=False):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(steps, batch, classes, generator=g, dtype=dtype)
    targets = torch.randint(1, classes, (batch, longest), generator=g)
    if repeats:
        targets[:, 1] = targets[:, 0]  # a repeated label needs a blank between its copies
    target_lengths = torch.randint(1, longest + 1, (batch,), generator=g)
    input_lengths = torch.randint(steps // 2, steps + 1, (batch,), generator=g)
    input_lengths[0] = steps
    return logits, targets, input_lengths, target_lengths


def ctc(logits, targets, input_lengths, target_lengths, **options):
    return F.ctc_loss(logits.log_softmax(2), targets, input_lengths, target_lengths, **options)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
def test_ctc_loss_matches_cpu(mode, reduction, layout, no_fallback):
    logits, targets, input_lengths, target_lengths = ctc_sample(repeats=True)
    if layout == "concatenated":
        targets = torch.cat([targets[b, :target_lengths[b]] for b in range(targets.size(0))])
    leaf = logits.clone().requires_grad_()
    want = ctc(leaf, targets, input_lengths, target_lengths, reduction=reduction)
    want.sum().backward()
    tpu_leaf = logits.to("tpu").requires_grad_()
    got = ctc(tpu_leaf, targets.to("tpu"), input_lengths, target_lengths, reduction=reduction)
    got.sum().backward()
    torch.testing.assert_close(to_cpu(got), want)
    torch.testing.assert_close(to_cpu(tpu_leaf.grad), leaf.grad)


def test_ctc_loss_in_float64_with_tensor_lengths_on_the_device(mode, no_fallback):
    logits, targets, input_lengths, target_lengths = ctc_sample(steps=20, batch=4, classes=5, longest=6,
                                                                seed=1, dtype=torch.float64)
    leaf = logits.clone().requires_grad_()
    want = ctc(leaf, targets, input_lengths, target_lengths)
    want.backward()
    tpu_leaf = logits.to("tpu").requires_grad_()
    got = ctc(tpu_leaf, targets.to("tpu"), input_lengths.to("tpu"), target_lengths.to("tpu"))
    got.backward()
    torch.testing.assert_close(to_cpu(got), want)
    torch.testing.assert_close(to_cpu(tpu_leaf.grad), leaf.grad)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignments_are_infinite_or_zeroed_as_on_cpu(mode, zero_infinity, no_fallback):
    # Element 1 has more labels than time steps can hold: its loss is inf (0 with zero_infinity).
    logits, targets, _, _ = ctc_sample(steps=6, batch=2, classes=4, longest=5, seed=2)
    input_lengths, target_lengths = torch.tensor([6, 3]), torch.tensor([2, 5])
    leaf = logits.clone().requires_grad_()
    want = ctc(leaf, targets, input_lengths, target_lengths, reduction="none", zero_infinity=zero_infinity)
    tpu_leaf = logits.to("tpu").requires_grad_()
    got = ctc(tpu_leaf, targets.to("tpu"), input_lengths, target_lengths, reduction="none", zero_infinity=zero_infinity)
    torch.testing.assert_close(to_cpu(got), want)
    if zero_infinity:
        want.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(to_cpu(tpu_leaf.grad), leaf.grad)


def test_empty_targets_and_a_blank_other_than_zero_match_cpu(mode, no_fallback):
    logits, targets, input_lengths, _ = ctc_sample(steps=8, batch=3, classes=5, longest=3, seed=3)
    targets = targets - 1  # labels 0..3, blank 4
    target_lengths = torch.tensor([0, 3, 1])
    leaf = logits.clone().requires_grad_()
    want = ctc(leaf, targets, input_lengths, target_lengths, blank=4, reduction="sum")
    want.backward()
    tpu_leaf = logits.to("tpu").requires_grad_()
    got = ctc(tpu_leaf, targets.to("tpu"), input_lengths, target_lengths, blank=4, reduction="sum")
    got.backward()
    torch.testing.assert_close(to_cpu(got), want)
    torch.testing.assert_close(to_cpu(tpu_leaf.grad), leaf.grad)


def test_other_lengths_reuse_the_program(no_fallback):
    logits, targets, _, _ = ctc_sample(steps=10, batch=2, classes=5, longest=3, seed=4)
    log_probs = logits.log_softmax(2).to("tpu")
    with torch_tpu.eager_mode("strict"):
        F.ctc_loss(log_probs, targets.to("tpu"), [10, 9], [3, 2], reduction="none")
        torch_tpu.reset_metrics()
        for input_lengths, target_lengths in [([8, 10], [3, 1]), ([10, 7], [3, 3]), ([9, 9], [3, 2])]:
            got = F.ctc_loss(log_probs, targets.to("tpu"), input_lengths, target_lengths, reduction="none")
            want = F.ctc_loss(logits.log_softmax(2), targets, input_lengths, target_lengths, reduction="none")
            torch.testing.assert_close(to_cpu(got), want)
        assert torch_tpu.metrics()["compiles"] == 0


@pytest.mark.parametrize("bad", ["input_too_long", "negative_target_length", "blank_out_of_range",
                                 "lengths_of_another_batch", "targets_too_short", "half"])
def test_bad_arguments_raise_what_cpu_raises(mode, bad):
    logits, targets, input_lengths, target_lengths = ctc_sample(steps=8, batch=2, classes=5, longest=3, seed=5)
    arguments = dict(input_lengths=input_lengths.tolist(), target_lengths=target_lengths.tolist(), blank=0)
    log_probs = logits.log_softmax(2)
    if bad == "input_too_long":
        arguments["input_lengths"] = [9, 8]
    elif bad == "negative_target_length":
        arguments["target_lengths"] = [-1, 2]
    elif bad == "blank_out_of_range":
        arguments["blank"] = 5
    elif bad == "lengths_of_another_batch":
        arguments["input_lengths"] = [8]
    elif bad == "targets_too_short":
        arguments["target_lengths"] = [4, 2]
    else:
        log_probs = log_probs.half()

    def run(lp, tg):
        return torch.ops.aten._ctc_loss(lp, tg, arguments["input_lengths"], arguments["target_lengths"],
                                        arguments["blank"], False)

    with pytest.raises(Exception) as cpu_error:
        run(log_probs, targets)
    with pytest.raises(type(cpu_error.value)) as tpu_error:
        run(log_probs.to("tpu"), targets.to("tpu"))
        torch.tpu.synchronize()
    assert str(tpu_error.value).replace("ctc_loss_allocate_outputs", "") == \
        str(cpu_error.value).replace("ctc_loss_allocate_outputs", "")


def test_the_op_returns_cpus_loss_and_log_alpha(mode, no_fallback):
    logits, targets, input_lengths, target_lengths = ctc_sample(steps=9, batch=3, classes=5, longest=3, seed=6)
    log_probs = logits.log_softmax(2)
    arguments = (input_lengths.tolist(), target_lengths.tolist(), 0, False)
    want = torch.ops.aten._ctc_loss(log_probs, targets, *arguments)
    got = torch.ops.aten._ctc_loss(log_probs.to("tpu"), targets.to("tpu"), *arguments)
    torch.testing.assert_close(to_cpu(got[0]), want[0])
    # CPU leaves log_alpha unwritten past each element's input and extended target lengths.
    steps, positions = torch.arange(9).view(1, -1, 1), torch.arange(want[1].size(2)).view(1, 1, -1)
    written = (steps < input_lengths.view(-1, 1, 1)) & (positions <= 2 * target_lengths.view(-1, 1, 1))
    assert got[1].shape == want[1].shape
    torch.testing.assert_close(to_cpu(got[1])[written], want[1][written])
