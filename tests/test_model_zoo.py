"""The model-zoo pipeline (torch_tpu.tools.model_zoo): a few real Hugging Face architectures
built from small configs pass forward and a training step against the CPU, and the reports
count what the records say."""
import json
import os

import pytest
import torch

pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from torch_tpu.tools import model_zoo as zoo  # noqa: E402

EAGER = ["strict", "defer_and_fuse"]


# llama: rotary attention, RMSNorm, gated MLP; gpt2: tied embedding and output projection;
# bert: an encoder with a masked-LM head and layer norm.
# bert@question_answering: span logits and their two-position loss (an extra task's entry).
@pytest.mark.parametrize("arch", ["llama", "gpt2", "bert", "bert@question_answering"])
def test_architecture_matches_cpu_in_eager_modes(arch):
    record = zoo.run_arch(arch, EAGER)
    assert record["status"] == "attempted", record.get("reason")
    for mode in EAGER:
        result = record["modes"][mode]
        assert result["forward"] == "pass", (mode, result["error"])
        assert result["train"] == "pass", (mode, result["error"])
        assert result["native"], (mode, result["fallbacks"])
        assert result["compiles"] >= 1 or result["cache_hits"] >= 1
        if arch in ("llama", "gpt2"):
            # Greedy generate() with a dynamic and a static cache gives the CPU's tokens.
            assert record["generate_reference"] == {"dynamic": "ok", "static": "ok"}
            assert result["generate_caches"] == {"dynamic": "pass", "static": "pass"}, result["error"]


def test_selection_is_one_architecture_per_module_across_families():
    chosen = zoo.select()
    types = [t for t, _, _ in chosen]
    assert len(types) == len(set(types)) >= 150
    modules = [zoo._module_of(t) for t in types]
    assert len(modules) == len(set(modules))
    assert ("gemma3" in types) != ("gemma3_text" in types)
    first, rest = zoo.tiers(chosen)
    assert set(zoo.QUICK) <= set(first + rest)


def test_tier_one_is_the_widely_used_types_then_their_extra_tasks():
    first, rest = zoo.tiers()
    assert not set(first) & set(rest)
    assert first[:3] == ["llama", "mistral", "qwen2"]
    assert "bert@question_answering" in first and "bert@multiple_choice" in first
    # A decoder's token classification head is its LM head's linear layer again.
    assert "llama@token_classification" not in first + rest
    extra = [e for e in first if "@" in e]
    assert first.index(extra[0]) > max(first.index(t) for t in first if "@" not in t and "/" not in t)
    assert all(e.partition("@")[0] in first for e in extra)


def test_generation_verdict_tells_a_near_tie_from_a_wrong_token():
    scores = [torch.tensor([0.0, 5.0, 1.0]), torch.tensor([2.0, 2.0005, -1.0]), torch.tensor([3.0, 0.0, 0.0])]
    assert zoo.generation_verdict([1, 1, 0], [1, 1, 0], scores) == "pass"
    # Step 1's two best CPU scores are 5e-4 apart: which wins is rounding.
    assert zoo.generation_verdict([1, 0, 0], [1, 1, 0], scores) == "tie"
    assert zoo.generation_verdict([2, 1, 0], [1, 1, 0], scores) == "token 0 is 2, CPU's 1"


@pytest.mark.parametrize("model_type", ["grounding-dino", "efficientnet", "swin", "beit"])
def test_small_configs_draw_nothing_at_random_in_training(model_type):
    # The CPU's random draws are not the device's: a rate left on (Grounding DINO's fusion drop
    # path, EfficientNet's drop connect) makes a right training step differ.
    from torch_tpu.tools.model_zoo.configs import small_config

    def rates(config, prefix=""):
        for key, value in config.to_dict().items():
            if isinstance(value, dict) and "model_type" in value:
                continue  # a sub-config, checked through its attribute below
            if any(word in key for word in ("drop", "pdrop")) and isinstance(value, float):
                yield prefix + key, value
        for key in ("backbone_config", "text_config", "vision_config"):
            sub = getattr(config, key, None)
            if sub is not None and hasattr(sub, "to_dict"):
                yield from rates(sub, prefix + key + ".")

    config = small_config(model_type)
    assert [(k, v) for k, v in rates(config) if v != 0.0] == []


