"""torch.compile(backend="tpu") and plain torch.compile on tpu tensors, against PyTorch on CPU."""
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import dynamo_backend
from torch_tpu.reference_models import Decoder, mlp


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def clone_to(module, device):
    import copy
    return copy.deepcopy(module).to(device)


def grads(module):
    return {name: p.grad for name, p in module.named_parameters() if p.grad is not None}


def assert_grads_close(tpu_module, cpu_module, **tolerance):
    expected = grads(cpu_module)
    actual = {name: g.cpu() for name, g in grads(tpu_module).items()}
    assert actual.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], msg=lambda m: f"{name}: {m}", **tolerance)


def train(model, loss_fn, data, steps):
    # SGD, not Adam: Adam turns the rounding noise of an exactly-zero gradient (attention's key
    # bias) into full-size steps, which no two implementations share.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(steps):
        loss = loss_fn(model, data)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_backend_is_found_by_name_after_plain_import_torch():
    # A fresh interpreter that imports nothing but torch: the entry points do the rest.
    code = ("import torch\n"
            "f = torch.compile(lambda x: (x * 2).sin(), backend='tpu')\n"
            "x = torch.arange(4.0)\n"
            "assert torch.allclose(f(x.to('tpu')).cpu(), (x * 2).sin())\n"
            "assert 'tpu' in torch._dynamo.list_backends()\n"
            "import torch_tpu\n"
            "assert torch_tpu.metrics()['compiled_graphs'] == 1, torch_tpu.metrics()\n"
            "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_plain_torch_compile_routes_tpu_graphs_here_and_cpu_graphs_to_inductor(monkeypatch, mode):
    import torch._inductor.compile_fx as compile_fx
    inductor_graphs = []

    def fake_inductor(graph_module, example_inputs, **kwargs):
        inductor_graphs.append(graph_module)
        return graph_module.forward

    monkeypatch.setattr(compile_fx, "compile_fx", fake_inductor)
    torch_tpu.reset_metrics()

    def f(x):
        return torch.relu(x) * 3 + 1

    x = torch.randn(8)
    compiled = torch.compile(f)
    torch.testing.assert_close(compiled(x.to("tpu")).cpu(), f(x))
    assert torch_tpu.metrics()["compiled_graphs"] == 1
    assert inductor_graphs == []
    torch.testing.assert_close(compiled(x), f(x))
    assert len(inductor_graphs) == 1
    assert torch_tpu.metrics()["compiled_graphs"] == 1


def small_decoder():
    torch.manual_seed(0)
    return Decoder(vocab=64, dim=32, heads=2, layers=2, seq=16)


def decoder_loss(model, tokens):
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def mlp_loss(model, data):
    x, y = data
    return F.cross_entropy(model(x), y)


@pytest.mark.parametrize("task", ["decoder", "mlp"])
def test_training_matches_cpu_over_20_steps(task, mode):
    if task == "decoder":
        model = small_decoder()
        data = torch.randint(0, 64, (4, 17), generator=torch.Generator().manual_seed(1))
        loss_fn = decoder_loss
    else:
        torch.manual_seed(0)
        model = mlp(16, 32, 5)
        g = torch.Generator().manual_seed(1)
        data = (torch.randn(32, 16, generator=g), torch.randint(0, 5, (32,), generator=g))
        loss_fn = mlp_loss
    cpu_model = clone_to(model, "cpu")
    tpu_model = torch.compile(clone_to(model, "tpu"), backend="tpu")
    tpu_data = tuple(d.to("tpu") for d in data) if isinstance(data, tuple) else data.to("tpu")

    torch_tpu.reset_metrics()
    expected = train(cpu_model, loss_fn, data, 20)
    actual = train(tpu_model, loss_fn, tpu_data, 20)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(cpu_model.named_parameters(), tpu_model.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-3, atol=1e-4, msg=lambda m: f"{name}: {m}")
    counters = torch_tpu.metrics()
    assert counters["compiled_graphs"] == 2  # one forward and one backward graph, compiled once
    assert counters["graph_replays"] >= 2 * 18  # later steps run the captured programs directly


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, groups=2, dilation=1)
        self.head = torch.nn.Linear(8 * 2 * 2, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        return self.head(F.relu(self.conv2(x)).flatten(1))


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).unflatten(-1, (3, 2, 8)).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).flatten(2)


class EmbeddingAndNorms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(20, 12)
        self.layer_norm = torch.nn.LayerNorm(12)
        self.group_norm = torch.nn.GroupNorm(3, 12)

    def forward(self, ids):
        h = self.layer_norm(self.embed(ids))
        return self.group_norm(h.transpose(1, 2)).transpose(1, 2)


class MultiheadAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


class Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 10, num_layers=2, batch_first=True)
        self.gru = torch.nn.GRU(10, 4, batch_first=True)

    def forward(self, x):
        return self.gru(self.lstm(x)[0])[0]


MODULES = {
    "conv_net": (ConvNet, lambda: torch.randn(2, 3, 12, 12)),
    "sdpa_attention": (Attention, lambda: torch.randn(2, 5, 16)),
    "embedding_norms": (EmbeddingAndNorms, lambda: torch.randint(0, 20, (2, 7))),
    "multihead_attention": (MultiheadAttention, lambda: torch.randn(2, 5, 16)),
    "lstm_gru": (Recurrent, lambda: torch.randn(2, 4, 6)),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_standard_modules_forward_and_backward(name, mode):
    build, make_input = MODULES[name]
    torch.manual_seed(0)
    module = build()
    x = make_input()
    cpu_module = clone_to(module, "cpu")
    tpu_module = clone_to(module, "tpu")
    compiled = torch.compile(tpu_module, backend="tpu")
    for _ in range(2):  # the second call replays the captured programs
        for m in (cpu_module, tpu_module):
            m.zero_grad(set_to_none=True)
        expected = cpu_module(x)
        actual = compiled(x.to("tpu"))
        torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-5)
        expected.square().sum().backward()
        actual.square().sum().backward()
        assert_grads_close(tpu_module, cpu_module, rtol=1e-3, atol=1e-4)
    # BatchNorm's running statistics are input mutations of the compiled graph.
    for (key, expected), actual in zip(cpu_module.state_dict().items(), tpu_module.state_dict().values()):
        torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-5, msg=lambda m: f"{key}: {m}")


def test_input_mutation_views_and_aliased_outputs(mode):
    def step(param, grad, buffer):
        # An optimizer-style update of inputs, a write through a view, and outputs that alias.
        param.add_(grad, alpha=-0.1)
        buffer[1:].mul_(2)
        flat = param.view(-1)
        return flat, flat[::2], param.sum()

    compiled = torch.compile(step, backend="tpu")
    torch.manual_seed(0)
    base = torch.randn(6, 4)
    args_cpu = [base.clone(), torch.randn(6, 4), torch.randn(5)]
    args_tpu = [a.to("tpu") for a in args_cpu]
    view_cpu, view_tpu = args_cpu[0][1:], args_tpu[0][1:]  # a view of the mutated input
    for _ in range(3):
        expected = step(*args_cpu)
        actual = compiled(*args_tpu)
        for e, a in zip(expected, actual):
            torch.testing.assert_close(a.cpu(), e)
        for e, a in zip(args_cpu, args_tpu):
            torch.testing.assert_close(a.cpu(), e)
        torch.testing.assert_close(view_tpu.cpu(), view_cpu)
    flat = compiled(*args_tpu)[0]
    flat[0] = 100.0  # the returned view shares the parameter's storage, as in eager
    assert args_tpu[0][0, 0].item() == 100.0


def test_replay_rebinds_new_arguments_and_relayouts_record_again(mode):
    compiled = torch.compile(lambda a, b: (a @ b).relu() + a.sum(), backend="tpu")
    torch_tpu.reset_metrics()
    for seed in range(3):
        torch.manual_seed(seed)
        a, b = torch.randn(4, 4), torch.randn(4, 4)
        torch.testing.assert_close(compiled(a.to("tpu"), b.to("tpu")).cpu(), (a @ b).relu() + a.sum())
    assert torch_tpu.metrics()["graph_replays"] == 2
    # The same shapes through a transposed view: Dynamo keeps the graph, the program's layout differs.
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    torch.testing.assert_close(compiled(a.to("tpu").t(), b.to("tpu")).cpu(), (a.t() @ b).relu() + a.sum())


def test_graph_breaks_run_eager_in_the_current_mode(mode):
    def f(x):
        y = x.sin() * 2
        if y.sum().item() > 0:  # a host read: Dynamo breaks the graph here
            y = y + 1
        print_like = str(y.shape)
        return y.cos(), print_like

    compiled = torch.compile(f, backend="tpu")
    for x in (torch.linspace(-1, 2, 7), torch.linspace(-3, 0.5, 7)):
        expected = f(x)
        actual = compiled(x.to("tpu"))
        torch.testing.assert_close(actual[0].cpu(), expected[0])
        assert actual[1] == expected[1]
    assert torch_tpu.get_eager_mode().name == {"debug": "DEFER_NEVER_AND_LAUNCH_BLOCKING", "strict": "DEFER_NEVER",
                                                "defer_and_fuse": "DEFER_AND_FUSE"}[mode]


