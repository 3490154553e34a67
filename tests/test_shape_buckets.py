"""Programs that serve a range of sizes (shape buckets, csrc/exec/padding.h).

Once an op has met a second size, its programs run at the sizes of a bucket (the next power of
two) with the real sizes as runtime values, so a sequence that grows by one element per step
reuses programs. Padding must never reach a result: each op whose result depends on other
positions along the padded dim (a reduction, a softmax, a norm, a sort, an index, a write) is run
here over a range of sizes and compared with the CPU, in every mode.
"""
import copy

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from conftest import to_cpu, to_tpu

# Sizes that grow one at a time across bucket boundaries (8 | 16 | 32), as a sequence does, then
# jump and revisit a bucket. Sizes that only ever jump get no room in their storages (their uploads
# look like weights of several widths), so they would run exact programs and test no padding.
LENGTHS = [*range(5, 20), 30, 12, 31]
MODE_NUMBER = {"debug": 0, "strict": 1, "defer_and_fuse": 2}  # sizes no other mode's programs have


def same_over_lengths(fn, make_inputs, lengths=LENGTHS):
    """Compares fn on tpu with the CPU at each length; returns how many launches ran padded."""
    before = torch_tpu.metrics()["padded_launches"]
    for n in lengths:
        inputs = make_inputs(n)
        expected = fn(*inputs)
        actual = fn(*to_tpu(inputs))
        torch.testing.assert_close(to_cpu(actual), expected, equal_nan=True, msg=lambda m: f"length {n}: {m}")
    return torch_tpu.metrics()["padded_launches"] - before


def seeded(n, *shape_of_n, dtype=torch.float32):
    g = torch.Generator().manual_seed(n)
    return [torch.randn(*s, generator=g, dtype=dtype) for s in shape_of_n]


OPS_OVER_A_PADDED_DIM = {
    "sum": lambda x: x.sum(1),
    "sum_all": lambda x: x.sum(),
    "mean_other_dim": lambda x: x.mean(-1),
    "mean_padded_dim": lambda x: x.mean(1),
    "amax_padded_dim": lambda x: x.amax(1),
    "max_padded_dim": lambda x: x.max(1).values,
    "argmax_padded_dim": lambda x: x.argmax(1),
    "var_padded_dim": lambda x: x.var(1),
    "softmax_padded_dim": lambda x: torch.softmax(x, 1),
    "log_softmax_padded_dim": lambda x: torch.log_softmax(x, 1),
    "softmax_other_dim": lambda x: torch.softmax(x, -1),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
    "cumsum_padded_dim": lambda x: x.cumsum(1),
    "sort_padded_dim": lambda x: x.sort(1).values,
    "sort_other_dim": lambda x: x.sort(-1).values,
    "topk_padded_dim": lambda x: x.topk(2, dim=1).values,
    "contract_padded_dim": lambda x: x.transpose(1, 2) @ x,
    "contract_other_dim": lambda x: x @ x.transpose(1, 2),
    "exp_then_sum": lambda x: x.exp().sum(1),
    "cat_along_padded_dim": lambda x: torch.cat([x, x[:, :3] * 2, x], dim=1),
    "transposed_copy": lambda x: x.transpose(0, 1).contiguous() + 1,
    "any_padded_dim": lambda x: (x > 1.5).any(1),
    "all_padded_dim": lambda x: (x > -1.5).all(1),
    "prod_padded_dim": lambda x: (x.abs() + 0.5).prod(1),
    "isin": lambda x: torch.isin(x.round(), torch.tensor([0.0, 1.0], device=x.device)),
}
# Ops whose padding would reach a result at these arguments: they run at exact sizes.
EXACT_OVER_A_PADDED_DIM = {"amax_padded_dim", "max_padded_dim", "argmax_padded_dim", "mean_padded_dim",
                           "var_padded_dim", "sort_padded_dim", "sort_other_dim", "topk_padded_dim"}