def test_comparisons_catch_a_perturbed_value():
    expected = torch.linspace(-3, 3, 50)
    assert zoo.elementwise_mismatch("x", expected.clone(), expected) is None
    nudged = expected.clone()
    nudged[7] += 0.05
    assert "max abs diff" in zoo.elementwise_mismatch("x", nudged, expected)
    assert "shape" in zoo.elementwise_mismatch("x", expected[:3], expected)
    assert zoo.scaled_mismatch("g", expected * (1 + 1e-4), expected) is None
    assert zoo.scaled_mismatch("g", expected + 0.1, expected) is not None
    assert zoo.scaled_mismatch("g", expected * float("nan"), expected) is not None


def _mode(forward, train, fallbacks=None, error=None):
    fallbacks = fallbacks or {}
    return {"forward": forward, "train": train, "error": error, "op": zoo.failing_op(error),
            "fallbacks": fallbacks, "compiles": 3, "seconds": 1.0,
            "native": forward == train == "pass" and not fallbacks}


def test_totals_and_table_count_what_the_records_say():
    records = [
        {"arch": "a", "status": "attempted", "family": "decoder-only", "task": "causal_lm",
         "seconds": 2.0, "modes": {"strict": dict(_mode("pass", "pass"), generate="pass",
                                                  train_judged_by="float64 on tpu",
                                                  forward_judged_by="float64 on tpu"),
                                   "compiled": dict(_mode("pass", "fail", error="train: boom"),
                                                    generate="tie")}},
        {"arch": "b", "status": "attempted", "family": "vision", "task": "image_classification",
         "seconds": 2.0, "modes": {"strict": dict(_mode("pass", "pass", {"aten::foo": 2}),
                                                  train_judged_by="float64"),
                                   "compiled": _mode("fail", "fail",
                                                     error="forward: no lowering for aten::bar.x")}},
        {"arch": "c", "status": "not_applicable", "family": "audio", "reason": "needs a file",
         "modes": {}, "seconds": 0.1},
        {"arch": "a@question_answering", "status": "attempted", "family": "decoder-only",
         "task": "question_answering", "seconds": 1.0,
         "modes": {"strict": _mode("pass", "fail"), "compiled": _mode("pass", "pass")}},
        {"arch": "diffusers/UNet", "status": "attempted", "family": "diffusion", "task": "noise_prediction",
         "seconds": 1.0, "modes": {"strict": _mode("pass", "pass"),
                                   "compiled": dict(_mode("pass", "pass"),
                                                    train_judged_by="float64 on tpu, without the loss")}},
        {"arch": "timm/vgg", "status": "attempted", "family": "vision", "task": "image_classification",
         "seconds": 600.0, "modes": {"strict": _mode("fail", "fail", error="timeout after 600s"),
                                     "compiled": _mode("pass", "pass")}},
        {"arch": "timm/nest", "status": "not_applicable", "family": "vision", "reason": "no timm",
         "modes": {}, "seconds": 0.1},
    ]
    t = zoo.totals(records, ["strict", "compiled"])
    # An extra task's entry is counted among the entries, not as another architecture.
    assert t["architectures"] == 6 and t["architectures_attempted"] == 4
    assert t["extra_task_entries"] == 1 and t["not_applicable"] == 2
    assert t["libraries"] == {"diffusers": 1, "timm": 1, "transformers": 3}
    assert t["not_applicable_by_library"] == {"timm": 1, "transformers": 1}
    # A run stopped at the time limit is a failure, and counted apart as a timeout too.
    assert t["strict"] == {"attempted": 5, "forward_pass": 4, "train_pass": 3, "native": 2,
                           "timeouts": 1, "train_judged_by_float64": 1,
                           "train_judged_by_float64_on_tpu": 1, "forward_judged_by_float64_on_tpu": 1,
                           "train_judged_by_float64_on_tpu_without_the_loss": 0,
                           "generate_attempted": 1, "generate_equal": 1,
                           "generate_tie": 0}
    assert t["compiled"] == {"attempted": 5, "forward_pass": 4, "train_pass": 3, "native": 3,
                             "timeouts": 0, "train_judged_by_float64": 0,
                             "train_judged_by_float64_on_tpu": 0, "forward_judged_by_float64_on_tpu": 0,
                             "train_judged_by_float64_on_tpu_without_the_loss": 1,
                             "generate_attempted": 1, "generate_equal": 0,
                             "generate_tie": 1}
    assert t["families"]["vision"] == {"attempted": 2, "forward_pass": {"strict": 1, "compiled": 1}}
    table = zoo.markdown(records, ["strict", "compiled"])
    assert "| strict | 5 | 4 (80.0 %) | 3 (60.0 %) | 2 (40.0 %) | 1 | 1 | 1 / 1 / 0 | 1 (100.0 %) + 0 of 1 |" in table
    assert "| compiled | 5 | 4 (80.0 %) | 3 (60.0 %) | 3 (60.0 %) | 0 | 0 | 0 / 0 / 1 | 0 (0.0 %) + 1 of 1 |" in table
    row_unet = next(line for line in table.splitlines() if line.startswith("| diffusers/UNet |"))
    assert "FT native" in row_unet and "FT64o native" in row_unet
    assert "not applicable per library: timm 1 (50.0 %), transformers 1 (25.0 %)" in table
    row_a = next(line for line in table.splitlines() if line.startswith("| a |"))
    assert "F64dT64d G native" in row_a and "Ft G~" in row_a
    row_b = next(line for line in table.splitlines() if line.startswith("| b |"))
    assert "FT" in row_b and "ft" in row_b and "aten::foo" in row_b and "[aten::bar.x]" in row_b
    assert "| c | audio | needs a file |" in table


