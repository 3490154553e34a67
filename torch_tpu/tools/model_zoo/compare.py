"""One architecture on the CPU and on tpu, compared: `build` makes the model from its small
config, `reference` runs the CPU's forward and training step, `run_mode` runs the same on tpu in
one mode (strict, defer_and_fuse, or compiled: torch.compile(model, backend="tpu") in strict
eager) and checks every output, the loss, every gradient and every updated parameter against the
CPU's within the tolerances below, and `run_arch` records all modes of one architecture."""
import os
import re
import time

from torch_tpu.tools.model_zoo.configs import small_config
from torch_tpu.tools.model_zoo.libraries import build as build_from_library
from torch_tpu.tools.model_zoo.libraries import library_of
from torch_tpu.tools.model_zoo.inputs import make_inputs
from torch_tpu.tools.model_zoo.random_draws import CpuRandomDraws
from torch_tpu.tools.model_zoo.task_inputs import for_task, to_device
from torch_tpu.tools.model_zoo.selection import _guess_family, family, head_of

MODES = ("strict", "defer_and_fuse", "compiled")

FORWARD_RTOL = FORWARD_ATOL = 2e-3
GRAD_RTOL, GRAD_ATOL = 1e-2, 1e-5
# A device's float64 forward or training step against the CPU's (see _device_float64_matches).
FLOAT64_RTOL, FLOAT64_ATOL = 1e-6, 1e-9
SGD_LR = 1e-2
# Causal LMs also generate greedily from one prompt, with each kind of cache.
GENERATE_PROMPT, GENERATE_NEW_TOKENS = 8, 16
GENERATE_CACHES = ("dynamic", "static")


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


def scaled_mismatch(name, actual, expected, rtol=GRAD_RTOL, atol=GRAD_ATOL, in_float64=False):
    """None when max |actual - expected| <= rtol * max |expected| + atol, else a reason."""
    actual = actual.detach().cpu().double() if in_float64 else actual.detach().cpu().float()
    expected = expected.detach().double() if in_float64 else expected.detach().float()
    if actual.shape != expected.shape:
        return f"{name}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    if expected.numel() == 0:
        return None
    diff = (actual - expected).abs().max().item()
    scale = expected.abs().max().item()
    if not diff <= rtol * scale + atol:  # also catches NaN
        return f"{name}: max abs diff {diff:.3g} (max |cpu| {scale:.3g})"
    return None


def _in_float64(value):
    """Inputs with their floating tensors in float64 (token ids and masks keep their types)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, dict):
        return {k: _in_float64(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_in_float64(v) for v in value)
    return value


def _float64_training(model, ref):
    """The CPU's training step in float64 (loss, gradients, updated parameters as float32-named
    dicts), computed once per architecture and only when a device's step disagrees with the
    CPU's float32 one; None when the model cannot run in float64."""
    import copy

    if "float64" not in ref:
        try:
            exact = copy.deepcopy(model).double().train()
            _seed_all(1)
            loss, grads, params, _ = _train_step(exact, _in_float64(ref["inputs"]),
                                                 _in_float64(ref["labels"]), "cpu")
            ref["float64"] = {"loss": loss, "grads": grads, "params": params}
        except Exception:  # noqa: BLE001 - then the float32 comparison stands
            ref["float64"] = None
    return ref["float64"]


def _within_float32_rounding(model, ref, loss, grads, params):
    """Whether a training step that disagrees with the CPU's float32 one is as close to the
    exact (float64) step as float32 lets it be. Some networks amplify rounding: batch norm over
    a few values per channel (a batch of 2 at 2 x 2 pixels), long chains of residual blocks;
    there the CPU's own float32 gradients differ from float64 by percents (measured: 37 % for
    timm's ConvMixer, 6 % for DPN), and no other compiler's float32 can match them within
    GRAD_RTOL. A tensor passes when its distance to float64 is at most twice the CPU float32's
    plus the usual tolerance of float64's scale; a device error larger than the CPU's own
    rounding still fails."""
    exact = _float64_training(model, ref)
    if exact is None:
        return False
    pairs = [("loss", loss, ref["loss"], exact["loss"])]
    pairs += [(n, grads[n], ref["grads"][n], exact["grads"].get(n)) for n in ref["grads"]]
    pairs += [(n, params[n], ref["params"][n], exact["params"].get(n)) for n in ref["params"]]
    for _, actual, float32, float64 in pairs:
        if float64 is None or float64.shape != float32.shape:
            return False
        float64 = float64.double()
        if float64.numel() == 0:
            continue
        own = (float32.double() - float64).abs().max().item()
        diff = (actual.detach().cpu().double() - float64).abs().max().item()
        if not diff <= 2 * own + GRAD_RTOL * float64.abs().max().item() + GRAD_ATOL:
            return False
    return True


