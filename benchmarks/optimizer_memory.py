"""Device memory an optimizer step adds on top of the training state, per eager mode: an AdamW
step on an 8-layer 1024x1024 MLP (34 MB of parameters, 134 MB of parameters, gradients and
moments). In-place updates donate their old buffers to the program that replaces them, so the
step should need little beyond its state, as CUDA's in-place AdamW does. Also the programs one
step launches (strict mode runs each foreach call as one program). JSON on the last line."""
import argparse
import json

import torch

import torch_tpu


def measure(mode, optimizer_kind, layers=8, width=1024):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).to("tpu")
    make = {"adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-3),
            "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True),
            "sgd_momentum": lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9)}[optimizer_kind]
    optimizer = make(model.parameters())
    x = torch.randn(16, width, device="tpu")
    with torch_tpu.eager_mode(mode):
        for _ in range(2):  # the first step creates the state
            model(x).sum().backward()
            optimizer.step()
        model(x).sum().backward()
        torch.tpu.synchronize()
        state = torch.tpu.memory_allocated()
        torch.tpu.reset_peak_memory_stats()
        torch_tpu.reset_metrics()
        optimizer.step()
        torch.tpu.synchronize()
        peak = torch.tpu.max_memory_allocated()
        executions = torch_tpu.metrics()["executions"]
    return {"state_mb": round(state / 2**20, 1), "step_peak_over_state_mb": round((peak - state) / 2**20, 1),
            "over_state_ratio": round((peak - state) / state, 3), "programs_per_step": executions}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=8)
    args = parser.parse_args()
    results = {}
    for kind in ["adamw_foreach", "adamw_fused", "sgd_momentum"]:
        for mode in ["strict", "defer_and_fuse"]:
            results[f"{kind}/{mode}"] = measure(mode, kind, layers=args.layers)
            print(kind, mode, results[f"{kind}/{mode}"], flush=True)
    print(json.dumps({"platform": torch.tpu.platform(), "results": results}))


if __name__ == "__main__":
    main()
