"""torch.compile(backend="tpu"): Dynamo's FX graphs run as whole XLA programs.

AOTAutograd, with PyTorch's core ATen decompositions, turns each Dynamo graph into a functional
forward graph and a backward graph. Each graph is then executed by replaying its ATen calls
through the tpu device's own kernels in defer-and-fuse mode and flushing once: the calls are
recorded, never run one by one, and the flush lowers them through the same lowering registry as
every eager path into ONE program, found in (or added to) the same compilation cache. Eager and
compiled therefore agree by construction, and a graph the cache has seen costs no compile, in
this process or the next.

Shapes: a graph Dynamo traced with static sizes is one XLA program. A graph traced with symbolic
sizes (dynamic=True, mark_dynamic, or Dynamo's automatic dynamic shapes) runs each new size
through the recording path again; its first call is exact, and from the second its program pads
the sizes that changed to their buckets (powers of two, exec/padding.h): every size of a bucket
runs the same program, so a decode loop over n tokens compiles O(log n) programs. A graph whose calls still compile new programs
after `max_programs_per_graph` of them (default 32, option or TORCH_TPU_MAX_PROGRAMS_PER_GRAPH;
sizes that cannot pad, such as an op whose padding would reach a result) runs further new sizes
op by op in strict mode, whose per-op programs are small and shared by every caller, with one
warning per graph.
"""
import functools
import itertools
import os
import re
import threading
import warnings

import torch

from . import _C
from ._modes import EagerMode

BACKEND_NAME = "tpu"

# Options torch.compile(..., options={...}) understands for this backend; others warn.
KNOWN_OPTIONS = {
    "max_programs_per_graph": "whole-graph programs per graph traced with symbolic shapes",
}
# torch.compile's modes are about CUDA graphs and autotuning, which XLA does itself.
KNOWN_MODES = {"default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"}

_counters_lock = threading.Lock()
_counters = {"graphs_compiled": 0, "graph_calls": 0, "graph_program_overflows": 0}
_graph_ids = itertools.count()


def counters():
    with _counters_lock:
        return dict(_counters)


def reset_counters():
    with _counters_lock:
        for name in _counters:
            _counters[name] = 0


def _count(name, amount=1):
    with _counters_lock:
        _counters[name] += amount


def _default_max_programs():
    value = os.environ.get("TORCH_TPU_MAX_PROGRAMS_PER_GRAPH", "")
    return int(value) if value.strip().isdigit() and int(value) > 0 else 32


class CompileError(RuntimeError):
    """A compiled graph's node could not be lowered or its program could not be compiled."""


# The location the executor records for an op is the innermost frame outside torch: for a
# replayed graph that is the GraphModule's generated code, "(at <eval_with_key>.N ...:LINE)".
_GENERATED_LINE = re.compile(r"\(at (<eval_with_key>.*?):(\d+)\)")
_ATEN_OP = re.compile(r"aten::(\w+)")


def _failing_node(graph_module, message, error=None):
    """The FX node the error points at: by the graph's generated line that raised it (in its
    traceback, or named in its message), else by its op's name (the first node of that op)."""
    import linecache
    import traceback

    generated = graph_module.forward.__code__.co_filename
    frames = traceback.extract_tb(error.__traceback__) if error is not None else []
    line = next((f.lineno for f in reversed(frames) if f.filename == generated), None)
    match = _GENERATED_LINE.search(message)
    if line is None and match is not None:
        generated, line = match.group(1), int(match.group(2))
    if line is not None:
        source = linecache.getline(generated, line).strip()
        assigned = source.split("=", 1)[0].split(":")[0].strip() if "=" in source else None
        for node in graph_module.graph.nodes:
            if node.name == assigned:
                return node
    op = _ATEN_OP.search(message)
    if op is not None:
        for node in graph_module.graph.nodes:
            packet = getattr(node.target, "_opname", None) or getattr(node.target, "__name__", "")
            if node.op == "call_function" and packet.split(".")[0] == op.group(1):
                return node
    return None


