"""What the backend changes inside PyTorch (torch_tpu/_torch_patches.py), pinned to the PyTorch it
was written against.

For each patch: the symbol it replaces still has the signature written here, the patch is
installed, PyTorch itself still needs it where that can be seen, and it does what it says,
compared with PyTorch on the CPU where that applies. A failure after a PyTorch upgrade means:
read the patch's docstring, see whether PyTorch still needs it, and change the patch, its check
and the signature here together.
"""
import copy
import inspect
import multiprocessing
import multiprocessing.queues
import pickle
import re
from multiprocessing.reduction import ForkingPickler

import pytest
import torch

import torch_tpu
from test_model_zoo_regressions import _TiedLM
from torch_tpu import _torch_patches as patches

PATCHES = ["backward_follows_the_caller", "grouped_mm_meta_any_float", "gru_cell_meta",
           "dynamo_device_interface", "pickling_refuses_tpu", "queue_put_refuses_tpu",
           "dlpack_refuses_tpu", "plain_compile_routes_tpu_graphs", "module_apply_keeps_ties",
           "optimizer_step_as_one_program", "flex_attention_accepts_tpu"]


def original_of(symbol, patch):
    """What `symbol` replaced, after checking that `patch` installed it."""
    assert getattr(symbol, patches.MARK, None) == patch, f"{symbol} is not the replacement of {patch}"
    return getattr(symbol, patches.ORIGINAL)


def signature(fn):
    parameters = [p.replace(annotation=inspect.Parameter.empty) for p in inspect.signature(fn).parameters.values()]
    return str(inspect.Signature(parameters))


def test_every_patch_is_installed_in_order():
    import torch._dynamo.device_interface  # noqa: F401  (the patches that wait for their module)
    import torch.nn.attention.flex_attention  # noqa: F401

    assert patches.status() == {name: "installed" for name in PATCHES}
    assert list(patches.status()) == PATCHES


def test_applying_again_replaces_nothing():
    import torch._dynamo.device_interface as interfaces
    import torch.nn.attention.flex_attention  # noqa: F401

    symbols = lambda: (torch.nn.Module._apply, torch.autograd.graph._engine_run_backward,  # noqa: E731
                       torch.Tensor.__dlpack__, torch.to_dlpack, multiprocessing.queues.Queue.put,
                       dict(ForkingPickler._extra_reducers), interfaces.TpuInterface,
                       torch._TorchCompileInductorWrapper.__call__,
                       torch.nn.attention.flex_attention._validate_device,
                       torch.optim.Optimizer.profile_hook_step,
                       torch.ops.aten._grouped_mm.default.py_kernels[torch._C.DispatchKey.Meta])
    before = symbols()
    patches.apply()
    assert symbols() == before
    assert patches.status() == {name: "installed" for name in PATCHES}


class _Owner:
    def method(self, value):
        return value


@pytest.mark.parametrize("on_mismatch", ["warn", "error"])
def test_a_changed_symbol_is_left_alone_and_named_with_the_pytorch_version(monkeypatch, on_mismatch):
    monkeypatch.setattr(patches, "_status", {})

    def example_patch():
        original = patches._function(_Owner, "method", ("self", "fn"))
        patches._replace(_Owner, "method", original, lambda self, fn: None)

    patch = patches._Patch(example_patch, on_mismatch, "examples break", None)
    expected = (rf"PyTorch {re.escape(torch.__version__)}, .*_Owner\.method takes \(self, value\), not \(self, fn, \.\.\.\); "
                r"the patch 'example_patch' cannot be applied, and without it examples break")
    if on_mismatch == "warn":
        with pytest.warns(patches.TorchPatchWarning, match=expected):
            patch.run()
    else:
        with pytest.raises(RuntimeError, match=expected):
            patch.run()
    assert _Owner.method is not None and _Owner().method(3) == 3
    assert patches.status()["example_patch"].startswith("skipped: ")


