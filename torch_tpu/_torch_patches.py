"""Every change TorchTPU makes inside PyTorch (and to multiprocessing), in one place.

The backend loads on `import torch`, so what it changes reaches every process that imports torch,
whether it uses tpu or not. Before replacing anything, each patch checks that the symbol is what
it was written against: it exists, it is a Python function whose leading parameters are the ones
the replacement passes on, and it is not already ours (then it stays as it is). Where a check
fails the patch is skipped with a TorchPatchWarning naming the PyTorch version and the symbol,
or, where running without it would give wrong results, loading fails with that message instead.
Each patch's docstring says why PyTorch needs it and which PyTorch change would retire it.

The replacements themselves live with the feature they serve (_modes, _meta, _dynamo_device,
_interop, dynamo_backend, _module_ties); tests/test_torch_patches.py pins the signature of each
symbol and checks what each patch does. Supported registration points (the PrivateUse1 rename,
the device module, Dynamo's and c10d's backend registries, kernels for PrivateUse1) are not
patches and stay where they are used.
"""
import importlib.abc
import importlib.util
import inspect
import sys
import warnings

import torch

MARK = "_torch_tpu_patch"  # on each replacement: the name of the patch that installed it
ORIGINAL = "_torch_tpu_original"  # on each replacement: what it replaced

_PATCHES = []  # in install order
_status = {}  # patch name -> "installed", or why not
_installing = None  # the name of the patch being installed, for _mark
# Meta kernels registered through torch.library live as long as this object.
_aten = torch.library.Library("aten", "IMPL")
_registered_meta = set()


class TorchPatchWarning(UserWarning):
    """A patch was skipped: what it replaces in PyTorch is not what it was written against."""


class _Mismatch(Exception):
    """What a patch expected of PyTorch is not there; the message names the symbol."""


class _Patch:
    def __init__(self, install, on_mismatch, without, after_import):
        self.install, self.name = install, install.__name__
        self.on_mismatch, self.without, self.after_import = on_mismatch, without, after_import

    def apply(self):
        if self.after_import is None:
            self.run()
        elif self.after_import in sys.modules:
            self.run(sys.modules[self.after_import])
        else:
            # Importing the module now would cost every `import torch` its import time.
            _status[self.name] = f"waits for the import of {self.after_import}"
            if not any(getattr(f, "patch", None) is self for f in sys.meta_path):
                sys.meta_path.insert(0, _AfterImport(self))

    def run(self, *module):
        global _installing
        _installing = self.name
        try:
            _status[self.name] = self.install(*module) or "installed"
        except _Mismatch as mismatch:
            _status[self.name] = f"skipped: {mismatch}"
            message = (f"torch_tpu: in PyTorch {torch.__version__}, {mismatch}; the patch "
                       f"{self.name!r} cannot be applied, and without it {self.without}")
            if self.on_mismatch == "error":
                raise RuntimeError(message + ". Use a PyTorch version this torch_tpu supports.") from None
            warnings.warn(message + ". It is skipped.", TorchPatchWarning, stacklevel=3)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a patch on its module right after the module's own code has run."""

    def __init__(self, patch):
        self.patch = patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.patch.after_import:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_patch(module):
            exec_module(module)
            self.patch.run(module)

        spec.loader.exec_module = exec_then_patch
        return spec


def _patch(on_mismatch, without, after_import=None):
    """Declares a patch: `on_mismatch` is "warn" (skip it, the feature degrades) or "error"
    (skipping would give wrong results); `without` says what happens without it."""
    def declare(install):
        _PATCHES.append(_Patch(install, on_mismatch, without, after_import))
        return install
    return declare


def apply():
    """Installs every patch, in the order they are declared."""
    for patch in _PATCHES:
        patch.apply()


def status():
    """{patch name: "installed", or why it is not}."""
    return dict(_status)


def _qualified(owner):
    return getattr(owner, "__module__", "") + "." + owner.__qualname__ if inspect.isclass(owner) \
        else owner.__name__


def _ours(value):
    return getattr(value, MARK, None) is not None