def _describe_failure(graph_module, graph_name, error):
    message = str(error)
    node = _failing_node(graph_module, message, error)
    where = f"FX node '{node.name}' ({node.target})" if node is not None else "a node"
    return CompileError(
        f"torch.compile(backend='tpu'): {where} of {graph_name} could not be lowered or compiled: "
        f"{message}\nTo run it anyway, call this code without torch.compile (eager tpu), or "
        "report the op and the StableHLO file named above.")


_graph_numbers = itertools.count(1)


class _GraphRunner:
    """Runs one AOTAutograd graph (forward, backward or inference) on tpu tensors."""

    def __init__(self, graph_module, name, max_programs):
        self.graph_module = graph_module
        self.name = name
        self.max_programs = max_programs
        # Per argument, the dims Dynamo traced with symbolic sizes.
        self.symbolic_dims = [[d for d, s in enumerate(_shape_of(node.meta.get("val"))) if isinstance(s, torch.SymInt)]
                              for node in graph_module.graph.nodes if node.op == "placeholder"]
        self.symbolic = any(self.symbolic_dims)
        self.first_sizes = None  # each argument's sizes at the first call
        self.varied_dims = [set() for _ in self.symbolic_dims]  # the symbolic dims that changed since
        self.programs_compiled = 0  # calls of this graph that compiled a program
        self.overflow_warned = False
        # Names this graph to the executor across calls: each of its ops learns which sizes change
        # from this graph's own calls (exec/padding.h, padding_site).
        self.graph_number = next(_graph_numbers)
        self.written_arguments = _written_arguments(graph_module)
        # signature -> (captured program, the graph's non-tensor outputs for that signature)
        self.replays = {}
        self.why_not_replayed = ""  # for debugging: why the last capture cannot be replayed
        _count("graphs_compiled")

    def __call__(self, args):
        _count("graph_calls")
        # A symbolic graph's numbers (sizes it computes with) follow its integer arguments, so
        # each concrete signature has a replay of its own (sizes of one bucket share its program);
        # a static graph has one.
        signature = _signature(args) if self.symbolic else None
        if self.symbolic:
            args = self._give_arguments_room(args)
        captured = self.replays.get(signature)
        if captured is not None:
            replay, non_tensor_outputs = captured
            outputs = replay.run(_tensors_only(args))
            if outputs is not None:
                return [o if o is not None else v for o, v in zip(outputs, non_tensor_outputs)]
        capture = not (self.symbolic and self.programs_compiled >= self.max_programs)
        if not capture:
            self._warn_overflow()
        mode = EagerMode.DEFER_AND_FUSE.value if capture else EagerMode.DEFER_NEVER.value
        caller_mode = _C._get_mode()
        # The graph becomes one program of its own: begin_capture launches what the caller
        # recorded (without waiting, unlike a mode change through set_eager_mode).
        if capture:
            compiles_before = _C._metrics()["compiles_compiled_graph"]
            # Pad at once where sizes have changed since the first call; the first call's exact
            # program compiles several times faster than a padded one, which it may never need.
            _C._begin_capture(any(self.varied_dims), self.graph_number)
        elif caller_mode == EagerMode.DEFER_AND_FUSE.value:
            _C._flush()
        # A backward graph runs on the autograd engine's thread, which has no mode of its own
        # (it follows the caller of backward()): put back exactly that, not a fixed mode.
        previous = _C._swap_thread_mode(mode)
        try:
            outputs = self.graph_module(*args)
            if capture:
                # Later calls with arguments laid out the same way run the program directly.
                replay, self.why_not_replayed = _C._end_capture(_tensors_only(args), _tensors_only(outputs))
                if _C._metrics()["compiles_compiled_graph"] > compiles_before:
                    self.programs_compiled += 1
                if replay is None:
                    self.replays.pop(signature, None)
                else:
                    self.replays[signature] = (replay, [None if isinstance(o, torch.Tensor) else o for o in outputs])
        except (RuntimeError, NotImplementedError) as error:
            if capture:
                # Close the capture the failed graph opened: left open, it would take in this
                # thread's later eager ops.
                try:
                    _C._end_capture([], [])
                except (RuntimeError, NotImplementedError):
                    pass
            if isinstance(error, torch.OutOfMemoryError):
                raise
            raise _describe_failure(self.graph_module, self.name, error) from error
        finally:
            _C._swap_thread_mode(previous)
        return outputs

    def _give_arguments_room(self, args):
        # The programs pad the sizes that change to their buckets (exec/padding.h): an argument
        # of exact length moves into a buffer with its bucket's room, as an upload whose sizes
        # keep changing gets one, so that every size of the bucket runs the same program. An
        # argument that is a view into a larger storage (the inputs `ids[:, :-1]` of a batch
        # uploaded with one more token) is copied out first when the graph does not write it:
        # a program's parameter is its whole storage, whose room follows the storage's own sizes,
        # so at a bucket's own size (32 tokens, uploaded as 33) the view and its storage would
        # fall in different buckets and compile a program that no other length uses.
        sizes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args]
        if self.first_sizes is None:
            self.first_sizes = sizes
            return args
        roomy = list(args)
        for i, (arg, dims) in enumerate(zip(args, self.symbolic_dims)):
            if not dims or sizes[i] is None or self.first_sizes[i] is None or len(sizes[i]) != len(self.first_sizes[i]):
                continue
            self.varied_dims[i].update(d for d in dims if sizes[i][d] != self.first_sizes[i][d])
            if not self.varied_dims[i]:
                continue
            if not _covers_its_storage(arg) and i not in self.written_arguments and arg.device.type == "tpu":
                with torch.no_grad():
                    roomy[i] = arg = arg.clone(memory_format=torch.contiguous_format)
            _C._extend_to_bucket(arg, sorted(self.varied_dims[i]))
        return roomy

    def _warn_overflow(self):
        _count("graph_program_overflows")
        if not self.overflow_warned:
            self.overflow_warned = True
            warnings.warn(
                f"tpu: {self.name} has compiled {self.max_programs} XLA programs for the input sizes "
                "it met; further new sizes run op by op (strict) instead of compiling more. Pad "
                "inputs to a few fixed sizes to keep whole-graph programs, or raise the bound with "
                "options={'max_programs_per_graph': N}.", stacklevel=2)