def _judge_counts():
    import torch_tpu

    return {"fallbacks": dict(torch_tpu.fallback_counts()),
            "compiles": int(torch_tpu.metrics().get("compiles", 0))}


def _count_difference(after, before):
    return {"fallbacks": {op: n - before["fallbacks"].get(op, 0)
                          for op, n in after["fallbacks"].items()
                          if n != before["fallbacks"].get(op, 0)},
            "compiles": after["compiles"] - before["compiles"]}


def _add_counts(a, b):
    fallbacks = dict(a["fallbacks"])
    for op, n in b["fallbacks"].items():
        fallbacks[op] = fallbacks.get(op, 0) + n
    return {"fallbacks": fallbacks, "compiles": a["compiles"] + b["compiles"]}


def _within_float64(pairs):
    """Whether every (actual, expected) pair agrees within FLOAT64_RTOL of the expected
    tensor's scale plus FLOAT64_ATOL."""
    return all(scaled_mismatch("", actual, expected, FLOAT64_RTOL, FLOAT64_ATOL, in_float64=True) is None
               for actual, expected in pairs)


def _device_float64_forward_matches(model, ref, mode):
    """The forward's counterpart of _device_float64_matches: a forward that misses float32's
    tolerance because a near tie decided a discrete choice differently (a detector's top-k
    queries, a depth's reciprocal near zero) passes when its float64 run on tpu gives the CPU's
    float64 outputs, with no CPU fallback the float32 run did not take."""
    import copy

    import torch

    import torch_tpu

    if "float64_out" not in ref:
        try:
            exact = copy.deepcopy(model).double().eval()
            ref["float64_out"] = _flatten(_forward(exact, _in_float64(ref["inputs"]), "cpu"))
        except Exception:  # noqa: BLE001 - then the float32 verdict stands
            ref["float64_out"] = None
    if ref["float64_out"] is None:
        return False
    taken = set(torch_tpu.fallback_counts())
    try:
        tpu_model = copy.deepcopy(model).double().eval().to("tpu")
        out = _flatten(_forward(_compile(tpu_model, mode), _in_float64(ref["inputs"]), "tpu"))
        torch.tpu.synchronize()
    except Exception:  # noqa: BLE001
        return False
    if set(torch_tpu.fallback_counts()) - taken:
        return False
    if [n for n, _ in out] != [n for n, _ in ref["float64_out"]]:
        return False
    return _within_float64([(a, e) for (_, a), (_, e) in zip(out, ref["float64_out"])])


# The verdicts of a training step passed by float64 on tpu: the whole step's, and that of a
# model whose loss cannot run in float64 (_device_float64_outputs_match).
ON_TPU = "float64 on tpu"
WITHOUT_THE_LOSS = "float64 on tpu, without the loss"


def _device_float64_matches(model, ref, mode):
    """The verdict (ON_TPU, or WITHOUT_THE_LOSS) when the device's training step, run in
    float64, equals the CPU's float64 step; else None.

    Some networks are chaotic in float32: a ReLU whose input is a rounding error away from
    zero flips its sign, batch norm over a handful of values per channel magnifies the flip,
    and two correct float32 implementations end percents apart. Float64 moves those inputs
    billions of ulps away from the flip, so there the device must agree with the CPU to
    1e-6 of each tensor's scale; a wrong lowering still fails (see _float64_on_tpu for the
    fallbacks it may not take)."""
    exact = _float64_training(model, ref)
    if exact is None:
        return _device_float64_outputs_match(model, ref, mode)
    ran = _float64_on_tpu(model, ref, mode, lambda tpu_model, runner: _train_step(
        tpu_model, _in_float64(ref["inputs"]), _in_float64(ref["labels"]), "tpu", runner))
    if ran is None:
        return None
    loss, grads, params, _ = ran
    grads = {n: g for n, g in grads.items() if n in exact["grads"] or bool(g.count_nonzero())}
    if sorted(grads) != sorted(exact["grads"]):
        return None
    pairs = [(loss, exact["loss"])]
    pairs += [(grads[n], exact["grads"][n]) for n in exact["grads"]]
    pairs += [(params[n], exact["params"][n]) for n in exact["params"]]
    return ON_TPU if _within_float64(pairs) else None


