"""The PyTorch habits of a CUDA user carry over to tpu: generators and RNG state, autocast and
GradScaler, checkpoints (torch.save / torch.load / safetensors), data loading and the nn.utils
helpers real training scripts call. Each compares with what the same code does on the CPU."""
import io
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import torch_tpu


# ---------------------------------------------------------------- random numbers

def test_seed_api_like_cuda(mode):
    torch.tpu.manual_seed(11)
    assert torch.tpu.initial_seed() == 11
    first = torch.rand(8, device="tpu").cpu()
    torch.tpu.manual_seed_all(11)
    assert torch.equal(torch.rand(8, device="tpu").cpu(), first)
    drawn = torch.tpu.seed()
    assert torch.tpu.initial_seed() == drawn
    states = torch.tpu.get_rng_state_all()
    assert len(states) == torch.tpu.device_count()
    assert states[0].dtype == torch.uint8 and states[0].device.type == "cpu"


def test_rng_state_restore_reproduces_every_kind_of_draw(mode, no_fallback):
    torch.tpu.manual_seed(5)
    x = torch.ones(64, device="tpu")
    state = torch.tpu.get_rng_state()
    draws = lambda: [torch.rand(16, device="tpu"), torch.randn(16, device="tpu"),  # noqa: E731
                     F.dropout(x, 0.5), torch.randperm(16, device="tpu"),
                     torch.multinomial(torch.ones(16, device="tpu"), 4)]
    first = [d.cpu() for d in draws()]
    torch.tpu.set_rng_state(state)
    again = [d.cpu() for d in draws()]
    for a, b in zip(first, again):
        assert torch.equal(a, b)


def test_generator_objects_drive_every_sampler(mode, no_fallback):
    def run(seed):
        g = torch.Generator(device="tpu").manual_seed(seed)
        x = torch.ones(256, device="tpu")
        probs = torch.tensor([0.1, 0.0, 0.6, 0.3], device="tpu")
        return [torch.rand(16, device="tpu", generator=g), torch.randn(16, device="tpu", generator=g),
                torch.bernoulli(torch.full((32,), 0.5, device="tpu"), generator=g),
                torch.randperm(50, device="tpu", generator=g),
                torch.multinomial(probs, 8, replacement=True, generator=g),
                torch.multinomial(probs, 3, replacement=False, generator=g),
                torch.empty(16, device="tpu").normal_(generator=g), x]
    a, b, c = run(3), run(3), run(4)
    for u, v in zip(a, b):
        assert torch.equal(u.cpu(), v.cpu())
    assert not torch.equal(a[0].cpu(), c[0].cpu())
    # The default generator is untouched by draws from a private one.
    torch.tpu.manual_seed(9)
    expected = torch.rand(4, device="tpu").cpu()
    torch.tpu.manual_seed(9)
    run(1)
    assert torch.equal(torch.rand(4, device="tpu").cpu(), expected)


def test_randperm_is_a_permutation(mode, no_fallback):
    torch.manual_seed(0)
    for n, dtype in [(0, torch.int64), (1, torch.int64), (1000, torch.int64), (100, torch.int32),
                     (64, torch.float32)]:
        perm = torch.randperm(n, device="tpu", dtype=dtype).cpu()
        assert perm.dtype == dtype and perm.shape == (n,)
        assert torch.equal(perm.sort().values, torch.arange(n, dtype=dtype))
    with pytest.raises(RuntimeError, match="too large"):
        torch.randperm(300, dtype=torch.int8, device="tpu")


def test_multinomial_distribution_and_checks(mode, no_fallback):
    torch.manual_seed(0)
    probs = torch.tensor([0.1, 0.0, 0.6, 0.3], device="tpu")
    draws = torch.multinomial(probs, 20000, replacement=True).cpu()
    assert draws.dtype == torch.int64 and draws.shape == (20000,)
    freq = torch.bincount(draws, minlength=4) / 20000
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.0, 0.6, 0.3]), atol=0.02, rtol=0)
    rows = torch.multinomial(probs.repeat(4000, 1) * 7, 3).cpu()  # unnormalised weights are fine
    assert rows.shape == (4000, 3)
    assert (rows != 1).all()  # a zero-probability category is never drawn
    assert (rows[:, 0] != rows[:, 1]).all() and (rows[:, 1] != rows[:, 2]).all()
    first = torch.bincount(rows[:, 0], minlength=4) / 4000
    torch.testing.assert_close(first, torch.tensor([0.1, 0.0, 0.6, 0.3]), atol=0.03, rtol=0)
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(probs, 5)