@pytest.mark.parametrize("name", sorted(OPS_OVER_A_PADDED_DIM))
def test_ops_over_a_padded_dim_match_cpu(mode, name):
    fn = OPS_OVER_A_PADDED_DIM[name]
    padded = same_over_lengths(fn, lambda n: seeded(n, (2, n, 6)))
    if name not in EXACT_OVER_A_PADDED_DIM:
        assert padded > 0, "no program ran padded: this test would not see what padding computes"


def test_attention_with_a_causal_mask_matches_cpu(mode):
    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    qkv = lambda n: seeded(n, (1, 2, n, 4), (1, 2, n, 4), (1, 2, n, 4))  # noqa: E731
    assert same_over_lengths(attend, qkv) > 0, "no program ran padded"


def test_cross_entropy_and_its_backward_match_cpu(mode):
    def loss_and_grad(logits, target):
        logits = logits.detach().requires_grad_()
        loss = F.cross_entropy(logits.reshape(-1, 5), target.reshape(-1), ignore_index=1)
        loss.backward()
        return loss.detach(), logits.grad

    def inputs(n):
        g = torch.Generator().manual_seed(n)
        return [torch.randn(2, n, 5, generator=g), torch.randint(0, 5, (2, n), generator=g)]

    assert same_over_lengths(loss_and_grad, inputs) > 0, "no program ran padded"


def test_embedding_and_its_backward_match_cpu(mode):
    weight = torch.randn(11, 4, generator=torch.Generator().manual_seed(0))

    def embed(index, w):
        w = w.detach().requires_grad_()
        out = F.embedding(index, w)
        (out * out).sum().backward()
        return out.detach(), w.grad

    def inputs(n):
        return [torch.randint(0, 11, (2, n), generator=torch.Generator().manual_seed(n)), weight]

    assert same_over_lengths(embed, inputs) > 0, "no program ran padded"


def test_layer_norm_backward_matches_cpu(mode):
    def norm_grads(x, w):
        x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
        F.layer_norm(x, (6,), w).pow(2).sum().backward()
        return x.grad, w.grad

    assert same_over_lengths(norm_grads, lambda n: seeded(n, (2, n, 6), (6,))) > 0, "no program ran padded"


def test_in_place_writes_over_a_padded_dim_match_cpu(mode):
    def write(x):
        y = x.clone()
        y[:, 1:].add_(x[:, :-1])
        y.mul_(2)
        y[:, -1] = 7.0
        return y

    assert same_over_lengths(write, lambda n: seeded(n, (3, n))) > 0, "no program ran padded"


def test_strided_views_of_a_wider_storage_keep_their_neighbours(mode):
    # Views whose strides do not change with the padded size are read and written as strided
    # ranges: a write's padding must not land on the columns beside it.
    def write_columns(buf, x):
        out = buf.clone()
        out[:, :4] = x * 2
        out[:, 8:].add_(out[:, 4:8])
        q, k, v = out.split(4, dim=-1)
        return out, (q * k).sum(-1) + v.mean(-1)

    assert same_over_lengths(write_columns, lambda n: seeded(n, (n, 12), (n, 4))) > 0, "no program ran padded"


def test_index_put_accumulating_over_a_padded_index_matches_cpu(mode):
    def accumulate(index, values):
        return torch.zeros(7, 3).to(values.device).index_put_((index,), values, accumulate=True)

    def inputs(n):
        g = torch.Generator().manual_seed(n)
        return [torch.randint(0, 7, (n,), generator=g), torch.randn(n, 3, generator=g)]

    assert same_over_lengths(accumulate, inputs) > 0, "no program ran padded"


def test_index_copy_of_a_padded_length_writes_only_its_rows(mode):
    # A static KV cache's prefill: the rows of a prompt of n tokens go to positions start..start+n;
    # at padded sizes the padding rows must write nothing, anywhere in the cache.
    def write(cache, positions, states):
        out = cache.clone()
        out.index_copy_(2, positions, states)
        return out, cache.index_copy(2, positions, states * 2)

    def inputs(n):
        g = torch.Generator().manual_seed(n)
        start = n % 5
        return [torch.randn(1, 2, 40, 3, generator=g), torch.arange(start, start + n), torch.randn(1, 2, n, 3, generator=g)]

    assert same_over_lengths(write, inputs) > 0, "no program ran padded"


