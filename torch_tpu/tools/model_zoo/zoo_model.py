"""The wrapper every non-Transformers architecture runs in (see `libraries`)."""
import torch


class ZooModel(torch.nn.Module):
    """A library's module with its inputs and loss. `inner` is the unmodified module (parameter
    names gain an `inner.` prefix); subclasses define `example_inputs(seed)` -> (inputs, labels)
    and `forward(**inputs, labels=None)` -> a dict of outputs, with "loss" when labels are given."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def example_inputs(self, seed=0):
        raise NotImplementedError


_NAMED = {}


def named_subclass(base, name):
    """A subclass of `base` named `name` (one per name), so that the zoo's reports show each
    entry's class or variant as the model's class name."""
    if (base, name) not in _NAMED:
        _NAMED[base, name] = type(name, (base,), {"__module__": base.__module__})
    return _NAMED[base, name]
