"""What a rank sees when its peers misbehave: a collective mismatch (in every mode), a peer
that never arrives (timeout), and a peer that died. Each must raise c10d's DistBackendError naming
the collective, promptly, never hang. Launched with torchrun --nproc-per-node 2."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import torch_tpu

TIMEOUT_S = 3


def expect_error(fn, *needles):
    start = time.monotonic()
    try:
        fn()
    except dist.DistBackendError as e:
        elapsed = time.monotonic() - start
        text = str(e)
        for needle in needles:
            assert needle in text, f"{needle!r} not in the error: {text}"
        return elapsed, text
    raise AssertionError("no error raised")


def main():
    dist.init_process_group("tpu_dist", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    torch.tpu.set_device(rank)
    x = torch.ones(4, device="tpu")

    # The ranks compare their calls before moving data, so a mismatch is an error on every rank
    # naming both collectives, not a hang or a silent mix-up.
    mismatch = dist.new_group(backend="tpu_dist", timeout=timedelta(seconds=60))
    with torch_tpu.eager_mode("debug"):
        if rank == 0:
            _, text = expect_error(lambda: dist.all_reduce(x, group=mismatch), "different collectives",
                                   "all_reduce", "broadcast")
        else:
            _, text = expect_error(lambda: dist.broadcast(x, src=0, group=mismatch),
                                   "different collectives", "all_reduce", "broadcast")
        # The group stays usable after the check refused the call.
        y = torch.full((3,), float(rank + 1), device="tpu")
        dist.all_reduce(y, group=mismatch)
        assert y.cpu().tolist() == [3.0, 3.0, 3.0], y
    print(f"rank {rank}: mismatch reported: {text.splitlines()[0]}", flush=True)

    # In the other modes too the ranks compare sizes and dtypes before the data moves: Gloo, on
    # the host path, would abort the process on either mismatch.
    for mode in ["strict", "defer_and_fuse"]:
        with torch_tpu.eager_mode(mode):
            sized = torch.ones(4 + rank, device="tpu")
            expect_error(lambda: dist.all_reduce(sized, group=mismatch), "different collectives")
            typed = torch.ones(4, device="tpu", dtype=torch.float32 if rank == 0 else torch.float64)
            expect_error(lambda: dist.all_gather_into_tensor(torch.empty(8, device="tpu", dtype=typed.dtype),
                                                             typed, group=mismatch), "different collectives")
            y = torch.full((3,), float(rank + 1), device="tpu")
            dist.all_reduce(y, group=mismatch)
            assert y.cpu().tolist() == [3.0, 3.0, 3.0], y
        print(f"rank {rank}: {mode}: size and dtype mismatches reported", flush=True)

    # A peer that never arrives: rank 1 skips the collective; rank 0 times out.
    late = dist.new_group(backend="tpu_dist", timeout=timedelta(seconds=TIMEOUT_S))
    for mode in ["strict", "defer_and_fuse"]:
        with torch_tpu.eager_mode(mode):
            if rank == 0:
                elapsed, text = expect_error(lambda: dist.all_reduce(x * 2, group=late),
                                             "all_reduce", "tpu_dist")
                assert elapsed < TIMEOUT_S + 20, elapsed
                print(f"rank 0: {mode}: timed out after {elapsed:.1f} s: {text.splitlines()[0]}",
                      flush=True)
    # Let rank 0 time out in both modes before rank 1 goes on.
    dist.barrier()

    # A peer that died: rank 1 exits; rank 0's next collective fails instead of waiting forever.
    dead = dist.new_group(backend="tpu_dist", timeout=timedelta(seconds=TIMEOUT_S))
    dist.barrier(group=dead)
    if rank == 1:
        os._exit(0)
    time.sleep(0.5)
    elapsed, text = expect_error(lambda: dist.all_reduce(x, group=dead), "all_reduce")
    print(f"rank 0: dead peer reported after {elapsed:.1f} s: {text.splitlines()[0]}", flush=True)
    # The default group has a dead member too: leave without another collective.
    os._exit(0)


if __name__ == "__main__":
    main()
