"""First contact: how long a new user waits for compiles, with an empty compilation cache.

For a small GPT written here from plain torch.nn (2 layers, 4 heads, d_model 64, block 64, vocab
256) and for Hugging Face's Llama from a tiny config (2 layers, hidden 64, 4 heads, vocab 256),
each figure is taken in a fresh process with its own empty cache directory:

- first_step_s: one training step (forward, cross-entropy, backward, AdamW step, loss.item())
  in strict, defer_and_fuse and compiled (torch.compile(model, backend="tpu")), and on the CPU in
  PyTorch's eager mode for reference, and compiled there with backend="aot_eager" (cpu_compiled:
  Dynamo's and AOTAutograd's tracing with no XLA at all, the floor under the compiled column);
- generate_64_s: greedy generation of 64 new tokens from an 8-token prompt (the GPT crops its
  context to the block; Llama uses generate()), in each mode and with a compiled forward (and its
  cpu_compiled floor), and whether the tokens equal the CPU's;
- programs_for_32_lengths: a training loop over 32 sequence lengths (8, 16, ..., 256; the GPT's
  block is 256 there), the programs compiled in each mode, next to the count for one length
  (compiled_graph_programs: of those, the compiled mode's whole-graph programs, the rest being
  its eager optimizer step's per-op programs);
- median_per_op_compile_ms: the median compile of a per-op program in the strict first step;
- static_generate (Llama only): generate() with cache_implementation="static" (one cache size)
  over 12 prompts of lengths 5..31, 16 new tokens each: in strict, where generate() compiles the
  decode step itself, and with a compiled forward; the whole-graph programs each prompt compiled
  (once for the decode step, once per bucket of prompt lengths for the prefill) and whether the
  tokens equal the CPU's.

    python benchmarks/compile_latency.py [--models gpt,llama] [--only first_step,generate,static_generate,lengths]

The last line is JSON.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

MODES = ["strict", "defer_and_fuse", "compiled"]
CPU_MODES = ["cpu", "cpu_compiled"]  # PyTorch's own eager, and compiled with aot_eager

CHILD = r"""
import json, sys, time
import torch
import torch.nn.functional as F
import torch_tpu

model_name, scenario, mode = sys.argv[1], sys.argv[2], sys.argv[3]
device = "cpu" if mode.startswith("cpu") else "tpu"
compile_backend = "aot_eager" if mode == "cpu_compiled" else "tpu"
if device == "tpu":
    torch_tpu.set_eager_mode("strict" if mode == "compiled" else mode)
    torch_tpu.set_fallback_warnings(False)
VOCAB = 256
# Prompts of buckets 8, 16 and 32 (no pad token in them: generate() would add a mask argument).
STATIC_PROMPT_LENGTHS = [5, 6, 7, 8, 11, 13, 16, 12, 20, 27, 9, 31]


class Block(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm2(x))


