"""Where PJRT plugins live once pip has installed them, in the order we prefer them.

An explicit TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so wins and is the only candidate; otherwise
libtpu (Cloud TPU), then JAX's CUDA plugin, then XLA's CPU plugin. TORCH_TPU_PLATFORM=cpu|cuda|tpu
keeps only that kind, e.g. to run on the CPU plugin on a GPU machine.
"""
import importlib.util
import os

_KINDS = (
    ("tpu", ("libtpu",), "libtpu.so"),
    ("cuda", ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"), "xla_cuda_plugin.so"),
    ("cpu", ("xla_plugins.xla_cpu_pjrt",), "xla_cpu_pjrt.so"),
)


def _package_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def candidates():
    """[(kind, path)] of the plugins found, most preferred first."""
    override = os.environ.get("TORCH_TPU_PJRT_PLUGIN")
    if override:
        return [("override", override)]
    wanted = os.environ.get("TORCH_TPU_PLATFORM", "").lower() or None
    found = []
    for kind, packages, filename in _KINDS:
        if wanted and kind != wanted:
            continue
        for package in packages:
            directory = _package_dir(package)
            if directory and os.path.exists(os.path.join(directory, filename)):
                found.append((kind, os.path.join(directory, filename)))
                break
    return found
