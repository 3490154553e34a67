"""One architecture on the CPU and on tpu, compared: `build` makes the model from its small
config, `reference` runs the CPU's forward and training step, `run_mode` runs the same on tpu in
one mode (strict, defer_and_fuse, or compiled: torch.compile(model, backend="tpu") in strict
eager) and checks every output, the loss, every gradient and every updated parameter against the
CPU's within the tolerances below, and `run_arch` records all modes of one architecture."""
import os
import re
import time

from torch_tpu.tools.model_zoo.configs import small_config
from torch_tpu.tools.model_zoo.inputs import make_inputs
from torch_tpu.tools.model_zoo.selection import _guess_family, _mappings, _task_of, family

MODES = ("strict", "defer_and_fuse", "compiled")

FORWARD_RTOL = FORWARD_ATOL = 2e-3
GRAD_RTOL, GRAD_ATOL = 1e-2, 1e-5
SGD_LR = 1e-2


def _flatten(value, prefix="out"):
    """[(name, tensor)] of the floating tensors of a model output, depth first."""
    import torch

    if isinstance(value, torch.Tensor):
        return [(prefix, value)] if value.is_floating_point() else []
    if hasattr(value, "to_tuple") and hasattr(value, "keys"):
        return [p for k in value.keys() for p in _flatten(value[k], f"{prefix}.{k}")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _flatten(v, f"{prefix}[{i}]")]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _flatten(v, f"{prefix}.{k}")]
    return []


def elementwise_mismatch(name, actual, expected, rtol=FORWARD_RTOL, atol=FORWARD_ATOL):
    """None when actual (any device) agrees with expected elementwise, else a one-line reason."""
    import torch

    actual = actual.detach().cpu().float()
    expected = expected.detach().float()
    if actual.shape != expected.shape:
        return f"{name}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    finite = torch.isfinite(expected)
    if not torch.equal(finite, torch.isfinite(actual)):
        return f"{name}: non-finite values differ"
    diff = (actual - expected).abs()[finite]
    bound = (atol + rtol * expected.abs())[finite]
    if diff.numel() and bool((diff > bound).any()):
        return f"{name}: max abs diff {diff.max().item():.3g} (max |cpu| " \
               f"{expected[finite].abs().max().item():.3g})"
    return None


def scaled_mismatch(name, actual, expected, rtol=GRAD_RTOL, atol=GRAD_ATOL):
    """None when max |actual - expected| <= rtol * max |expected| + atol, else a reason."""
    actual = actual.detach().cpu().float()
    expected = expected.detach().float()
    if actual.shape != expected.shape:
        return f"{name}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    if expected.numel() == 0:
        return None
    diff = (actual - expected).abs().max().item()
    scale = expected.abs().max().item()
    if not diff <= rtol * scale + atol:  # also catches NaN
        return f"{name}: max abs diff {diff:.3g} (max |cpu| {scale:.3g})"
    return None


def _first_line(error):
    text = f"{type(error).__name__}: {error}".strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return type(error).__name__


def _where(error):
    """file:line of the innermost Python frame an exception passed through."""
    import traceback

    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return None
    last = frames[-1]
    return f"{os.path.basename(last.filename)}:{last.lineno} in {last.name}"


def failing_op(text):
    """The ATen op an error names, if any."""
    match = re.search(r"aten::[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?", text or "")
    return match.group(0) if match else None


def _seed_all(seed):
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)


def build(model_type):
    """(config, task, model on the CPU in float32) or raises NotApplicable."""
    import torch
    import transformers

    mappings = _mappings()
    task = _task_of(model_type, mappings)
    if task is None:
        raise NotApplicable(f"{model_type} is in none of the task mappings")
    class_name = mappings[task][model_type]
    if isinstance(class_name, (list, tuple)):  # e.g. DeiT: (plain head, head with a teacher)
        class_name = class_name[0]
    cls = getattr(transformers, class_name, None)
    if cls is None:
        raise NotApplicable(f"transformers has no class {class_name} in this installation")
    try:
        config = small_config(model_type)
    except Exception as error:  # noqa: BLE001
        raise NotApplicable("config: " + _first_line(error)) from None
    _seed_all(0)
    try:
        model = cls(config)
    except Exception as error:  # noqa: BLE001
        raise NotApplicable("model from small config: " + _first_line(error)) from None
    model = model.to(torch.float32)
    _perturb_constant_parameters(model)
    return config, task, model


def _perturb_constant_parameters(model):
    """Adds N(0, 0.02) noise to every parameter whose entries are all equal (zero-initialised
    routers, biases, norm scales). A zero router gives every expert the same score, and which
    of tied experts topk returns is left open by PyTorch (the CPU's choice differs from CUDA's
    as well), so the two devices would route tokens differently for no fault of either."""
    import torch

    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.02)


class NotApplicable(Exception):
    pass


def _loss_of(output):
    import torch

    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return loss
    tensors = _flatten(output)
    if not tensors:
        raise NotApplicable("the model returns no floating tensor to train on")
    # Without labels, the mean square of the first output is a loss whose gradient reaches
    # every parameter that output depends on.
    return tensors[0][1].float().pow(2).mean()


def _train_step(model, inputs, labels, device, runner=None):
    """runner (the compiled model, or the model itself) takes the inputs; gradients and
    parameters are read from the model under their own names."""
    import torch

    runner = model if runner is None else runner
    kwargs = {k: v.to(device) for k, v in inputs.items()}
    if labels is not None:
        kwargs["labels"] = labels.to(device)
    try:
        output = runner(**kwargs)
    except TypeError as error:
        if "labels" not in str(error):
            raise
        kwargs.pop("labels", None)
        output = runner(**kwargs)
    loss = _loss_of(output)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()
             if p.grad is not None}
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=SGD_LR)
    opt.step()
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    return loss.detach(), grads, params, "labels" in kwargs