def _function(owner, attribute, parameters=()):
    """owner.attribute, checked by _checked; None when it is already ours."""
    return _checked(getattr(owner, attribute, None), f"{_qualified(owner)}.{attribute}", parameters)


def _checked(fn, where, parameters=()):
    """fn, checked to be a Python function whose parameters begin with the names in
    `parameters`; None when it is already ours."""
    if fn is None:
        raise _Mismatch(f"{where} does not exist")
    if _ours(fn):
        return None
    if not inspect.isfunction(fn):
        raise _Mismatch(f"{where} is a {type(fn).__name__}, not a Python function")
    names = list(inspect.signature(fn).parameters)
    if names[:len(parameters)] != list(parameters):
        raise _Mismatch(f"{where} takes ({', '.join(names)}), not ({', '.join(parameters)}, ...)")
    return fn


def _aten_op(name, arguments=None):
    """aten::name's default overload, its schema checked to take `arguments` (names)."""
    try:
        op = getattr(torch.ops.aten, name).default
    except AttributeError:
        raise _Mismatch(f"aten::{name} does not exist") from None
    names = [a.name for a in op._schema.arguments]
    if arguments is not None and names != list(arguments):
        raise _Mismatch(f"aten::{name} takes ({', '.join(names)}), not ({', '.join(arguments)})")
    return op


def _mark(replacement, original):
    setattr(replacement, MARK, _installing)
    setattr(replacement, ORIGINAL, original)
    return replacement


def _replace(owner, attribute, original, replacement):
    setattr(owner, attribute, _mark(replacement, original))


# Warn: without it backward ops still compute the same values (a storage another thread's
# pending graph holds makes that graph run first), in the engine thread's own mode.
@_patch("warn", "backward() runs in the default eager mode, not the caller's, and a fused "
                "forward no longer fuses with its backward")
def backward_follows_the_caller():
    """The autograd engine's device threads run with no eager mode of their own; unnecessary
    once PyTorch propagates a backend's thread-local state into them as it does autocast's."""
    import torch.autograd.graph as graph

    original = _function(graph, "_engine_run_backward", ("t_outputs",))
    if original is None:
        return None
    alias = getattr(torch.autograd, "_engine_run_backward", original)
    if alias is not original:
        raise _Mismatch("torch.autograd._engine_run_backward is no longer "
                        "torch.autograd.graph._engine_run_backward")
    from ._modes import following_the_caller

    replacement = _mark(following_the_caller(original), original)
    graph._engine_run_backward = replacement
    if hasattr(torch.autograd, "_engine_run_backward"):
        torch.autograd._engine_run_backward = replacement


# Warn: without it float32 _grouped_mm on tpu raises under torch.compile; nothing computes wrong.
@_patch("warn", "torch.compile of float32 or float16 torch._grouped_mm on tpu (Hugging Face's MoE "
                "layers) fails PyTorch's bfloat16-only check")
def grouped_mm_meta_any_float():
    """PyTorch's meta function of _grouped_mm allows bfloat16 only (CUDA's limit); unnecessary
    once it checks dtypes per device, accepting what the CPU kernel accepts."""
    from ._meta import grouped_mm_for_tpu

    op = _aten_op("_grouped_mm")
    original = _checked(op.py_kernels.get(torch._C.DispatchKey.Meta), "aten._grouped_mm's Python meta kernel",
                        ("mat_a", "mat_b", "offs", "bias", "out_dtype"))
    if original is not None:
        op.py_kernels[torch._C.DispatchKey.Meta] = _mark(grouped_mm_for_tpu(original), original)


# Warn: without them the GRU's cells run on the CPU through the counted fallback, same results.
@_patch("warn", "GRU layers run their cells on the CPU (the counted fallback) and torch.compile "
                "cannot trace them on tpu")
