"""The CPU's random draws on the device, so that a training step that samples noise no config
turns off (GroupViT's Gumbel-softmax token assignment) can be compared with the CPU's.

The device's generator is not the CPU's: the same seed gives other numbers, and a step that
adds them to its activations ends elsewhere for reasons that say nothing about the backend.
Inside `with CpuRandomDraws():`, a random op whose result lives on a device draws on the CPU, with
the CPU's generator, and the numbers are uploaded; seeded alike, both runs draw the same values
in the same order. Only the comparison harness does this: the backend's own random ops run
on the device."""
import torch
from torch.overrides import TorchFunctionMode

# Factories that take a device= keyword.
_FACTORIES = {torch.rand, torch.randn, torch.randint, torch.randperm, torch.normal}
# Ops whose results take the device of their first argument (a tensor).
_OF_INPUT = {torch.rand_like, torch.randn_like, torch.randint_like, torch.bernoulli,
             torch.multinomial, torch.poisson, torch.Tensor.bernoulli, torch.Tensor.multinomial,
             torch.normal}
# In-place fills of their first argument.
_IN_PLACE = {torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.exponential_,
             torch.Tensor.bernoulli_, torch.Tensor.geometric_, torch.Tensor.log_normal_,
             torch.Tensor.cauchy_, torch.Tensor.random_}
# Every op above: the mode sees every torch call, and lets the others through on this test.
_RANDOM = _FACTORIES | _OF_INPUT | _IN_PLACE


def _on_device(value):
    return isinstance(value, torch.Tensor) and value.device.type != "cpu"


def _to_cpu(value):
    return value.detach().cpu() if _on_device(value) else value


@torch._dynamo.disable
def _draw_on_cpu(func, args, kwargs):
    """func's result drawn on the CPU and moved where it would have been; NotImplemented when
    nothing in the call is on a device."""
    kwargs = dict(kwargs or {})
    device = kwargs.get("device")
    if func in _FACTORIES and device is not None and torch.device(device).type != "cpu":
        kwargs["device"] = "cpu"
        requires_grad = kwargs.pop("requires_grad", False)
        return func(*args, **kwargs).to(device).requires_grad_(requires_grad)
    if func in _IN_PLACE and args and _on_device(args[0]):
        target, drawn = args[0], args[0].detach().cpu()
        func(drawn, *[_to_cpu(a) for a in args[1:]], **{k: _to_cpu(v) for k, v in kwargs.items()})
        with torch.no_grad():
            target.copy_(drawn)
        return target
    if func in _OF_INPUT and args and _on_device(args[0]):
        device = args[0].device
        result = func(*[_to_cpu(a) for a in args], **{k: _to_cpu(v) for k, v in kwargs.items()})
        return result.to(device)
    return NotImplemented


class CpuRandomDraws(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _RANDOM:
            result = _draw_on_cpu(func, args, kwargs)
            if result is not NotImplemented:
                return result
        return func(*args, **(kwargs or {}))