# ---------------------------------------------------------------- autocast

def _operands():
    torch.manual_seed(0)
    return dict(a=torch.randn(8, 16), b=torch.randn(16, 8), c=torch.randn(8, 8),
                batch=torch.randn(2, 8, 16), batch2=torch.randn(2, 16, 8), w=torch.randn(8, 16),
                img=torch.randn(1, 3, 8, 8), kernel=torch.randn(4, 3, 3, 3),
                target=torch.randint(0, 8, (8,)))


# CUDA autocast's categories: these run in the autocast dtype...
LOW_PRECISION = {
    "mm": lambda t: torch.mm(t["a"], t["b"]),
    "matmul": lambda t: t["a"] @ t["b"],
    "linear": lambda t: F.linear(t["a"], t["w"]),
    "bmm": lambda t: torch.bmm(t["batch"], t["batch2"]),
    "baddbmm": lambda t: torch.baddbmm(t["c"].expand(2, 8, 8), t["batch"], t["batch2"]),
    "addmm": lambda t: torch.addmm(t["c"], t["a"], t["b"]),
    "conv2d": lambda t: F.conv2d(t["img"], t["kernel"]),
}
# ...these in float32 even when their inputs are in the low precision type...
FLOAT32 = {
    "softmax": lambda t: torch.softmax(t["c"].to(t["low"]), -1),
    "log_softmax": lambda t: F.log_softmax(t["c"].to(t["low"]), -1),
    "sum": lambda t: t["c"].to(t["low"]).sum(),
    "layer_norm": lambda t: F.layer_norm(t["c"].to(t["low"]), (8,)),
    "exp": lambda t: t["c"].to(t["low"]).exp(),
    "mse_loss": lambda t: F.mse_loss(t["c"].to(t["low"]), t["c"].to(t["low"]) * 2),
    "nll_loss": lambda t: F.nll_loss(F.log_softmax(t["c"].to(t["low"]), -1), t["target"]),
}
# ...these promote mixed inputs to the widest, and the rest are left as they are.
PROMOTE = {
    "addcmul": lambda t: torch.addcmul(t["c"], t["c"].to(t["low"]), t["c"]),
    "dot": lambda t: torch.dot(t["c"][0].to(t["low"]), t["c"][1]),
}
UNTOUCHED = {
    "relu": lambda t: torch.relu(t["c"]),
    "add_low": lambda t: t["c"].to(t["low"]) + 1,
}


@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_autocast_op_categories_match_cuda(mode, low):
    cpu = _operands()
    tpu = {k: v.to("tpu") for k, v in cpu.items()}
    cpu["low"] = tpu["low"] = low
    low_precision = dict(LOW_PRECISION)
    with torch.autocast("tpu", dtype=low):
        assert torch.is_autocast_enabled("tpu") and torch.get_autocast_dtype("tpu") == low
        for name, fn in low_precision.items():
            out = fn(tpu)
            assert out.dtype == low, name
            # Same numbers as casting the inputs by hand and running the op in `low` on the CPU.
            expected = fn({k: v.to(low) if v.is_floating_point() else v for k, v in cpu.items()
                           if isinstance(v, torch.Tensor)})
            torch.testing.assert_close(out.cpu(), expected, atol=0.1, rtol=0.05, msg=name)
        # The float32 ops must compute on their inputs upcast, not in the low precision type.
        rounded = {k: v.to(low).float() if v.is_floating_point() else v for k, v in cpu.items()
                   if isinstance(v, torch.Tensor)}
        rounded["low"] = torch.float32
        for name, fn in FLOAT32.items():
            out = fn(tpu)
            assert out.dtype == torch.float32, name
            torch.testing.assert_close(out.cpu(), fn(rounded), msg=name)
        # cross_entropy passes its input's dtype to log_softmax, so that part stays in the low
        # type (as on cuda); its nll_loss still returns float32.
        assert F.cross_entropy(tpu["c"].to(low), tpu["target"]).dtype == torch.float32
        for name, fn in PROMOTE.items():
            assert fn(tpu).dtype == torch.float32, name
        assert UNTOUCHED["relu"](tpu).dtype == torch.float32
        assert UNTOUCHED["add_low"](tpu).dtype == low
        with torch.autocast("tpu", enabled=False):
            assert LOW_PRECISION["mm"](tpu).dtype == torch.float32
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(torch.sigmoid(tpu["c"]), torch.rand(8, 8, device="tpu"))
    assert LOW_PRECISION["mm"](tpu).dtype == torch.float32


