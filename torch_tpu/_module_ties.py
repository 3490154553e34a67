"""Shared (tied) parameters stay shared when a module moves to or from tpu.

nn.Module._apply keeps a parameter object, and so every tie, only when the converted tensor's
TensorImpl is "shallow-copy compatible" with the old one, which c10 grants to a fixed list of
in-tree backends; for PrivateUse1 it makes a new Parameter per module instead, so a model whose
output projection shares the embedding's weight (GPT-2, BERT, T5, ...) leaves `.to("tpu")` with
two independent copies that train apart. On CUDA the tie survives, so it must here: after the
top-level conversion, every module slot that held one object before holds one object again.
_torch_patches installs keeping_ties(nn.Module._apply) in its place.
"""
import threading

_state = threading.local()


def _shared_slots(module):
    """{id(tensor): [(module, dict name, key)]} for parameters and buffers held by more than
    one slot."""
    slots = {}
    for sub in module.modules():
        for table in ("_parameters", "_buffers"):
            for key, value in getattr(sub, table).items():
                if value is not None:
                    slots.setdefault(id(value), []).append((sub, table, key))
    return {k: v for k, v in slots.items() if len(v) > 1}


def keeping_ties(original_apply):
    """nn.Module._apply that runs original_apply, then ties again what was tied before."""

    def _apply(self, fn, recurse=True):
        if getattr(_state, "inside", False) or not recurse:
            return original_apply(self, fn, recurse)
        shared = _shared_slots(self)
        _state.inside = True
        try:
            result = original_apply(self, fn, recurse)
        finally:
            _state.inside = False
        for slots in shared.values():
            module, table, key = slots[0]
            first = getattr(module, table)[key]
            for module, table, key in slots[1:]:
                if getattr(module, table)[key] is not first:
                    getattr(module, table)[key] = first
        return result

    return _apply
