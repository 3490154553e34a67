"""Every collective of tpu_dist, in each eager mode, against the same collective on CPU tensors.

Launched by tests/test_distributed.py with torchrun --nproc-per-node 2; exits non-zero on the
first mismatch."""
import os
import warnings

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import torch_tpu
import torch_tpu.distributed

# The *_into_tensor and *_tensor names are deprecated in favour of *_single, but are what users call.
warnings.filterwarnings("ignore", category=FutureWarning)
MODES = os.environ.get("MODES", "debug,strict,defer_and_fuse").split(",")


def same(actual, expected, what):
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), what
        for a, e in zip(actual, expected):
            same(a, e, what)
        return
    assert actual.device.type == "tpu", f"{what}: result left the device ({actual.device})"
    torch.testing.assert_close(actual.cpu(), expected, msg=lambda m: f"{what}: {m}")


def both(fn, *tensors):
    """Runs fn on tpu copies and on CPU copies of the tensors; returns (tpu results, cpu results)."""
    on_tpu = [t.to("tpu") for t in tensors]
    on_cpu = [t.clone() for t in tensors]
    fn(*on_tpu)
    fn(*on_cpu)
    return on_tpu, on_cpu


def check_all(rank, world):
    gen = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(6, 5, generator=gen)

    for op in [dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN,
               dist.ReduceOp.MAX]:
        t, c = both(lambda a: dist.all_reduce(a, op=op), x)
        same(t, c, f"all_reduce {op}")
    # Integer and async forms; the result lands in place, so a view of the input sees it.
    ints = torch.arange(12, dtype=torch.int64).reshape(3, 4) * (rank + 1)
    base = ints.to("tpu")
    view = base[1]
    work = dist.all_reduce(base, async_op=True)
    work.wait()
    expected = ints.clone()
    dist.all_reduce(expected)
    same(view, expected[1], "all_reduce in place through a view")
    # A non-contiguous tpu tensor.
    tt = x.to("tpu").t()
    ct = x.clone().t()
    dist.all_reduce(tt)
    dist.all_reduce(ct)
    same(tt, ct, "all_reduce of a transposed view")

    t, c = both(lambda a: dist.broadcast(a, src=1), x)
    same(t, c, "broadcast")

    t_out = [torch.empty(6, 5, device="tpu") for _ in range(world)]
    c_out = [torch.empty(6, 5) for _ in range(world)]
    dist.all_gather(t_out, x.to("tpu"))
    dist.all_gather(c_out, x)
    same(t_out, c_out, "all_gather")

    t_out = torch.empty(6 * world, 5, device="tpu")
    c_out = torch.empty(6 * world, 5)
    dist.all_gather_into_tensor(t_out, x.to("tpu"))
    dist.all_gather_into_tensor(c_out, x)
    same(t_out, c_out, "all_gather_into_tensor")
    # The stacked output NCCL also accepts (DTensor and FSDP2 pass it): [world, *shape].
    stacked = torch.empty(world, 6, 5, device="tpu")
    dist.all_gather_into_tensor(stacked, x.to("tpu"))
    same(stacked, c_out.reshape(world, 6, 5), "all_gather_into_tensor with a stacked output")

    chunks = list(torch.randn(world, 3, 2, generator=gen))
    t_out, c_out = torch.empty(3, 2, device="tpu"), torch.empty(3, 2)
    dist.reduce_scatter(t_out, [c.to("tpu") for c in chunks])
    dist.reduce_scatter(c_out, chunks)
    same(t_out, c_out, "reduce_scatter")

    big = torch.randn(world * 4, 3, generator=gen)
    t_out, c_out = torch.empty(4, 3, device="tpu"), torch.empty(4, 3)
    dist.reduce_scatter_tensor(t_out, big.to("tpu"), op=dist.ReduceOp.AVG)
    dist.reduce_scatter_tensor(c_out, big, op=dist.ReduceOp.AVG)
    same(t_out, c_out, "reduce_scatter_tensor")
    stacked_out = torch.empty(4, 3, device="tpu")
    dist.reduce_scatter_tensor(stacked_out, big.reshape(world, 4, 3).to("tpu"), op=dist.ReduceOp.AVG)
    same(stacked_out, c_out, "reduce_scatter_tensor with a stacked input")

    ins = [torch.full((2,), float(10 * rank + i)) for i in range(world)]
    t_out = [torch.empty(2, device="tpu") for _ in range(world)]
    c_out = [torch.empty(2) for _ in range(world)]
    dist.all_to_all(t_out, [i.to("tpu") for i in ins])
    dist.all_to_all(c_out, ins)
    same(t_out, c_out, "all_to_all")

    # Uneven splits: rank r sends r + 1 + i rows to rank i.
    in_splits = [rank + 1 + i for i in range(world)]
    out_splits = [r + 1 + rank for r in range(world)]
    src = torch.randn(sum(in_splits), 2, generator=gen)
    t_out = torch.empty(sum(out_splits), 2, device="tpu")
    c_out = torch.empty(sum(out_splits), 2)
    dist.all_to_all_single(t_out, src.to("tpu"), out_splits, in_splits)
    dist.all_to_all_single(c_out, src, out_splits, in_splits)
    same(t_out, c_out, "all_to_all_single with splits")
    t_out, c_out = torch.empty(6, 5, device="tpu"), torch.empty(6, 5)
    dist.all_to_all_single(t_out, x.to("tpu"))
    dist.all_to_all_single(c_out, x)
    same(t_out, c_out, "all_to_all_single")

    t, c = both(lambda a: dist.reduce(a, dst=0, op=dist.ReduceOp.MAX), x)
    if rank == 0:
        same(t, c, "reduce")

    t_list = [torch.empty(6, 5, device="tpu") for _ in range(world)] if rank == 0 else None
    c_list = [torch.empty(6, 5) for _ in range(world)] if rank == 0 else None
    dist.gather(x.to("tpu"), t_list, dst=0)
    dist.gather(x, c_list, dst=0)
    if rank == 0:
        same(t_list, c_list, "gather")

    parts = list(torch.randn(world, 4, generator=torch.Generator().manual_seed(7)))
    t_out, c_out = torch.empty(4, device="tpu"), torch.empty(4)
    dist.scatter(t_out, [p.to("tpu") for p in parts] if rank == 1 else None, src=1)
    dist.scatter(c_out, parts if rank == 1 else None, src=1)
    same(t_out, c_out, "scatter")

    dist.barrier()

    # Point to point, blocking and batched (both ranks send first: a blocking send would hang).
    peer = 1 - rank
    if rank == 0:
        dist.send(x.to("tpu"), dst=1)
    else:
        got = torch.empty(6, 5, device="tpu")
        dist.recv(got, src=0)
        same(got, torch.randn(6, 5, generator=torch.Generator().manual_seed(1234)), "send/recv")
    mine = torch.arange(4.0, device="tpu") + 100 * rank
    theirs = torch.empty(4, device="tpu")
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, peer),
                                   dist.P2POp(dist.irecv, theirs, peer)])
    for r in reqs:
        r.wait()
    same(theirs, torch.arange(4.0) + 100 * peer, "batch_isend_irecv")

    # Coalesced all_reduce, as c10d's coalescing manager issues it.
    a_t, b_t = x.to("tpu"), (x * 2).to("tpu")
    a_c, b_c = x.clone(), x * 2
    for pair in ([a_t, b_t], [a_c, b_c]):
        with dist._coalescing_manager():
            for t in pair:
                dist.all_reduce(t)
    same([a_t, b_t], [a_c, b_c], "coalesced all_reduce")
    outs_t = [torch.empty(6 * world, 5, device="tpu") for _ in range(2)]
    outs_c = [torch.empty(6 * world, 5) for _ in range(2)]
    torch_tpu.distributed.reset_staging_stats()
    for outs, ins in ((outs_t, [x.to("tpu"), (x + 1).to("tpu")]), (outs_c, [x, x + 1])):
        with dist._coalescing_manager():
            for o, i in zip(outs, ins):
                dist.all_gather_into_tensor(o, i)
    same(outs_t, outs_c, "coalesced all_gather_into_tensor")
    # One operation for both tensors: the coalescing manager's request reached the backend.
    assert torch_tpu.distributed.staging_stats()["operations"] == 1
    outs_t = [torch.empty(4, 3, device="tpu") for _ in range(2)]
    outs_c = [torch.empty(4, 3) for _ in range(2)]
    for outs, ins in ((outs_t, [big.to("tpu"), (big * 3).to("tpu")]), (outs_c, [big, big * 3])):
        with dist._coalescing_manager():
            for o, i in zip(outs, ins):
                dist.reduce_scatter_tensor(o, i)
    same(outs_t, outs_c, "coalesced reduce_scatter_tensor")

    # Functional collectives (DTensor's path): out of place, waited for on use.
    group = dist.group.WORLD
    r_t = funcol.all_reduce(x.to("tpu"), "sum", group)
    r_c = funcol.all_reduce(x.clone(), "sum", group)
    same(funcol.wait_tensor(r_t), funcol.wait_tensor(r_c), "functional all_reduce")
    g_t = funcol.all_gather_tensor(x.to("tpu"), 0, group)
    g_c = funcol.all_gather_tensor(x.clone(), 0, group)
    same(funcol.wait_tensor(g_t), funcol.wait_tensor(g_c), "functional all_gather_tensor")
    s_t = funcol.reduce_scatter_tensor(big.to("tpu"), "sum", 0, group)
    s_c = funcol.reduce_scatter_tensor(big.clone(), "sum", 0, group)
    same(funcol.wait_tensor(s_t), funcol.wait_tensor(s_c), "functional reduce_scatter_tensor")
    a_t = funcol.all_to_all_single(src.to("tpu"), out_splits, in_splits, group)
    a_c = funcol.all_to_all_single(src.clone(), out_splits, in_splits, group)
    same(funcol.wait_tensor(a_t), funcol.wait_tensor(a_c), "functional all_to_all_single")

    # The staging accounts for what it moved: one all_reduce of 64 KiB goes to the host and back.
    staged = torch.randn(16384).to("tpu")
    torch_tpu.distributed.reset_staging_stats()
    dist.all_reduce(staged)
    stats = torch_tpu.distributed.staging_stats()
    assert stats["operations"] == 1, stats
    assert stats["bytes_to_host"] == stats["bytes_to_device"] == 16384 * 4, stats
    assert stats["total_seconds"] >= stats["to_host_seconds"] + stats["to_device_seconds"], stats

    # Bad arguments raise what they raise for CPU tensors.
    errors = {}
    for device in ("cpu", "tpu"):
        try:
            dist.all_gather([torch.empty(6, 5, device=device)], x.to(device))
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            errors[device] = (type(e), str(e).splitlines()[0])
        else:
            raise AssertionError(f"all_gather with too few outputs on {device} did not raise")
    assert errors["cpu"] == errors["tpu"], errors

    # Object collectives ride on the same group's CPU path.
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in range(world)], objs


def main():
    dist.init_process_group("tpu_dist")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.tpu.set_device(rank % torch.tpu.device_count())
    assert dist.get_backend() == "tpu_dist"
    for mode in MODES:
        with torch_tpu.eager_mode(mode):
            check_all(rank, world)
            torch.tpu.synchronize()
        print(f"rank {rank}: collectives agree with CPU in {mode}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