def test_command_line_resumes_and_prints_totals_last(tmp_path, capfd):
    # One unknown architecture keeps this cheap: the worker process, the JSON file, the
    # resume and the last line of stdout are what is checked.
    out = str(tmp_path)
    zoo.main(["--arch", "no_such_model", "--modes", "strict", "--out", out])
    last = capfd.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last)["strict"]["attempted"] == 0
    assert json.loads(last)["not_applicable"] == 1
    with open(os.path.join(out, "model_zoo.json")) as f:
        saved = json.load(f)
    assert saved["architectures"][0]["status"] == "not_applicable"
    assert "has no head for any task" in saved["architectures"][0]["reason"]
    zoo.main(["--arch", "no_such_model", "--modes", "strict", "--out", out])
    err = capfd.readouterr().err
    assert "resuming: 1 of 1" in err


def test_a_run_of_other_modes_keeps_the_modes_already_recorded(tmp_path, monkeypatch):
    out = str(tmp_path)
    saved = {"arch": "x", "status": "attempted", "family": "vision", "seconds": 1.0,
             "modes": {"strict": {"forward": "pass", "train": "pass", "error": None, "op": None,
                                  "fallbacks": {}, "compiles": 1, "seconds": 1.0, "native": True}}}
    zoo.write_results(out, [saved], ["strict"], {})

    def fake_run_arch(arch, modes):
        return {"arch": arch, "status": "attempted", "family": "vision", "seconds": 1.0,
                "modes": {m: {"forward": "fail", "train": "fail", "error": "forward: boom",
                              "op": None, "fallbacks": {}, "compiles": 0, "seconds": 1.0,
                              "native": False} for m in modes}}

    # The workers are subprocesses; answer each job in this process instead.
    def in_process(command, jobs, parallel, timeout, log, on_answer, on_failure, **options):
        for job in jobs:
            on_answer(job, fake_run_arch(job["arch"], job["modes"]))

    monkeypatch.setattr(zoo.worker_pool, "run", in_process)
    records, totals = zoo.run(["x"], ["compiled"], out, progress=False)
    assert set(records[0]["modes"]) == {"strict", "compiled"}
    assert records[0]["modes"]["strict"]["native"] is True
    assert totals["compiled"]["attempted"] == 1 and totals["compiled"]["forward_pass"] == 0