def _float64_on_tpu(model, ref, mode, step):
    """step(tpu_model, runner) on a float64 copy of the model in training mode on tpu, seeded
    as the CPU's step and drawing its numbers; None when it raises or takes a CPU fallback
    the float32 run did not take (the fallback counters keep counting through it), so that
    an op computed on the host cannot be what passes the step."""
    import copy

    import torch

    import torch_tpu

    taken = set(torch_tpu.fallback_counts())
    try:
        tpu_model = copy.deepcopy(model).double().train().to("tpu")
        runner = _compile(tpu_model, mode)
        _seed_all(1)
        with _same_draws_as_cpu(ref):
            result = step(tpu_model, runner)
        torch.tpu.synchronize()
    except Exception:  # noqa: BLE001 - then the float32 verdict stands
        return None
    return None if set(torch_tpu.fallback_counts()) - taken else result


def _weighted_outputs_step(model, inputs, device, runner=None):
    """A training-mode forward without labels and the backward of a fixed random weighting of
    its floating outputs (a plain sum would cancel where batch norm makes outputs sum to
    zero): ([outputs], {name: gradient})."""
    import torch

    runner = model if runner is None else runner
    outputs = [t for _, t in _flatten(runner(**to_device(inputs, device)))]
    weights = torch.Generator().manual_seed(2)
    loss = sum((t * torch.randn(t.shape, generator=weights, dtype=t.dtype).to(t.device)).sum()
               for t in outputs)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()
             if p.grad is not None}
    return [t.detach() for t in outputs], grads


def _device_float64_outputs_match(model, ref, mode):
    """_device_float64_matches for a model whose loss cannot run in float64 on any device
    (D-FINE's loss casts its targets to float32): its training-mode outputs and their
    gradients, for a loss the harness builds from them, in float64 on tpu against the CPU's.
    The model's own loss is left out of this verdict, which says so (WITHOUT_THE_LOSS)."""
    import copy

    try:
        exact = copy.deepcopy(model).double().train()
        _seed_all(1)
        expected, expected_grads = _weighted_outputs_step(exact, _in_float64(ref["inputs"]), "cpu")
    except Exception:  # noqa: BLE001 - then the float32 verdict stands
        return None
    ran = _float64_on_tpu(model, ref, mode, lambda tpu_model, runner: _weighted_outputs_step(
        tpu_model, _in_float64(ref["inputs"]), "tpu", runner))
    if ran is None:
        return None
    outputs, grads = ran
    grads = {n: g for n, g in grads.items() if n in expected_grads or bool(g.count_nonzero())}
    if len(outputs) != len(expected) or sorted(grads) != sorted(expected_grads):
        return None
    # A gradient is judged against the step's largest: batch norm removes what a layer before
    # it adds per channel, so such a layer's gradient is zero in exact arithmetic and what both
    # sides compute is rounding noise of the step's scale (D-FINE's input projections).
    step_scale = max((g.abs().max().item() for g in expected_grads.values() if g.numel()), default=0.0)
    close = all(scaled_mismatch("", grads[n], expected_grads[n], FLOAT64_RTOL,
                                FLOAT64_ATOL + FLOAT64_RTOL * step_scale, in_float64=True) is None
                for n in expected_grads)
    return WITHOUT_THE_LOSS if close and _within_float64(list(zip(outputs, expected))) else None


def _first_line(error):
    """The error's type and the first line of its message that says something (an ImportError's
    message may start on the line after its colon)."""
    message = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {message}"[:300].rstrip(": ")


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


def _same_draws_as_cpu(ref):
    """Around a device's training step: when the CPU's step drew random numbers (noise that no
    config turns off, such as GroupViT's Gumbel-softmax), the device's step draws the CPU's
    (see random_draws); else nothing, so that a compiled step is traced as a user's is."""
    import contextlib

    return CpuRandomDraws() if ref.get("train_samples") else contextlib.nullcontext()


def _seed_all(seed):
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)


