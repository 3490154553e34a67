"""Host overhead per small op: tpu in each eager mode next to PyTorch CPU eager.

- strict_us_per_op, debug_us_per_op: the median over batches of µs per `x + y` on 16-element
  float32 tensors, after a warm-up that compiles the op's program; a batch ends with a
  synchronize, so queued device work is included.
- fused_record_us_per_op: the same ops recorded in defer_and_fuse, the time of the recording alone
  (each batch's graph is run after the clock stops).
- optimizer_step_host_ms: host time of the reference decoder's AdamW (foreach, PyTorch's default)
  step in defer_and_fuse, recording only (the step's graph runs after the clock stops);
  fused_optimizer_step_host_ms the same with AdamW(fused=True), one recorded op, which is
  PyTorch's own Python around the step plus one record.
- *_optimizer_step_host_ms_tiny_tensors: the same steps over the same 54 parameters built at
  d_model 16 (each optimizer figure is the median of 3 rounds that alternate full and tiny). On
  the CPU plugin the device is this host: the step's program, run between two timed steps over
  14 MB of state, evicts the host's caches, and the next step's recording then misses in them. On
  an accelerator the device computes elsewhere, so this is the host cost there.
- optimizer_step_python_floor_ms: the foreach step over CPU tensors with every torch._foreach_*
  op replaced by one that returns at once: PyTorch's own Python (grouping, state, bias
  corrections), which every backend pays before any op is dispatched.
- strict_plugin_execute_us_per_op: of strict_us_per_op, the host time inside the plugin's execute
  call (torch_tpu.metrics()["execute_call_seconds"]): the CPU plugin runs a tiny program inline, so
  this is a floor no dispatch work removes, beside PyTorch's own dispatch (cpu_us_per_op).
- cpu_us_per_op, cpu_optimizer_step_ms: the same on PyTorch CPU eager, and each tpu figure's
  ratio to its CPU figure (`*_over_cpu`).

The last line is JSON.
"""
import argparse
import contextlib
import json
import statistics
import time

import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.reference_models import Decoder


def per_op_us(x, y, batches, ops_per_batch, sync, timed_sync=True):
    samples = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(ops_per_batch):
            x + y
        if timed_sync:
            sync()
        samples.append((time.perf_counter() - start) / ops_per_batch * 1e6)
        if not timed_sync:
            sync()
    return statistics.median(samples)


def optimizer_step_ms(device, steps, sync, fused=False, d_model=256, foreach=None, timed=contextlib.nullcontext):
    """The host time of AdamW's step over the reference decoder's parameters (4 layers, d256);
    the timed steps run inside `timed()`."""
    torch.manual_seed(0)
    model = Decoder(512, d_model, 4, 4, 64).to(device)
    # fused=False would select the single-tensor loop, not the default foreach path.
    options = {"fused": True} if fused else {} if foreach is None else {"foreach": foreach}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, **options)
    tokens = torch.randint(0, 512, (2, 65)).to(device)
    logits = model(tokens[:, :-1])
    F.cross_entropy(logits.reshape(-1, 512), tokens[:, 1:].reshape(-1)).backward()
    for _ in range(3):  # the first steps create the state and compile
        optimizer.step()
        sync()
    samples = []
    with timed():
        for _ in range(steps):
            sync()
            start = time.perf_counter()
            optimizer.step()
            elapsed = time.perf_counter() - start
            sync()
            samples.append(elapsed * 1e3)
    return statistics.median(samples)


@contextlib.contextmanager
def foreach_ops_return_at_once():
    foreach_ops = {name: getattr(torch, name) for name in dir(torch) if name.startswith("_foreach_")}

    def returns_at_once(tensors, *args, **kwargs):
        return tensors

    try:
        for name in foreach_ops:
            setattr(torch, name, returns_at_once)
        yield
    finally:
        for name, op in foreach_ops.items():
            setattr(torch, name, op)


def optimizer_step_python_floor_ms(steps):
    """The foreach step's time with its _foreach_* ops returning at once (see the module's doc).
    CPU's default is the per-tensor loop; the tpu default (as CUDA's) is foreach. Each step is
    short: the median of more steps is steadier."""
    return optimizer_step_ms("cpu", steps * 5, lambda: None, foreach=True, timed=foreach_ops_return_at_once)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=25)
    parser.add_argument("--ops", type=int, default=400, help="ops per batch")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps timed")
    args = parser.parse_args()

    cpu_x, cpu_y = torch.randn(16), torch.randn(16)
    tpu_x, tpu_y = cpu_x.to("tpu"), cpu_y.to("tpu")
    results = {"platform": torch.tpu.platform()}
    for mode in ("strict", "debug"):
        with torch_tpu.eager_mode(mode):
            per_op_us(tpu_x, tpu_y, 2, 50, torch.tpu.synchronize)  # compile + warm up
            torch_tpu.reset_metrics()
            results[f"{mode}_us_per_op"] = round(
                per_op_us(tpu_x, tpu_y, args.batches, args.ops, torch.tpu.synchronize), 2)
            if mode == "strict":
                metrics = torch_tpu.metrics()
                results["strict_plugin_execute_us_per_op"] = round(
                    metrics["execute_call_seconds"] / metrics["executions"] * 1e6, 2)
    with torch_tpu.eager_mode("defer_and_fuse"):
        per_op_us(tpu_x, tpu_y, 2, args.ops, torch.tpu.synchronize, timed_sync=False)
        results["fused_record_us_per_op"] = round(
            per_op_us(tpu_x, tpu_y, args.batches, args.ops, torch.tpu.synchronize, timed_sync=False), 2)
        # Full size and tiny tensors alternate, 3 rounds: on a noisy machine one measurement of each,
        # minutes apart, can order them either way.
        rounds = {"optimizer_step_host_ms": [], "fused_optimizer_step_host_ms": [],
                  "optimizer_step_host_ms_tiny_tensors": [], "fused_optimizer_step_host_ms_tiny_tensors": []}
        for _ in range(3):
            for key, samples in rounds.items():
                tiny = key.endswith("_tiny_tensors")
                samples.append(optimizer_step_ms("tpu", args.steps * (5 if tiny else 1), torch.tpu.synchronize,
                                                 fused=key.startswith("fused"), d_model=16 if tiny else 256))
        for key, samples in rounds.items():
            results[key] = round(statistics.median(samples), 3)
    per_op_us(cpu_x, cpu_y, 2, 50, lambda: None)
    results["cpu_us_per_op"] = round(per_op_us(cpu_x, cpu_y, args.batches, args.ops, lambda: None), 2)
    results["cpu_optimizer_step_ms"] = round(optimizer_step_ms("cpu", args.steps, lambda: None), 3)
    results["cpu_fused_optimizer_step_ms"] = round(optimizer_step_ms("cpu", args.steps, lambda: None, fused=True), 3)
    results["optimizer_step_python_floor_ms"] = round(optimizer_step_python_floor_ms(args.steps), 3)
    for key in ("strict_us_per_op", "debug_us_per_op", "fused_record_us_per_op"):
        results[key.replace("_us_per_op", "_over_cpu")] = round(results[key] / results["cpu_us_per_op"], 2)
    results["optimizer_step_host_over_cpu"] = round(results["optimizer_step_host_ms"] / results["cpu_optimizer_step_ms"], 2)
    results["fused_optimizer_step_host_over_cpu"] = round(
        results["fused_optimizer_step_host_ms"] / results["cpu_fused_optimizer_step_ms"], 2)
    for key, value in results.items():
        print(f"{key:>30}: {value}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
