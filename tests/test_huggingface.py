"""Hugging Face Transformers on tpu, as a CUDA user writes it: from_pretrained(device_map="tpu"),
.to("tpu"), generate(), a hand-written training loop and transformers.Trainer. The model is a
2-layer LLaMA-style decoder with random weights written to a temporary directory; nothing is
downloaded."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import copy  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    directory = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(directory)
    return str(directory), model


def _prompt():
    return torch.randint(0, 128, (2, 6), generator=torch.Generator().manual_seed(1))


def test_from_pretrained_device_map_and_to_place_the_model_on_tpu(mode, saved_model):
    directory, cpu_model = saved_model
    mapped = transformers.AutoModelForCausalLM.from_pretrained(directory, device_map="tpu")
    moved = transformers.AutoModelForCausalLM.from_pretrained(directory).to("tpu")
    ids = _prompt()
    expected = cpu_model(ids).logits
    for model in (mapped, moved):
        assert model.device.type == "tpu"
        assert all(p.device.type == "tpu" for p in model.parameters())
        with torch.no_grad():
            logits = model(ids.to("tpu")).logits
        torch.testing.assert_close(logits.cpu(), expected, atol=1e-4, rtol=1e-4)


def test_generate_greedy_matches_cpu_and_sampling_follows_the_seed(mode, saved_model):
    directory, cpu_model = saved_model
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, device_map="tpu")
    ids = _prompt()
    mask = torch.ones_like(ids)
    kwargs = dict(attention_mask=mask, max_new_tokens=5, pad_token_id=0)
    expected = cpu_model.generate(ids, do_sample=False, **kwargs)
    greedy = model.generate(ids.to("tpu"), do_sample=False, **{**kwargs, "attention_mask": mask.to("tpu")})
    assert torch.equal(greedy.cpu(), expected)

    def sample(seed):
        torch.manual_seed(seed)
        return model.generate(ids.to("tpu"), do_sample=True, top_k=20, temperature=1.0,
                              **{**kwargs, "attention_mask": mask.to("tpu")}).cpu()

    first, again = sample(3), sample(3)
    assert first.shape == (2, 11) and torch.equal(first[:, :6], ids)
    assert torch.equal(first, again)
    assert ((first >= 0) & (first < 128)).all()


def test_static_cache_generate_on_a_compiled_forward_compiles_once_per_prompt_bucket(mode):
    """generate(cache_implementation="static") with a compiled forward: the decode step compiles
    once, the prefill once per bucket of prompt lengths (a bucket's program serves every length in
    it, a length equal to the bucket's size too), then nothing compiles again; tokens equal CPU's."""
    import torch_tpu

    config = transformers.LlamaConfig(
        vocab_size=96, hidden_size=48, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    lengths = [5, 6, 7, 8, 11, 13, 16, 12]
    # No pad token (0) in a prompt: generate() would pass an attention mask, another graph.
    prompts = [torch.randint(1, 96, (1, n), generator=torch.Generator().manual_seed(n)) for n in lengths]
    kwargs = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0,
                  cache_implementation="static", max_cache_len=32)  # one cache size for every prompt
    expected = [model.generate(p, **kwargs) for p in prompts]
    model.to("tpu")
    model.forward = torch.compile(model.forward, backend="tpu")
    compiled = {}
    for n, prompt, tokens in zip(lengths, prompts, expected):
        before = torch_tpu.metrics()["compiles_compiled_graph"]
        assert torch.equal(model.generate(prompt.to("tpu"), **kwargs).cpu(), tokens), n
        compiled[n] = torch_tpu.metrics()["compiles_compiled_graph"] - before
    # 5: the static prefill and the decode step; 6: the first prefill traced with a symbolic
    # length runs exact; 7: bucket 8's program; 11: bucket 16's. (Another mode's run of this test
    # may have compiled them already: the counts are bounds.) 12 is also the rotary table's width.
    assert compiled[5] <= 2 and compiled[6] <= 1 and compiled[7] <= 1 and compiled[11] <= 1, compiled
    assert compiled[8] == 0 and compiled[13] == 0 and compiled[16] == 0 and compiled[12] == 0, compiled


def test_training_loop_matches_cpu(mode, saved_model):
    _, cpu_model = saved_model
    data = torch.randint(0, 128, (3, 4, 12), generator=torch.Generator().manual_seed(2))
    losses = {}
    for device in ("cpu", "tpu"):
        model = copy.deepcopy(cpu_model).to(device).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses[device] = []
        for batch in data:
            batch = batch.to(device)
            loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            losses[device].append(loss.item())
    torch.testing.assert_close(losses["tpu"], losses["cpu"], atol=1e-4, rtol=1e-4)
    assert losses["tpu"][-1] < losses["tpu"][0]


class _TokenDataset(torch.utils.data.Dataset):
    def __init__(self):
        self.ids = torch.randint(0, 128, (8, 12), generator=torch.Generator().manual_seed(4))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def test_trainer_trains_on_tpu(mode, saved_model, tmp_path, monkeypatch):
    """TrainingArguments picks tpu:0 through torch.accelerator by itself; accelerate (which moves
    the batches) needs ACCELERATE_TORCH_DEVICE=tpu, its own switch for a device it does not list."""
    directory, _ = saved_model
    monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", "tpu")
    model = transformers.AutoModelForCausalLM.from_pretrained(directory)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=2, learning_rate=1e-3,
        report_to=[], save_strategy="no", logging_steps=1, disable_tqdm=True)
    assert args.device.type == "tpu"
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_TokenDataset())
    before = model.model.embed_tokens.weight.detach().cpu().clone()
    result = trainer.train()
    assert trainer.accelerator.device.type == "tpu"
    assert all(p.device.type == "tpu" for p in model.parameters())
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    assert not torch.equal(model.model.embed_tokens.weight.detach().cpu(), before)