def test_a_missing_symbol_is_named():
    with pytest.raises(patches._Mismatch, match=r"_Owner\.gone does not exist"):
        patches._function(_Owner, "gone")
    with pytest.raises(patches._Mismatch, match=r"aten::no_such_op does not exist"):
        patches._aten_op("no_such_op")


# backward_follows_the_caller

def test_engine_run_backward_signature():
    original = original_of(torch.autograd.graph._engine_run_backward, "backward_follows_the_caller")
    assert torch.autograd._engine_run_backward is torch.autograd.graph._engine_run_backward
    assert signature(original) == "(t_outputs, *args, **kwargs)"


def test_backward_runs_in_the_mode_of_its_caller(mode):
    seen = {}
    x = torch.linspace(-1, 1, 5)

    def loss(w):
        y = (w * 3).exp()
        if w.device.type == "tpu":
            y.register_hook(lambda grad: seen.setdefault("mode", torch_tpu.get_eager_mode()) and None)
        return y.sum()

    w = x.to("tpu").requires_grad_()
    loss(w).backward()
    expected = x.clone().requires_grad_()
    loss(expected).backward()
    assert seen["mode"] is torch_tpu.get_eager_mode()  # the engine's thread, not this one
    torch.testing.assert_close(w.grad.cpu(), expected.grad)


# grouped_mm_meta_any_float

def _experts():
    torch.manual_seed(0)
    return torch.randn(6, 8), torch.randn(3, 8, 8), torch.tensor([2, 3, 6], dtype=torch.int32)


def test_grouped_mm_meta_signature():
    meta = torch.ops.aten._grouped_mm.default.py_kernels[torch._C.DispatchKey.Meta]
    original = original_of(meta, "grouped_mm_meta_any_float")
    assert signature(original) == "(mat_a, mat_b, offs=None, bias=None, out_dtype=None, *, out=None)"
    # Still needed: PyTorch's own meta function takes bfloat16 only.
    tokens, weights, offsets = (t.to("meta") for t in _experts())
    with pytest.raises(RuntimeError, match="BF16"):
        original(tokens, weights, offsets)


def test_grouped_mm_meta_takes_float32_as_the_cpu_kernel_does(mode):
    from torch._dispatch.python import enable_python_dispatcher

    tokens, weights, offsets = _experts()
    expected = torch._grouped_mm(tokens, weights, offs=offsets)
    with enable_python_dispatcher():  # as under torch.compile, where the Python meta kernel runs
        meta = torch._grouped_mm(tokens.to("meta"), weights.to("meta"), offs=offsets.to("meta"))
    assert (meta.shape, meta.dtype) == (expected.shape, expected.dtype)
    actual = torch._grouped_mm(tokens.to("tpu"), weights.to("tpu"), offs=offsets.to("tpu"))
    torch.testing.assert_close(actual.cpu(), expected)


# gru_cell_meta

def test_gru_cell_schemas_and_our_meta_kernels():
    assert str(torch.ops.aten._thnn_fused_gru_cell.default._schema) == (
        "aten::_thnn_fused_gru_cell(Tensor input_gates, Tensor hidden_gates, Tensor hx, Tensor? input_bias=None, "
        "Tensor? hidden_bias=None) -> (Tensor, Tensor)")
    assert str(torch.ops.aten._thnn_fused_gru_cell_backward.default._schema) == (
        "aten::_thnn_fused_gru_cell_backward(Tensor grad_hy, Tensor workspace, bool has_bias) "
        "-> (Tensor, Tensor, Tensor, Tensor, Tensor)")
    for name in ("_thnn_fused_gru_cell", "_thnn_fused_gru_cell_backward"):
        meta = [line for line in torch._C._dispatch_dump(f"aten::{name}").splitlines() if line.startswith("Meta:")]
        assert len(meta) == 1 and "torch_tpu" in meta[0], meta  # ours, not PyTorch's


