"""What a model's forward takes besides its main input, and the shapes its configuration and its
processor give them: the main input a composite model passes to its encoder, the layout of its
feature extractor's output, pixels for its vision tower, images placed among the tokens (as
many image tokens as the vision tower makes features), audio codebooks, a decoder's ids,
layout boxes. `inputs.make_inputs` builds the main input and the labels and calls
`add_extras` for the rest; every tensor is drawn from its seeded generator on the CPU."""
import functools

from torch_tpu.tools.model_zoo.configs import VOCAB

# Sub-configurations that describe an encoder, looked up in this order.
_ENCODERS = ("encoder", "audio_config", "encoder_config", "speech_config", "vision_config")
# Sub-configurations that describe a decoder.
_DECODERS = ("decoder", "decoder_config", "text_config")


def forward_parameters(model):
    import inspect

    return set(inspect.signature(model.forward).parameters)


def main_input(model, params):
    """The main input's name; a composite encoder-decoder's generic `inputs` is its encoder's
    (speech-encoder-decoder: the speech encoder's input_values), and Perceiver's is token ids
    for its text preprocessor."""
    name = getattr(model, "main_input_name", "input_ids")
    if isinstance(name, (list, tuple)):  # OneFormer's: the image, then the task's prompt
        name = name[0]
    if name in params and name != "inputs":
        return name
    encoder = getattr(model, "encoder", None)
    inner = getattr(encoder, "main_input_name", None)
    if inner and inner != "inputs" and (inner in params or "inputs" in params):
        return inner
    return "input_ids"


def encoder_config(model, config):
    """The configuration the main input goes through: a composite's encoder's."""
    encoder = getattr(model, "encoder", None)
    if getattr(config, "is_encoder_decoder", False) and hasattr(config, "encoder") and \
            getattr(encoder, "main_input_name", "input_ids") != "input_ids":
        return config.encoder
    return config


def find(config, key):
    """An attribute of the configuration or else of its encoder's sub-configuration."""
    value = getattr(config, key, None)
    if value is not None:
        return value
    for sub in _ENCODERS:
        inner = getattr(config, sub, None)
        if inner is not None and hasattr(inner, "to_dict"):
            value = getattr(inner, key, None)
            if value is not None:
                return value
    return None


def feature_size(config):
    """Features per spectrogram frame: mel bins, or what a conformer's feature projection takes
    (Wav2Vec2-BERT's stacked frames), or Speech2Text's features per channel times channels."""
    for key in ("num_mel_bins", "feature_projection_input_dim", "n_mels", "feature_size"):
        value = find(config, key)
        if isinstance(value, int) and value > 1:
            return value
    per_channel = find(config, "input_feat_per_channel")
    if isinstance(per_channel, int):
        return per_channel * (find(config, "input_channels") or 1)
    return 16


def first_linear_width(model):
    """Input width of the model's first linear layer (in registration order)."""
    import torch

    return next((m.in_features for m in model.modules() if isinstance(m, torch.nn.Linear)), None)


