"""An op call's signature (what a program's key depends on) and what changed between two."""
import torch

# Arguments that say where or how a result lives, not what the program computes on.
_IGNORED_TYPES = (torch.device, torch.layout, torch.memory_format)


_DTYPE_NAMES = {}
_ARGUMENT_NAMES = {}


def _describe_value(value):
    if isinstance(value, torch.Tensor):
        dtype = _DTYPE_NAMES.get(value.dtype)
        if dtype is None:
            dtype = _DTYPE_NAMES[value.dtype] = str(value.dtype).replace("torch.", "")
        return ("tensor", dtype, tuple(value.shape), value.stride())
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, torch.Tensor) for v in value):
            return ("tensors",) + tuple(_describe_value(v) for v in value)
        return tuple(_describe_value(v) for v in value)
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    if isinstance(value, _IGNORED_TYPES):
        return None
    if isinstance(value, torch.SymInt):
        return int(value)
    return type(value).__name__


def signature(func, args, kwargs, outputs):
    """A hashable summary: per argument, its name and (for tensors) dtype, sizes and strides, or
    its value (a compiled graph's numbers are its constants); then the results, whose sizes a
    factory's or a view's numbers decide."""
    names = _ARGUMENT_NAMES.get(func)
    if names is None:
        names = _ARGUMENT_NAMES[func] = [a.name for a in func._schema.arguments]
    parts = [(names[i] if i < len(names) else str(i), _describe_value(v)) for i, v in enumerate(args)]
    parts += [(k, _describe_value(v)) for k, v in sorted(kwargs.items())]
    parts.append(("result", _describe_value(outputs[0]) if len(outputs) == 1 else _describe_value(outputs)))
    return tuple(parts)


_DERIVED = {}


def _derived(sig):
    """(tensor_key, sizes_only) of a signature, computed once per distinct signature."""
    derived = _DERIVED.get(sig)
    if derived is None:
        if len(_DERIVED) > 65536:
            _DERIVED.clear()
        derived = _DERIVED[sig] = (
            tuple((name, value) for name, value in sig
                  if _is_tensor(value) or (isinstance(value, tuple) and value[:1] == ("tensors",))),
            tuple((name, value[2] if _is_tensor(value) else value) for name, value in sig))
    return derived


def tensor_key(sig):
    """The part of a signature an eager program's key depends on: its tensors' dtypes, sizes and
    strides (numbers are the program's runtime arguments)."""
    return _derived(sig)[0]


def _tensor_changes(name, old, new):
    _, old_dtype, old_shape, old_strides = old
    _, new_dtype, new_shape, new_strides = new
    changes = []
    if old_dtype != new_dtype:
        changes.append(f"`{name}` dtype {old_dtype} -> {new_dtype}")
    if len(old_shape) != len(new_shape):
        changes.append(f"`{name}` rank {len(old_shape)} -> {len(new_shape)} (shape {list(old_shape)} -> "
                       f"{list(new_shape)})")
    elif old_shape != new_shape:
        dims = [f"dim {d}: {a} -> {b}" for d, (a, b) in enumerate(zip(old_shape, new_shape)) if a != b]
        changes.append(f"`{name}` shape {list(old_shape)} -> {list(new_shape)} ({', '.join(dims)})")
    elif old_strides != new_strides:
        changes.append(f"`{name}` layout: strides {list(old_strides)} -> {list(new_strides)}")
    return changes


def _is_tensor(value):
    return isinstance(value, tuple) and len(value) == 4 and value[0] == "tensor"


def describe_change(old, new):
    """What differs between two signatures of one op, in words: its tensors' shapes, dtypes and
    layouts, else its result's (sized by numbers: a factory, a view), else its numbers."""
    old_parts = dict(old)
    tensors, result, numbers = [], [], []
    for name, value in new:
        before = old_parts.get(name)
        if before == value:
            continue
        into = result if name == "result" else tensors
        if _is_tensor(before) and _is_tensor(value):
            into += _tensor_changes(name, before, value)
        elif (isinstance(before, tuple) and isinstance(value, tuple) and before[:1] == ("tensors",)
              and value[:1] == ("tensors",) and len(before) == len(value)):
            for i, (a, b) in enumerate(zip(before[1:], value[1:])):
                if a != b and _is_tensor(a) and _is_tensor(b):
                    into += _tensor_changes(f"{name}[{i}]", a, b)
        else:
            numbers.append(f"`{name}` {_plain(before)} -> {_plain(value)}")
    if tensors:
        return "; ".join(tensors)
    if result:
        return "; ".join(result) + (f" (from {', '.join(numbers)})" if numbers else "")
    return "; ".join(numbers) or "same arguments (the program was evicted from the cache)"


def _plain(value):
    if isinstance(value, tuple):
        return "[" + ", ".join(str(_plain(v)) for v in value) + "]"
    return value


def tensor_parts(sig):
    """[(name, dtype, shape)] of the signature's tensor arguments, in order."""
    out = []
    for name, value in sig:
        if _is_tensor(value):
            out.append((name, value[1], value[2]))
    return out


def sizes_only(sig):
    """The signature with dtypes and layouts dropped: two calls with equal sizes_only differ only
    in layout or dtype."""
    return _derived(sig)[1]
