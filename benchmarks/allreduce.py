"""all_reduce bus bandwidth: tpu_dist on tpu tensors next to Gloo on CPU tensors, same run.

Launch with torchrun (`torchrun --nproc-per-node 2 benchmarks/allreduce.py`). One process group
serves both: "cpu:gloo,tpu:tpu_dist". For each size (float32, 4 KiB to 64 MiB) the figure is the
median over iterations of the slowest rank's time, as bus bandwidth (algorithm bandwidth times
2(n-1)/n, the convention of nccl-tests). On the CPU plugin tpu_dist stages through host memory, so
each tpu size also gets the backend's own breakdown (torch_tpu.distributed.staging_stats(), rank
0's mean per call, next to that mean): device -> host copy, the Gloo transport (which includes
waiting for the slower rank), host -> device copy. Rank 0 prints a table and, last, a JSON line.

`python benchmarks/allreduce.py --threads 2` instead runs the ranks as threads of one process, one
device each, where one PJRT client spans the devices: tpu_dist then runs all_reduce as one
replicated XLA program. It reports that path next to tpu_dist's host path and Gloo on CPU tensors,
all three measured in the same run over the same ranks.
"""
import argparse
import datetime
import json
import statistics
import threading
import time
import types

import torch
import torch.distributed as dist

import torch_tpu.distributed as tpu_dist


def slowest(seconds):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def timed(fn, iters, sync):
    samples = []
    for _ in range(iters):
        dist.barrier()
        start = time.perf_counter()
        fn()
        sync()
        samples.append(slowest(time.perf_counter() - start))
    return statistics.median(samples)


def busbw_gbps(nbytes, seconds, world):
    return nbytes / seconds * 2 * (world - 1) / world / 1e9


def sizes_of(args):
    sizes = []
    size = args.min_kib * 1024
    while size <= args.max_mib * 1024 * 1024:
        sizes.append(size)
        size *= 4
    return sizes