def test_autocast_training_step_matches_cpu_autocast(mode):
    """bfloat16 autocast of a small MLP: forward, loss and float32 gradients agree with CPU
    autocast (whose list also puts linear in bfloat16 and the loss in float32)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    tpu_model = torch.nn.Sequential(*[m for m in __import__("copy").deepcopy(model)]).to("tpu")
    results = []
    for m, dev in ((model, "cpu"), (tpu_model, "tpu")):
        with torch.autocast(dev, dtype=torch.bfloat16):
            out = m(x.to(dev))
            loss = F.cross_entropy(out, y.to(dev))
        loss.backward()
        results.append((out.dtype, loss.dtype, loss.detach().cpu(), m[0].weight.grad.cpu()))
    (cpu_out, cpu_loss, cpu_value, cpu_grad), (out, loss, value, grad) = results
    assert out == cpu_out == torch.bfloat16 and loss == cpu_loss == torch.float32
    assert grad.dtype == torch.float32
    torch.testing.assert_close(value, cpu_value, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(grad, cpu_grad, atol=2e-2, rtol=5e-2)


def test_cuda_amp_spellings_exist(mode):
    from torch.tpu.amp import GradScaler, autocast
    x = torch.randn(4, 4, device="tpu")
    with autocast(dtype=torch.bfloat16):
        assert (x @ x).dtype == torch.bfloat16
    with torch.tpu.amp.autocast():  # default dtype as for torch.autocast("tpu"): float16, as on cuda
        assert (x @ x).dtype == torch.get_autocast_dtype("tpu") == torch.float16
    assert GradScaler().get_scale() == 2.0**16
    assert torch.tpu.is_bf16_supported()
    assert torch.amp.is_autocast_available("tpu")


def test_grad_scaler_float16_matches_cpu(mode, no_fallback):
    """GradScaler's two fused ops run on the device and scale, skip and update exactly as on
    the CPU, including the step skipped for an inf gradient."""
    torch.manual_seed(0)
    ref = torch.nn.Linear(8, 4)
    steps = [torch.randn(16, 8) for _ in range(3)] + [torch.full((16, 8), 1e4)]  # the last overflows
    runs = []
    for dev in ("cpu", "tpu"):
        model = __import__("copy").deepcopy(ref).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(dev, init_scale=2.0**4, growth_interval=2)
        scales = []
        for x in steps:
            opt.zero_grad()
            with torch.autocast(dev, dtype=torch.float16):
                loss = model(x.to(dev)).float().pow(2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        runs.append((scales, model.weight.detach().cpu()))
    (cpu_scales, cpu_weight), (scales, weight) = runs
    assert scales == cpu_scales and scales[-1] < scales[-2]  # the overflow halved the scale
    torch.testing.assert_close(weight, cpu_weight, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("poison", [None, float("inf"), float("nan")])
def test_grad_scaler_unscale_op_matches_cpu(mode, no_fallback, poison):
    generator = torch.Generator().manual_seed(0)
    grads = [torch.randn(5, 3, generator=generator), torch.randn(4, generator=generator).half(), torch.randn(())]
    if poison is not None:
        grads[1][2] = poison
    results = []
    for device in ("cpu", "tpu"):
        tensors = [g.clone().to(device) for g in grads]
        found_inf = torch.zeros((), device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(tensors, found_inf, torch.full((), 0.25, device=device))
        results.append(([t.cpu() for t in tensors], found_inf.item()))
    (cpu_grads, cpu_found), (grads_tpu, found) = results
    assert found == cpu_found == (0.0 if poison is None else 1.0)
    torch.testing.assert_close(grads_tpu, cpu_grads, equal_nan=True)


@pytest.mark.parametrize("scale,tracker,found_inf", [
    (2.0**8, 0, 1.0),     # an inf: back off, start counting again
    (2.0**8, 0, 0.0),     # one more good step
    (2.0**8, 2, 0.0),     # the growth interval reached: grow
    (3.0e38, 2, 0.0),     # growing would overflow: keep the scale, reset the count
])
def test_grad_scaler_update_op_matches_cpu(mode, no_fallback, scale, tracker, found_inf):
    results = []
    for device in ("cpu", "tpu"):
        current = torch.full((), scale, device=device)
        growth_tracker = torch.full((), tracker, dtype=torch.int32, device=device)
        returned = torch._amp_update_scale_(current, growth_tracker, torch.full((), found_inf, device=device),
                                            2.0, 0.5, 3)
        assert returned is current
        results.append((current.item(), growth_tracker.item()))
    assert results[1] == results[0]


# ---------------------------------------------------------------- checkpoints

def _trained(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(4, 6, device=device)).pow(2).sum().backward()
        opt.step()
    return model, opt


def test_save_and_load_tensors_views_modules_optimizers(mode, tmp_path):
    model, opt = _trained("tpu")
    base = torch.arange(12.0, device="tpu").view(3, 4)
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "base": base, "col": base[:, 1],
                "step": 3}, path)
    for map_location, device in [(None, "tpu"), ("tpu", "tpu"), ("cpu", "cpu"),
                                 ({"tpu:0": "cpu"}, "cpu"), (torch.device("tpu:0"), "tpu")]:
        ckpt = torch.load(path, map_location=map_location)
        assert ckpt["base"].device.type == device and ckpt["step"] == 3
        torch.testing.assert_close(ckpt["col"].cpu(), torch.tensor([1.0, 5.0, 9.0]))
        # A view keeps sharing its base's storage through the round trip, as on cuda.
        ckpt["base"][0, 1] = -1
        assert ckpt["col"][0].item() == -1
        for k, v in model.state_dict().items():
            assert ckpt["model"][k].device.type == device
            assert torch.equal(ckpt["model"][k].cpu(), v.cpu())
    # Resuming on tpu from a CPU-mapped checkpoint, and from one loaded onto tpu directly.
    fresh, fresh_opt = _trained("tpu")
    ckpt = torch.load(path, map_location="cpu")
    fresh.load_state_dict(ckpt["model"])
    fresh_opt.load_state_dict(ckpt["opt"])
    state = fresh_opt.state_dict()["state"][0]
    assert state["exp_avg"].device.type == "tpu"
    torch.testing.assert_close(state["exp_avg"].cpu(), opt.state_dict()["state"][0]["exp_avg"].cpu())
    x = torch.randn(2, 6)
    torch.testing.assert_close(fresh(x.to("tpu")).cpu(), model(x.to("tpu")).cpu())


def test_cpu_checkpoint_loads_onto_tpu(mode):
    buffer = io.BytesIO()
    model, _ = _trained("cpu")
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, map_location="tpu")
    assert all(v.device.type == "tpu" for v in state.values())
    tpu_model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).to("tpu")
    tpu_model.load_state_dict(state)
    x = torch.randn(2, 6)
    torch.testing.assert_close(tpu_model(x.to("tpu")).cpu(), model(x))


def test_tpu_checkpoint_loads_where_there_is_no_plugin(tmp_path):
    """A checkpoint written on tpu opens with map_location="cpu" on a machine whose PJRT plugin is
    missing (only torch_tpu's registration is needed to name the "tpu" device)."""
    model, _ = _trained("tpu")
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "t": torch.arange(5.0, device="tpu")[1:4]}, path)
    script = textwrap.dedent(f"""
        import torch
        assert not torch.tpu.is_available()
        ckpt = torch.load({str(path)!r}, map_location="cpu")
        assert ckpt["t"].device.type == "cpu" and ckpt["t"].tolist() == [1.0, 2.0, 3.0]
        print(sorted(ckpt["model"]), float(ckpt["model"]["0.weight"].sum()))
    """)
    env = dict(os.environ, TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    names, total = result.stdout.strip().rsplit("]", 1)
    assert "0.weight" in names
    assert abs(float(total) - float(model.state_dict()["0.weight"].sum().cpu())) < 1e-4


def test_safetensors_round_trip(mode, tmp_path):
    """safetensors saves tpu tensors as they are. Its loader only knows a fixed list of device
    names, which has no "tpu": load onto the CPU and move, or name the device by its index
    (device=0 is torch.device(0), the current accelerator's device 0)."""
    safetensors_torch = pytest.importorskip("safetensors.torch")
    model, _ = _trained("tpu")
    path = str(tmp_path / "model.safetensors")
    safetensors_torch.save_file(model.state_dict(), path)
    on_cpu = safetensors_torch.load_file(path)
    by_index = safetensors_torch.load_file(path, device=0)
    for k, v in model.state_dict().items():
        assert on_cpu[k].device.type == "cpu" and by_index[k].device.type == "tpu"
        assert torch.equal(on_cpu[k], v.cpu()) and torch.equal(by_index[k].cpu(), v.cpu())
    fresh = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).to("tpu")
    missing, unexpected = safetensors_torch.load_model(fresh, path)
    assert not missing and not unexpected
    assert fresh[0].weight.device.type == "tpu"
    assert torch.equal(fresh[0].weight.cpu(), model[0].weight.cpu())
    blob = safetensors_torch.save({"x": torch.arange(4.0, device="tpu")})
    assert safetensors_torch.load(blob)["x"].tolist() == [0.0, 1.0, 2.0, 3.0]


