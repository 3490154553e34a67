"""Architectures the model zoo used to call not applicable, because their small configuration
left a derived size stale or their CPU reference rejected the generic inputs, now build their
configuration and inputs from their own conventions, pass the CPU reference and match it on
tpu; and the inputs follow those conventions (feature layouts, image token counts)."""
import os

import pytest
import torch

pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from torch_tpu.tools import model_zoo as zoo  # noqa: E402


# minicpm3: latent attention, whose rotary head width the configuration derives after the
# small sizes are set; swin: windowed attention over an image sized for its window and stages;
# parakeet_ctc: conformer features laid out frames first with their mask, as its feature
# extractor lays them out; videomae: a clip of as many frames as its configuration counts;
# patchtst: a multichannel history of its context length; depth_anything: a DPT neck fed one
# feature map per entry from a small DINOv2 backbone.
@pytest.mark.parametrize("arch", ["minicpm3", "swin", "parakeet_ctc", "videomae", "patchtst",
                                  "depth_anything"])
def test_formerly_not_applicable_architecture_matches_cpu_in_strict_mode(arch):
    record = zoo.run_arch(arch, ["strict"])
    assert record["status"] == "attempted", record.get("reason")
    result = record["modes"]["strict"]
    assert result["forward"] == "pass", result["error"]
    assert result["train"] == "pass", result["error"]
    assert result["native"], result["fallbacks"]


def test_small_config_rederives_what_its_class_derives():
    config = zoo.small_config("deepseek_v3")
    # __post_init__'s own derivation from the small widths, not the default's 64 and 192.
    assert config.head_dim == config.qk_rope_head_dim
    assert config.qk_head_dim == config.qk_nope_head_dim + config.qk_rope_head_dim
    # A composite model type's causal LM is built from its text half.
    assert type(zoo.small_config("qwen3_5")).__name__ == "Qwen3_5TextConfig"


def test_spectrogram_layout_follows_the_feature_extractor():
    whisper_config, task, whisper = zoo.build("whisper")
    inputs, _ = zoo.make_inputs(whisper, task, whisper_config)
    # Whisper: (batch, mel bins, exactly twice max_source_positions frames).
    assert inputs["input_features"].shape == (zoo.BATCH, whisper_config.num_mel_bins,
                                               2 * whisper_config.max_source_positions)
    config, task, model = zoo.build("parakeet_ctc")
    inputs, labels = zoo.make_inputs(model, task, config)
    features = inputs["input_features"]
    # Parakeet: (batch, frames, mel bins), and a mask over the frames for the CTC lengths.
    assert features.shape[0] == zoo.BATCH
    assert features.shape[2] == config.encoder_config.num_mel_bins
    assert inputs["attention_mask"].shape == features.shape[:2]
    assert labels.shape == (zoo.BATCH, 3)


def test_image_tokens_are_as_many_as_the_vision_tower_makes_features():
    config, task, model = zoo.build("shieldgemma2")
    inputs, labels = zoo.make_inputs(model, task, config)
    with torch.no_grad():
        # The classifier's vision-language model's own count of features per image.
        features = model.model.get_image_features(pixel_values=inputs["pixel_values"])
    features = getattr(features, "pooler_output", features)
    image = inputs["input_ids"] == config.image_token_index
    assert int(image[0].sum()) == features.shape[-2] > 0
    # Gemma 3 marks the image's tokens as such, and they carry no labels.
    assert torch.equal(inputs["token_type_ids"], image.long())
    assert bool((labels[image] == -100).all())
    again, _ = zoo.make_inputs(model, task, config)
    assert all(torch.equal(inputs[k], again[k]) for k in inputs)  # the seeded generator's
