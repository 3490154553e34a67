"""Training throughput, peak device memory and steady-state compiles in each eager mode.

Trains, on the same seed, (a) a GPT-style decoder (4 layers, d_model 256, 4 heads, seq 128,
batch 8, AdamW) and (b) a 3-layer MLP, for a fixed number of steps after warm-up, in debug,
strict and defer_and_fuse on the tpu device, compiled with torch.compile(backend="tpu"), and for
reference on the same CPU in PyTorch's eager and with torch.compile's default backend (inductor). Each
step ends with loss.item(), as a training loop that logs its loss does.

    python benchmarks/modes.py [--quick] [--steps N] [--warmup N]

The last line is JSON with, per model and mode, steps/s, peak device bytes, compiles after
warm-up and the final loss, plus fused_over_strict (decoder steps/s ratio), fused_over_cpu_eager,
compiled_over_strict, compiled_over_inductor_cpu, compiled_over_strict_ceiling (strict's step over
the time of the step's matrix products alone, benchmarks/decoder_matmul_bound.py; full size only)
and fused_peak_over_strict_peak (all decoder).
"""
import argparse
import contextlib
import json
import math
import time

import torch
import torch.nn.functional as F

import decoder_matmul_bound
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
    if mode == "compiled":
        # The model's forward and backward become whole-graph programs; the optimizer step stays
        # eager, in defer_and_fuse, as a script that compiles only its model would run it.
        model = torch.compile(model, backend="tpu")
        mode = "defer_and_fuse"
    elif mode == "inductor_cpu":
        model = torch.compile(model)
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
            # Warm-up includes the full compiles of programs first compiled quickly.
            torch_tpu.wait_for_background_compiles()
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


MODES = ("debug", "strict", "defer_and_fuse", "compiled", "cpu_eager", "inductor_cpu")


def ratio(results, numerator, denominator):
    """steps/s of one mode over another's, when both ran."""
    if numerator in results and denominator in results:
        return round(results[numerator]["steps_per_s"] / results[denominator]["steps_per_s"], 3)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller decoder and fewer steps (< 2 min)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
    parser.add_argument("--models", default="decoder,mlp")
    args = parser.parse_args()
    steps = args.steps or (3 if args.quick else 10)
    warmup = args.warmup or 3  # the first two steps differ: optimizer state appears in the first

    results = {}
    tasks = {"decoder": decoder_task, "mlp": mlp_task}
    for name in args.models.split(","):
        task = tasks[name](args.quick)
        results[name] = {}
        for mode in args.modes.split(","):
            device = "cpu" if mode in ("cpu_eager", "inductor_cpu") else "tpu"
            run_steps = max(1, steps // 2) if mode == "debug" else steps
            results[name][mode] = measure(task, device, mode, warmup, run_steps)
            print(f"{name:8s} {mode:15s} {json.dumps(results[name][mode])}", flush=True)

    decoder = results.get("decoder", {})

    def same_loss(a, b):
        if a in decoder and b in decoder:
            return math.isclose(decoder[a]["final_loss"], decoder[b]["final_loss"], rel_tol=1e-3)
        return None

    # The decoder step's matrix products alone, at the rate this device runs them: no compiled
    # program can take less, so strict's step time over it caps compiled_over_strict.
    ceiling = None
    if "strict" in decoder and not args.quick:
        product_seconds = decoder_matmul_bound.step_product_seconds("tpu")
        ceiling = round(1 / decoder["strict"]["steps_per_s"] / product_seconds, 3)
        print(f"decoder step matrix products alone on tpu: {product_seconds * 1e3:.0f} ms", flush=True)

    peak = None
    if "defer_and_fuse" in decoder and "strict" in decoder:
        peak = round(decoder["defer_and_fuse"]["peak_device_bytes"] / max(1, decoder["strict"]["peak_device_bytes"]), 3)
    summary = {
        "quick": args.quick,
        "platform": torch.tpu.platform(),
        "fused_over_strict": ratio(decoder, "defer_and_fuse", "strict"),
        "fused_over_cpu_eager": ratio(decoder, "defer_and_fuse", "cpu_eager"),
        "compiled_over_strict": ratio(decoder, "compiled", "strict"),
        "compiled_over_inductor_cpu": ratio(decoder, "compiled", "inductor_cpu"),
        "compiled_over_strict_ceiling": ceiling,
        "fused_peak_over_strict_peak": peak,
        "fused_loss_matches_strict": same_loss("defer_and_fuse", "strict"),
        "compiled_loss_matches_cpu_eager": same_loss("compiled", "cpu_eager"),
        "results": results,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