# ---------------------------------------------------------------- utilities scripts use

def test_dataloader_with_pin_memory_feeds_tpu(mode):
    dataset = torch.utils.data.TensorDataset(torch.randn(10, 3), torch.arange(10))
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, pin_memory=True)
    seen = []
    for x, y in loader:
        x, y = x.to("tpu", non_blocking=True), y.to("tpu", non_blocking=True)
        assert x.device.type == "tpu"
        seen.append((x * 2).cpu())
    torch.testing.assert_close(torch.cat(seen), dataset.tensors[0] * 2)
    pinned = torch.randn(5).pin_memory()
    torch.testing.assert_close(pinned.to("tpu", non_blocking=True).cpu(), pinned)


def test_activation_checkpointing_matches_cpu(mode):
    from torch.utils.checkpoint import checkpoint
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 8))
    x = torch.randn(4, 8)
    grads = []
    for dev in ("cpu", "tpu"):
        b = __import__("copy").deepcopy(block).to(dev)
        inp = x.to(dev, copy=True).requires_grad_()
        for use_reentrant in (False, True):
            out = checkpoint(b, inp, use_reentrant=use_reentrant)
            out.pow(2).sum().backward()
        grads.append((inp.grad.cpu(), b[0].weight.grad.cpu()))
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a)