def test_index_copy_out_of_range_still_raises_when_the_index_is_padded(mode):
    cache = torch.zeros(2, 20).to("tpu")
    for n in range(2, 12):
        cache.index_copy_(1, torch.arange(n).to("tpu"), torch.ones(2, n).to("tpu"))
        torch.tpu.synchronize()  # in defer_and_fuse, a graph per length, which then pads too
    torch_tpu.reset_metrics()
    with pytest.raises(IndexError):
        # The next length of the run, so that it pads as the ones before it did.
        cache.index_copy_(1, torch.tensor([*range(11), 20]).to("tpu"), torch.ones(2, 12).to("tpu"))
        torch.tpu.synchronize()
    assert torch_tpu.metrics()["padded_launches"] > 0


def test_compiled_attention_over_growing_lengths_compiles_per_bucket(mode):
    def attend(x, w):
        q, k, v = (x @ w).split(4, dim=-1)
        q, k, v = (z.view(1, z.shape[0], 2, 2).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(-1, 4).softmax(0)

    compiled = torch.compile(attend, backend="tpu", dynamic=True)
    w = torch.randn(4, 12, generator=torch.Generator().manual_seed(0))
    torch_tpu.reset_metrics()
    lengths = range(3 + MODE_NUMBER[mode], 34, 3)  # no other mode's programs
    for n in lengths:
        x = seeded(n, (n, 4))[0]
        torch.testing.assert_close(compiled(x.to("tpu"), w.to("tpu")).cpu(), attend(x, w), msg=f"length {n}")
    # One exact program for the first length, then one per bucket (4, 8, 16, 32, 64).
    assert torch_tpu.metrics()["compiles_compiled_graph"] <= 6


def test_a_compiled_graph_taking_views_of_a_longer_upload_compiles_once_per_bucket(mode):
    # A training step uploads L + 1 token ids and passes ids[:, :-1] to the compiled model. At a
    # bucket's own length (32, uploaded as 33) the view and its storage would fall in different
    # buckets; the runner copies such a view out, so that length runs its bucket's program.
    width = 3 + MODE_NUMBER[mode]
    table = torch.randn(64, width, generator=torch.Generator().manual_seed(0))

    def step(ids, table):
        return torch.tanh(F.embedding(ids, table)).sum(-1).cumsum(-1)

    compiled = torch.compile(step, backend="tpu", dynamic=True)
    tpu_table = table.to("tpu")
    compiles = []
    for n in (9, 12, 20, 24, 28, 32):
        ids = torch.randint(0, 64, (2, n + 1), generator=torch.Generator().manual_seed(n))
        actual = compiled(ids.to("tpu")[:, :-1], tpu_table)
        torch.testing.assert_close(actual.cpu(), step(ids[:, :-1], table), msg=lambda m: f"length {n}: {m}")
        compiles.append(torch_tpu.metrics()["compiles_compiled_graph"])
    # 20 compiles the bucket of 32's program; 24, 28 and 32 run it.
    assert compiles[-1] == compiles[2], compiles


def test_a_compiled_graph_that_writes_a_view_argument_writes_the_callers_tensor(mode):
    base_cpu = torch.randn(3, 40, generator=torch.Generator().manual_seed(1))
    base = base_cpu.to("tpu")

    def bump(x):
        x.mul_(2)
        return x.sum(-1)

    compiled = torch.compile(bump, backend="tpu", dynamic=True)
    for n in (9, 12, 20, 24, 32):
        expected = bump(base_cpu[:, :n])
        torch.testing.assert_close(compiled(base[:, :n]).cpu(), expected, msg=lambda m: f"length {n}: {m}")
        torch.testing.assert_close(base.cpu(), base_cpu, msg=lambda m: f"length {n}: {m}")


def test_a_compiled_decode_step_matches_cpu_where_its_ops_ran_eagerly_at_other_sizes(mode):
    # Each op of a compiled graph learns which of its sizes change from that graph's calls: the
    # query of one token keeps its exact layout, though the same ops ran on whole prompts before.
    g = torch.Generator().manual_seed(2)
    w = torch.randn(4 + MODE_NUMBER[mode], 12, generator=g)

    def attend(x, cache_k, cache_v, w):
        q, k, v = (x @ w).split(4, dim=-1)
        k, v = torch.cat([cache_k, k], 0), torch.cat([cache_v, v], 0)
        return torch.softmax(q @ k.T / 2, -1) @ v, k, v

    compiled = torch.compile(attend, backend="tpu", dynamic=True)
    prompt = torch.randn(7, w.shape[0], generator=g)
    tw = w.to("tpu")
    # The prompt runs eagerly: the same ops at other sizes.
    _, k, v = attend(prompt[:-1], torch.zeros(0, 4), torch.zeros(0, 4), w)
    _, tk, tv = attend(prompt[:-1].to("tpu"), torch.zeros(0, 4).to("tpu"), torch.zeros(0, 4).to("tpu"), tw)
    x = prompt[-1:]
    for step in range(20):
        out, k, v = attend(x, k, v, w)
        tout, tk, tv = compiled(x.to("tpu"), tk, tv, tw)
        torch.testing.assert_close(tout.cpu(), out, msg=lambda m: f"step {step}: {m}")
        torch.testing.assert_close(tk.cpu(), k, msg=lambda m: f"step {step}: {m}")
        x = torch.tanh(out @ torch.ones(4, w.shape[0]))


def test_index_select_with_a_padded_index_matches_cpu(mode):
    table = torch.randn(9, 3, generator=torch.Generator().manual_seed(3))

    def inputs(n):
        return [table, torch.randint(0, 9, (n,), generator=torch.Generator().manual_seed(n))]

    assert same_over_lengths(lambda t, i: t.index_select(0, i) * 2, inputs) > 0, "no program ran padded"


def test_index_out_of_range_still_raises_when_the_index_is_padded(mode):
    table = torch.randn(9, 3).to("tpu")
    for n in (5, 6, 7):
        index = torch.randint(0, 9, (n,)).to("tpu")
        table.index_select(0, index).cpu()
    bad = torch.tensor([0, 1, 2, 3, 4, 5, 6, 9]).to("tpu")
    with pytest.raises(IndexError):
        table.index_select(0, bad).cpu()


def growing_step(x, w):
    h = torch.tanh(x @ w) + x
    return torch.softmax(h, dim=0).sum(-1)


def test_strict_programs_are_reused_within_a_bucket():
    w = torch.randn(8, 8).to("tpu")
    with torch_tpu.eager_mode("strict"):
        # A few lengths in the bucket of 33..64 mark the sizes as changing and compile its programs.
        for n in range(33, 40):
            growing_step(torch.randn(n, 8).to("tpu"), w).cpu()
        before = torch_tpu.metrics()["compiles"]
        for n in range(40, 65):
            x = torch.randn(n, 8)
            torch.testing.assert_close(growing_step(x.to("tpu"), w).cpu(), growing_step(x, w.cpu()))
        assert torch_tpu.metrics()["compiles"] == before


def test_a_model_whose_shapes_never_change_never_pads(mode):
    # Layers of several widths make the sizes of one op differ from site to site, and the first
    # AdamW step meets each weight's size once, one after another: neither is a size that grows.
    torch.manual_seed(0)
    widths = [32, 256, 192, 64, 48, 10]
    layers = [m for a, b in zip(widths, widths[1:]) for m in (torch.nn.Linear(a, b), torch.nn.Tanh())]
    model = torch.nn.Sequential(*layers)
    x, y = torch.randn(16, 32), torch.randn(16, 10)
    losses = {}
    for device in ("cpu", "tpu"):
        net = copy.deepcopy(model).to(device)
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
        if device == "tpu":
            torch_tpu.reset_metrics()
        losses[device] = []
        for _ in range(3):
            loss = F.mse_loss(net(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses[device].append(loss.item())
    torch.testing.assert_close(losses["tpu"], losses["cpu"], rtol=1e-4, atol=1e-5)
    assert torch_tpu.metrics()["padded_launches"] == 0


def test_matmuls_of_several_widths_pad_as_the_sequence_grows(mode):
    # The output columns of x @ w differ between the sites (48, 80, 16) but come from the weights,
    # which stay exact: only the growing rows pad, and no padded program fails to build.
    g = torch.Generator().manual_seed(0)
    w1, w2, w3 = torch.randn(16, 48, generator=g), torch.randn(48, 80, generator=g), torch.randn(80, 16, generator=g)
    tw = [w.to("tpu") for w in (w1, w2, w3)]

    def step(x, a, b, c):
        h = torch.tanh(x @ a)
        return torch.softmax(torch.relu(h @ b) @ c, dim=0).sum(-1)

    torch_tpu.reset_metrics()
    for n in range(5, 31):
        x = torch.randn(n, 16, generator=g)
        torch.testing.assert_close(step(x.to("tpu"), *tw).cpu(), step(x, w1, w2, w3), msg=lambda m: f"length {n}: {m}")
    m = torch_tpu.metrics()
    assert m["padding_declined"] == 0, m
    assert m["padded_launches"] > 0, m


GROWING_LOOP = """
import json, torch, torch_tpu
import torch.nn.functional as F
torch.manual_seed(0)
table, w = torch.randn(50, 8), torch.randn(8, 8)

def generate(steps, device):
    t, m = table.to(device), w.to(device)
    idx = torch.arange(1, 6).view(1, 5).to(device)
    for _ in range(steps):
        h = torch.tanh(F.embedding(idx, t) @ m).sum(-1)
        nxt = (h[:, -1:] * 100).abs().long() % 50
        idx = torch.cat([idx, nxt], dim=1)
    return idx.cpu()

torch_tpu.set_eager_mode("defer_and_fuse")
same = torch.equal(generate(40, "tpu"), generate(40, "cpu"))
reasons = dict(torch_tpu.metrics()["flush_reasons"])
before = torch_tpu.metrics()["compiles"]
same_again = torch.equal(generate(55, "tpu")[:, 40:50], generate(55, "cpu")[:, 40:50])
print(json.dumps({"same": same and same_again, "reasons": reasons,
                  "compiled": torch_tpu.metrics()["compiles"] - before}))
"""


def test_a_growing_loop_without_host_reads_compiles_once_per_bucket(tmp_path):
    """defer_and_fuse: a generation-like loop becomes one graph per iteration, and within a bucket
    every iteration runs the same padded program. In a fresh process: which ops have met several
    sizes is process-wide history, which other tests change."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path))
    env.pop("TORCH_TPU_EAGER_MODE", None)
    out = subprocess.run([sys.executable, "-c", GROWING_LOOP], env=env, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["same"]
    assert result["reasons"].get("loop iteration", 0) > 0, result["reasons"]
    # Lengths 45..60 fall in the bucket of 64, whose programs exist by then.
    assert result["compiled"] <= 12, result


LAYERS_OVER_GROWING_LENGTHS = """
import json, sys, torch, torch_tpu
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128)
reference = LlamaForCausalLM(config)

LENGTHS = json.loads(sys.argv[1])

def train(device):
    model = LlamaForCausalLM(config).to(device)
    model.load_state_dict(reference.state_dict())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses, fused = [], []
    for step, length in enumerate(LENGTHS):
        # Token ids one longer than the step's length, read without their last and first column.
        ids = torch.randint(0, 64, (2, length + 1), generator=torch.Generator().manual_seed(step)).to(device)
        logits = model(ids[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, 64), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if device == "tpu":
            fused.append(torch_tpu.metrics()["compiles_fused_graph"])
    return losses, fused

torch_tpu.set_eager_mode("defer_and_fuse")
(cpu, _), (tpu, fused) = train("cpu"), train("tpu")
m = torch_tpu.metrics()
print(json.dumps({"cpu": cpu, "tpu": tpu, "reasons": dict(m["flush_reasons"]), "fused_after_each_step": fused}))
"""
TRAINING_LENGTHS = list(range(8, 73, 8))


@pytest.fixture(scope="module")
def training_over_growing_lengths(tmp_path_factory):
    """A small Llama trained in defer_and_fuse over lengths 8, 16, ..., 72, in a fresh process (which
    sizes have varied is process-wide history, which other tests change), and on the CPU."""
    import json
    import os
    import subprocess
    import sys
    # No cut by expected compile time either, whatever this machine's speed: the loop rule is tested.
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path_factory.mktemp("cache")),
               TORCH_TPU_FUSED_COMPILE_BUDGET_S="1000")
    env.pop("TORCH_TPU_EAGER_MODE", None)
    out = subprocess.run([sys.executable, "-c", LAYERS_OVER_GROWING_LENGTHS, json.dumps(TRAINING_LENGTHS)], env=env,
                         capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    torch.testing.assert_close(result["tpu"], result["cpu"], rtol=1e-5, atol=1e-5)
    return result


def test_a_training_step_over_growing_lengths_stays_one_graph(training_over_growing_lengths):
    """defer_and_fuse: a model's layers repeat with equal sizes within a step, though from the
    first padded lengths on they read storages of other lengths. That is not a loop whose sizes
    grow: the step stays one graph (it was cut into three, each compiled per bucket)."""
    result = training_over_growing_lengths
    assert set(result["reasons"]) == {"host access"}, result["reasons"]
    # Exact graphs at the first lengths, then one padded graph per bucket (64 and 128).
    assert result["fused_after_each_step"][-1] <= 5, result


def test_a_length_that_fills_its_bucket_runs_the_program_of_the_bucket_above(training_over_growing_lengths):
    """At a length of 32 or 64 the token ids (one longer) have room for the bucket above, which no
    other length of the bucket 32 or 64 pairs with a view of that bucket: the step runs at the
    bucket above, whose program the next lengths (40, 72) then reuse instead of compiling their
    own."""
    fused = training_over_growing_lengths["fused_after_each_step"]
    compiled_at = {n: fused[i] - (fused[i - 1] if i else 0) for i, n in enumerate(TRAINING_LENGTHS)}
    assert compiled_at[32] == 1 and compiled_at[64] == 1, compiled_at
    assert compiled_at[40] == 0 and compiled_at[48] == 0 and compiled_at[72] == 0, compiled_at


def test_buckets_can_be_turned_off(tmp_path):
    import os
    import subprocess
    import sys
    code = (
        "import torch, torch_tpu\n"
        "torch_tpu.set_eager_mode('strict')\n"
        "for n in range(5, 12):\n"
        "    (torch.randn(n, 3).to('tpu') + 1).cpu()\n"
        "print(torch_tpu.metrics()['compiles'])\n"
    )

    def compiles(env_value):
        env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path / env_value))
        env["TORCH_TPU_SHAPE_BUCKETS"] = env_value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return int(out.stdout.strip().splitlines()[-1])

    assert compiles("1") < compiles("0")


def test_views_differing_only_in_a_unit_dims_stride_share_one_program(mode, no_fallback):
    # The last position of a [1, L] sequence for growing L is a [1, k] view whose row stride is L:
    # a stride no element is reached through, so it must not make a new program each time.
    base_cpu = torch.arange(64, dtype=torch.float32)
    base = base_cpu.to("tpu")
    torch.tpu.synchronize()
    torch_tpu.reset_metrics()
    for row_stride in range(5, 13):
        got = base.as_strided((1, 4), (row_stride, 1), 3) * 2
        torch.testing.assert_close(got.cpu(), base_cpu.as_strided((1, 4), (row_stride, 1), 3) * 2)
    assert torch_tpu.metrics()["compiles"] <= 1  # none when an earlier mode compiled it
