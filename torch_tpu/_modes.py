"""The eager-mode API, with the names TorchTPU's users already know.

strict (DEFER_NEVER, the default) runs every op as its own program without waiting for it;
debug (DEFER_NEVER_AND_LAUNCH_BLOCKING) also waits after every op, so an error names the op and
the Python line that issued it; defer_and_fuse (DEFER_AND_FUSE, alias "fused") records ops into
the thread's pending graph and runs it as one program at the next sync point.
The mode is per thread, like autocast state, and so is the pending graph.
"""
import contextlib
import enum
import functools
import os
import warnings

import torch

from . import _C


class EagerMode(enum.Enum):
    DEFER_NEVER_AND_LAUNCH_BLOCKING = 0
    DEFER_NEVER = 1
    DEFER_AND_FUSE = 2


_NAMES = {
    "debug": EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING,
    "strict": EagerMode.DEFER_NEVER,
    "defer_and_fuse": EagerMode.DEFER_AND_FUSE,
    "fused": EagerMode.DEFER_AND_FUSE,
}
_NAMES.update({m.name.lower(): m for m in EagerMode})


def _resolve(mode):
    if isinstance(mode, EagerMode):
        return mode
    if isinstance(mode, str) and mode.lower() in _NAMES:
        return _NAMES[mode.lower()]
    valid = ", ".join(sorted(repr(n) for n in _NAMES))
    raise ValueError(f"unknown tpu eager mode {mode!r}; use a torch_tpu.EagerMode or one of {valid}")


def set_eager_mode(mode):
    """Selects the eager mode of the calling thread. The thread's pending ops run first (other
    threads' pending graphs are theirs: flushing them would cut their graphs at random points)."""
    resolved = _resolve(mode)
    if _C._get_mode() != resolved.value and _C._is_available():
        _C._flush("mode change")
    _C._set_mode(resolved.value)


def get_eager_mode():
    return EagerMode(_C._get_mode())


@contextlib.contextmanager
def eager_mode(mode):
    """Runs the block in `mode`, then restores the previous mode."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)


def _flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def mode_from_environment():
    """TPU_LAUNCH_BLOCKING=1 first, then TORCH_TPU_EAGER_MODE=<name>, then
    TORCH_TPU_DEFER_AND_FUSE=1 (or the legacy TPU_DEFER_AND_FUSE=1); strict otherwise."""
    if _flag("TPU_LAUNCH_BLOCKING"):
        return EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
    named = os.environ.get("TORCH_TPU_EAGER_MODE")
    if named:
        try:
            return _resolve(named)
        except ValueError as error:
            # This runs while `import torch` loads the backend: a typo must not break the import.
            warnings.warn(f"TORCH_TPU_EAGER_MODE: {error}; running in strict mode", stacklevel=2)
            return EagerMode.DEFER_NEVER
    if _flag("TORCH_TPU_DEFER_AND_FUSE") or _flag("TPU_DEFER_AND_FUSE"):
        return EagerMode.DEFER_AND_FUSE
    return EagerMode.DEFER_NEVER


def following_the_caller(run_backward):
    """torch.autograd.graph._engine_run_backward, made to run the autograd engine's device threads
    in the mode of the thread that called backward(), recording into that thread's pending graph,
    as they get its autocast state (otherwise a fused forward would be followed by a strict
    backward, and two threads' backward passes would share one mode). Each backward pass carries
    its own context, so concurrent passes from threads in different modes do not mix.
    _torch_patches installs it."""

    def engine_run_backward(*args, **kwargs):
        _C._enter_backward()
        try:
            return run_backward(*args, **kwargs)
        finally:
            _C._exit_backward()

    return engine_run_backward


def _updates_tpu(optimizer):
    # A CPU model's optimizer never reaches the executor (nor, in a process forked after the
    # device was used, the executor's refusal to run there).
    return any(p.device.type == "tpu" for group in optimizer.param_groups for p in group["params"])


def optimizer_steps_as_one_program(profile_hook_step):
    """torch.optim.Optimizer.profile_hook_step (the wrapper every optimizer's step gets), made to
    run a strict-mode step as one program, as CUDA's fused=True kernels run it: recorded as in
    defer-and-fuse and flushed when the step returns or raises. Op by op, foreach AdamW keeps a
    parameter-sized temporary per call alive between programs (the denominators); as one program
    the old buffers are donated and the step needs almost nothing beyond its state. Argument checks still raise at the op that fails. A step given a closure
    (LBFGS and friends run forward and backward inside it) stays op by op, and so does a step
    traced by torch.compile. _torch_patches installs it."""

    def hooked(step):
        @functools.wraps(step)
        def step_as_one_program(*args, **kwargs):
            if (torch.compiler.is_compiling() or _C._get_mode() != EagerMode.DEFER_NEVER.value
                    or len(args) > 1 or kwargs.get("closure") is not None or not _updates_tpu(args[0])):
                return step(*args, **kwargs)
            previous = _C._swap_thread_mode(EagerMode.DEFER_AND_FUSE.value)
            try:
                return step(*args, **kwargs)
            finally:
                # What was recorded before an error still runs, as it would have op by op.
                _C._swap_thread_mode(previous)
                _C._flush("optimizer step")

        # Inside the wrapper: the step hooks run outside the group, in the caller's mode.
        return profile_hook_step(step_as_one_program)

    return hooked
