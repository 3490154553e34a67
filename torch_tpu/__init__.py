"""TorchTPU: a native PyTorch backend for XLA accelerators through PJRT.

`import torch` loads this package through the `torch.backends` entry point; afterwards "tpu" is
a device like "cuda": torch.randn(3, device="tpu"), model.to("tpu"), torch.tpu.*,
torch.accelerator.*.
"""


def _autoload():
    """Entry point for `import torch` (group torch.backends): importing this package is the work.

    Defined before `import torch` because `import torch_tpu` imports torch, whose autoload then
    looks this name up on the still partially initialised torch_tpu module."""


import sys  # noqa: E402

import torch  # noqa: E402

from . import _C, _plugins  # noqa: E402
from ._modes import (EagerMode, eager_mode, get_eager_mode, mode_from_environment,  # noqa: E402
                     set_eager_mode)

__all__ = [
    "EagerMode", "eager_mode", "get_eager_mode", "set_eager_mode", "fallback_counts",
    "reset_fallback_counts", "set_fallback_warnings", "metrics", "reset_metrics", "cache_stats",
]


def _register():
    if torch._C._get_privateuse1_backend_name() != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")
    _C._set_plugin_candidates(_plugins.candidates())
    from . import tpu as tpu_module

    torch._register_device_module("tpu", tpu_module)
    # torch.tpu is a module, not a package: `import torch.tpu.amp` (and .memory) needs its own entry.
    sys.modules["torch.tpu.amp"] = tpu_module.amp
    sys.modules["torch.tpu.memory"] = tpu_module.memory
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
    _C._set_default_mode(mode_from_environment().value)
    # Everything the backend changes inside PyTorch itself, each change checked first.
    from . import _torch_patches
    _torch_patches.apply()
    from . import _exit
    _exit.register()
    # init_process_group("tpu_dist") must work right after `import torch`, as "nccl" does.
    from . import distributed
    distributed._register()
    # torch.compile: "tpu" reaches Dynamo through the torch_dynamo_backends entry point (importing
    # torch._dynamo here would cost every user a second).
    from . import dynamo_backend
    if "torch._dynamo" in sys.modules:
        dynamo_backend.register()


def fallback_counts():
    """{"aten::op.overload": calls} of ops that ran on the CPU because tpu has no lowering."""
    return dict(_C._fallback_counts())


def reset_fallback_counts():
    _C._reset_fallback_counts()


def set_fallback_warnings(enabled):
    """Turns the once-per-op CPU-fallback warning on or off."""
    _C._set_fallback_warnings(bool(enabled))


def set_fallback_error(enabled):
    """With True, an op that would run on the CPU raises NotImplementedError instead
    (the same as TORCH_TPU_FALLBACK=error)."""
    _C._set_fallback_error(bool(enabled))


def metrics():
    """Counters of the executor and the program cache: ops, cache_hits, cache_misses, compiles,
    compile_seconds, executions, execute_call_seconds (host time inside the plugin's execute calls),
    cache_entries; compile cost per kind of program
    (compiles_per_op, compile_seconds_per_op, and the same for fused_graph and compiled_graph),
    quick_compiles, per_op_compile_median_ms, compile_upgrades and compile_upgrade_seconds (the
    background full compiles of quick programs), slow_compiles; how ops' result layouts were found:
    meta_results_cached, meta_functions_cpp (PyTorch's C++ meta functions, called directly),
    meta_functions_dispatched (through the Meta dispatch key: Python reference code for most ops);
    and of torch.compile(backend="tpu"):
    compiled_graphs (FX graphs handed to the backend: forward, backward and inference graphs
    count separately), compiled_graph_calls, compiled_graph_program_overflows (calls run op by op because their graph
    had compiled max_programs_per_graph programs)."""
    from . import dynamo_backend
    values = dict(_C._metrics())
    values.update({"compiled_" + k.replace("graphs_compiled", "graphs"): v
                   for k, v in dynamo_backend.counters().items()})
    return values


def wait_for_background_compiles():
    """Blocks until the programs queued for their full compile have it. A program's first compile
    is a quick one; once its runs have repaid a full compile, a background thread compiles it with
    full optimisation and the new program replaces it (both compute the same values). Benchmarks
    call this after warm-up to time the steady state; nothing else needs to."""
    _C._wait_for_compile_upgrades()


def reset_metrics():
    from . import dynamo_backend
    _C._reset_metrics()
    dynamo_backend.reset_counters()


def cache_stats():
    """The compilation cache: memory_hits, disk_hits, misses, compile_seconds, bytes_on_disk,
    entries_on_disk, directory (None when the disk cache is off), and a few more counters.
    `python -m torch_tpu.cache stats|clear` works on the directory from the command line."""
    return dict(_C._cache_stats())


def lowered_ops():
    """Names of the ATen ops with a tpu lowering."""
    return list(_C._lowered_ops())


_register()


# Re-exported for `torch_tpu.is_available()` style use.
from .tpu import device_count, is_available, platform, synchronize  # noqa: E402