class GPT(torch.nn.Module):
    def __init__(self, block_size=64, dim=64, heads=4, layers=2):
        super().__init__()
        self.block_size = block_size
        self.tokens, self.positions = torch.nn.Embedding(VOCAB, dim), torch.nn.Embedding(block_size, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm, self.head = torch.nn.LayerNorm(dim), torch.nn.Linear(dim, VOCAB, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tokens(idx) + self.positions(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build(block_size=64):
    torch.manual_seed(0)
    if model_name == "gpt":
        return GPT(block_size)
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512)
    return LlamaForCausalLM(config).eval()


def logits_of(model, idx):
    out = model(idx)
    return out if torch.is_tensor(out) else out.logits


def train_step(model, forward, optimizer, idx):
    logits = forward(idx[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), idx[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def forward_of(model):
    if mode not in ("compiled", "cpu_compiled"):
        return lambda idx: logits_of(model, idx)
    compiled = torch.compile(model, backend=compile_backend)
    return lambda idx: logits_of(compiled, idx)


def counters():
    if device == "cpu":
        return {}
    m = torch_tpu.metrics()
    return {"programs": m["compiles"], "compiled_graph_programs": m["compiles_compiled_graph"],
            "upgrades": m["compile_upgrades"], "upgrade_s": round(m["compile_upgrade_seconds"], 2),
            "compile_s": round(m["compile_seconds"], 3),
            "per_op_compile_median_ms": round(m["per_op_compile_median_ms"], 2),
            "slow_compiles": m["slow_compiles"]}


result = {}
if scenario == "first_step":
    model = build().to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = torch.randint(0, VOCAB, (4, 65), generator=torch.Generator().manual_seed(1)).to(device)
    forward = forward_of(model)
    start = time.perf_counter()
    result["loss"] = train_step(model, forward, optimizer, idx)
    result["seconds"] = time.perf_counter() - start
elif scenario == "generate":
    model = build().eval()
    prompt = torch.randint(0, VOCAB, (1, 8), generator=torch.Generator().manual_seed(2))
    model = model.to(device)
    start = time.perf_counter()
    with torch.no_grad():
        if model_name == "gpt":
            forward = forward_of(model)
            idx = prompt.to(device)
            for _ in range(64):
                logits = forward(idx[:, -model.block_size:])
                idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        else:
            if mode in ("compiled", "cpu_compiled"):
                model.forward = torch.compile(model.forward, backend=compile_backend)
            idx = model.generate(prompt.to(device), max_new_tokens=64, min_new_tokens=64, do_sample=False,
                                 pad_token_id=0)
        tokens = idx.cpu()[0, 8:].tolist()
    result["seconds"] = time.perf_counter() - start
    result["tokens"] = tokens
elif scenario == "static_generate":
    # Hugging Face's static cache, one size for every prompt: generate() compiles the decode step
    # itself on a tpu model ("strict": unmodified code); "compiled" also compiles the prefill.
    model = build().eval().to(device)
    if mode in ("compiled", "cpu_compiled"):
        model.forward = torch.compile(model.forward, backend=compile_backend)
    kwargs = dict(max_new_tokens=16, min_new_tokens=16, do_sample=False, pad_token_id=0,
                  cache_implementation="static", max_cache_len=64)
    result["tokens"], result["graph_programs_per_prompt"] = [], []
    start = time.perf_counter()
    with torch.no_grad():
        for n in STATIC_PROMPT_LENGTHS:
            prompt = torch.randint(1, VOCAB, (1, n), generator=torch.Generator().manual_seed(n))
            before = torch_tpu.metrics()["compiles_compiled_graph"] if device == "tpu" else 0
            result["tokens"].append(model.generate(prompt.to(device), **kwargs).cpu()[0, n:].tolist())
            if device == "tpu":
                result["graph_programs_per_prompt"].append(torch_tpu.metrics()["compiles_compiled_graph"] - before)
    result["seconds"] = time.perf_counter() - start
elif scenario in ("lengths", "one_length"):
    model = build(block_size=256).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    forward = forward_of(model)
    lengths = list(range(8, 257, 8)) if scenario == "lengths" else [64]
    if device == "tpu":
        torch_tpu.reset_metrics()
    start = time.perf_counter()
    for step, length in enumerate(lengths):
        idx = torch.randint(0, VOCAB, (2, length + 1), generator=torch.Generator().manual_seed(step)).to(device)
        train_step(model, forward, optimizer, idx)
    result["seconds"] = time.perf_counter() - start
result.update(counters())
print(json.dumps(result))
"""


def run_child(model, scenario, mode, timeout):
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache_dir)
        env.pop("TORCH_TPU_EAGER_MODE", None)
        try:
            done = subprocess.run([sys.executable, "-c", CHILD, model, scenario, mode], env=env, timeout=timeout,
                                  capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]}
    result = json.loads(lines[-1])
    result["xla_slow_compile_alarm"] = "Very slow compile" in done.stderr
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gpt,llama")
    parser.add_argument("--only", default="first_step,generate,static_generate,lengths")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per measurement")
    args = parser.parse_args()
    scenarios = args.only.split(",")
    figures = {}
    for model in args.models.split(","):
        out = figures[model] = {}
        if "first_step" in scenarios:
            cells = {mode: run_child(model, "first_step", mode, args.timeout) for mode in MODES + CPU_MODES}
            out["first_step_s"] = {mode: round(c["seconds"], 2) if "seconds" in c else c.get("error")
                                   for mode, c in cells.items()}
            out["first_step_programs"] = {mode: c.get("programs") for mode, c in cells.items() if mode in MODES}
            out["median_per_op_compile_ms"] = cells["strict"].get("per_op_compile_median_ms")
            out["first_step_loss_matches_cpu"] = {
                mode: abs(c.get("loss", float("nan")) - cells["cpu"].get("loss", float("nan"))) < 1e-3
                for mode, c in cells.items() if mode != "cpu"}
            out["xla_slow_compile_alarm"] = any(c.get("xla_slow_compile_alarm") for c in cells.values())
        if "generate" in scenarios:
            cells = {mode: run_child(model, "generate", mode, args.timeout) for mode in MODES + CPU_MODES}
            out["generate_64_s"] = {mode: round(c["seconds"], 2) if "seconds" in c else c.get("error")
                                    for mode, c in cells.items()}
            out["generate_64_programs"] = {mode: c.get("programs") for mode, c in cells.items() if mode in MODES}
            out["generate_tokens_match_cpu"] = {mode: c.get("tokens") == cells["cpu"].get("tokens")
                                                for mode, c in cells.items() if mode != "cpu"}
            out["xla_slow_compile_alarm"] = out.get("xla_slow_compile_alarm", False) or any(
                c.get("xla_slow_compile_alarm") for c in cells.values())
        if "static_generate" in scenarios and model == "llama":
            cells = {mode: run_child(model, "static_generate", mode, args.timeout) for mode in ("strict", "compiled", "cpu")}
            out["static_generate_s"] = {mode: round(c["seconds"], 2) if "seconds" in c else c.get("error")
                                        for mode, c in cells.items()}
            out["static_generate_graph_programs_per_prompt"] = {
                mode: c.get("graph_programs_per_prompt") for mode, c in cells.items() if mode != "cpu"}
            out["static_generate_tokens_match_cpu"] = {mode: c.get("tokens") == cells["cpu"].get("tokens")
                                                       for mode, c in cells.items() if mode != "cpu"}
        if "lengths" in scenarios:
            many = {mode: run_child(model, "lengths", mode, args.timeout) for mode in MODES}
            one = {mode: run_child(model, "one_length", mode, args.timeout) for mode in MODES}
            out["programs_for_32_lengths"] = {mode: c.get("programs", c.get("error")) for mode, c in many.items()}
            out["programs_for_one_length"] = {mode: c.get("programs", c.get("error")) for mode, c in one.items()}
            out["compiled_graph_programs_for_32_lengths"] = many["compiled"].get("compiled_graph_programs")
            out["compiled_graph_programs_for_one_length"] = one["compiled"].get("compiled_graph_programs")
            out["seconds_for_32_lengths"] = {mode: round(c["seconds"], 2) if "seconds" in c else None
                                             for mode, c in many.items()}
        print(model, json.dumps(out), flush=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