@functools.lru_cache(maxsize=None)
def extractor_layout(model_type, key):
    """(dimensions, feature axis) of `key` in what the model type's feature extractor makes of a
    short waveform, or None where it has none or needs a library not installed. Only the
    layout is taken from it: the sizes come from the small configuration."""
    import numpy
    import transformers
    from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES

    cls = getattr(transformers, FEATURE_EXTRACTOR_MAPPING_NAMES.get(model_type) or "", None)
    try:
        extractor = cls()
        rate = getattr(extractor, "sampling_rate", 16000)
        wave = numpy.sin(numpy.arange(rate // 10, dtype=numpy.float32) * 0.05)
        value = extractor(wave, sampling_rate=rate, return_tensors="pt")[key]
    except Exception:  # noqa: BLE001 no extractor, another main input, a missing library
        return None
    size = getattr(extractor, "feature_size", None)
    axes = [i for i in range(1, value.dim()) if value.shape[i] == size]
    return value.dim(), (axes[-1] if axes else value.dim() - 1)


def documented_channel_axis(model, key):
    """Whether the forward's documentation shapes `key` (batch_size, 1 or channels, length)."""
    import inspect
    import re

    doc = inspect.getdoc(getattr(model, "forward", None)) or ""
    shape = re.search(rf"{key} \(`[^`]*` of shape `\(([^)]*)\)`", doc)
    return bool(shape) and bool(re.fullmatch(r"batch_size, (1|\w*channels), \w+",
                                             shape.group(1)))


def pixels(config, params, g, batch, video=False, tiles=None):
    """Pixels for a vision tower: (batch, channels, height, width) of the configured image
    size; a clip (batch, frames, channels, height, width) for a video model (one whose
    configuration counts frames, or whose input is `pixel_values_videos`); or for Siglip2's
    patch sequence (batch, patches, channels x patch x patch) with its patch mask and spatial
    shapes in `_patch_inputs`."""
    import torch

    vision = getattr(config, "vision_config", None) or config
    channels = getattr(vision, "num_channels", 3)
    channels = channels if isinstance(channels, int) else 3
    height, width = _image_size(vision)
    frames = next((v for v in (getattr(vision, k, None) for k in _FRAME_COUNTS)
                   if isinstance(v, int) and not isinstance(v, bool)), None)
    if video or frames or tiles:
        return torch.randn(batch, tiles or frames or 2, channels, height, width, generator=g)
    if "spatial_shapes" in params:
        patch = vision.patch_size
        count = (height // patch) * (width // patch)
        return torch.randn(batch, count, channels * patch * patch, generator=g)
    return torch.randn(batch, channels, height, width, generator=g)


def flattened_patches(config, g, batch):
    """Pix2Struct's image as its processor gives it: a sequence of patches, each its row and
    column (from 1; 0 marks padding) and its flattened pixels, of a 4 x 4 grid, with the mask
    of the real patches."""
    import torch

    vision = getattr(config, "vision_config", None) or config
    side = 4
    rows = torch.arange(1, side + 1).repeat_interleave(side)
    cols = torch.arange(1, side + 1).repeat(side)
    ids = torch.stack([rows, cols], dim=-1).float().expand(batch, -1, -1)
    pixels = torch.randn(batch, side * side, vision.patch_embed_hidden_size, generator=g)
    return {"flattened_patches": torch.cat([ids, pixels], dim=-1),
            "attention_mask": torch.ones(batch, side * side, dtype=torch.long)}


def takes_image_pairs(model):
    """Keypoint matchers (LightGlue, SuperGlue, EfficientLoFTR) take two images to match per
    example, as their forward checks: (batch_size, 2, num_channels, height, width)."""
    import inspect

    try:
        source = inspect.getsource(type(model).forward)
    except (OSError, TypeError):
        return False
    return "(batch_size, 2, num_channels, height, width)" in source


# How a video model's configuration counts the frames of one clip.
_FRAME_COUNTS = ("num_frames", "frames_per_clip")


def takes_clips(model):
    """Whether the model's pixels are clips whatever their input's name: it has video features
    and no image features (InstructBLIP-Video's pixel_values)."""
    return hasattr(model, "get_video_features") and not hasattr(model, "get_image_features")


def _vision(config):
    """The configuration of the model's vision side: its vision_config, or the configuration
    itself where one configuration sizes both the text and the images (ViLT, UDOP, TVP's
    frames): it sizes images and names no text sub-configuration. None for a text model."""
    vision = getattr(config, "vision_config", None)
    if vision is not None:
        return vision
    sized = any(isinstance(getattr(config, k, None), int) for k in _IMAGE_SIZES)
    return config if sized and getattr(config, "text_config", None) is None else None


# How a configuration sizes its (square) images: TVP's frames are max_img_size square, the
# size its prompter pads them to.
_IMAGE_SIZES = ("image_size", "max_img_size")


def _image_size(vision):
    size = next((v for k in _IMAGE_SIZES if (v := getattr(vision, k, None)) is not None), None)
    ratios = getattr(vision, "scaled_images_ratios", None)
    if size is None and ratios and isinstance(getattr(vision, "patch_size", None), int):
        # DepthPro cuts its smallest scaling of the image into patches of patch_size pixels.
        size = int(vision.patch_size / min(ratios))
    if size is None:
        size = _unsized_image(getattr(vision, "model_type", "")) or 32
    if isinstance(size, int):
        return size, size
    if isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(v, int) for v in size):
        return tuple(size)
    return 32, 32


# Images for models whose configuration names no image size and that a 32-pixel square does
# not fit: UVDoc's backbone makes 1/16-size maps that it pads by 2 on each side (reflecting,
# which needs 3 pixels); PP-LCNetV3's last stages run at 1/32 size, where a 32-pixel image
# leaves 1 x 1 maps whose batch norm sees 2 values per channel (a batch of 2): its outputs are
# +-1 whatever the input, and every gradient through it is rounding noise, in float64 too.
# D-FINE and DEIMv2 train their encoders' batch norms over maps of 1/8 to 1/32 size: from a
# 128-pixel image, their float64 steps on two devices agree within 1e-8 (from 64 pixels, 1e-6).
_UNSIZED_IMAGES = {"uvdoc": 64, "pp_lcnet_v3": 64, "d_fine": 128, "deimv2": 128}


def _unsized_image(model_type):
    """The image of a model whose configuration names no size: its image processor's fixed size
    where that is already small (a text-line recognizer's 48 x 320 lines), else _UNSIZED_IMAGES."""
    size = _processor_size(model_type)
    if size and min(size) <= 64:
        return size
    return _UNSIZED_IMAGES.get(model_type)


@functools.lru_cache(maxsize=None)
def _processor_size(model_type):
    """(height, width) of the fixed size the model type's image processor resizes to, read
    from its source (the processors need torchvision, which this environment may lack)."""
    import ast
    import glob
    import os

    import transformers
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES

    names = set((IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type) or {}).values())
    root = os.path.join(os.path.dirname(transformers.__file__), "models")
    for path in glob.glob(os.path.join(root, "*", "image_processing_*.py")):
        with open(path, encoding="utf-8") as source:
            text = source.read()
        if not any(f"class {name}(" in text for name in names):
            continue
        for node in ast.parse(text).body:
            if isinstance(node, ast.ClassDef) and node.name in names:
                for statement in node.body:
                    if isinstance(statement, ast.Assign) and \
                            any(getattr(t, "id", None) == "size" for t in statement.targets):
                        try:
                            size = ast.literal_eval(statement.value)
                        except ValueError:
                            continue
                        if isinstance(size, dict) and {"height", "width"} <= set(size):
                            return size["height"], size["width"]
    return None


def decoder_vocab(config):
    value = getattr(config, "decoder_vocab_size", None)
    if isinstance(value, int):
        return value
    for key in _DECODERS:
        inner = getattr(config, key, None)
        if inner is not None and isinstance(getattr(inner, "vocab_size", None), int):
            return inner.vocab_size
    return getattr(config, "vocab_size", None) or VOCAB


def add_extras(model, config, inputs, labels, params, g):
    """Adds to `inputs` what the forward takes besides the main input; returns the labels,
    reshaped where the extras change what they label."""
    if "spatial_shapes" in params and "pixel_values" in inputs:
        _patch_inputs(config, inputs)
    if {"prompt_pixel_values", "prompt_masks"} <= params and "pixel_values" in inputs:
        _prompt_pair(inputs, g)
    if "classes_structure" in params and "pixel_values" in inputs:
        _class_prompts(config, inputs, g)
    if "bbox" in params and "input_ids" in inputs:
        inputs["bbox"] = _boxes(config, inputs["input_ids"].shape, g)
    if "visual_feats" in params and "visual_pos" in params and "input_ids" in inputs:
        _region_features(config, inputs, g)
    labels = _codebooks(model, config, inputs, labels, params, g)
    if "qformer_input_ids" in params and "input_ids" in inputs:
        _qformer_prompt(config, inputs, g)
    if "task_inputs" in params and isinstance(getattr(config, "task_seq_len", None), int):
        # OneFormer is told its task (semantic, instance or panoptic) by a tokenized prompt.
        import torch

        vocab = getattr(config, "text_encoder_vocab_size", None) or VOCAB
        inputs["task_inputs"] = torch.randint(0, vocab, (next(iter(inputs.values())).shape[0], config.task_seq_len),
                                              generator=g)
    placed = _image_token_id(config, takes_clips(model)) is not None
    if "image_embeds_position_mask" in params and "pixel_values" in params and \
            "input_ids" in inputs:
        labels = _image_positions(config, inputs, labels, params, g)
    elif "input_ids" in inputs and "pixel_values" in params and (
            "pixel_values" not in inputs or placed):
        # Pixels as the main input (BLIP-2) still need their image tokens among the text's.
        labels = _images(model, config, inputs, labels, params, g)
    video = getattr(config, "video_config", None)
    if "input_ids" in inputs and "pixel_values_videos" in params and \
            "pixel_values_videos" not in inputs and _is_config(video) and \
            not isinstance(getattr(config, "video_token_id", None), int):
        # A video-text model without a video token (PE Video) embeds the clip and the text
        # each whole, as CLIP does an image and a text.
        inputs["pixel_values_videos"] = pixels(video, params, g, inputs["input_ids"].shape[0],
                                               video=True)
    if "input_ids" in inputs and "input_features" in params and "input_features" not in inputs \
            and isinstance(getattr(config, "audio_length_per_tok", None), int):
        _token_aligned_audio(config, inputs, g)
    if "input_ids" in inputs and {"duration_labels", "spectrogram_labels"} <= params:
        _speech_targets(config, inputs, params, g)
    if "noise" in params and "pixel_values" in inputs and isinstance(find(config, "mask_ratio"), float):
        # A masked autoencoder (ViT-MAE) keeps the patches its noise ranks lowest, drawn on the
        # model's device unless given: both sides get the CPU's draw.
        import torch

        pixel_values, patch = inputs["pixel_values"], find(config, "patch_size")
        patches = (pixel_values.shape[-2] // patch) * (pixel_values.shape[-1] // patch)
        inputs["noise"] = torch.rand(pixel_values.shape[0], patches, generator=g)
    if _default(model, "sample") is True:
        # A variational codec (VibeVoice's) adds noise to its latents when told to sample; the
        # CPU's draws are not the device's, so both run on the mean, as with dropout off.
        inputs["sample"] = False
    if "input_values" in inputs and "input_features" in params and \
            "input_features" not in inputs and _required(model, "input_features"):
        _semantic_features(model, config, inputs, g)
    if "mm_token_type_ids" in params and "input_ids" in inputs and \
            _processor_default(config.model_type, "return_mm_token_type_ids"):
        inputs["mm_token_type_ids"] = _modality_types(config, inputs["input_ids"])
    return labels


def _speech_targets(config, inputs, params, g):
    """A text-to-speech model trained on its targets (FastSpeech 2) takes them all in
    training: each token's duration in spectrogram frames (two each, so that every example's
    spectrogram is equally long), its pitch and energy, and the spectrogram they sum to."""
    import torch

    batch, length = inputs["input_ids"].shape[:2]
    frames = 2 * length
    inputs["duration_labels"] = torch.full((batch, length), 2, dtype=torch.long)
    for key in ("pitch_labels", "energy_labels"):
        if key in params:
            inputs[key] = torch.randn(batch, length, 1, generator=g)
    inputs["spectrogram_labels"] = torch.randn(batch, frames, feature_size(config), generator=g)


def _required(model, key):
    import inspect

    parameter = inspect.signature(model.forward).parameters.get(key)
    return parameter is not None and parameter.default is inspect.Parameter.empty


def _default(model, key):
    import inspect

    parameter = inspect.signature(model.forward).parameters.get(key)
    return None if parameter is None else parameter.default


def _semantic_features(model, config, inputs, g):
    """A codec with a speech encoder beside its acoustic one (X-Codec 2, NeuCodec) takes
    features of the same audio for it: as their feature extractor makes them, one frame per
    hop of the waveform (two 10 ms filter-bank frames stacked), each as wide as the speech
    encoder's feature projection takes; the two encoders' frames are concatenated."""
    import torch

    samples = inputs["input_values"].shape[-1]
    hop = getattr(model, "hop_length", None) or getattr(config, "hop_length")
    speech = next((v for k, v in config.to_dict().items()
                   if isinstance(v, dict) and "feature_projection_input_dim" in v), None)
    bins = speech["feature_projection_input_dim"] if speech else feature_size(config)
    inputs["input_features"] = torch.randn(inputs["input_values"].shape[0], samples // hop,
                                           bins, generator=g)


def _is_config(value):
    return hasattr(value, "to_dict") and hasattr(value, "model_type")


def _processor_default(model_type, key):
    """A class-level default of the model type's processor (False where it has none)."""
    import transformers
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    name = PROCESSOR_MAPPING_NAMES.get(model_type)
    return bool(getattr(getattr(transformers, name or "", None), key, False))


def _modality_types(config, ids):
    """Each token's modality as processors mark it (create_mm_token_type_ids): 0 text, 1 an
    image token, 2 a video token, 3 an audio token. Molmo2 requires them in training."""
    types = ids.new_zeros(ids.shape)
    for value, modality in ((1, "image"), (2, "video"), (3, "audio")):
        token = getattr(config, f"{modality}_token_id", None)
        if isinstance(token, int):
            types[ids == token] = value
    return types


def _patch_inputs(config, inputs):
    """Siglip2 (NaFlex) takes its image as a patch sequence with a mask of the real patches and
    each image's grid of patches."""
    import torch

    vision = getattr(config, "vision_config", None) or config
    height, width = _image_size(vision)
    batch, count = inputs["pixel_values"].shape[:2]
    inputs["pixel_attention_mask"] = torch.ones(batch, count, dtype=torch.long)
    grid = [height // vision.patch_size, width // vision.patch_size]
    inputs["spatial_shapes"] = torch.tensor([grid] * batch, dtype=torch.long)


# Layout models whose word boxes are fractions of the page, as floats (Bros scales them by its
# bbox_scale, UDOP clips them to [0, 1] and takes their means), not integer positions.
_UNIT_BOXES = ("bros", "udop")


def _prompt_pair(inputs, g):
    """SegGPT stacks a prompt image above the input image (and the prompt's mask above itself)
    into one image of its configured size: the input, prompt image and mask are each half its
    height."""
    import torch

    pixels = inputs["pixel_values"]
    half = pixels[:, :, : pixels.shape[2] // 2].contiguous()
    inputs["pixel_values"] = half
    inputs["prompt_pixel_values"] = torch.randn(half.shape, generator=g)
    inputs["prompt_masks"] = torch.randn(half.shape, generator=g)


# Classes each image of an open-vocabulary detector is asked to find.
_CLASSES_PER_IMAGE = 2


def _class_prompts(config, inputs, g):
    """OmDet-Turbo's processor tokenizes one task prompt per image and every class name of every
    image, the class names flattened, with classes_structure counting each image's classes."""
    import torch

    batch = inputs["pixel_values"].shape[0]
    text = getattr(config, "text_config", None) or config
    vocab, length = text.vocab_size, 8
    tasks = torch.randint(3, vocab, (batch, length), generator=g)
    classes = torch.randint(3, vocab, (batch * _CLASSES_PER_IMAGE, length), generator=g)
    inputs.update(tasks_input_ids=tasks, tasks_attention_mask=torch.ones_like(tasks),
                  classes_input_ids=classes, classes_attention_mask=torch.ones_like(classes),
                  classes_structure=torch.full((batch,), _CLASSES_PER_IMAGE, dtype=torch.long))


def _boxes(config, shape, g):
    """Layout models' word boxes (x0, y0, x1, y1) with x0 <= x1 and y0 <= y1, within the 2-D
    position embeddings (or the page, _UNIT_BOXES)."""
    import torch

    if getattr(config, "model_type", None) in _UNIT_BOXES:
        return _unit_boxes(shape, g)
    limit = min(getattr(config, "max_2d_position_embeddings", 1024), 1024) - 1
    corners = torch.randint(0, limit + 1, (*shape, 2, 2), generator=g)
    low, high = corners.min(dim=-2).values, corners.max(dim=-2).values
    return torch.cat([low, high], dim=-1)


def _unit_boxes(shape, g):
    """Boxes (x0, y0, x1, y1) as fractions of the page or image, x0 <= x1 and y0 <= y1."""
    import torch

    corners = torch.rand(*shape, 2, 2, generator=g)
    return torch.cat([corners.min(dim=-2).values, corners.max(dim=-2).values], dim=-1)


# Regions of an image that LXMERT's detector features describe.
_REGIONS = 4


def _region_features(config, inputs, g):
    """LXMERT reads an image as a detector's (Faster R-CNN's) pooled features of a few regions
    and their boxes as fractions of the image, which no processor of Transformers makes."""
    import torch

    batch = inputs["input_ids"].shape[0]
    inputs["visual_feats"] = torch.randn(batch, _REGIONS, config.visual_feat_dim, generator=g)
    inputs["visual_pos"] = _unit_boxes((batch, _REGIONS), g)[..., :config.visual_pos_dim]


def _codebooks(model, config, inputs, labels, params, g):
    """Audio-token language models take one token per codebook and position, each laid out in
    its own way (read from their forward's documentation): MusicGen's decoder (batch x
    codebooks, length) with labels (batch, length, codebooks); Dia's decoder (batch, length,
    channels) with labels (batch x channels, length); Kyutai's speech-to-text (batch, length,
    1 + codebooks), a text token then the audio codebooks' tokens."""
    import torch

    ids = inputs.get("input_ids")
    if ids is None:
        return labels
    batch, length = ids.shape[:2]
    codebooks = getattr(config, "num_codebooks", None)
    if isinstance(codebooks, int) and isinstance(getattr(config, "codebook_vocab_size", None), int):
        audio = torch.randint(0, config.codebook_vocab_size, (batch, length, codebooks),
                              generator=g)
        inputs["input_ids"] = torch.cat([ids[..., None], audio], dim=-1)
        return labels
    if isinstance(codebooks, int) and getattr(config, "model_type", "").endswith("_decoder"):
        codes = torch.randint(3, config.vocab_size, (batch, codebooks, length), generator=g)
        inputs["input_ids"] = codes.reshape(batch * codebooks, length)
        inputs["attention_mask"] = torch.ones(batch, length, dtype=torch.long)
        return codes.transpose(1, 2).contiguous()
    decoder = getattr(config, "decoder_config", None)
    channels = getattr(decoder, "num_channels", None)
    if isinstance(channels, int) and "decoder_input_ids" in params:
        codes = torch.randint(3, decoder.vocab_size, (batch, length, channels), generator=g)
        inputs["decoder_input_ids"] = codes
        return codes.transpose(1, 2).reshape(batch * channels, length).contiguous()
    return labels


# How many image tokens one image makes, where the configuration says so.
_IMAGE_TOKEN_COUNTS = ("mm_tokens_per_image", "image_seq_length", "num_image_tokens")


def _images(model, config, inputs, labels, params, g):
    """Pixels for a model that takes them beside its token ids, and, where the tokens mark the
    image's place (an image token id), as many image tokens after the first token as the
    vision tower makes features of one image (the configuration's count, else the tower's own
    get_image_features), with token types marking them where the forward takes token types
    (Gemma 3 attends within an image both ways). A model without an image token (GIT)
    prepends the image's features itself."""
    import torch

    # Images flattened into patch sequences with each one's patch grid (Qwen2-VL's
    # image_grid_thw, Nemotron Omni's image_grid_hw) are left out: their processors' layout.
    if _vision(config) is None or {"image_grid_thw", "image_grid_hw"} & params:
        return labels
    ids = inputs["input_ids"]
    batch = ids.shape[0]
    tiles = _tiles(model, config) if "image_sizes" in params else None
    extra = {"pixel_values": inputs["pixel_values"] if "pixel_values" in inputs
             else pixels(config, params, g, batch, tiles=tiles)}
    if "image_sizes" in params:
        extra["image_sizes"] = torch.tensor([_image_size(_vision(config))] * batch)
    # The Q-Former's prompt (InstructBLIP) conditions the image features too.
    extra.update({k: inputs[k] for k in ("qformer_input_ids", "qformer_attention_mask")
                  if k in inputs})
    image_id = _image_token_id(config, takes_clips(model))
    if "image_attention_mask" in params:
        # IDEFICS cross-attends from the text to the images: its processor gives each example's
        # images (here one) and which of them each token sees (the one before it: every token).
        extra["pixel_values"] = extra["pixel_values"][:, None]
        extra["image_attention_mask"] = torch.ones(*ids.shape, 1, dtype=torch.long)
    if image_id is None:
        inputs.update(extra)
        return labels
    # With the image sizes where the model's features take them (LLaVA-NeXT's count depends
    # on them); plain LLaVA's forward takes image sizes too but splits by a patch size its
    # vision tower lacks: only the processors of the LLaVA-NeXT kind give them.
    count = _image_token_count(model, config, extra, sizes=True) if "image_sizes" in extra \
        else None
    if count is None:
        extra.pop("image_sizes", None)
        count = _image_token_count(model, config, extra)
    if not count:
        return labels
    # Labels that are the tokens (a decoder-only model's) follow them, the image's unlabelled;
    # an encoder-decoder's are the decoder's own.
    follow = _are_tokens(labels, ids)
    text = ids.masked_fill(ids == image_id, plain_token(config))
    image = torch.full((batch, count), image_id, dtype=ids.dtype)
    ids = torch.cat([text[:, :1], image, text[:, 1:]], dim=1)
    inputs.update(input_ids=ids, attention_mask=torch.ones_like(ids), **extra)
    if "token_type_ids" in params:
        inputs["token_type_ids"] = (ids == image_id).long()
    if follow:
        labels = ids.masked_fill(ids == image_id, -100)
    return labels


def _are_tokens(labels, ids):
    import torch

    return labels is not None and labels.shape == ids.shape and bool(torch.equal(labels, ids))


def _tiles(model, config):
    """Tiles per image of an any-resolution model (LLaVA-NeXT): its processor resizes the image
    to the best of image_grid_pinpoints, cuts that into tiles of the vision tower's image size
    and puts the whole image first; the model's own image_size_to_num_patches counts them for
    an image of the tower's size. None for a model without such a grid."""
    import sys

    grid = getattr(config, "image_grid_pinpoints", None)
    count = getattr(sys.modules.get(type(model).__module__), "image_size_to_num_patches", None)
    if not grid or count is None:
        return None
    size = _image_size(_vision(config))
    return count(image_size=size, grid_pinpoints=grid, patch_size=size[0])


def _image_token_id(config, video=False):
    """The id of the tokens that the image's features replace, or a clip's."""
    keys = ("video_token_id", "video_token_index") if video else \
        ("image_token_id", "image_token_index")
    return next((v for k in keys if isinstance(v := getattr(config, k, None), int)), None)


def _qformer_prompt(config, inputs, g):
    """InstructBLIP's processor tokenizes the prompt twice: for the language model and, with
    the Q-Former's own tokenizer, for the Q-Former that picks the image features it asks
    about."""
    import torch

    vocab = getattr(getattr(config, "qformer_config", None), "vocab_size", None) or VOCAB
    shape = inputs["input_ids"].shape
    inputs["qformer_input_ids"] = torch.randint(3, vocab, shape, generator=g)
    inputs["qformer_attention_mask"] = torch.ones(shape, dtype=torch.long)


def _image_positions(config, inputs, labels, params, g):
    """Kosmos-2 marks the image's place by a mask instead of a token id: its processor puts
    latent_query_num tokens between the image's start and end tokens and sets the mask there,
    where the forward writes the image's features over their embeddings."""
    import torch

    ids = inputs["input_ids"]
    batch = ids.shape[0]
    follow = _are_tokens(labels, ids)
    if "pixel_values" not in inputs:
        inputs["pixel_values"] = pixels(config, params, g, batch)
    count = config.latent_query_num
    image = torch.full((batch, count), plain_token(config), dtype=ids.dtype)
    ids = torch.cat([ids[:, :1], image, ids[:, 1:]], dim=1)
    mask = torch.zeros_like(ids)
    mask[:, 1:1 + count] = 1
    inputs.update(input_ids=ids, attention_mask=torch.ones_like(ids),
                  image_embeds_position_mask=mask)
    if follow:
        labels = ids.masked_fill(mask.bool(), -100)
    return labels


def plain_token(config):
    """The smallest token id from 3 on that no special token of the configuration takes."""
    taken = {v for k in config.to_dict() if k.endswith(("_token_id", "_token_index"))
             for v in [getattr(config, k, None)] if isinstance(v, int)}
    return next(i for i in range(3, 3 + len(taken) + 1) if i not in taken)


def _image_token_count(model, config, extra, sizes=False):
    """Features per image: what the model's own get_image_features makes of the pixels, else
    the configuration's count (not every small configuration keeps that count consistent)."""
    import torch

    # The head's, or its base model's (a classifier around a vision-language model).
    method = "get_video_features" if takes_clips(model) else "get_image_features"
    features = getattr(model, method, None) or \
        getattr(getattr(model, "model", None), method, None)
    if features is not None:
        training = model.training
        try:
            model.eval()
            with torch.no_grad():
                out = features(**{k: v for k, v in extra.items() if sizes or k != "image_sizes"})
        except Exception:  # noqa: BLE001 a tower that wants more than pixels
            out = None
        finally:
            model.train(training)
        stacked = getattr(out, "deepstack_features", None)
        out = getattr(out, "pooler_output", out)
        if out is None and stacked:
            # Granite 4 Vision's features are per language layer: (layer, one per image).
            out = stacked[0][1]
        batch = extra["pixel_values"].shape[0]
        if isinstance(out, (list, tuple)) and out:  # one tensor per image
            out, batch = out[0], 1
        if isinstance(out, torch.Tensor) and out.dim() >= 2:
            return out.shape[-2] if out.dim() == 3 else out.shape[0] // batch
    if sizes:
        return None
    for key in _IMAGE_TOKEN_COUNTS:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _token_aligned_audio(config, inputs, g):
    """Voxtral Realtime adds one audio frame's embedding to each token's, a frame being
    audio_length_per_tok feature frames (after its encoder's and projector's subsampling)."""
    import torch

    batch, length = inputs["input_ids"].shape[:2]
    bins = feature_size(config)
    frames = length * config.audio_length_per_tok
    inputs["input_features"] = torch.randn(batch, bins, frames, generator=g)
