"""Where a tpu tensor would leave the process or the framework without its device: pickling for
another process (multiprocessing queues, pipes) and DLPack. Both refuse, where the user made the
call, with a message that says what to do, instead of failing somewhere the user cannot see (a
queue's feeder thread, leaving the consumer waiting forever) or with an unrelated error.
_torch_patches installs these wrappers."""
import itertools
import threading

import torch

_NO_SHARING = ("tpu tensors cannot be sent to another process: the tpu device's buffers belong to the "
               "process that made them (there is no inter-process memory handle, unlike CUDA IPC). Move "
               "the tensor to the CPU first (tensor.cpu()) and back to the device in the receiving process.")

_NO_DLPACK = ("tpu tensors cannot be exported through DLPack: a PJRT device buffer has no address that "
              "another library could use. Copy it to the host first, e.g. torch.from_dlpack(tensor.cpu()).")


def _refuse_in_receiver(message):
    """Runs where the pickle is loaded: what reached a queue's feeder thread (where raising would
    only print, leaving the receiver waiting forever) raises in the receiver's get() instead."""
    raise RuntimeError(message)


def _on_tpu(obj):
    device = getattr(obj, "device", None)
    return isinstance(device, torch.device) and device.type == "tpu"


def _holds_tpu_data(obj, depth=0):
    """Whether obj is, or a container a few levels deep holds, a tpu tensor or storage."""
    if isinstance(obj, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
        return _on_tpu(obj)
    if depth >= 4:
        return False
    if isinstance(obj, dict):
        obj = obj.values()
    elif not isinstance(obj, (list, tuple, set, frozenset)):
        return False
    return any(_holds_tpu_data(item, depth + 1) for item in itertools.islice(obj, 1000))


def refusing_tpu(reduce):
    """A ForkingPickler reducer that refuses tpu tensors and storages and leaves the rest to
    `reduce` (torch.multiprocessing's: shared memory for CPU, IPC handles for CUDA)."""
    def reduce_unless_tpu(obj):
        if _on_tpu(obj):
            if threading.current_thread().name == "QueueFeederThread":
                return _refuse_in_receiver, (_NO_SHARING,)
            raise RuntimeError(_NO_SHARING)
        return reduce(obj)
    return reduce_unless_tpu


def refusing_put(queue_put):
    """multiprocessing.queues.Queue.put, refusing tpu data. put() only hands the object to a
    feeder thread, which pickles it later: the caller would never see the error. (Pipes and
    SimpleQueue pickle in the caller, so their send()/put() raises through refusing_tpu.)"""
    def put(self, obj, block=True, timeout=None):
        if _holds_tpu_data(obj):
            raise RuntimeError(_NO_SHARING)
        return queue_put(self, obj, block, timeout)

    put.__doc__ = queue_put.__doc__
    return put


def refusing_dlpack(export):
    """A DLPack export (Tensor.__dlpack__, Tensor.__dlpack_device__, or the legacy capsule
    export to_dlpack, which does not go through __dlpack__) that raises for a tpu tensor."""
    def refuse_tpu(tensor, *args, **kwargs):
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "tpu":
            raise BufferError(_NO_DLPACK)
        return export(tensor, *args, **kwargs)

    refuse_tpu.__doc__ = export.__doc__
    refuse_tpu.__name__ = refuse_tpu.__qualname__ = export.__name__
    return refuse_tpu