def test_no_grad_autocast_and_compile_arguments(mode):
    torch.manual_seed(0)
    linear = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    tpu_linear = clone_to(linear, "tpu")
    compiled = torch.compile(tpu_linear, backend="tpu", mode="max-autotune")
    with torch.no_grad():
        out = compiled(x.to("tpu"))
    assert not out.requires_grad
    torch.testing.assert_close(out.cpu(), linear(x).detach())
    with torch.autocast("tpu", dtype=torch.bfloat16):
        out = compiled(x.to("tpu"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = linear(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), expected, rtol=2e-2, atol=2e-2)
    with pytest.warns(UserWarning, match="unknown option 'triton.cudagraphs'"):
        compiled = torch.compile(lambda t: t * 2, backend="tpu", options={"triton.cudagraphs": True})
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), x * 2)
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        torch.compile(lambda t: t + 1, backend="tpu", mode="fastest")(x.to("tpu"))


def test_new_static_shape_compiles_once_then_hits_cache(mode):
    compiled = torch.compile(lambda t: (t * t).sum(0), backend="tpu", dynamic=False)
    torch_tpu.reset_metrics()
    columns = {"debug": 3, "strict": 4, "defer_and_fuse": 5}[mode]  # no program from another test
    shapes = [(4, columns), (5, columns), (4, columns), (5, columns)]
    for shape in shapes:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), (x * x).sum(0))
    counters = torch_tpu.metrics()
    assert counters["compiled_graphs"] == 2
    assert counters["compiles"] == 2
    assert counters["graph_replays"] == 2


def test_dynamic_shapes_compile_one_program_per_size_bucket(mode):
    # A decode-style loop: the sequence grows by one each call. Sizes of one power-of-two bucket
    # share a padded program, so 2..33 rows compile about one program per bucket, not per size.
    compiled = torch.compile(lambda t: t.softmax(-1) * t.shape[0] + t.sum(0), backend="tpu", dynamic=True)
    torch_tpu.reset_metrics()
    columns = {"debug": 5, "strict": 6, "defer_and_fuse": 7}[mode]  # no program from another mode's run
    for rows in range(2, 34):
        x = torch.randn(rows, columns)
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), x.softmax(-1) * rows + x.sum(0))
    counters = torch_tpu.metrics()
    assert counters["compiled_graphs"] == 1  # one symbolic graph serves every size
    assert counters["compiles_compiled_graph"] <= 6  # buckets 2, 4, 8, 16, 32, 64
    assert counters["compiled_graph_program_overflows"] == 0
    # A size seen before runs its captured program again, with its own numbers (t.shape[0]).
    for rows in (3, 2):
        x = torch.randn(rows, columns)
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), x.softmax(-1) * rows + x.sum(0))
    assert torch_tpu.metrics()["graph_replays"] == counters["graph_replays"] + 2


def test_a_graph_that_keeps_compiling_runs_op_by_op_past_its_bound(mode):
    # A sort along the changing dim cannot pad: every size is a program of its own, until the
    # bound, after which new sizes run op by op (warned once), still equal to the CPU's.
    compiled = torch.compile(lambda t: t.sort(-1).values * t.shape[-1], backend="tpu", dynamic=True,
                             options={"max_programs_per_graph": 3})
    torch_tpu.reset_metrics()
    rows = {"debug": 3, "strict": 4, "defer_and_fuse": 5}[mode]  # no program from another mode's run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for columns in range(2, 9):
            x = torch.randn(rows, columns)
            torch.testing.assert_close(compiled(x.to("tpu")).cpu(), x.sort(-1).values * columns)
    counters = torch_tpu.metrics()
    assert counters["compiles_compiled_graph"] == 3
    assert counters["compiled_graph_program_overflows"] == 4
    assert sum("XLA programs for the input sizes" in str(w.message) for w in caught) == 1