def build(model_type):
    """(config, task, model on the CPU in float32) or raises NotApplicable."""
    import torch
    import transformers

    if library_of(model_type) != "transformers":
        config, task, model = build_from_library(model_type)
        _without_dropout(model)
        _weight_norms_as_leaves(model)
        return config, task, model
    model_type, task, class_name = head_of(model_type)
    if task is None or class_name is None:
        raise NotApplicable(f"{model_type} has no head for {task or 'any task of the zoo'}")
    if isinstance(class_name, (list, tuple)):  # e.g. DeiT: (plain head, head with a teacher)
        class_name = class_name[0]
    cls = getattr(transformers, class_name, None)
    if cls is None:
        raise NotApplicable(f"transformers has no class {class_name} in this installation")
    _bind_block_mask(cls)
    try:
        config = small_config(model_type, task)
    except Exception as error:  # noqa: BLE001
        raise NotApplicable("config: " + _first_line(error)) from None
    if task == "question_answering":
        config.num_labels = 2  # a span's start and end logits
    _seed_all(0)
    try:
        model = cls(config)
    except Exception as error:  # noqa: BLE001
        raise NotApplicable("model from small config: " + _first_line(error)) from None
    model = model.to(torch.float32)
    _perturb_constant_parameters(model)
    _without_dropout(model)
    return config, task, model


