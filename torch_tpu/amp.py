"""torch.tpu.amp: the spellings CUDA scripts use under torch.cuda.amp.

torch.autocast("tpu", ...) and torch.amp.GradScaler("tpu") are the current names; these aliases
exist so that `torch.cuda.amp.autocast()` becomes `torch.tpu.amp.autocast()` with no other edit.
Unlike the deprecated torch.cuda.amp classes they do not warn: a tpu user has no older name to
be steered away from.
"""
import torch

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(torch.amp.autocast_mode.autocast):
    """torch.autocast("tpu", ...). The default dtype is torch.autocast's for tpu, float16 as on
    cuda; dtype=torch.bfloat16 is the type TPUs multiply in natively and needs no GradScaler."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("tpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """torch.amp.GradScaler("tpu", ...). Loss scaling matters only for float16; bfloat16 has
    float32's range and trains without it."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    return torch.amp.custom_fwd(fwd, device_type="tpu", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    return torch.amp.custom_bwd(bwd, device_type="tpu")