def test_shards_partition_the_selection_and_merge_back(tmp_path, capfd):
    from torch_tpu.tools.model_zoo.cli import shard_of

    archs = [f"m{i}" for i in range(11)]
    shards = [shard_of(archs, f"{i}/3") for i in (1, 2, 3)]
    assert sorted(sum(shards, [])) == sorted(archs) and all(len(s) in (3, 4) for s in shards)
    with pytest.raises(ValueError, match="between 1 and n"):
        shard_of(archs, "4/3")
    with pytest.raises(ValueError, match="i/n"):
        shard_of(archs, "half")
    # Two shard directories, each holding one record, merge into one report with both.
    record = {"status": "attempted", "family": "vision", "seconds": 1.0,
              "modes": {"strict": _mode("pass", "pass")}}
    for name in ("a", "b"):
        zoo.write_results(str(tmp_path / name), [dict(record, arch=name)], ["strict"], {})
    merged = str(tmp_path / "all")
    zoo.main(["--arch", "a,b", "--modes", "strict", "--report", "--merge",
              f"{tmp_path / 'a'},{tmp_path / 'b'}", "--out", merged])
    last = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    assert last["strict"]["attempted"] == 2 and last["architectures"] == 2
    with open(os.path.join(merged, "model_zoo.json")) as f:
        assert [r["arch"] for r in json.load(f)["architectures"]] == ["a", "b"]


def test_float64_judges_a_step_only_as_far_as_float32_rounding_goes():
    from torch_tpu.tools.model_zoo.compare import _within_float32_rounding

    exact = {"loss": torch.tensor(1.0, dtype=torch.float64),
             "grads": {"w": torch.tensor([1.0, -2.0], dtype=torch.float64)},
             "params": {"w": torch.tensor([0.5, 0.5], dtype=torch.float64)}}
    # The CPU's float32 gradient is 0.1 away from float64 (an ill-conditioned network).
    ref = {"loss": torch.tensor(1.0), "grads": {"w": torch.tensor([1.1, -2.0])},
           "params": {"w": torch.tensor([0.5, 0.5])}, "float64": exact}

    def judge(grad):
        return _within_float32_rounding(None, ref, torch.tensor(1.0), {"w": torch.tensor(grad)},
                                        {"w": torch.tensor([0.5, 0.5])})

    assert judge([0.85, -2.0])         # 0.15 from float64: within twice the CPU's own 0.1
    assert not judge([1.5, -2.0])      # 0.5 from float64: a device error, not rounding
    ref["float64"] = None              # a model that cannot run in float64: float32 stands
    assert not judge([0.85, -2.0])


class _SkewedOnTpu(torch.nn.Module):
    """A linear layer and a ReLU whose result is shifted by `skew` on tpu only: a stand-in for
    a lowering that is wrong by that much."""

    def __init__(self, skew):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)
        self.skew = skew

    def forward(self, x):
        y = self.linear(x).relu()
        return {"logits": y + self.skew if y.device.type == "tpu" else y}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_float64_on_tpu_passes_a_right_forward_and_step_and_fails_wrong_ones(mode, monkeypatch):
    import torch_tpu
    from torch_tpu.tools.model_zoo.compare import (_device_float64_forward_matches, _device_float64_matches,
                                                   _eager_mode_for)

    def judge(model):
        ref = {"inputs": {"x": torch.randn(2, 4, generator=torch.Generator().manual_seed(1))},
               "labels": None}
        with torch_tpu.eager_mode(_eager_mode_for(mode)):
            return _device_float64_matches(model, ref, mode)

    def judge_forward(model):
        ref = {"inputs": {"x": torch.randn(2, 4, generator=torch.Generator().manual_seed(1))}}
        with torch_tpu.eager_mode(_eager_mode_for(mode)):
            return _device_float64_forward_matches(model, ref, mode)

    assert judge(_SkewedOnTpu(0.0)) and judge_forward(_SkewedOnTpu(0.0))
    # 1e-4 on values of order one is far below float32's tolerance but not float64's.
    assert not judge(_SkewedOnTpu(1e-4)) and not judge_forward(_SkewedOnTpu(1e-4))
    # A step that passes only because its float64 run took the CPU fallback is not judged right.
    calls = iter([{}, {"aten::relu": 1}, {}, {"aten::relu": 1}])
    monkeypatch.setattr(torch_tpu, "fallback_counts", lambda: next(calls))
    assert not judge(_SkewedOnTpu(0.0))
    assert not judge_forward(_SkewedOnTpu(0.0))


