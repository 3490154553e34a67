"""Cold and warm start of a training loop: what the persistent compilation cache saves.

Runs the same training script (the reference decoder of torch_tpu.reference_models with 2 layers
of width 64, AdamW, batch 4, sequence 32; defer-and-fuse by default, --mode to change) twice in fresh processes against one empty temporary
cache directory: first cold (every program is compiled and written), then warm (every program is
loaded from the directory). Each run reports the time to its first completed step (forward,
backward, optimizer step, loss.item(), timed from the end of set-up) and its compile seconds.
Import and set-up (model and optimizer construction, which include the PJRT client's start and
torch.optim's one-time import of torch._dynamo: about 3 s here, cold or warm alike) are reported
apart. The last line is JSON: cold_first_step_s, warm_first_step_s, speedup (cold / warm first
step), set-up and compile seconds of each run, and whether both runs computed the same losses.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

TRAIN = r"""
import json, sys, time
started = time.perf_counter()
import torch
import torch_tpu
imported = time.perf_counter()

from torch_tpu.reference_models import Decoder

torch_tpu.set_eager_mode(sys.argv[2])
torch_tpu.set_fallback_warnings(False)
torch.manual_seed(0)
vocab, width, batch, length = 256, 64, 4, 32
layers = 2


tokens = torch.randint(0, vocab, (batch, length + 1))
model = Decoder(vocab, width, heads=4, layers=layers, seq=length).to("tpu")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
inputs, targets = tokens[:, :-1].to("tpu"), tokens[:, 1:].to("tpu")
set_up = time.perf_counter()
losses, first_step = [], None
for step in range(int(sys.argv[1])):
    logits = model(inputs)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    if first_step is None:
        first_step = time.perf_counter() - set_up
total = time.perf_counter() - set_up
stats = torch_tpu.cache_stats()
print(json.dumps({"import_s": imported - started, "setup_s": set_up - imported, "first_step_s": first_step,
                  "total_s": total,
                  "compile_seconds": stats["compile_seconds"], "disk_load_seconds": stats["disk_load_seconds"],
                  "misses": stats["misses"], "disk_hits": stats["disk_hits"], "losses": losses,
                  "fallbacks": sum(torch_tpu.fallback_counts().values())}))
"""


def run(directory, steps, mode):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=directory)
    env.pop("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", None)
    proc = subprocess.run([sys.executable, "-c", TRAIN, str(steps), mode], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--mode", default="defer_and_fuse", help="eager mode of the training script")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="torch_tpu_cache_") as directory:
        cold = run(directory, args.steps, args.mode)
        warm = run(directory, args.steps, args.mode)
    for name, r in (("cold", cold), ("warm", warm)):
        print(f"{name}: first step {r['first_step_s']:.2f} s, {args.steps} steps {r['total_s']:.2f} s, "
              f"compile {r['compile_seconds']:.2f} s, {r['misses']} compiled, {r['disk_hits']} loaded from disk "
              f"({r['disk_load_seconds']:.2f} s); before the loop: import {r['import_s']:.2f} s, "
              f"set-up {r['setup_s']:.2f} s")
    result = {
        "cold_first_step_s": round(cold["first_step_s"], 3),
        "warm_first_step_s": round(warm["first_step_s"], 3),
        "speedup": round(cold["first_step_s"] / warm["first_step_s"], 2),
        "cold_setup_s": round(cold["setup_s"], 3),
        "warm_setup_s": round(warm["setup_s"], 3),
        "cold_compile_seconds": round(cold["compile_seconds"], 3),
        "warm_compile_seconds": round(warm["compile_seconds"], 3),
        "programs": cold["misses"],
        "fallback_ops": cold["fallbacks"],
        "mode": args.mode,
        "same_losses": cold["losses"] == warm["losses"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
