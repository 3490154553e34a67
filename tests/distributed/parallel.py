"""What runs on top of tpu_dist: DDP and FSDP2 training of the reference decoder against a
single-process CPU run on the concatenated batch, a sharded checkpoint through
torch.distributed.checkpoint, and DTensor (distribute_tensor, redistribute, a tensor-parallel MLP)
against unsharded CPU results. Launched with torchrun --nproc-per-node 2; PARTS and MODES choose
what runs; exits non-zero on the first mismatch."""
import copy
import os
import time
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_tpu
from torch_tpu.reference_models import Decoder

warnings.filterwarnings("ignore", category=FutureWarning)
MODES = os.environ.get("MODES", "debug,strict,defer_and_fuse").split(",")
PARTS = os.environ.get("PARTS", "ddp,fsdp,dtensor").split(",")
STEPS = 3
# Float32 sums in a different order (per-rank halves, then the collective) differ from the
# single-process run in the last bits. SGD, not Adam: attention's key bias has a gradient of zero
# up to rounding, which Adam's normalisation would turn into full-size steps of random sign.
TOL = dict(rtol=1e-4, atol=1e-5)


def small_decoder(seed):
    torch.manual_seed(seed)
    return Decoder(vocab=64, dim=32, heads=2, layers=1, seq=8)


def batches(world):
    gen = torch.Generator().manual_seed(99)
    return [torch.randint(0, 64, (2 * world, 9), generator=gen) for _ in range(STEPS)]


def loss_fn(model, tokens):
    logits = model(tokens[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             tokens[:, 1:].reshape(-1))


def cpu_reference(world):
    model = small_decoder(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for tokens in batches(world):
        opt.zero_grad()
        loss_fn(model, tokens).backward()
        opt.step()
    return {n: p.detach() for n, p in model.named_parameters()}


def train(model, rank, world):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for tokens in batches(world):
        mine = tokens.chunk(world)[rank].to("tpu")
        opt.zero_grad()
        loss_fn(model, mine).backward()
        opt.step()
    return model


def check_params(named, reference, what):
    for name, p in named:
        value = p.full_tensor() if isinstance(p, DTensor) else p
        assert value.device.type == "tpu", (what, name, value.device)
        torch.testing.assert_close(value.detach().cpu(), reference[name], **TOL,
                                   msg=lambda m: f"{what}: {name}: {m}")


def check_ddp(rank, world, reference):
    # Rank 1 starts from other weights: DDP's broadcast of rank 0's state must fix that.
    model = small_decoder(0 if rank == 0 else 5).to("tpu")
    ddp = DDP(model, bucket_cap_mb=0.1)
    train(ddp, rank, world)
    check_params(model.named_parameters(), reference, "DDP")


def fsdp_model(seed):
    model = small_decoder(seed).to("tpu")
    for block in model.blocks.layers:
        fully_shard(block)
    fully_shard(model)
    return model


def check_fsdp(rank, world, reference, checkpoint_dir):
    model = fsdp_model(0)
    sharded = [p for p in model.parameters() if isinstance(p, DTensor)]
    assert sharded and all(p.placements == (Shard(0),) for p in sharded), "parameters not sharded"
    train(model, rank, world)
    check_params(model.named_parameters(), reference, "FSDP2")
    # Between steps FSDP2 frees the gathered parameters by resizing their storages to zero bytes
    # (and grows them back for the next all-gather): that must have happened on tpu storages.
    gathered = [t for fp in model.blocks.layers[0]._get_fsdp_state()._fsdp_param_group.fsdp_params
                for t in fp.all_gather_outputs]
    assert gathered and all(t.device.type == "tpu" and t.untyped_storage().size() == 0
                            for t in gathered), "FSDP2 did not free its gathered parameters"

    # A sharded checkpoint: each rank writes its shards; a fresh model with other weights loads
    # them back.
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=checkpoint_dir)
    restored = fsdp_model(7)
    state = {"model": get_model_state_dict(restored)}
    dcp.load(state, checkpoint_id=checkpoint_dir)
    set_model_state_dict(restored, state["model"])
    check_params(restored.named_parameters(), reference, "FSDP2 checkpoint load")
    # The restored model trains on: its next forward all-gathers the loaded shards.
    tokens = batches(world)[0].chunk(world)[rank].to("tpu")
    torch.testing.assert_close(loss_fn(restored, tokens).detach().cpu(),
                               loss_fn(model, tokens).detach().cpu(), **TOL)


def check_dtensor(rank, world):
    mesh = init_device_mesh("tpu", (world,))
    full = torch.randn(8, 6, generator=torch.Generator().manual_seed(3))
    dt = distribute_tensor(full.to("tpu"), mesh, [Shard(0)])
    assert dt.to_local().device.type == "tpu"
    torch.testing.assert_close(dt.to_local().cpu(), full.chunk(world)[rank])
    torch.testing.assert_close(dt.redistribute(mesh, [Replicate()]).to_local().cpu(), full)
    by_cols = dt.redistribute(mesh, [Shard(1)])
    torch.testing.assert_close(by_cols.to_local().cpu(), full.chunk(world, dim=1)[rank])
    torch.testing.assert_close(by_cols.full_tensor().cpu(), full)
    # A sum over the sharded dimension leaves a partial value that the reduction resolves.
    torch.testing.assert_close(dt.sum(0).full_tensor().cpu(), full.sum(0), rtol=1e-5, atol=1e-5)

    torch.manual_seed(11)
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.Linear(16, 6))
    reference = copy.deepcopy(mlp)
    tp = parallelize_module(mlp.to("tpu"), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(4))
    out = tp(x.to("tpu"))
    expected = reference(x)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    expected.sum().backward()
    for (name, p), q in zip(tp.named_parameters(), reference.parameters()):
        grad = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        torch.testing.assert_close(grad.cpu(), q.grad, rtol=1e-5, atol=1e-5,
                                   msg=lambda m: f"tensor-parallel grad of {name}: {m}")


def main():
    dist.init_process_group(device_id=torch.device("tpu", int(os.environ["LOCAL_RANK"])))
    rank, world = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "tpu_dist", dist.get_backend()
    reference = cpu_reference(world)
    for mode in MODES:
        seconds = {}
        with torch_tpu.eager_mode(mode):
            for part in PARTS:
                start = time.perf_counter()
                if part == "ddp":
                    check_ddp(rank, world, reference)
                elif part == "fsdp":
                    check_fsdp(rank, world, reference,
                               os.path.join(os.environ["CHECKPOINT_DIR"], mode))
                elif part == "dtensor":
                    check_dtensor(rank, world)
                torch.tpu.synchronize()
                seconds[part] = round(time.perf_counter() - start, 1)
        print(f"rank {rank}: {','.join(PARTS)} agree with CPU in {mode} (seconds: {seconds})",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