class _NoisyInTraining(torch.nn.Module):
    """Gumbel noise in training, drawn the ways models draw it (a distribution's sample, a
    factory with device=, an in-place fill), as GroupViT's token assignment does."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, labels=None):
        y = self.linear(x)
        gumbel = torch.distributions.Gumbel(torch.zeros((), device=y.device), torch.ones((), device=y.device))
        y = y + gumbel.sample(y.shape) + torch.randn(y.shape, device=y.device)
        y = y * torch.empty_like(y).uniform_(0.5, 1.5)
        return {"loss": y.softmax(-1).square().sum()}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_a_step_that_draws_noise_draws_the_cpus_numbers_on_tpu(mode):
    import copy

    import torch_tpu
    from torch_tpu.tools.model_zoo.compare import (_compile, _eager_mode_for, _same_draws_as_cpu, _seed_all,
                                                   _train_step)

    model, inputs = _NoisyInTraining(), {"x": torch.randn(2, 4, generator=torch.Generator().manual_seed(1))}
    _seed_all(1)
    state = torch.random.get_rng_state()
    loss, grads, _, _ = _train_step(copy.deepcopy(model), inputs, None, "cpu")
    ref = {"train_samples": not torch.equal(state, torch.random.get_rng_state())}
    assert ref["train_samples"]
    with torch_tpu.eager_mode(_eager_mode_for(mode)):
        tpu_model = copy.deepcopy(model).to("tpu")
        _seed_all(1)
        with _same_draws_as_cpu(ref):
            tpu_loss, tpu_grads, _, _ = _train_step(tpu_model, inputs, None, "tpu", _compile(tpu_model, mode))
    assert zoo.elementwise_mismatch("loss", tpu_loss, loss) is None
    assert all(zoo.scaled_mismatch(n, tpu_grads[n], grads[n]) is None for n in grads)
    # Without the CPU's draws the device's own generator gives other numbers.
    with torch_tpu.eager_mode(_eager_mode_for(mode)):
        _seed_all(1)
        own_loss, _, _, _ = _train_step(copy.deepcopy(model).to("tpu"), inputs, None, "tpu")
    assert zoo.elementwise_mismatch("loss", own_loss, loss) is not None


class _LossRefusesFloat64(torch.nn.Module):
    """A bias that batch norm takes away (its gradient is zero in exact arithmetic, rounding
    noise in practice), then a layer shifted by `skew` on tpu only; its loss refuses float64,
    as D-FINE's casts its targets to float32."""

    def __init__(self, skew):
        super().__init__()
        torch.manual_seed(0)
        self.before_norm = torch.nn.Linear(4, 6)
        self.norm = torch.nn.BatchNorm1d(6)
        self.head = torch.nn.Linear(6, 3)
        self.skew = skew

    def forward(self, x, labels=None):
        y = self.head(self.norm(self.before_norm(x)).relu())
        y = y + self.skew if y.device.type == "tpu" else y
        if labels is not None and y.dtype == torch.float64:
            raise RuntimeError("Index put requires the source and destination dtypes match")
        return {"logits": y}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_float64_without_the_loss_judges_outputs_and_gradients(mode):
    import torch_tpu
    from torch_tpu.tools.model_zoo.compare import WITHOUT_THE_LOSS, _device_float64_matches, _eager_mode_for

    def judge(model):
        ref = {"inputs": {"x": torch.randn(8, 4, generator=torch.Generator().manual_seed(1))},
               "labels": torch.zeros(8, dtype=torch.long)}
        with torch_tpu.eager_mode(_eager_mode_for(mode)):
            return _device_float64_matches(model, ref, mode)

    assert judge(_LossRefusesFloat64(0.0)) == WITHOUT_THE_LOSS
    assert not judge(_LossRefusesFloat64(1e-4))


def test_a_weight_normed_model_deep_copies_and_computes_the_same():
    import copy

    from torch_tpu.tools.model_zoo.compare import _weight_norms_as_leaves

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.utils.weight_norm(torch.nn.Conv1d(3, 4, 3)), torch.nn.ReLU())
    with pytest.raises(RuntimeError, match="deepcopy"):
        copy.deepcopy(model)
    x = torch.randn(2, 3, 8)
    expected = model(x)
    _weight_norms_as_leaves(model)
    copied = copy.deepcopy(model)
    torch.testing.assert_close(copied(x), expected)
    copied(x).sum().backward()  # the copy still trains its magnitude and direction
    assert copied[0].weight_g.grad is not None and copied[0].weight_v.grad is not None