def test_gru_cell_runs_on_tpu_as_on_cpu(mode, no_fallback):
    torch.manual_seed(0)
    cell, x, h = torch.nn.GRUCell(4, 5), torch.randn(3, 4), torch.randn(3, 5)
    expected = cell(x, h)
    expected.square().sum().backward()
    tpu_cell = copy.deepcopy(cell).to("tpu")
    actual = tpu_cell(x.to("tpu"), h.to("tpu"))
    actual.square().sum().backward()
    torch.testing.assert_close(actual.cpu(), expected)
    torch.testing.assert_close(tpu_cell.weight_hh.grad.cpu(), cell.weight_hh.grad)
    gates = torch.empty(3, 15, device="meta")
    hy, workspace = torch.ops.aten._thnn_fused_gru_cell(gates, gates, torch.empty(3, 5, device="meta"))
    assert hy.shape == expected.shape and workspace.shape == (3, 25)


# dynamo_device_interface

def test_dynamo_device_interface_replaces_the_placeholder():
    import torch._dynamo.device_interface as interfaces
    import torch.nn.attention.flex_attention  # noqa: F401

    placeholder = original_of(interfaces.TpuInterface, "dynamo_device_interface")
    assert issubclass(placeholder, interfaces.DeviceInterface)
    with pytest.raises(NotImplementedError):  # still needed: PyTorch's placeholder cannot count
        placeholder.device_count()
    assert signature(interfaces.register_interface_for_device) == "(device, device_interface)"
    interface = interfaces.get_interface_for_device("tpu")
    assert interface is interfaces.TpuInterface is interfaces.get_interface_for_device("tpu:0")
    assert interface.device_count() == torch.tpu.device_count()


# pickling_refuses_tpu and queue_put_refuses_tpu

def test_pickling_refuses_tpu_tensors_and_leaves_cpu_ones_to_pytorch():
    for cls in (torch.Tensor, torch.nn.Parameter, torch.UntypedStorage):
        original = original_of(ForkingPickler._extra_reducers[cls], "pickling_refuses_tpu")
        assert original.__module__ == "torch.multiprocessing.reductions"
    assert signature(original_of(ForkingPickler._extra_reducers[torch.Tensor], "pickling_refuses_tpu")) == "(tensor)"
    with pytest.raises(RuntimeError, match="cannot be sent to another process"):
        ForkingPickler.dumps(torch.ones(2, device="tpu"))
    with pytest.raises(RuntimeError, match="cannot be sent to another process"):
        ForkingPickler.dumps(torch.ones(2, device="tpu").untyped_storage())
    cpu = torch.arange(3.0)
    torch.testing.assert_close(pickle.loads(ForkingPickler.dumps(cpu)), cpu)


def test_queue_put_refuses_tpu_tensors_in_the_caller():
    original = original_of(multiprocessing.queues.Queue.put, "queue_put_refuses_tpu")
    assert signature(original) == "(self, obj, block=True, timeout=None)"
    queue = multiprocessing.get_context("spawn").Queue()
    try:
        with pytest.raises(RuntimeError, match="cannot be sent to another process"):
            queue.put({"batch": [torch.ones(1, device="tpu")]})
        queue.put(torch.arange(3.0))
        assert queue.get(timeout=60).tolist() == [0.0, 1.0, 2.0]
    finally:
        queue.close()
        queue.join_thread()


# dlpack_refuses_tpu

def test_dlpack_refuses_tpu_tensors_and_leaves_cpu_ones_to_pytorch():
    dlpack = original_of(torch.Tensor.__dlpack__, "dlpack_refuses_tpu")
    device = original_of(torch.Tensor.__dlpack_device__, "dlpack_refuses_tpu")
    original_of(torch.utils.dlpack.to_dlpack, "dlpack_refuses_tpu")
    assert torch.to_dlpack is torch.utils.dlpack.to_dlpack
    assert signature(dlpack) == "(self, *, stream=-1, max_version=None, dl_device=None, copy=None)"
    assert signature(device) == "(self)"
    t = torch.ones(3, device="tpu")
    # Still needed: PyTorch's own __dlpack__ hands out the tpu tensor's (unreadable) address.
    assert type(dlpack(t)).__name__ == "PyCapsule"
    for export in (torch.from_dlpack, torch.Tensor.__dlpack__, torch.Tensor.__dlpack_device__, torch.to_dlpack):
        with pytest.raises(BufferError, match=r"cpu\(\)"):
            export(t)
    cpu = torch.arange(3.0)
    torch.testing.assert_close(torch.from_dlpack(cpu), cpu)
    torch.testing.assert_close(torch.utils.dlpack.from_dlpack(torch.to_dlpack(cpu)), cpu)