def test_compile_failure_names_the_fx_node_and_writes_the_program(tmp_path):
    code = ("import torch, torch_tpu\n"
            "f = torch.compile(lambda a, b: (a @ b).relu(), backend='tpu')\n"
            "try:\n"
            "    f(torch.ones(3, 3, device='tpu'), torch.ones(3, 3, device='tpu'))\n"
            "except Exception as e:\n"
            "    print(type(e).__name__); print(e)\n")
    env = dict(os.environ, TORCH_TPU_INJECT_COMPILE_FAILURE="mm", TMPDIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "FX node 'mm'" in result.stdout and "aten.mm.default" in result.stdout, result.stdout
    written = [line.split("written to ")[1].strip() for line in result.stdout.splitlines() if "written to " in line]
    assert written and os.path.exists(written[0]), result.stdout
    assert "stablehlo.dot_general" in open(written[0]).read()


def test_random_ops_draw_new_numbers_every_call(mode):
    compiled = torch.compile(lambda t: F.dropout(t, 0.5, training=True), backend="tpu")
    x = torch.ones(64, 64, device="tpu")
    first, second = compiled(x).cpu(), compiled(x).cpu()
    assert not torch.equal(first, second)
    for sample in (first, second):
        assert set(sample.unique().tolist()) <= {0.0, 2.0}
        assert 0.4 < (sample == 0).float().mean().item() < 0.6


def test_dynamo_backend_metrics_are_reset():
    compiled = torch.compile(lambda t: t + 1, backend="tpu")
    compiled(torch.zeros(2, device="tpu"))
    assert torch_tpu.metrics()["compiled_graph_calls"] >= 1
    torch_tpu.reset_metrics()
    assert dynamo_backend.counters() == {k: 0 for k in dynamo_backend.counters()}


def test_out_of_range_index_in_a_replayed_graph_raises_at_the_next_sync(mode):
    compiled = torch.compile(lambda table, ids: F.embedding(ids, table) * 2, backend="tpu")
    table = torch.randn(10, 3, device="tpu")
    good = torch.tensor([1, 2, 9], device="tpu")
    for _ in range(2):  # capture, then replay
        torch.testing.assert_close(compiled(table, good).cpu(), F.embedding(good.cpu(), table.cpu()) * 2)
    # The core ATen decompositions turn embedding into index_select, which names itself.
    with pytest.raises(IndexError, match="index_select: index out of range"):
        compiled(table, torch.tensor([1, 10, 2], device="tpu"))
        torch.tpu.synchronize()


def test_compiled_graphs_load_from_the_persistent_cache_in_a_new_process(tmp_path):
    code = ("import torch, torch_tpu\n"
            "torch.manual_seed(0)\n"
            "model = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()).to('tpu'), backend='tpu')\n"
            "model(torch.randn(4, 8, device='tpu')).sum().backward()\n"
            "torch.tpu.synchronize()\n"
            "stats = torch_tpu.cache_stats()\n"
            "print(torch_tpu.metrics()['compiles'], stats['disk_hits'])\n")
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
            for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    (cold_compiles, _), (warm_compiles, warm_disk_hits) = [map(int, r.stdout.split()[-2:]) for r in runs]
    assert cold_compiles > 0
    assert warm_compiles == 0 and warm_disk_hits == cold_compiles


def test_grouped_mm_in_float32_compiles_as_hugging_face_moe_layers_call_it(mode):
    def experts(tokens, weights, offsets):
        return torch._grouped_mm(tokens, weights, offs=offsets).relu()

    torch.manual_seed(0)
    tokens, weights = torch.randn(6, 8), torch.randn(3, 8, 8)
    offsets = torch.tensor([2, 3, 6], dtype=torch.int32)
    compiled = torch.compile(experts, backend="tpu")
    actual = compiled(tokens.to("tpu"), weights.to("tpu"), offsets.to("tpu"))
    torch.testing.assert_close(actual.cpu(), experts(tokens, weights, offsets))


def test_compiled_backward_leaves_the_autograd_thread_following_the_caller():
    # The compiled backward runs on the autograd engine's thread; it must not pin that thread to
    # the mode it ran in, or a later eager backward in another mode stops fusing.
    linear = torch.nn.Linear(4, 4).to("tpu")
    with torch_tpu.eager_mode("strict"):
        torch.compile(linear, backend="tpu")(torch.randn(2, 4, device="tpu")).sum().backward()
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch_tpu.reset_metrics()
        linear(torch.randn(2, 4, device="tpu")).sum().backward()
        linear.weight.grad.sum().item()
        assert torch_tpu.metrics()["flush_reasons"] == {"host access": 1}


def test_compile_failure_names_the_node_that_failed_not_the_first_of_its_op():
    # Two comparisons; only the second (with a complex number) has no lowering.
    torch_tpu.set_fallback_error(True)
    try:
        f = torch.compile(lambda a, z: ((a == 1).float().sum(), z == 1j), backend="tpu")
        with pytest.raises(Exception, match="FX node 'eq_1'"):
            f(torch.ones(3, device="tpu"), torch.ones(3, dtype=torch.complex64, device="tpu"))
    finally:
        torch_tpu.set_fallback_error(False)
    # The failed graph's capture is closed: later fused ops compile a graph of their own.
    torch_tpu.reset_metrics()
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch.testing.assert_close((torch.arange(13.0, device="tpu").sin() * 3 + 1).cpu(),
                                   torch.arange(13.0).sin() * 3 + 1)
    assert torch_tpu.metrics()["compiles_fused_graph"] + torch_tpu.metrics()["cache_hits"] >= 1