def _covers_its_storage(tensor):
    return (isinstance(tensor, torch.Tensor) and tensor.is_contiguous() and tensor.storage_offset() == 0
            and tensor.nbytes == tensor.untyped_storage().nbytes())


def _written_arguments(graph_module):
    """The positions of the placeholders that an op of the graph writes (an input mutation that
    AOTAutograd kept in the graph): those must stay the caller's tensors."""
    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    position = {node: i for i, node in enumerate(placeholders)}
    written = set()
    for node in graph_module.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None:
            continue
        writes = {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}
        named = dict(zip((a.name for a in schema.arguments), node.args)) | dict(node.kwargs)
        for name in writes & named.keys():
            values = named[name] if isinstance(named[name], (list, tuple)) else [named[name]]  # Tensor(a!)[]
            written.update(position[v] for v in values if isinstance(v, torch.fx.Node) and v in position)
    return written


def _signature(args):
    return tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)


def _tensors_only(values):
    return [v if isinstance(v, torch.Tensor) else None for v in values]


def _shape_of(value):
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, torch.SymInt):
        return (value,)
    return ()


def _make_compiler(kind, graph_id, max_programs):
    from torch._functorch.aot_autograd import make_boxed_func

    def compiler(graph_module, example_inputs):
        _views_as_reshapes(graph_module)
        runner = _GraphRunner(graph_module, f"graph {graph_id} ({kind})", max_programs)
        return make_boxed_func(lambda *args: runner(args))

    return compiler


def _views_as_reshapes(graph_module):
    """AOTAutograd proves each view of the graph possible on FakeTensor layouts, but where an
    elementwise op's operands are laid out differently (one transposed), FakeTensor's Python
    reference and the TensorIterator meta function that the device runs, as CPU does, order the
    result's dims differently, and a later view of it can fail (a softplus backward in a
    gated-delta-rule model). The graphs are functional (no view of an intermediate is written
    through), so a reshape, which is the same view where one is possible and a copy only where
    not, computes the same values."""
    changed = False
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
            changed = True
    if changed:
        graph_module.recompile()