def gru_cell_meta():
    """ATen hands every non-CPU device the fused GRU cell kernels, which ship no meta function;
    unnecessary once PyTorch registers Meta kernels for _thnn_fused_gru_cell and its backward."""
    from ._meta import fused_gru_cell, fused_gru_cell_backward

    kernels = {
        "_thnn_fused_gru_cell": (fused_gru_cell, ("input_gates", "hidden_gates", "hx", "input_bias",
                                                  "hidden_bias")),
        "_thnn_fused_gru_cell_backward": (fused_gru_cell_backward, ("grad_hy", "workspace", "has_bias")),
    }
    for name, (_, arguments) in kernels.items():
        _aten_op(name, arguments)
    missing = [name for name in kernels
               if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta")]
    for name in missing:
        _aten.impl(name, kernels[name][0], "Meta")
        _registered_meta.add(name)
    if not _registered_meta:
        return "not needed: PyTorch has Meta kernels for both"
    return None


# Warn: without it torch.compile of tpu code fails loudly (the placeholder's device_count raises).
@_patch("warn", "torch.compile of tpu code fails: Dynamo's placeholder TpuInterface raises in "
                "device_count()", after_import="torch._dynamo.device_interface")
def dynamo_device_interface(module):
    """Dynamo's init_device_reg registers a placeholder interface for "tpu" over any registered
    before it; unnecessary once it leaves a device's registered interface in place."""
    base, placeholder = getattr(module, "DeviceInterface", None), getattr(module, "TpuInterface", None)
    if not (inspect.isclass(base) and inspect.isclass(placeholder) and issubclass(placeholder, base)):
        raise _Mismatch(f"{module.__name__}.TpuInterface is not a DeviceInterface class")
    if _ours(placeholder):
        return None
    register = _function(module, "register_interface_for_device", ("device", "device_interface"))
    from ._dynamo_device import make_interface

    interface = make_interface(base)
    _replace(module, "TpuInterface", placeholder, interface)  # what init_device_reg registers
    register("tpu", interface)  # in case init_device_reg already ran
    for index in range(torch.tpu.device_count()):
        register(f"tpu:{index}", interface)
    return None


# Warn: without it a tpu tensor sent to another process fails where the user cannot see it; no
# value is computed wrong.
@_patch("warn", "a tpu tensor sent to another process fails where the caller cannot see it (a "
                "queue's feeder thread), and the receiver may wait forever")
def pickling_refuses_tpu():
    """torch.multiprocessing's reducers share a tensor's memory with the receiving process, and a
    PJRT buffer has no IPC handle; unnecessary once they ask the device whether it can share."""
    import torch.multiprocessing  # noqa: F401  (registers torch's reducers first)
    from multiprocessing.reduction import ForkingPickler

    from ._interop import refusing_tpu

    reducers = getattr(ForkingPickler, "_extra_reducers", None)
    if not isinstance(reducers, dict) or torch.Tensor not in reducers:
        raise _Mismatch("multiprocessing's ForkingPickler._extra_reducers holds no reducer of "
                        "torch.Tensor (torch.multiprocessing registers them)")
    for cls, reduce in list(reducers.items()):
        if isinstance(cls, type) and issubclass(cls, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
            if not _ours(reduce):
                ForkingPickler.register(cls, _mark(refusing_tpu(reduce), reduce))


# Warn: as pickling_refuses_tpu; with that one alone the receiver's get() raises instead.
@_patch("warn", "putting a tpu tensor on a multiprocessing.Queue raises in the receiver's get(), "
                "not in the caller's put()")
def queue_put_refuses_tpu():
    """multiprocessing.Queue.put pickles in a feeder thread after put() has returned, so only
    put() can tell its caller; unnecessary once tpu tensors can cross processes."""
    import multiprocessing.queues

    from ._interop import refusing_put

    original = _function(multiprocessing.queues.Queue, "put", ("self", "obj", "block", "timeout"))
    if original is not None:
        _replace(multiprocessing.queues.Queue, "put", original, refusing_put(original))


# Warn: without it a DLPack export of a tpu tensor gives another library a pointer it cannot read
# (which fails there) or an unrelated error; nothing computes wrong silently.
@_patch("warn", "DLPack export of a tpu tensor hands out a data pointer no other library can read, "
                "or raises an unrelated error")
def dlpack_refuses_tpu():
    """Tensor.__dlpack__ exports a PrivateUse1 tensor's data pointer as it would CUDA's; unnecessary
    once PyTorch asks the device whether its memory can be exported."""
    exports = [(torch.Tensor, name, _function(torch.Tensor, name, ("self",)))
               for name in ("__dlpack__", "__dlpack_device__")]
    legacy = getattr(torch.utils.dlpack, "to_dlpack", None)
    if not callable(legacy):
        raise _Mismatch("torch.utils.dlpack.to_dlpack does not exist")
    if getattr(torch, "to_dlpack", None) is not legacy:
        raise _Mismatch("torch.to_dlpack is not torch.utils.dlpack.to_dlpack")
    from ._interop import refusing_dlpack

    for owner, name, original in exports:
        if original is not None:
            _replace(owner, name, original, refusing_dlpack(original))
    if not _ours(legacy):
        torch.utils.dlpack.to_dlpack = torch.to_dlpack = _mark(refusing_dlpack(legacy), legacy)


# Warn: without it plain torch.compile fails on tpu graphs (inductor raises); backend="tpu" works.
@_patch("warn", "plain torch.compile(model) sends tpu graphs to inductor, which cannot compile "
                "them (backend='tpu' still works)")
def plain_compile_routes_tpu_graphs():
    """torch.compile's default backend is inductor whatever the device; unnecessary once a device
    can name its default torch.compile backend."""
    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if not inspect.isclass(wrapper):
        raise _Mismatch("torch._TorchCompileInductorWrapper does not exist")
    original = _function(wrapper, "__call__", ("self", "model_", "inputs_"))
    if original is not None:
        from .dynamo_backend import routing_tpu_graphs

        _replace(wrapper, "__call__", original, routing_tpu_graphs(original))


# An error: without it tied weights become two copies that train apart, and nothing says so.
@_patch("error", "tied parameters (an embedding shared with the output projection, as in GPT-2) "
                 "become two independent copies on .to('tpu') and train apart")
def module_apply_keeps_ties():
    """nn.Module._apply keeps a Parameter object, and so its ties, only where c10 calls the new
    tensor shallow-copy compatible, which it grants in-tree backends only; unnecessary once
    torch._has_compatible_shallow_copy_type accepts PrivateUse1 tensors."""
    original = _function(torch.nn.Module, "_apply", ("self", "fn", "recurse"))
    if original is not None:
        from ._module_ties import keeping_ties

        _replace(torch.nn.Module, "_apply", original, keeping_ties(original))


# Warn: without it a strict-mode optimizer step runs op by op: same values, more device memory.
@_patch("warn", "a strict-mode optimizer step runs op by op, keeping a parameter-sized temporary "
                "per foreach call beside the old moments instead of updating them in place")
def optimizer_step_as_one_program():
    """Optimizer.profile_hook_step wraps every optimizer's step, and its step hooks cannot wrap it
    (a post hook is skipped when the step raises, which would leave the thread recording);
    unnecessary once an optimizer step can run inside a context a backend enters around it."""
    optimizer = torch.optim.Optimizer
    original = _function(optimizer, "profile_hook_step", ("func",))
    if original is not None:
        from ._modes import optimizer_steps_as_one_program

        setattr(optimizer, "profile_hook_step",
                staticmethod(_mark(optimizer_steps_as_one_program(original), original)))


# Warn: without it flex_attention on tpu raises PyTorch's device check; nothing computes wrong.
@_patch("warn", "torch.nn.attention.flex_attention raises 'only supported on CUDA, CPU, HPU, or "
                "MPS devices' for tpu tensors", after_import="torch.nn.attention.flex_attention")
def flex_attention_accepts_tpu(module):
    """flex_attention checks its inputs' device against an allow-list of in-tree devices before
    dispatching to the flex_attention op, whose dense implementation and backward are ATen ops tpu
    lowers; unnecessary once the check asks whether the device implements the op. Also registers
    the op's autocast rule for tpu (a registration, not a patch), which must wait for the same
    import."""
    from ._flex_attention import accepting_tpu, register_autocast

    original = _function(module, "_validate_device", ("query", "key", "value"))
    if original is not None:
        _replace(module, "_validate_device", original, accepting_tpu(original))
    register_autocast(sys.modules["torch._higher_order_ops.flex_attention"])
