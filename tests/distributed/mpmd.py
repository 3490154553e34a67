"""Divergent ranks: rank 0 runs extra work between training steps (an evaluation pass, logging,
a host read of a parameter) while rank 1 only trains, in every eager mode. Nothing may hang, the
ranks must end with equal parameters, and after its warm-up steps rank 1 must compile nothing
(rank 0's extra work never leaks into the other rank's programs); programs are counted
as compiled or loaded from the disk cache, so a warm cache does not hide a new one. Launched with torchrun
--nproc-per-node 2; prints one line per mode with the counts."""
import os
import warnings

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_tpu
from torch_tpu.reference_models import Decoder

warnings.filterwarnings("ignore", category=FutureWarning)
MODES = os.environ.get("MODES", "debug,strict,defer_and_fuse").split(",")
WARMUP, STEPS = 3, 3


def programs():
    """Programs this process has had to build or load (compiled, or read from the disk cache):
    a step that only replays what earlier steps used adds none."""
    stats = torch_tpu.cache_stats()
    return stats["misses"] + stats["disk_hits"]


def loss_fn(model, tokens):
    logits = model(tokens[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             tokens[:, 1:].reshape(-1))


def run(rank, world):
    torch.manual_seed(0)
    model = Decoder(vocab=64, dim=32, heads=2, layers=1, seq=8).to("tpu")
    # The same model, buckets and optimizer as parallel.py's DDP check: the two share programs.
    ddp = DDP(model, bucket_cap_mb=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(rank)
    eval_tokens = torch.randint(0, 64, (3, 7), generator=gen).to("tpu")
    programs_at_warmup = new_programs = None
    log = []
    for step in range(WARMUP + STEPS):
        if step == WARMUP:
            programs_at_warmup = programs()
        tokens = torch.randint(0, 64, (2, 9), generator=gen).to("tpu")
        opt.zero_grad()
        loss = loss_fn(ddp, tokens)
        loss.backward()
        if step == WARMUP + STEPS - 1:
            # Counted before the last optimizer step: in defer-and-fuse that step's graph ends at
            # the end of training, a place no earlier graph ended, so it is new on every rank.
            new_programs = programs() - programs_at_warmup
        opt.step()
        if rank == 0:
            # Work only this rank does: a forward pass on other shapes, logging, host reads.
            with torch.no_grad():
                eval_loss = loss_fn(model, eval_tokens)
            log.append((step, loss.item(), eval_loss.item()))
            _ = model.head.weight[0, :4].tolist()
            if step % 2:
                print(f"rank 0: step {step} loss {loss.item():.4f} eval {eval_loss.item():.4f}",
                      flush=True)
    # The ranks must have stayed in lockstep: equal parameters everywhere.
    for name, p in model.named_parameters():
        gathered = [torch.empty_like(p) for _ in range(world)]
        dist.all_gather(gathered, p.detach())
        torch.testing.assert_close(gathered[0].cpu(), gathered[1].cpu(),
                                   msg=lambda m: f"{name} differs between ranks: {m}")
    return new_programs, len(log)


def main():
    dist.init_process_group("tpu_dist")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.tpu.set_device(rank)
    for mode in MODES:
        with torch_tpu.eager_mode(mode):
            new_programs, logged = run(rank, world)
            torch.tpu.synchronize()
        if rank == 1:
            assert new_programs == 0, f"rank 1 built {new_programs} new programs after warm-up in {mode}"
        print(f"rank {rank}: {mode}: new programs after warm-up {new_programs}, extra work "
              f"{logged} times", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