def iterations(args, nbytes):
    return args.iters if nbytes <= 16 * 1024 * 1024 else max(3, args.iters // 3)


def threads_main(args):
    """Ranks as threads sharing this process's PJRT client: replicated XLA program vs host path
    vs Gloo on CPU tensors."""
    from torch._C._distributed_c10d import AllreduceOptions

    from torch_tpu import _C

    world = args.threads
    assert torch.tpu.device_count() >= world, f"needs {world} devices (TORCH_TPU_CPU_DEVICES)"
    store = torch.distributed.HashStore()
    barrier = threading.Barrier(world)
    times = {}  # (path, bytes) -> per-iteration list of per-rank seconds
    ready = {}

    def rank_main(rank):
        torch.tpu.set_device(rank)
        opts = types.SimpleNamespace(store=store, group_rank=rank, group_size=world,
                                     timeout=datetime.timedelta(seconds=300))
        xla = tpu_dist._create_backend(opts, None)
        assert xla.spans_devices
        host_path = _C.ProcessGroupTPU(xla.transport, rank, world, datetime.timedelta(seconds=300))
        paths = {"xla": (xla, "tpu"), "host": (host_path, "tpu"), "gloo": (xla.transport, "cpu")}
        for nbytes in sizes_of(args):
            host = torch.randn(nbytes // 4)
            on_device = host.to(f"tpu:{rank}")
            for name, (backend, where) in paths.items():
                t = on_device if where == "tpu" else host
                for i in range(iterations(args, nbytes) + 1):  # the first compiles and connects
                    barrier.wait()
                    start = time.perf_counter()
                    backend.allreduce([t], AllreduceOptions()).wait()
                    torch.tpu.synchronize()
                    if i:
                        times.setdefault((name, nbytes), {}).setdefault(i, []).append(time.perf_counter() - start)
        ready[rank] = xla.replicated_collectives

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ready) == world, "a rank failed"

    def busbw(name, nbytes):
        seconds = statistics.median(max(v) for v in times[(name, nbytes)].values())
        return busbw_gbps(nbytes, seconds, world)

    rows = [{"bytes": n, **{k: busbw(k, n) for k in ("xla", "host", "gloo")}} for n in sizes_of(args)]
    print(f"platform {torch.tpu.platform()}, {world} ranks as threads of one process, float32, "
          "bus bandwidth GB/s, median of slowest rank")
    print(f"{'size':>9} {'xla program':>12} {'host path':>10} {'gloo cpu':>9} {'xla/gloo':>9}")
    for r in rows:
        label = f"{r['bytes'] // 1024} KiB" if r["bytes"] < 1024 * 1024 else f"{r['bytes'] // (1024 * 1024)} MiB"
        print(f"{label:>9} {r['xla']:12.3f} {r['host']:10.3f} {r['gloo']:9.3f} {r['xla'] / r['gloo']:9.2f}")
    big = rows[-1]
    print(json.dumps({
        "platform": torch.tpu.platform(), "world_size": world, "ranks": "threads", "dtype": "float32",
        "sizes_bytes": [r["bytes"] for r in rows],
        "replicated_busbw_gbps": [round(r["xla"], 4) for r in rows],
        "host_path_busbw_gbps": [round(r["host"], 4) for r in rows],
        "gloo_busbw_gbps": [round(r["gloo"], 4) for r in rows],
        "replicated_over_gloo_at_largest": round(big["xla"] / big["gloo"], 3),
        "replicated_over_host_path_at_largest": round(big["xla"] / big["host"], 3),
    }))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-kib", type=int, default=4)
    parser.add_argument("--max-mib", type=int, default=64)
    parser.add_argument("--iters", type=int, default=10, help="iterations per size (fewer above 16 MiB)")
    parser.add_argument("--threads", type=int, default=0,
                        help="run this many ranks as threads of one process (no torchrun)")
    args = parser.parse_args()
    if args.threads:
        threads_main(args)
        return

    dist.init_process_group("cpu:gloo,tpu:tpu_dist")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.tpu.set_device(rank % torch.tpu.device_count())
    sync_tpu = torch.tpu.synchronize

    rows = []
    for nbytes in sizes_of(args):
        numel = nbytes // 4
        iters = iterations(args, nbytes)
        host = torch.randn(numel)
        device = host.to("tpu")

        def on_tpu():
            dist.all_reduce(device)

        def on_cpu():
            dist.all_reduce(host)

        for fn in (on_tpu, on_cpu):  # compile, connect, fault pages in
            fn()
            sync_tpu()
        tpu_dist.reset_staging_stats()
        row = {"bytes": nbytes, "tpu_dist_s": timed(on_tpu, iters, sync_tpu)}
        stats = tpu_dist.staging_stats()
        calls = stats["operations"]
        row.update({"d2h_s": stats["to_host_seconds"] / calls,
                    "transport_s": stats["transport_seconds"] / calls,
                    "h2d_s": stats["to_device_seconds"] / calls,
                    "flush_s": stats["flush_seconds"] / calls,
                    "mean_s": stats["total_seconds"] / calls})
        row["gloo_s"] = timed(on_cpu, iters, lambda: None)
        row["tpu_dist_busbw_gbps"] = busbw_gbps(nbytes, row["tpu_dist_s"], world)
        row["gloo_busbw_gbps"] = busbw_gbps(nbytes, row["gloo_s"], world)
        rows.append(row)

    if rank == 0:
        print(f"platform {torch.tpu.platform()}, world size {world}, float32, median of slowest rank")
        print(f"{'size':>9} {'tpu_dist GB/s':>14} {'gloo GB/s':>10} {'ratio':>6} | "
              f"{'d2h ms':>8} {'transport':>9} {'h2d ms':>8} {'mean ms':>8}")
        for r in rows:
            label = (f"{r['bytes'] // 1024} KiB" if r["bytes"] < 1024 * 1024
                     else f"{r['bytes'] // (1024 * 1024)} MiB")
            print(f"{label:>9} {r['tpu_dist_busbw_gbps']:14.3f} {r['gloo_busbw_gbps']:10.3f} "
                  f"{r['tpu_dist_busbw_gbps'] / r['gloo_busbw_gbps']:6.2f} | "
                  f"{r['d2h_s'] * 1e3:8.3f} {r['transport_s'] * 1e3:9.3f} {r['h2d_s'] * 1e3:8.3f} "
                  f"{r['mean_s'] * 1e3:8.3f}")
        big = rows[-1]
        print(json.dumps({
            "platform": torch.tpu.platform(),
            "world_size": world,
            "dtype": "float32",
            "sizes_bytes": [r["bytes"] for r in rows],
            "tpu_dist_busbw_gbps": [round(r["tpu_dist_busbw_gbps"], 4) for r in rows],
            "gloo_busbw_gbps": [round(r["gloo_busbw_gbps"], 4) for r in rows],
            "ratio_at_largest": round(big["tpu_dist_busbw_gbps"] / big["gloo_busbw_gbps"], 3),
            "breakdown_ms": {str(r["bytes"]): {k: round(r[k + "_s"] * 1e3, 4)
                                               for k in ("flush", "d2h", "transport", "h2d",
                                                         "mean", "tpu_dist", "gloo")}
                             for r in rows},
        }))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