def test_checkpointed_dropout_replays_the_same_mask(mode):
    """checkpoint() saves and restores the tpu RNG state, so the recomputed forward in the
    backward pass draws the same dropout mask: gradients equal those without checkpointing."""
    from torch.utils.checkpoint import checkpoint
    layer = torch.nn.Linear(16, 16).to("tpu")
    x = torch.randn(8, 16, device="tpu")
    fn = lambda t: F.dropout(layer(t), 0.5).sum()  # noqa: E731
    grads = []
    for ckpt in (False, True):
        torch.tpu.manual_seed(3)
        layer.zero_grad()
        (checkpoint(fn, x, use_reentrant=False) if ckpt else fn(x)).backward()
        grads.append(layer.weight.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])


def test_clip_grad_norm_matches_cpu(mode):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8) * 10
    results = []
    for dev in ("cpu", "tpu"):
        m = __import__("copy").deepcopy(model).to(dev)
        m(x.to(dev)).pow(2).sum().backward()
        norm = torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm=1.0)
        value = torch.nn.utils.clip_grad_value_(m.parameters(), clip_value=0.01)
        assert value is None
        results.append((norm.cpu(), m.weight.grad.cpu()))
    torch.testing.assert_close(results[1][0], results[0][0])
    torch.testing.assert_close(results[1][1], results[0][1])


@pytest.mark.parametrize("kind", ["weight_norm", "orthogonal", "spectral_norm"])
def test_parametrizations_match_cpu(mode, kind):
    torch.manual_seed(0)
    base = torch.nn.Linear(6, 6)
    x = torch.randn(3, 6)
    results = []
    for dev in ("cpu", "tpu"):
        torch.manual_seed(1)  # spectral_norm draws its power-iteration start vectors
        layer = getattr(torch.nn.utils.parametrizations, kind)(__import__("copy").deepcopy(base).to(dev))
        out = layer(x.to(dev))
        out.pow(2).sum().backward()
        grad = next(p.grad for n, p in layer.named_parameters() if p.grad is not None)
        results.append((out.detach().cpu(), grad.cpu(), layer.weight.detach().cpu()))
    if kind == "spectral_norm":
        # The power iteration starts from random vectors drawn on each device; after it has
        # converged the normalised weight has unit spectral norm on both.
        assert abs(torch.linalg.matrix_norm(results[1][2], ord=2) - 1) < 0.05
        return
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)


def test_memory_summary_and_empty_cache(mode):
    keep = torch.empty(1024, 1024, device="tpu").fill_(1)
    torch.tpu.synchronize()
    summary = torch.tpu.memory_summary()
    assert "Allocated memory" in summary and "MiB" in summary
    assert torch.tpu.memory_summary(device="tpu:0", abbreviated=True) == summary
    torch.tpu.empty_cache()
    torch.accelerator.empty_cache() if hasattr(torch.accelerator, "empty_cache") else None
    assert keep.sum().item() == 1024 * 1024
