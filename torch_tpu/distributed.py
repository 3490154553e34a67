"""The "tpu_dist" backend for torch.distributed.

A CUDA program changes "nccl" to "tpu_dist" (or names no backend and passes
device_id=torch.device("tpu", rank)); torchrun launches it as before. The backend serves tpu
tensors and, so that object collectives and CPU-side bookkeeping work in the same process group,
CPU tensors too.

Transport: where one PJRT client drives the devices of every rank of a group (the ranks are
threads of one process), all_reduce, broadcast, all_gather, reduce_scatter and even all_to_all
run as one replicated XLA program over the ranks' devices. Where each process has its own PJRT
client (the CPU plugin under torchrun, one process per device), and for the other operations,
tpu tensors are staged through host memory and moved by a Gloo backend held inside ours; CPU
tensors go to that Gloo backend directly. TORCH_TPU_DIST_TRANSPORT=host sends everything the host
way. See the README's Distributed section.
"""
import os
import socket
import uuid
from datetime import timedelta

import torch

from . import _C

BACKEND_NAME = "tpu_dist"

__all__ = ["BACKEND_NAME", "is_available", "transport_of", "staging_stats", "reset_staging_stats"]


def is_available():
    return torch.distributed.is_available() and torch.distributed.is_gloo_available()


def _create_backend(dist_backend_opts, backend_options):
    """c10d's creator (extended API): called once per process group with its store, rank, size and
    timeout."""
    import torch.distributed as dist

    # Our own prefix: a Gloo backend for the CPU in the same group ("cpu:gloo,tpu:tpu_dist")
    # rendezvouses through the same store, and the two must not read each other's keys.
    store = dist.PrefixStore(f"{BACKEND_NAME}/", dist_backend_opts.store)
    timeout = dist_backend_opts.timeout
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout))
    rank, size = dist_backend_opts.group_rank, dist_backend_opts.group_size
    transport = dist.ProcessGroupGloo(store, rank, size, timeout)
    return _C.ProcessGroupTPU(transport, rank, size, timeout, _replica_group(store, rank, size))


def _replica_group(store, rank, size):
    """A name the ranks of a group share when all of them live in this process, where one PJRT
    client drives every rank's device; "" otherwise (each process has its own client)."""
    if os.environ.get("TORCH_TPU_DIST_TRANSPORT", "") == "host":
        return ""
    here = f"{socket.gethostname()}:{os.getpid()}"
    store.set(f"process/{rank}", here)
    if any(store.get(f"process/{r}").decode() != here for r in range(size)):
        return ""
    if rank == 0:
        store.set("replica_group", uuid.uuid4().hex)
    return store.get("replica_group").decode()


def transport_of(group=None):
    """The Gloo backend that moves a process group's tpu tensors on this platform."""
    return _backend_of(group).transport


def _backend_of(group):
    import torch.distributed as dist

    return (group or dist.group.WORLD)._get_backend(torch.device("tpu"))


def staging_stats(group=None):
    """Where this process's blocking tpu_dist operations spent their time, summed since the last
    reset: flush_seconds (running the pending graph the collective waited for), to_host_seconds,
    transport_seconds (Gloo, including waiting for the slower ranks), to_device_seconds,
    total_seconds; with operations, bytes_to_host and bytes_to_device."""
    return dict(_backend_of(group).staging_stats())


def reset_staging_stats(group=None):
    _backend_of(group).reset_staging_stats()


def _register():
    if not is_available():
        return
    import torch.distributed as dist

    if BACKEND_NAME in dist.Backend.backend_list:
        return
    # "cpu" as well: object collectives (all_gather_object, DCP's planning) use CPU tensors on the
    # default group, and a group whose only backend is ours must carry them. The default backend
    # of the CPU stays Gloo: register_backend only fills device slots that have none.
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True,
                                  devices=["tpu", "cpu"])