# plain_compile_routes_tpu_graphs

def test_plain_compile_sends_tpu_graphs_here_and_the_rest_to_inductor(monkeypatch):
    import torch._inductor.compile_fx as compile_fx

    from torch_tpu import dynamo_backend

    original = original_of(torch._TorchCompileInductorWrapper.__call__, "plain_compile_routes_tpu_graphs")
    assert signature(original) == "(self, model_, inputs_, *, config_patches=None)"
    calls = []
    monkeypatch.setattr(dynamo_backend, "tpu_backend", lambda gm, inputs: calls.append("tpu") or gm)
    monkeypatch.setattr(compile_fx, "compile_fx", lambda gm, inputs, **kwargs: calls.append("inductor") or gm)
    graph = torch.fx.symbolic_trace(lambda x: torch.relu(x) * 3)
    wrapper = torch._TorchCompileInductorWrapper("default", None, False)
    assert wrapper(graph, [torch.ones(2, device="tpu")]) is graph
    assert wrapper(graph, [torch.ones(2)]) is graph
    assert calls == ["tpu", "inductor"]


# module_apply_keeps_ties

def test_module_apply_signature_and_why_it_is_needed():
    original = original_of(torch.nn.Module._apply, "module_apply_keeps_ties")
    assert signature(original) == "(self, fn, recurse=True)"
    # Still needed: c10 does not let a tpu tensor replace a CPU one in place, so PyTorch's own
    # _apply makes one Parameter per module.
    assert not torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1, device="tpu"))
    model = _TiedLM()
    original(model, lambda t: t.to("tpu"))
    assert model.head.weight is not model.embed.weight


def test_tied_parameters_stay_tied_on_tpu_as_on_cpu(mode):
    torch.manual_seed(0)
    cpu = _TiedLM().to(torch.float64)  # a CPU conversion keeps the tie: PyTorch's behaviour
    assert cpu.head.weight is cpu.embed.weight
    moved = copy.deepcopy(cpu).to("tpu")
    assert moved.head.weight is moved.embed.weight and moved.head.weight.device.type == "tpu"
    assert len(list(moved.parameters())) == len(list(cpu.parameters())) == 1
    ids = torch.tensor([[1, 5], [10, 0]])
    torch.testing.assert_close(moved(ids.to("tpu")).cpu(), cpu(ids))
    back = moved.cpu()
    assert back.head.weight is back.embed.weight


# optimizer_step_as_one_program

def _trained_pair(make_optimizer, steps=3, closure=False):
    """A small model trained on CPU and a copy on tpu with the same optimizer; the tpu copy's
    programs per step."""
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    tpu = copy.deepcopy(cpu).to("tpu")
    x = torch.randn(5, 8)
    programs = []
    for model, device in ((cpu, "cpu"), (tpu, "tpu")):
        optimizer = make_optimizer(model.parameters())
        inputs = x.to(device)

        def loss_and_backward():
            optimizer.zero_grad()
            loss = model(inputs).square().mean()
            loss.backward()
            return loss

        for _ in range(steps):
            if closure:
                optimizer.step(loss_and_backward)
                continue
            loss_and_backward()
            if device == "tpu":
                torch.tpu.synchronize()
                torch_tpu.reset_metrics()
            optimizer.step()
            if device == "tpu":
                torch.tpu.synchronize()
                programs.append(torch_tpu.metrics()["executions"])
    return cpu, tpu, programs


def test_optimizer_step_hook_signature():
    original = original_of(torch.optim.Optimizer.profile_hook_step, "optimizer_step_as_one_program")
    assert signature(original) == "(func)"