def _without_dropout(model):
    """Dropout layers whose rate a module hard-codes (DPT's auxiliary head: 0.1), which no config
    turns off, get rate 0: the CPU's random draws are not the device's, and the configs' own
    dropout rates are set to 0 for the same reason."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0


def _weight_norms_as_leaves(model):
    """The weights that torch.nn.utils.weight_norm computes from their magnitude and direction,
    detached: weight_norm sets each as a tensor computed with autograd, which deepcopy refuses
    (diffusers' Oobleck and SAME autoencoders), and recomputes it before every forward, so the
    detached copy is never what a forward uses."""
    from torch.nn.utils.weight_norm import WeightNorm

    for module in model.modules():
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm):
                setattr(module, hook.name, getattr(module, hook.name).detach())


def _bind_block_mask(cls):
    """Transformers imports flex attention's BlockMask into a modelling module only where it
    deems flex attention available, which it does not once tpu is the host's accelerator (as
    torch_tpu makes it); a model that names BlockMask when it runs (Doge's isinstance checks
    on its mask) then raises NameError on any device. Bound to torch's class, those checks
    are False for the tensor masks eager attention builds, as on a host without tpu."""
    import inspect
    import sys

    module = sys.modules.get(cls.__module__)
    if module is None or hasattr(module, "BlockMask"):
        return
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return
    if "BlockMask" in source:
        from torch.nn.attention.flex_attention import BlockMask

        module.BlockMask = BlockMask


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

    loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return loss
    tensors = _flatten(output)
    if not tensors:
        raise NotApplicable("the model returns no floating tensor to train on")
    # Without labels, the mean square of the first output is a loss whose gradient reaches
    # every parameter that output depends on.
    first = tensors[0][1]
    return (first if first.dtype == torch.float64 else first.float()).pow(2).mean()


def _train_step(model, inputs, labels, device, runner=None):
    """runner (the compiled model, or the model itself) takes the inputs; gradients and
    parameters are read from the model under their own names."""
    import torch

    runner = model if runner is None else runner
    kwargs = to_device(inputs, device)
    if labels is not None:
        kwargs["labels"] = to_device(labels, device)
    try:
        output = runner(**kwargs)
    except (TypeError, ValueError, NotImplementedError) as error:
        # A head that takes no labels, or one that takes them only to refuse them (inference-only
        # detectors: PP-DocLayoutV2 "does not support training", OmDet-Turbo "Training is not
        # implemented yet"), trains on its first output.
        if not any(words in str(error) for words in
                   ("labels", "does not support training", "Training is not implemented")):
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

    # The same random draws on both sides, as in training: a forward that samples even in
    # eval (ViLT shuffles its image patches with torch.multinomial on the CPU) sees the same.
    _seed_all(0)
    with torch.no_grad():
        return model(**to_device(inputs, device))


def reference(model, task, config):
    """The CPU's results: forward outputs and a training step's loss, gradients and
    parameters; NotApplicable when the CPU itself cannot run the generic inputs."""
    import copy

    import torch

    # The CPU runs a copy: a model that caches tensors on itself as it runs (CLVP's rotary
    # embedding) would otherwise hand the device the CPU's, which moving it leaves behind.
    built = model
    model = copy.deepcopy(built)
    inputs, labels = for_task(task, *make_inputs(model, task, config))
    try:
        model.eval()
        expected_out = _flatten(_forward(model, inputs, "cpu"))
    except Exception as error:  # noqa: BLE001
        raise NotApplicable("CPU forward with generic inputs: " + _first_line(error)) from None
    if not expected_out:
        raise NotApplicable("the model returns no floating tensor to compare")
    train_model = copy.deepcopy(built).train()
    try:
        _seed_all(1)
        generator_state = torch.random.get_rng_state()
        loss, grads, params, used_labels = _train_step(train_model, inputs, labels, "cpu")
        samples = not torch.equal(generator_state, torch.random.get_rng_state())
    except NotApplicable:
        raise
    except Exception as error:  # noqa: BLE001
        raise NotApplicable("CPU training step: " + _first_line(error)) from None
    return {"inputs": inputs, "labels": labels if used_labels else None, "out": expected_out,
            "loss": loss, "grads": grads, "params": params, "train_samples": samples,
            "generate": _reference_generation(model, task, config)}


def _prompt(config):
    import torch

    vocab = getattr(config, "vocab_size", None) or getattr(config.get_text_config(), "vocab_size")
    g = torch.Generator().manual_seed(3)
    return torch.randint(3, vocab, (1, GENERATE_PROMPT), generator=g)


def _generate(model, prompt, cache, device):
    """(new tokens, the scores each was chosen from) of a greedy generate() with one kind of
    cache; min_new_tokens keeps an end-of-sequence token from ending it early."""
    import torch

    kwargs = dict(max_new_tokens=GENERATE_NEW_TOKENS, min_new_tokens=GENERATE_NEW_TOKENS,
                  do_sample=False, output_scores=True, return_dict_in_generate=True,
                  pad_token_id=getattr(model.config, "pad_token_id", None) or 0)
    if cache == "static":
        kwargs["cache_implementation"] = "static"
    ids = prompt.to(device)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
    tokens = out.sequences[0, prompt.shape[1]:].cpu().tolist()
    return tokens, [s[0].detach().float().cpu() for s in out.scores]


def _reference_generation(model, task, config):
    """Per cache kind, the CPU's tokens and scores, or why the CPU cannot generate with it (such
    a cache kind is not tried on tpu); None for a model that is not a causal LM."""
    if task != "causal_lm" or not getattr(model, "can_generate", lambda: False)():
        return None
    model.eval()
    prompt, out = _prompt(config), {}
    for cache in GENERATE_CACHES:
        try:
            tokens, scores = _generate(model, prompt, cache, "cpu")
            out[cache] = {"tokens": tokens, "scores": scores}
        except Exception as error:  # noqa: BLE001
            out[cache] = {"error": "CPU generate: " + _first_line(error)}
    return {"prompt": prompt, "caches": out}


def generation_verdict(tokens, expected, expected_scores):
    """"pass" when the tokens equal the CPU's; "tie" when they first differ at a step where the
    CPU's two best scores were within the forward tolerance of each other (rounding between two
    compilers then decides which is the argmax, and every later token follows from it); else a
    one-line reason."""
    if tokens == expected:
        return "pass"
    step = next((i for i, (a, b) in enumerate(zip(tokens, expected)) if a != b), None)
    if step is None:
        return f"{len(tokens)} tokens, CPU's {len(expected)}"
    top = expected_scores[step].topk(2).values.tolist()
    if len(top) == 2 and top[0] - top[1] <= FORWARD_ATOL + FORWARD_RTOL * abs(top[0]):
        return "tie"
    return f"token {step} is {tokens[step]}, CPU's {expected[step]}"


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
    # What the float64 judge's own run adds, left out of the record: it is not the model's run.
    judge_counts = {"fallbacks": {}, "compiles": 0}

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
                bad = next(filter(None, (elementwise_mismatch(n, a, e) for (n, a), (_, e)
                                         in zip(out, ref["out"]))), None)
                if bad:
                    before = _judge_counts()
                    if _device_float64_forward_matches(model, ref, mode):
                        bad, record["forward_judged_by"] = None, ON_TPU
                    judge_counts = _add_counts(judge_counts, _count_difference(_judge_counts(), before))
                verdict("forward", bad)
        except Exception as error:  # noqa: BLE001
            fail("forward", error)
        try:
            tpu_model = copy.deepcopy(model).train().to("tpu")
            runner = _compile(tpu_model, mode)
            _seed_all(1)
            with _same_draws_as_cpu(ref):
                loss, grads, params, _ = _train_step(tpu_model, ref["inputs"], ref["labels"],
                                                     "tpu", runner)
            torch.tpu.synchronize()
            bad = elementwise_mismatch("loss", loss, ref["loss"])
            # A compiled backward returns zeros where eager leaves a parameter's .grad None (a
            # parameter only unused outputs depend on), as inductor does: the same gradient.
            grads = {n: g for n, g in grads.items() if n in ref["grads"] or bool(g.count_nonzero())}
            if bad is None and sorted(grads) != sorted(ref["grads"]):
                missing = sorted(set(ref["grads"]) ^ set(grads))
                bad = f"gradients of {missing[:3]} differ in presence"
            presence = bad is not None and "presence" in bad
            for name in ref["grads"]:
                bad = bad or scaled_mismatch("grad " + name, grads[name], ref["grads"][name])
            for name in ref["params"]:
                bad = bad or scaled_mismatch("updated " + name, params[name],
                                             ref["params"][name])
            if bad and not presence and _within_float32_rounding(model, ref, loss, grads, params):
                bad, record["train_judged_by"] = None, "float64"
            if bad and not presence:
                before = _judge_counts()
                judged = _device_float64_matches(model, ref, mode)
                if judged:
                    bad, record["train_judged_by"] = None, judged
                judge_counts = _add_counts(judge_counts, _count_difference(_judge_counts(), before))
            verdict("train", bad)
        except Exception as error:  # noqa: BLE001
            fail("train", error)
        if ref.get("generate") and any("tokens" in c for c in ref["generate"]["caches"].values()):
            _check_generation(model, ref["generate"], mode, record, fail)
        try:
            torch.tpu.synchronize()
        except Exception as error:  # noqa: BLE001
            fail("sync", error)
    record["error"] = errors[0] if errors else None
    record["fallbacks"] = {op: n - judge_counts["fallbacks"].get(op, 0)
                           for op, n in torch_tpu.fallback_counts().items()
                           if n > judge_counts["fallbacks"].get(op, 0)}
    metrics = torch_tpu.metrics()
    record["compiles"] = int(metrics.get("compiles", 0)) - judge_counts["compiles"]
    record["cache_hits"] = int(metrics.get("cache_hits", 0))
    record["native"] = record["forward"] == "pass" and record["train"] == "pass" and \
        not record["fallbacks"]
    record["seconds"] = round(time.monotonic() - start, 1)
    return record


def _check_generation(model, ref, mode, record, fail):
    """record["generate"]: "pass" when every cache kind the CPU could generate with gave the
    CPU's tokens on tpu, "tie" when some first differed at a near-tie, else "fail";
    record["generate_caches"] has the verdict of each."""
    import copy

    import torch

    record["generate"], record["generate_caches"] = "fail", {}
    try:
        tpu_model = copy.deepcopy(model).eval().to("tpu")
        if mode == "compiled":
            tpu_model.forward = torch.compile(tpu_model.forward, backend="tpu")
    except Exception as error:  # noqa: BLE001
        fail("generate", error)
        return
    verdicts = []
    for cache, expected in ref["caches"].items():
        if "tokens" not in expected:
            continue
        try:
            tokens, _ = _generate(tpu_model, ref["prompt"], cache, "tpu")
            verdict = generation_verdict(tokens, expected["tokens"], expected["scores"])
            if verdict not in ("pass", "tie"):
                fail(f"generate ({cache} cache)", f"mismatch {verdict}")
                verdict = "fail"
        except Exception as error:  # noqa: BLE001
            fail(f"generate ({cache} cache)", error)
            verdict = "fail"
        record["generate_caches"][cache] = verdict
        verdicts.append(verdict)
    record["generate"] = "fail" if "fail" in verdicts else "tie" if "tie" in verdicts else "pass"


def run_arch(model_type, modes=MODES):
    """Everything about one architecture, as a JSON-able dict."""
    import torch

    import torch_tpu

    torch_tpu.set_fallback_warnings(False)
    # A worker runs many architectures: Dynamo's caches on the code objects they share
    # (Transformers' forward decorators) would reach its recompile limit, after which a
    # "compiled" run is silently eager, and would keep every earlier graph's programs alive.
    torch._dynamo.reset()
    start = time.monotonic()
    record = {"arch": model_type, "status": "attempted", "modes": {}}
    try:
        config, task, model = build(model_type)
        record["task"] = task
        record["class"] = type(model).__name__
        record["family"] = family(model_type, task, config)
        record["parameters"] = sum(p.numel() for p in model.parameters())
        ref = reference(model, task, config)
        if ref["generate"]:
            record["generate_reference"] = {c: v.get("error", "ok") for c, v in ref["generate"]["caches"].items()}
        elif task == "causal_lm":
            record["generate_reference"] = "the model class cannot generate"
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
