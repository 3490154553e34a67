"""Where an op comes from: the user's line and the nn.Module that owns it.

The user's line is the innermost frame outside torch, torch_tpu and the standard library (the
same rule the executor uses for its error messages). The owning module comes from a stack kept
by global forward hooks; they do nothing while Dynamo traces, so they never add graph breaks or
guards of their own to the user's compiled code.
"""
import os
import sys
import sysconfig
import threading
import weakref

import torch

_torch_dir = os.path.dirname(torch.__file__) + os.sep
_package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_stdlib_dirs = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})
_internal = {}


def is_internal(filename):
    verdict = _internal.get(filename)
    if verdict is None:
        if filename.startswith("<"):
            # Generated code (a GraphModule's <eval_with_key>, frozen importlib) is never the
            # user's line; code run with exec() and no file name is.
            verdict = not filename.startswith("<string>")
        else:
            path = os.path.realpath(filename)
            in_stdlib = path.startswith(_stdlib_dirs) and "-packages" + os.sep not in path
            verdict = path.startswith((_torch_dir, _package_dir)) or filename.startswith(
                (_torch_dir, _package_dir)) or in_stdlib
        _internal[filename] = verdict
    return verdict


def user_frame(frame, fallback_thread=None):
    """(the innermost user frame above `frame`, the frame it called into, if Python); for a
    thread with none (the autograd engine's device threads run the backward pass), those of
    `fallback_thread`, which called backward()."""
    child = None
    while frame is not None:
        if not is_internal(frame.f_code.co_filename):
            return frame, child
        child, frame = frame, frame.f_back
    if fallback_thread is not None and fallback_thread != threading.get_ident():
        other = sys._current_frames().get(fallback_thread)
        if other is not None:
            return user_frame(other)
    return None, None


class ModuleStack:
    """The qualified name of the innermost nn.Module running forward, per thread. Names come from
    the outermost module called (`Decoder.blocks.layers.0.self_attn`)."""

    def __init__(self):
        self._local = threading.local()
        self._names = {}  # id(module) -> qualified name, for every module under a root seen
        self._invocations = 0
        self._handles = []
        self._parameters = {}  # id(parameter) -> (qualified name, weak reference)

    def _stack(self):
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def current(self):
        """(name, invocation number) of the innermost module running, or (None, 0)."""
        stack = self._stack()
        return stack[-1] if stack else (None, 0)

    def _name(self, module):
        name = self._names.get(id(module))
        if name is None:
            root = type(module).__name__
            for sub_name, sub in module.named_modules():
                self._names.setdefault(id(sub), f"{root}.{sub_name}" if sub_name else root)
            for param_name, param in module.named_parameters():
                self._parameters.setdefault(id(param), (f"{root}.{param_name}", weakref.ref(param)))
            name = self._names[id(module)]
        return name

    def parameter_storages(self):
        """{storage address: (bytes, qualified name)} of the tpu parameters of the modules seen,
        still alive."""
        storages = {}
        for name, ref in self._parameters.values():
            param = ref()
            if param is not None and param.device.type == "tpu":
                storage = param.untyped_storage()
                storages.setdefault(storage.data_ptr(), (storage.nbytes(), name))
        return storages

    def _pre(self, module, args):
        if torch.compiler.is_compiling():
            return
        self._invocations += 1
        self._stack().append((self._name(module), self._invocations))

    def _post(self, module, args, output):
        if torch.compiler.is_compiling():
            return
        stack = self._stack()
        if stack:
            stack.pop()

    def __enter__(self):
        hooks = torch.nn.modules.module
        self._handles = [hooks.register_module_forward_pre_hook(self._pre),
                         hooks.register_module_forward_hook(self._post, always_call=True)]
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()
        self._handles = []
        return False


class Statements:
    """Numbers the calls of each op within one execution of a statement, so that a site (op,
    line, module, ordinal) names the same call from one execution to the next.

    A statement is one call instruction of the user's frame, and an execution of it one call
    it makes: when the call enters Python code (torch.optim, nn.Module), that code's frame tells
    executions apart, so the many calls of one op inside one optimizer step stay distinct. A call
    straight into a C function has no such frame. A loop whose body is that one statement runs
    it again with no new instruction in between; its next execution is assumed
    where the statement's first op comes again (after at least two ops), and the calls from
    there are held back until that is settled: confirmed once the whole period of ops has come
    twice more (once more for a statement whose period was confirmed before), refuted as soon as
    an op differs or the statement ends first. One call that makes the same ops again (the casts
    of q, k and v inside scaled_dot_product_attention) is refuted that way, so its calls keep
    their own ordinals."""

    _LONGEST = 4096  # ops of one execution followed; beyond, no restart is looked for

    def __init__(self):
        self._statement = self._call = None
        self._seq = []  # keys of the current execution
        self._ordinals = {}
        self._held = None  # (period, [(key, record)]) since an assumed restart
        self._periods = {}  # statement -> its confirmed period

    def _next(self, key):
        ordinal = self._ordinals.get(key, 0)
        self._ordinals[key] = ordinal + 1
        return ordinal

    def settle(self):
        """Releases the calls held back, as part of the current execution: [(record, ordinal)]."""
        if self._held is None:
            return []
        _, held = self._held
        self._held = None
        placed = []
        for key, record in held:
            self._seq.append(key)
            placed.append((record, self._next(key)))
        return placed

    def _confirm(self):
        period, held = self._held
        self._held = None
        self._periods[self._statement] = period
        placed = []
        for i, (key, record) in enumerate(held):
            if i % period == 0:
                self._ordinals = {}
            placed.append((record, self._next(key)))
        self._seq = [key for key, _ in held[-period:]]
        return placed

    def place(self, statement, call, key, record):
        """[(record, ordinal)] of the calls whose execution is now known, in order. `call`
        identifies the Python frame the statement called into, or is None."""
        placed = []
        if statement != self._statement or call != self._call:
            placed += self.settle()
            self._statement, self._call, self._seq, self._ordinals = statement, call, [], {}
        if self._held is None:
            position = len(self._seq)
            if call is not None or not (2 <= position < self._LONGEST and key == self._seq[0]):
                self._seq.append(key)
                return placed + [(record, self._next(key))]
            self._held = (position, [])
        period, held = self._held
        if key != self._seq[len(held) % period]:
            placed += self.settle()
            self._seq.append(key)
            return placed + [(record, self._next(key))]
        held.append((key, record))
        repeats = 1 if self._periods.get(statement) == period else 2
        if len(held) == repeats * period:
            placed += self._confirm()
        return placed
