"""What must finish at exit while Python and the PJRT plugin are still whole.

Background compiles. A quick program's full compile may still be running on its background
thread when the script ends. If it still runs while the C++ exit handlers destroy the plugin's
static objects, the compile spins or crashes. Here, first, the queued compiles are dropped and
the one in flight is awaited.

The autograd engine's tpu device threads.

Every backward pass stores a Python object (the caller's contextvars context) in its graph task's
thread-local state, and the tensors it returns or accumulates into have Python objects too. The
graph task usually ends on a device thread: it runs the last node, wakes the caller, and only then
drops its reference. When the program exits right after a backward, that release can come after
Python has started finalizing. It then needs the GIL, the interpreter ends the thread with
pthread_exit, the unwind meets a noexcept destructor, and the process aborts with "terminate called
without an active exception", after all its work was done.

The cure is ordering: at exit, while Python is still whole, one more backward goes through each
device thread, built in C++ so that nothing in it is tied to Python (csrc/python/
autograd_shutdown_bindings.cpp). A device thread takes its next task only after releasing the
previous one, so when that backward returns, every earlier graph task has been released. It
allocates two empty scalars per device and runs no program.
"""
import atexit
import os

from . import _C


def _autograd_device_threads_started():
    # The engine names its device threads pt_autograd_<index>. Where /proc cannot tell, assume so.
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return True
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                if comm.read().startswith("pt_autograd_"):
                    return True
        except OSError:
            continue
    return False


def drain_device_threads():
    if not _C._is_available() or not _autograd_device_threads_started():
        return
    try:
        for index in range(_C._device_count()):
            _C._drain_autograd_device_thread(index)
    except Exception:  # noqa: BLE001 - the process is exiting; a failed courtesy must not fail it
        pass


def stop_background_compiles():
    _C._stop_compile_upgrades()  # touches no device: nothing to do when no program was upgraded


def register():
    # atexit runs the last registered first.
    atexit.register(drain_device_threads)
    atexit.register(stop_background_compiles)
