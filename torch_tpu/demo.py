"""Trains a small classifier on the tpu device and says what happened.

    python -m torch_tpu.demo [--steps 30] [--mode strict|debug|defer_and_fuse]

The model, data and optimizer are plain PyTorch; only the device string says "tpu".
"""
import argparse
import time

import torch
import torch.nn.functional as F

import torch_tpu


def make_data(generator, batch, features, classes):
    # Two informative directions per class, so the loss visibly falls within a few dozen steps.
    centers = torch.randn(classes, features, generator=generator) * 2
    labels = torch.randint(0, classes, (batch,), generator=generator)
    inputs = centers[labels] + torch.randn(batch, features, generator=generator)
    return inputs, labels


def main():
    parser = argparse.ArgumentParser(description="Train a small model on the tpu device.")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--mode", default=None, help="eager mode (default: from the environment, else strict)")
    args = parser.parse_args()
    if args.mode:
        torch_tpu.set_eager_mode(args.mode)

    torch.manual_seed(0)
    device = torch.device("tpu")
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.GELU(),
        torch.nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    inputs, labels = make_data(torch.Generator().manual_seed(1), 256, 32, 10)
    inputs, labels = inputs.to(device), labels.to(device)

    print(f"platform: {torch.tpu.platform()} ({torch.tpu.get_device_name()}), "
          f"{torch.tpu.device_count()} device(s); accelerator: {torch.accelerator.current_accelerator()}")
    print(f"eager mode: {torch_tpu.get_eager_mode().name}")
    torch_tpu.reset_metrics()
    start = time.perf_counter()
    first_step = None
    for step in range(1, args.steps + 1):
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        value = loss.item()
        if first_step is None:
            first_step = time.perf_counter() - start
        print(f"step {step:3d}  loss {value:.4f}")
    elapsed = time.perf_counter() - start
    accuracy = (model(inputs).argmax(dim=1) == labels).float().mean().item()
    metrics = torch_tpu.metrics()
    steady = (args.steps - 1) / max(elapsed - first_step, 1e-9) if args.steps > 1 else float("nan")
    print(f"trained {args.steps} steps in {elapsed:.2f}s: {steady:.1f} steps/s after the first step "
          f"(first step, with compilation: {first_step:.2f}s)")
    print(f"final accuracy on the training batch: {accuracy:.3f}")
    print(f"programs compiled: {metrics['compiles']} ({metrics['compile_seconds']:.2f}s), "
          f"cache hits: {metrics['cache_hits']}, ops run: {metrics['ops']}, "
          f"ops that fell back to the CPU: {sum(torch_tpu.fallback_counts().values())}")


if __name__ == "__main__":
    main()
