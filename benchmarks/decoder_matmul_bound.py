"""How much of a decoder training step is matrix products, at the rate the device runs them.

Times every matrix product of one training step of the modes.py decoder (4 layers, d_model 256,
4 heads, seq 128, batch 8, vocab 512) on tpu in strict mode, one product per program as XLA
runs it inside a whole-graph program, and the same products with PyTorch on the CPU for
reference. The sum is a floor under any step time on this device: whatever a compiled program
saves elsewhere, it cannot go below it. modes.py's strict step time divided by this floor bounds
compiled_over_strict from above.

    python benchmarks/decoder_matmul_bound.py [--repeats N]

The last line is JSON: per-shape milliseconds and GFLOP/s on tpu and CPU, and the step's
product time on each.
"""
import argparse
import contextlib
import json
import time

import torch

import torch_tpu

VOCAB, DIM, HEADS, LAYERS, SEQ, BATCH = 512, 256, 4, 4, 128, 8
TOKENS = SEQ * BATCH
HEAD_DIM = DIM // HEADS


def step_products():
    """(name, lhs shape, rhs shape, times per training step): forward, and the two gradient
    products of each in backward, which have the same flop count."""
    linear = [("qkv", (TOKENS, DIM), (DIM, 3 * DIM)), ("attention_out", (TOKENS, DIM), (DIM, DIM)),
              ("mlp_up", (TOKENS, DIM), (DIM, 4 * DIM)), ("mlp_down", (TOKENS, 4 * DIM), (4 * DIM, DIM))]
    attention = [("scores", (BATCH * HEADS, SEQ, HEAD_DIM), (BATCH * HEADS, HEAD_DIM, SEQ)),
                 ("weighted_values", (BATCH * HEADS, SEQ, SEQ), (BATCH * HEADS, SEQ, HEAD_DIM))]
    head = [("lm_head", (TOKENS, DIM), (DIM, VOCAB))]
    return [(n, a, b, 3 * LAYERS) for n, a, b in linear + attention] + [(n, a, b, 3) for n, a, b in head]


def flops(a, b):
    batch = a[0] if len(a) == 3 else 1
    return 2 * batch * a[-2] * a[-1] * b[-1]


def seconds_per_product(device, a_shape, b_shape, repeats):
    a, b = torch.randn(a_shape, device=device), torch.randn(b_shape, device=device)
    sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)
    for _ in range(3):
        torch.matmul(a, b)
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        torch.matmul(a, b)
    sync()
    return (time.perf_counter() - start) / repeats


def step_product_seconds(device, repeats=30):
    with torch_tpu.eager_mode("strict") if device == "tpu" else contextlib.nullcontext():
        return sum(seconds_per_product(device, a, b, repeats) * n for _, a, b, n in step_products())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    shapes, totals = {}, {"tpu": 0.0, "cpu": 0.0}
    with torch_tpu.eager_mode("strict"):
        for name, a, b, per_step in step_products():
            row = {"per_step": per_step}
            for device in ("tpu", "cpu"):
                seconds = seconds_per_product(device, a, b, args.repeats)
                row[f"{device}_ms"] = round(seconds * 1e3, 3)
                row[f"{device}_gflops"] = round(flops(a, b) / seconds / 1e9, 1)
                totals[device] += seconds * per_step
            shapes[name] = row
            print(f"{name:16s} {a} @ {b} x{per_step}: tpu {row['tpu_ms']} ms ({row['tpu_gflops']} GFLOP/s), "
                  f"cpu {row['cpu_ms']} ms ({row['cpu_gflops']} GFLOP/s)")
    step_gflop = sum(flops(a, b) * n for _, a, b, n in step_products()) / 1e9
    print(f"one training step: {step_gflop:.1f} GFLOP of products; tpu {totals['tpu'] * 1e3:.0f} ms, "
          f"cpu {totals['cpu'] * 1e3:.0f} ms")
    print(json.dumps({"platform": torch.tpu.platform(), "step_product_gflop": round(step_gflop, 2),
                      "step_product_ms_tpu": round(totals["tpu"] * 1e3, 1),
                      "step_product_ms_cpu": round(totals["cpu"] * 1e3, 1), "shapes": shapes}))


if __name__ == "__main__":
    main()