def _forward(model, inputs, device):
    import torch

    with torch.no_grad():
        return model(**{k: v.to(device) for k, v in inputs.items()})


def reference(model, task, config):
    """The CPU's results: forward outputs and a training step's loss, gradients and
    parameters; NotApplicable when the CPU itself cannot run the generic inputs."""
    import copy

    inputs, labels = make_inputs(model, task, config)
    try:
        model.eval()
        expected_out = _flatten(_forward(model, inputs, "cpu"))
    except Exception as error:  # noqa: BLE001
        raise NotApplicable("CPU forward with generic inputs: " + _first_line(error)) from None
    if not expected_out:
        raise NotApplicable("the model returns no floating tensor to compare")
    train_model = copy.deepcopy(model).train()
    try:
        _seed_all(1)
        loss, grads, params, used_labels = _train_step(train_model, inputs, labels, "cpu")
    except NotApplicable:
        raise
    except Exception as error:  # noqa: BLE001
        raise NotApplicable("CPU training step: " + _first_line(error)) from None
    return {"inputs": inputs, "labels": labels if used_labels else None, "out": expected_out,
            "loss": loss, "grads": grads, "params": params}


def _compile(model, mode):
    import torch

    if mode == "compiled":
        return torch.compile(model, backend="tpu")
    return model


def _eager_mode_for(mode):
    return "strict" if mode == "compiled" else mode


def run_mode(model, ref, mode):
    """One mode's record: forward and train outcomes, fallback ops, compile counts, seconds."""
    import copy

    import torch

    import torch_tpu

    record = {"forward": "fail", "train": "fail", "error": None, "op": None, "fallbacks": {},
              "compiles": 0, "seconds": 0.0}
    start = time.monotonic()
    torch_tpu.reset_fallback_counts()
    torch_tpu.reset_metrics()
    errors = []

    def fail(stage, error):
        line = error if isinstance(error, str) else _first_line(error)
        errors.append(f"{stage}: {line}")
        if record["op"] is None and not isinstance(error, str):
            record["op"] = failing_op(str(error))
            record["where"] = _where(error)

    def verdict(stage, mismatch):
        if mismatch:
            fail(stage, "mismatch " + mismatch)
        else:
            record[stage] = "pass"

    with torch_tpu.eager_mode(_eager_mode_for(mode)):
        try:
            tpu_model = copy.deepcopy(model).eval().to("tpu")
            runner = _compile(tpu_model, mode)
            out = _flatten(_forward(runner, ref["inputs"], "tpu"))
            names = [n for n, _ in out]
            if names != [n for n, _ in ref["out"]]:
                fail("forward", f"outputs {names} != CPU's {[n for n, _ in ref['out']]}")
            else:
                verdict("forward", next(filter(None, (elementwise_mismatch(n, a, e) for (n, a), (_, e)
                                                      in zip(out, ref["out"]))), None))
        except Exception as error:  # noqa: BLE001
            fail("forward", error)
        try:
            tpu_model = copy.deepcopy(model).train().to("tpu")
            runner = _compile(tpu_model, mode)
            _seed_all(1)
            loss, grads, params, _ = _train_step(tpu_model, ref["inputs"], ref["labels"], "tpu",
                                              runner)
            torch.tpu.synchronize()
            bad = elementwise_mismatch("loss", loss, ref["loss"])
            # A compiled backward returns zeros where eager leaves a parameter's .grad None (a
            # parameter only unused outputs depend on), as inductor does: the same gradient.
            grads = {n: g for n, g in grads.items() if n in ref["grads"] or bool(g.count_nonzero())}
            if bad is None and sorted(grads) != sorted(ref["grads"]):
                missing = sorted(set(ref["grads"]) ^ set(grads))
                bad = f"gradients of {missing[:3]} differ in presence"
            for name in ref["grads"]:
                bad = bad or scaled_mismatch("grad " + name, grads[name], ref["grads"][name])
            for name in ref["params"]:
                bad = bad or scaled_mismatch("updated " + name, params[name],
                                             ref["params"][name])
            verdict("train", bad)
        except Exception as error:  # noqa: BLE001
            fail("train", error)
        try:
            torch.tpu.synchronize()
        except Exception as error:  # noqa: BLE001
            fail("sync", error)
    record["error"] = errors[0] if errors else None
    record["fallbacks"] = torch_tpu.fallback_counts()
    metrics = torch_tpu.metrics()
    record["compiles"] = int(metrics.get("compiles", 0))
    record["cache_hits"] = int(metrics.get("cache_hits", 0))
    record["native"] = record["forward"] == "pass" and record["train"] == "pass" and \
        not record["fallbacks"]
    record["seconds"] = round(time.monotonic() - start, 1)
    return record


def run_arch(model_type, modes=MODES):
    """Everything about one architecture, as a JSON-able dict."""
    import torch_tpu

    torch_tpu.set_fallback_warnings(False)
    start = time.monotonic()
    record = {"arch": model_type, "status": "attempted", "modes": {}}
    try:
        config, task, model = build(model_type)
        record["task"] = task
        record["class"] = type(model).__name__
        record["family"] = family(model_type, task, config)
        record["parameters"] = sum(p.numel() for p in model.parameters())
        ref = reference(model, task, config)
    except NotApplicable as reason:
        record["status"] = "not_applicable"
        record["reason"] = str(reason)
        record.setdefault("family", _guess_family(model_type))
        record["seconds"] = round(time.monotonic() - start, 1)
        return record
    for mode in modes:
        record["modes"][mode] = run_mode(model, ref, mode)
    record["seconds"] = round(time.monotonic() - start, 1)
    return record
