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
# instructblip: Q-Former queries placed as image tokens of an id the configuration leaves
# unset, with the Q-Former's own prompt; llava_next: an image cut into any-resolution tiles;
# pix2struct: flattened patches and decoder-side labels; tvp: pixels sized by one
# configuration for text and frames, in a batch of one.
@pytest.mark.parametrize("arch", ["minicpm3", "swin", "parakeet_ctc", "videomae", "patchtst",
                                  "depth_anything", "instructblip", "llava_next", "pix2struct",
                                  "tvp"])
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


def test_vision_language_inputs_follow_their_processors():
    config, task, model = zoo.build("llava_next")
    inputs, labels = zoo.make_inputs(model, task, config)
    # Tiles of the tower's image size, as many as the model's own count for the image's size;
    # as many image tokens as its features of those tiles.
    tiles = inputs["pixel_values"].shape[1]
    assert inputs["pixel_values"].shape[-1] == config.vision_config.image_size and tiles > 1
    with torch.no_grad():
        features = model.get_image_features(pixel_values=inputs["pixel_values"],
                                            image_sizes=inputs["image_sizes"]).pooler_output
    image = inputs["input_ids"] == config.image_token_index
    assert int(image[0].sum()) == features[0].shape[0]
    assert bool((labels[image] == -100).all())
    config, task, model = zoo.build("kosmos-2")
    inputs, labels = zoo.make_inputs(model, task, config)
    # Kosmos-2 places the image by a mask of latent_query_num positions.
    mask = inputs["image_embeds_position_mask"].bool()
    assert int(mask[0].sum()) == config.latent_query_num
    assert bool((labels[mask] == -100).all())
    config, task, model = zoo.build("florence2")
    inputs, labels = zoo.make_inputs(model, task, config)
    # An encoder-decoder's labels are the decoder's, not the prompt's tokens.
    assert labels.shape == inputs["decoder_input_ids"].shape
    config, task, model = zoo.build("udop")
    inputs, _ = zoo.make_inputs(model, task, config)
    boxes = inputs["bbox"]
    # UDOP's word boxes are fractions of the page.
    assert boxes.is_floating_point() and 0 <= float(boxes.min()) and float(boxes.max()) <= 1
    assert bool((boxes[..., :2] <= boxes[..., 2:]).all())


def test_small_configs_follow_checkpoint_conventions():
    # Chameleon's image tokens at the top of the vocabulary, which text ids stay below.
    chameleon = zoo.small_config("chameleon")
    assert max(chameleon.vocabulary_map.values()) == chameleon.vocab_size - 1
    assert zoo.inputs._vocab(chameleon) == chameleon.image_token_id
    # Multimodal RoPE sections that split the rotated half of the small head exactly, Ernie's
    # height and width sections equal.
    for arch, section in (("glm4v_moe", [2, 1, 1]), ("paddleocr_vl", [2, 1, 1]),
                          ("ernie4_5_vl_moe", [1, 1, 2])):
        rope = zoo.small_config(arch).get_text_config().rope_parameters
        assert rope["mrope_section"] == section, arch
    # Gemma 3n keeps a layer of each kind that reuses the cache of an earlier one.
    text = zoo.small_config("gemma3n").get_text_config()
    assert text.num_kv_shared_layers == 2
    assert text.layer_types[:2] == text.layer_types[2:]
    assert len(text.intermediate_size) == text.num_hidden_layers == 4
