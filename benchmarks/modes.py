"""Training throughput, peak device memory and steady-state compiles in each eager mode.

Trains, on the same seed, (a) a GPT-style decoder (4 layers, d_model 256, 4 heads, seq 128,
batch 8, AdamW) and (b) a 3-layer MLP, for a fixed number of steps after warm-up, in debug,
strict and defer_and_fuse on the tpu device, and in PyTorch's CPU eager for reference. Each
step ends with loss.item(), as a training loop that logs its loss does.

    python benchmarks/modes.py [--quick] [--steps N] [--warmup N]

The last line is JSON with, per model and mode, steps/s, peak device bytes, compiles after
warm-up and the final loss, plus fused_over_strict (decoder steps/s ratio), fused_over_cpu_eager
(decoder) and fused_peak_over_strict_peak (decoder).
"""
import argparse
import contextlib
import json
import math
import time

import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.reference_models import Decoder, mlp


def decoder_task(quick):
    vocab, dim, heads, layers, seq, batch = 512, 256, 4, 4, 128, 8
    if quick:
        layers, seq = 2, 64
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (batch, seq + 1), generator=generator)

    def build(device):
        torch.manual_seed(0)
        return Decoder(vocab, dim, heads, layers, seq).to(device)

    def loss_fn(model, batch_on_device):
        logits = model(batch_on_device[:, :-1])
        return F.cross_entropy(logits.reshape(-1, vocab), batch_on_device[:, 1:].reshape(-1))

    return build, loss_fn, tokens


def mlp_task(quick):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(256, 512, generator=generator)
    y = torch.randint(0, 10, (256,), generator=generator)

    def build(device):
        torch.manual_seed(0)
        return mlp(512, 1024, 10).to(device)

    def loss_fn(model, data):
        inputs, labels = data
        return F.cross_entropy(model(inputs), labels)

    return build, loss_fn, (x, y)


def to_device(data, device):
    if isinstance(data, tuple):
        return tuple(d.to(device) for d in data)
    return data.to(device)


def measure(task, device, mode, warmup, steps):
    build, loss_fn, data = task
    model = build(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = to_device(data, device)

    def step():
        loss = loss_fn(model, data)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    context = torch_tpu.eager_mode(mode) if device == "tpu" else contextlib.nullcontext()
    with context:
        for _ in range(warmup):
            step()
        if device == "tpu":
            torch.tpu.synchronize()
            torch.tpu.reset_peak_memory_stats()
            before = torch_tpu.metrics()
        start = time.perf_counter()
        for _ in range(steps):
            loss = step()
        if device == "tpu":
            torch.tpu.synchronize()
        elapsed = time.perf_counter() - start
    result = {"steps_per_s": round(steps / elapsed, 3), "final_loss": round(loss, 5)}
    if device == "tpu":
        after = torch_tpu.metrics()
        result["compiles_after_warmup"] = after["compiles"] - before["compiles"]
        result["peak_device_bytes"] = torch.tpu.max_memory_allocated()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller decoder and fewer steps (< 2 min)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    args = parser.parse_args()
    steps = args.steps or (3 if args.quick else 10)
    warmup = args.warmup or 3  # the first two steps differ: optimizer state appears in the first

    results = {}
    for name, task in (("decoder", decoder_task(args.quick)), ("mlp", mlp_task(args.quick))):
        results[name] = {}
        for mode in ("debug", "strict", "defer_and_fuse", "cpu_eager"):
            device = "cpu" if mode == "cpu_eager" else "tpu"
            run_steps = max(1, steps // 2) if mode == "debug" else steps
            results[name][mode] = measure(task, device, mode, warmup, run_steps)
            print(f"{name:8s} {mode:15s} {json.dumps(results[name][mode])}", flush=True)

    decoder = results["decoder"]
    summary = {
        "quick": args.quick,
        "platform": torch.tpu.platform(),
        "fused_over_strict": round(decoder["defer_and_fuse"]["steps_per_s"] / decoder["strict"]["steps_per_s"], 3),
        "fused_over_cpu_eager": round(decoder["defer_and_fuse"]["steps_per_s"] / decoder["cpu_eager"]["steps_per_s"], 3),
        "fused_peak_over_strict_peak": round(
            decoder["defer_and_fuse"]["peak_device_bytes"] / max(1, decoder["strict"]["peak_device_bytes"]), 3),
        "fused_loss_matches_strict": math.isclose(decoder["defer_and_fuse"]["final_loss"],
                                                  decoder["strict"]["final_loss"], rel_tol=1e-3),
        "results": results,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
