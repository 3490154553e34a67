"""Host overhead per small elementwise op: tpu in strict (and debug) mode next to PyTorch CPU eager.

Each figure is the median over batches of µs per `x + y` on 16-element float32 tensors, measured
after a warm-up that compiles the op's program. A batch ends with a synchronize, so queued device
work is included. The last line is JSON: strict_us_per_op, cpu_us_per_op, ratio (strict / cpu),
debug_us_per_op, and the platform.
"""
import argparse
import json
import statistics
import time

import torch

import torch_tpu


def per_op_us(x, y, batches, ops_per_batch, sync):
    samples = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(ops_per_batch):
            x + y
        sync()
        samples.append((time.perf_counter() - start) / ops_per_batch * 1e6)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=25)
    parser.add_argument("--ops", type=int, default=400, help="ops per batch")
    args = parser.parse_args()

    cpu_x, cpu_y = torch.randn(16), torch.randn(16)
    tpu_x, tpu_y = cpu_x.to("tpu"), cpu_y.to("tpu")
    results = {"platform": torch.tpu.platform()}
    for mode in ("strict", "debug"):
        with torch_tpu.eager_mode(mode):
            per_op_us(tpu_x, tpu_y, 2, 50, torch.tpu.synchronize)  # compile + warm up
            results[f"{mode}_us_per_op"] = round(
                per_op_us(tpu_x, tpu_y, args.batches, args.ops, torch.tpu.synchronize), 2)
    per_op_us(cpu_x, cpu_y, 2, 50, lambda: None)
    results["cpu_us_per_op"] = round(per_op_us(cpu_x, cpu_y, args.batches, args.ops, lambda: None), 2)
    results["ratio"] = round(results["strict_us_per_op"] / results["cpu_us_per_op"], 2)
    for key in ("strict_us_per_op", "debug_us_per_op", "cpu_us_per_op", "ratio"):
        print(f"{key:>18}: {results[key]}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
