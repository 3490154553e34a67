"""tpu_dist where one PJRT client drives every rank's device: the ranks are threads of this process
(the CPU plugin exposes several devices), and the collectives XLA has run as one replicated XLA
program over the ranks' devices. Results are compared with the same collective computed on the
CPU from every rank's input, in all three eager modes."""
import datetime
import threading
import types

import pytest
import torch
import torch.distributed as dist

import torch_tpu
from torch_tpu import distributed as tpu_dist

c10d = pytest.importorskip("torch._C._distributed_c10d")
RANKS = 2
MODES = ["debug", "strict", "defer_and_fuse"]
pytestmark = [
    pytest.mark.skipif(not tpu_dist.is_available(), reason="this torch build has no torch.distributed with Gloo"),
    pytest.mark.skipif(torch.tpu.device_count() < RANKS,
                       reason=f"the plugin exposes fewer than {RANKS} devices (TORCH_TPU_CPU_DEVICES)"),
]


def run_ranks(body, mode, timeout_s=30, ranks=RANKS):
    """body(rank, backend) on one thread per rank, each on its own device and in `mode`; returns
    what each returned, and raises the first rank's error."""
    store = dist.HashStore()
    results, errors = {}, {}

    def main(rank):
        try:
            torch.tpu.set_device(rank)
            opts = types.SimpleNamespace(store=store, group_rank=rank, group_size=ranks,
                                         timeout=datetime.timedelta(seconds=timeout_s))
            backend = tpu_dist._create_backend(opts, None)
            with torch_tpu.eager_mode(mode):
                results[rank] = body(rank, backend)
                torch.tpu.synchronize()
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            errors[rank] = error

    threads = [threading.Thread(target=main, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s * 3)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    if errors:
        raise errors[min(errors)]
    return results


def rank_input(rank, dtype=torch.float32, n=12):
    # A generator of its own: the ranks' threads would race for the global one.
    generator = torch.Generator().manual_seed(100 + rank)
    if dtype == torch.bool:
        return torch.rand(n, generator=generator) > 0.5
    if dtype.is_floating_point:
        return torch.randn(n, generator=generator).to(dtype)
    return torch.randint(-5, 6, (n,), dtype=dtype, generator=generator)


def on_device(rank, cpu):
    # Made by a device op, so that in defer_and_fuse the collective must first run pending work.
    return (cpu.to(f"tpu:{rank}") * 1) if cpu.dtype != torch.bool else cpu.to(f"tpu:{rank}").clone()


CPU_REDUCE = {
    "SUM": lambda xs: sum(x.double() for x in xs),
    "AVG": lambda xs: sum(x.double() for x in xs) / len(xs),
    "PRODUCT": lambda xs: torch.stack([x.double() for x in xs]).prod(0),
    "MIN": lambda xs: torch.stack([x.double() for x in xs]).amin(0),
    "MAX": lambda xs: torch.stack([x.double() for x in xs]).amax(0),
}


def reduce_on_cpu(op, xs):
    if xs[0].dtype == torch.bool:
        return {"SUM": torch.stack(xs).any(0), "MAX": torch.stack(xs).any(0), "MIN": torch.stack(xs).all(0),
                "PRODUCT": torch.stack(xs).all(0)}[op]
    out = CPU_REDUCE[op](xs)
    if not xs[0].dtype.is_floating_point:
        out = out.trunc()
    return out.to(xs[0].dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype, ops", [
    (torch.float32, ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]),
    (torch.bfloat16, ["SUM", "MAX"]),
    (torch.int64, ["SUM", "MIN", "PRODUCT"]),
    (torch.bool, ["SUM", "MIN"]),
], ids=["float32", "bfloat16", "int64", "bool"])
def test_all_reduce_runs_as_one_program_and_agrees_with_cpu(mode, dtype, ops):
    def body(rank, backend):
        out = {}
        for op in ops:
            t = on_device(rank, rank_input(rank, dtype))
            opts = c10d.AllreduceOptions()
            opts.reduceOp = getattr(dist.ReduceOp, op)
            backend.allreduce([t], opts).wait()
            out[op] = t.cpu()
        return out, backend.replicated_collectives

    results = run_ranks(body, mode)
    inputs = [rank_input(r, dtype) for r in range(RANKS)]
    for rank, (out, replicated) in results.items():
        assert replicated == len(ops), "a collective took the host path"
        for op in ops:
            torch.testing.assert_close(out[op], reduce_on_cpu(op, inputs), msg=f"{op} on rank {rank}")