def _check_arguments(mode, options):
    if mode is not None and mode not in KNOWN_MODES:
        raise RuntimeError(f"Unrecognized mode={mode!r}, should be one of: {', '.join(sorted(KNOWN_MODES))}")
    options = dict(options or {})
    for name in sorted(set(options) - set(KNOWN_OPTIONS)):
        warnings.warn(f"torch.compile(backend='tpu') ignores the unknown option {name!r}; it knows "
                      + ", ".join(f"{k!r} ({v})" for k, v in KNOWN_OPTIONS.items()), stacklevel=3)
    max_programs = options.get("max_programs_per_graph", _default_max_programs())
    if not isinstance(max_programs, int) or max_programs < 1:
        raise ValueError(f"options['max_programs_per_graph'] must be a positive int, got {max_programs!r}")
    return max_programs


@functools.lru_cache(maxsize=None)
def _decompositions():
    """PyTorch's core ATen decompositions of the ops the device neither lowers nor implements
    itself (views, factories). Every other op stays whole: its lowering takes fewer passes over the
    data than the decomposition's ops would, a compiled graph runs the same ATen ops as eager code,
    and AOTAutograd traces faster (its decomposing dispatch costs even where it only turns a
    transpose into a permute: the small GPT's training step traces 0.3 s faster with none)."""
    from torch._decomp import core_aten_decompositions

    lowered = set(_C._lowered_ops())

    def device_runs_itself(op):
        name = op._schema.name.split("::")[-1]
        return op.is_view or name in lowered or name.rstrip("_") in lowered or name in _DEVICE_FACTORIES

    return {op: fn for op, fn in core_aten_decompositions().items() if not device_runs_itself(op)}


# Factories and copies with tpu kernels of their own (csrc/aten), which need no decomposition.
_DEVICE_FACTORIES = {"empty", "empty_strided", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like",
                     "empty_like", "_unsafe_view", "_to_copy", "copy", "clone", "new_empty", "new_zeros",
                     "new_ones", "new_full", "new_empty_strided", "scalar_tensor", "lift_fresh_copy"}


def tpu_backend(graph_module, example_inputs, mode=None, options=None):
    """The Dynamo backend registered as "tpu"."""
    from torch._dynamo.backends.common import aot_autograd

    max_programs = _check_arguments(mode, options)
    graph_id = next(_graph_ids)
    backend = aot_autograd(
        fw_compiler=_make_compiler("forward", graph_id, max_programs),
        bw_compiler=_make_compiler("backward", graph_id, max_programs),
        inference_compiler=_make_compiler("inference", graph_id, max_programs),
        decompositions=_decompositions(),
        # Input mutations (optimizer steps, BatchNorm's running stats) stay in the graph as
        # copy_ calls, so they fuse into its program instead of running after it.
        keep_inference_input_mutations=True,
    )
    return backend(graph_module, example_inputs)


def _is_tpu(value):
    return isinstance(value, torch.Tensor) and value.device.type == BACKEND_NAME


def graph_uses_tpu(graph_module, example_inputs):
    """Whether a Dynamo graph computes on tpu: an input lives there, or a node creates a tensor
    there (a graph without tensor inputs)."""
    if any(_is_tpu(v) for v in example_inputs):
        return True
    for node in graph_module.graph.nodes:
        if _is_tpu(node.meta.get("example_value")) or _is_tpu(node.meta.get("val")):
            return True
    return False


def routing_tpu_graphs(inductor_call):
    """torch._TorchCompileInductorWrapper.__call__ for plain torch.compile(model), which goes to
    inductor: tpu graphs have no inductor code generator, so those graphs come here, while CPU and
    CUDA graphs go to inductor exactly as before. _torch_patches installs it."""

    def __call__(self, model_, inputs_, **kwargs):
        if graph_uses_tpu(model_, inputs_):
            return tpu_backend(model_, inputs_)
        return inductor_call(self, model_, inputs_, **kwargs)

    return __call__


def register():
    """Registers "tpu" with Dynamo now. Normally unnecessary: the package's torch_dynamo_backends
    entry point makes Dynamo register it on first use of backend="tpu" (so `import torch` alone
    suffices); this is for a source tree run without installing."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if BACKEND_NAME not in _COMPILER_FNS:
        register_backend(compiler_fn=tpu_backend, name=BACKEND_NAME)
