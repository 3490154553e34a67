"""Device memory of a training step, per eager mode, next to the state it updates.

Two models: an 8-layer 1024x1024 MLP (34 MB of parameters; 134 MB with gradients and AdamW's
moments) and the reference decoder (4 layers, d256, seq 128, batch 8). For each, in strict,
defer_and_fuse and compiled (the model under torch.compile(backend="tpu"), its optimizer step
eager in defer_and_fuse, as benchmarks/modes.py runs it), and for AdamW (foreach, PyTorch's
default), AdamW(fused=True) and SGD with momentum:

- optimizer_step_extra_over_state: (peak during opt.step() - bytes allocated before it) / bytes
  before it. In-place updates donate their old buffers, so a step should need almost nothing
  beyond its state, as CUDA's in-place optimizers do (goal: at most 0.05);
- train_step_peak_over_cpu_model_bytes: the peak of a whole step (forward, backward, optimizer,
  gradients set to None before it) over the model's parameter bytes;
- programs_per_optimizer_step.

Also, per model, fused_over_strict_train_peak for AdamW foreach (defer_and_fuse keeps a step's
intermediates inside one program). JSON on the last line.
"""
import argparse
import json

import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.reference_models import Decoder

OPTIMIZERS = {
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-3),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9),
}
MODES = ("strict", "defer_and_fuse", "compiled")


def mlp_task(layers=8, width=1024):
    def build():
        return torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])

    x = torch.randn(16, width, generator=torch.Generator().manual_seed(0))
    return build, lambda model, data: model(data).square().mean(), x


def decoder_task(vocab=512, dim=256, heads=4, layers=4, seq=128, batch=8):
    def build():
        return Decoder(vocab, dim, heads, layers, seq)

    def loss(model, tokens):
        logits = model(tokens[:, :-1])
        return F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))

    tokens = torch.randint(0, vocab, (batch, seq + 1), generator=torch.Generator().manual_seed(0))
    return build, loss, tokens


def measure(task, mode, optimizer_kind):
    build, loss_fn, data = task
    torch.manual_seed(0)
    model = build()
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    model = model.to("tpu")
    optimizer = OPTIMIZERS[optimizer_kind](model.parameters())
    data = data.to("tpu")
    if mode == "compiled":
        model = torch.compile(model, backend="tpu")
    eager = "defer_and_fuse" if mode == "compiled" else mode

    def forward_backward():
        loss_fn(model, data).backward()

    with torch_tpu.eager_mode(eager):
        for _ in range(2):  # the first step creates the optimizer state
            forward_backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        forward_backward()
        torch.tpu.synchronize()
        before_step = torch.tpu.memory_allocated()
        torch.tpu.reset_peak_memory_stats()
        torch_tpu.reset_metrics()
        optimizer.step()
        torch.tpu.synchronize()
        step_peak = torch.tpu.max_memory_allocated()
        programs = torch_tpu.metrics()["executions"]

        optimizer.zero_grad(set_to_none=True)
        torch.tpu.synchronize()
        torch.tpu.reset_peak_memory_stats()
        forward_backward()
        optimizer.step()
        torch.tpu.synchronize()
        train_peak = torch.tpu.max_memory_allocated()
    return {"state_mb": round(before_step / 2**20, 1),
            "optimizer_step_extra_over_state": round((step_peak - before_step) / before_step, 3),
            "train_step_peak_over_cpu_model_bytes": round(train_peak / model_bytes, 3),
            "programs_per_optimizer_step": programs}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,decoder")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--optimizers", default=",".join(OPTIMIZERS))
    args = parser.parse_args()
    tasks = {"mlp": mlp_task, "decoder": decoder_task}
    results = {}
    for model in args.models.split(","):
        for optimizer_kind in args.optimizers.split(","):
            for mode in args.modes.split(","):
                key = f"{model}/{optimizer_kind}/{mode}"
                results[key] = measure(tasks[model](), mode, optimizer_kind)
                print(key, results[key], flush=True)
        strict, fused = (results.get(f"{model}/adamw_foreach/{m}") for m in ("strict", "defer_and_fuse"))
        if strict and fused:
            results[f"{model}/fused_over_strict_train_peak"] = round(
                fused["train_step_peak_over_cpu_model_bytes"] / strict["train_step_peak_over_cpu_model_bytes"], 3)
    extras = [r["optimizer_step_extra_over_state"] for r in results.values() if isinstance(r, dict)]
    results["worst_optimizer_step_extra_over_state"] = max(extras)
    print(json.dumps({"platform": torch.tpu.platform(), "results": results}))


if __name__ == "__main__":
    main()