@pytest.mark.parametrize("mode", MODES)
def test_broadcast_gather_scatter_and_all_to_all_agree_with_cpu(mode):
    n = 8

    def body(rank, backend):
        device = f"tpu:{rank}"
        x = on_device(rank, rank_input(rank, n=n)).reshape(2, 4)  # a 2-D operand: c10d flattens it
        b = x.clone()
        broadcast = c10d.BroadcastOptions()
        broadcast.rootRank = 1
        backend.broadcast([b], broadcast).wait()
        gathered = torch.empty(RANKS * 2, 4, device=device)
        backend._allgather_base(gathered, x, c10d.AllgatherOptions()).wait()
        parts = [torch.empty(2, 4, device=device) for _ in range(RANKS)]
        backend.allgather([parts], [x], c10d.AllgatherOptions()).wait()
        scattered = torch.empty(n // RANKS, device=device)
        backend._reduce_scatter_base(scattered, x.reshape(-1), c10d.ReduceScatterOptions()).wait()
        exchanged = torch.empty(n, device=device)
        backend.alltoall_base(exchanged, x.reshape(-1), [], [], c10d.AllToAllOptions()).wait()
        return (b.cpu(), gathered.cpu(), [p.cpu() for p in parts], scattered.cpu(), exchanged.cpu(),
                backend.replicated_collectives)

    results = run_ranks(body, mode)
    xs = [rank_input(r, n=n) for r in range(RANKS)]
    total = sum(xs)
    for rank, (b, gathered, parts, scattered, exchanged, replicated) in results.items():
        assert replicated == 5
        torch.testing.assert_close(b, xs[1].reshape(2, 4))
        torch.testing.assert_close(gathered, torch.cat(xs).reshape(RANKS * 2, 4))
        for r in range(RANKS):
            torch.testing.assert_close(parts[r], xs[r].reshape(2, 4))
        chunk = n // RANKS
        torch.testing.assert_close(scattered, total[rank * chunk:(rank + 1) * chunk])
        torch.testing.assert_close(exchanged, torch.cat([x[rank * chunk:(rank + 1) * chunk] for x in xs]))


def test_a_repeated_collective_compiles_once():
    before = torch_tpu._C._collective_programs()

    def body(rank, backend):
        for step in range(4):
            t = on_device(rank, rank_input(rank))
            backend.allreduce([t], c10d.AllreduceOptions()).wait()

    run_ranks(body, "strict")
    after = torch_tpu._C._collective_programs()
    assert after["run"] - before["run"] == 4
    assert after["compiled"] - before["compiled"] <= 1


def test_uneven_all_to_all_takes_the_host_path_and_agrees_with_cpu():
    def body(rank, backend):
        x = on_device(rank, rank_input(rank, n=5))
        in_splits = [2, 3] if rank == 0 else [4, 1]
        out_splits = [2, 4] if rank == 0 else [3, 1]
        out = torch.empty(sum(out_splits), device=f"tpu:{rank}")
        backend.alltoall_base(out, x, out_splits, in_splits, c10d.AllToAllOptions()).wait()
        return out.cpu(), backend.replicated_collectives

    results = run_ranks(body, "strict")
    x0, x1 = rank_input(0, n=5), rank_input(1, n=5)
    torch.testing.assert_close(results[0][0], torch.cat([x0[:2], x1[:4]]))
    torch.testing.assert_close(results[1][0], torch.cat([x0[2:], x1[4:]]))
    assert results[0][1] == results[1][1] == 0


def test_a_rank_that_never_arrives_gets_the_timeout_error_naming_the_collective():
    def body(rank, backend):
        if rank == 0:
            backend.allreduce([on_device(rank, rank_input(rank))], c10d.AllreduceOptions()).wait()

    with pytest.raises(dist.DistBackendError, match="all_reduce timed out on rank 0"):
        run_ranks(body, "strict", timeout_s=2)


def test_ranks_calling_different_collectives_get_an_error_naming_both():
    def body(rank, backend):
        t = on_device(rank, rank_input(rank))
        if rank == 0:
            backend.allreduce([t], c10d.AllreduceOptions()).wait()
        else:
            backend.broadcast([t], c10d.BroadcastOptions()).wait()

    with pytest.raises(dist.DistBackendError, match="rank 0 called all_reduce.*rank 1 called broadcast"):
        run_ranks(body, "debug", timeout_s=10)