@pytest.mark.parametrize("make_optimizer", [
    lambda p: torch.optim.AdamW(p, lr=1e-2),
    lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True),
    lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False),
], ids=["adamw_foreach", "sgd_momentum", "adam_for_loop"])
def test_a_strict_optimizer_step_is_one_program_and_matches_cpu(mode, make_optimizer):
    cpu, tpu, programs = _trained_pair(make_optimizer)
    for expected, actual in zip(cpu.parameters(), tpu.parameters()):
        torch.testing.assert_close(actual.cpu(), expected)
    if mode == "strict":
        assert programs == [1, 1, 1]
    elif mode == "debug":  # debug keeps one program per op, to name a failing one
        assert min(programs) > 1


def test_a_step_with_a_closure_runs_as_the_mode_runs_it(mode):
    cpu, tpu, _ = _trained_pair(lambda p: torch.optim.LBFGS(p, lr=0.5, max_iter=4), steps=2, closure=True)
    for expected, actual in zip(cpu.parameters(), tpu.parameters()):
        torch.testing.assert_close(actual.cpu(), expected)
    assert torch_tpu.get_eager_mode().name == {"strict": "DEFER_NEVER", "debug": "DEFER_NEVER_AND_LAUNCH_BLOCKING",
                                               "defer_and_fuse": "DEFER_AND_FUSE"}[mode]


def test_a_cpu_optimizer_step_never_reaches_the_device(monkeypatch):
    # A process forked after using the device refuses every device call; its CPU training must not
    # notice torch_tpu.
    def refuse(*args):
        raise AssertionError("the executor was called for a CPU optimizer")

    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 3)).sum().backward()
    monkeypatch.setattr(torch_tpu._C, "_flush", refuse)
    monkeypatch.setattr(torch_tpu._C, "_swap_thread_mode", refuse)
    with torch_tpu.eager_mode("strict"):
        optimizer.step()


class _DoublesThenFails(torch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.mul_(2)
        raise ValueError("this step fails after its update")


def test_a_step_that_raises_keeps_its_update_and_the_mode(mode):
    values = {}
    for device in ("cpu", "tpu"):
        p = torch.nn.Parameter(torch.arange(4.0, device=device))
        with pytest.raises(ValueError, match="fails after its update"):
            _DoublesThenFails([p]).step()
        values[device] = p.detach()
    torch.testing.assert_close(values["tpu"].cpu(), values["cpu"])
    expected = {"strict": 1, "debug": 0, "defer_and_fuse": 2}[mode]
    assert torch_tpu.get_eager_mode().value == expected


# flex_attention_accepts_tpu

def test_flex_attention_device_check_signature_and_why_it_is_needed():
    from torch._C import DispatchKey
    from torch._higher_order_ops.flex_attention import flex_attention as flex_attention_op
    from torch.nn.attention import flex_attention

    original = original_of(flex_attention._validate_device, "flex_attention_accepts_tpu")
    assert signature(original) == "(query, key, value)"
    # Still needed: PyTorch's own check refuses tpu tensors.
    q = torch.ones(1, 1, 4, 4, device="tpu")
    with pytest.raises(ValueError, match="only supported on"):
        original(q, q, q)
    # CPU keeps PyTorch's rules (no backward there).
    cpu = torch.ones(1, 1, 4, 4, requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        flex_attention._validate_device(cpu, cpu, cpu)
    assert DispatchKey.AutocastPrivateUse1 in flex_attention_op.py_kernels


def test_no_patch_warned_at_import():
    # Importing torch_tpu in this process happened before any test ran; a fresh interpreter shows
    # whether any patch was skipped with a warning.
    import subprocess
    import sys

    code = ("import warnings; warnings.filterwarnings('error', message='torch_tpu: in PyTorch')\n"
            "import torch, torch._dynamo.device_interface, torch.nn.attention.flex_attention\n"
            "from torch_tpu import _torch_patches\n"
            "print(sorted(set(_torch_patches.status().values())))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "['installed']"
