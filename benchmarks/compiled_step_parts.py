"""Where a compiled decoder training step spends its time: forward, backward, optimizer.

Trains the modes.py decoder with torch.compile(backend="tpu") and times each part of the step
with a synchronize after it, so each part's device time is counted in that part (the parts do
not overlap as they do in modes.py's step). The median over the steps is reported.

    python benchmarks/compiled_step_parts.py [--steps N]

The last line is JSON: milliseconds per part, and their sum.
"""
import argparse
import json
import statistics
import time

import torch

import modes
import torch_tpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    build, loss_fn, tokens = modes.decoder_task(quick=False)
    model = torch.compile(build("tpu"), backend="tpu")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = tokens.to("tpu")
    parts = {"forward_ms": [], "backward_ms": [], "optimizer_ms": []}

    def step(record):
        start = time.perf_counter()
        loss = loss_fn(model, tokens)
        torch.tpu.synchronize()
        forward = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.tpu.synchronize()
        backward = time.perf_counter()
        optimizer.step()
        torch.tpu.synchronize()
        end = time.perf_counter()
        if record:
            parts["forward_ms"].append((forward - start) * 1e3)
            parts["backward_ms"].append((backward - forward) * 1e3)
            parts["optimizer_ms"].append((end - backward) * 1e3)

    with torch_tpu.eager_mode("defer_and_fuse"):  # the optimizer runs eagerly, as in modes.py
        for _ in range(3):
            step(record=False)
        for _ in range(args.steps):
            step(record=True)
    result = {name: round(statistics.median(times), 1) for name, times in parts.items()}
    result["step_ms"] = round(sum(result.values()), 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
