"""Where a tpu tensor would leave the process or the framework without its device: pickling for
another process (multiprocessing queues, pipes) and DLPack. Both refuse, where the user made the
call, with a message that says what to do, instead of failing somewhere the user cannot see (a
queue's feeder thread, leaving the consumer waiting forever) or with an unrelated error."""
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


def _refusing_tpu(reduce):
    def reduce_unless_tpu(obj):
        if _on_tpu(obj):
            if threading.current_thread().name == "QueueFeederThread":
                return _refuse_in_receiver, (_NO_SHARING,)
            raise RuntimeError(_NO_SHARING)
        return reduce(obj)
    return reduce_unless_tpu


def _install_multiprocessing_refusal():
    # torch.multiprocessing registers its reducers (shared memory for CPU, IPC handles for CUDA)
    # for every tensor and storage class when imported; wrap each one. Pipes and SimpleQueue
    # pickle in the caller, so their send()/put() raises.
    import multiprocessing.queues

    import torch.multiprocessing  # noqa: F401  (registers torch's reducers first)
    from multiprocessing.reduction import ForkingPickler

    for cls, reduce in list(ForkingPickler._extra_reducers.items()):
        if isinstance(cls, type) and issubclass(cls, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
            if not getattr(reduce, "_tpu_refusing", False):
                wrapped = _refusing_tpu(reduce)
                wrapped._tpu_refusing = True
                ForkingPickler.register(cls, wrapped)

    # multiprocessing.Queue.put only hands the object to a feeder thread, which pickles it later:
    # look for tpu data at put() so that the caller gets the error.
    queue_put = multiprocessing.queues.Queue.put
    if getattr(queue_put, "_tpu_refusing", False):
        return

    def put(self, obj, block=True, timeout=None):
        if _holds_tpu_data(obj):
            raise RuntimeError(_NO_SHARING)
        return queue_put(self, obj, block, timeout)

    put._tpu_refusing = True
    put.__doc__ = queue_put.__doc__
    multiprocessing.queues.Queue.put = put


def _install_dlpack_refusal():
    tensor_dlpack, tensor_dlpack_device = torch.Tensor.__dlpack__, torch.Tensor.__dlpack_device__

    def __dlpack__(self, *args, **kwargs):
        if self.device.type == "tpu":
            raise BufferError(_NO_DLPACK)
        return tensor_dlpack(self, *args, **kwargs)

    def __dlpack_device__(self):
        if self.device.type == "tpu":
            raise BufferError(_NO_DLPACK)
        return tensor_dlpack_device(self)

    __dlpack__.__doc__ = tensor_dlpack.__doc__
    __dlpack_device__.__doc__ = tensor_dlpack_device.__doc__
    torch.Tensor.__dlpack__ = __dlpack__
    torch.Tensor.__dlpack_device__ = __dlpack_device__

    # The legacy capsule export does not go through __dlpack__.
    legacy_to_dlpack = torch.utils.dlpack.to_dlpack

    def to_dlpack(tensor):
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "tpu":
            raise BufferError(_NO_DLPACK)
        return legacy_to_dlpack(tensor)

    to_dlpack.__doc__ = legacy_to_dlpack.__doc__
    torch.utils.dlpack.to_dlpack = torch.to_dlpack = to_dlpack


def install():
    _install_multiprocessing_refusal()
    _install_dlpack_refusal()

