"""The inputs each architecture runs on: one batch for its main input (token ids, pixels, a
waveform, a spectrogram or mel features) shaped as its configuration and its own feature
extractor have it, with labels for its task, and what its forward takes besides
(`model_inputs`: decoder ids, images placed among the tokens, codebooks, boxes), generated on
the CPU from a fixed seed so that the CPU and the device see the same values."""
from torch_tpu.tools.model_zoo import model_inputs
from torch_tpu.tools.model_zoo.configs import NUM_LABELS, VOCAB

BATCH, SEQ = 2, 8
# A waveform's samples (wav2vec2's two small feature-extractor convolutions make 159 frames of
# them) and a spectrogram's frames (four to eight times subsampled by speech encoders).
SAMPLES, FRAMES = 1600, 64

CLASSIFICATION = ("sequence_classification", "image_classification", "audio_classification")
SEQ2SEQ = ("seq2seq_lm", "speech_seq2seq")


def make_inputs(model, task, config, seed=0):
    """CPU inputs for one forward and one training step, from the model's main input."""
    import torch

    if hasattr(model, "example_inputs"):  # a ZooModel from another library
        return model.example_inputs(seed)
    g = torch.Generator().manual_seed(seed)
    params = model_inputs.forward_parameters(model)
    name = model_inputs.main_input(model, params)
    source = model_inputs.encoder_config(model, config)
    if name in ("pixel_values", "pixel_values_videos"):
        video = name == "pixel_values_videos" or model_inputs.takes_clips(model)
        inputs = {name: model_inputs.pixels(source, params, g, BATCH, video=video)}
        if "input_ids" in params:
            # A captioner (BLIP) decodes text about the image.
            ids = torch.randint(3, _vocab(config), (BATCH, SEQ), generator=g)
            inputs.update(input_ids=ids, attention_mask=torch.ones_like(ids))
    elif name == "input_values":
        inputs = {name: _waveform(source, g)}
    elif name == "past_values":
        inputs = _series(config, params, g)
    elif name == "input_features":
        inputs = {name: _features(model, source, g)}
    elif name == "flattened_patches":
        inputs = model_inputs.flattened_patches(config, g, BATCH)
    else:
        length = _text_length(config)
        ids = torch.randint(3, _vocab(config), (BATCH, length), generator=g)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    label_task = task
    if task == "image_classification" and name == "input_ids" and "pixel_values" in params:
        # An image classifier on a vision-language model (ShieldGemma 2) hands its labels to
        # the language model's loss: token labels.
        label_task = "causal_lm"
    if name == "flattened_patches" or task == "image_text_to_text" and name == "input_ids" and \
            getattr(config, "is_encoder_decoder", False):
        # An encoder-decoder that reads an image (with a prompt: Florence-2, UDOP; alone:
        # Pix2Struct) decodes the text: the labels and decoder ids are the decoder's.
        label_task = "seq2seq_lm"
    labels = _labels(label_task, config, inputs, g)
    if (task in SEQ2SEQ or label_task == "seq2seq_lm") and "decoder_input_ids" in params:
        inputs["decoder_input_ids"] = torch.randint(3, model_inputs.decoder_vocab(config),
                                                    (BATCH, SEQ), generator=g)
    labels = model_inputs.add_extras(model, config, inputs, labels, params, g)
    if name == "input_features" and "attention_mask" in params:
        # Conformer CTC heads measure each example's encoded length from it.
        features = inputs[name]
        frames = features.shape[2] if _channels_first(source) else features.shape[1]
        inputs["attention_mask"] = torch.ones(BATCH, frames, dtype=torch.long)
    if name == "input_values" and "padding_mask" in params:
        inputs["padding_mask"] = torch.ones(inputs[name].shape[0], inputs[name].shape[-1],
                                            dtype=torch.long)
    if getattr(config, "model_type", None) in ONE_EXAMPLE:
        inputs = {k: v[:1] if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        labels = labels[:1] if isinstance(labels, torch.Tensor) else labels
    return inputs, labels


# Model types whose forward takes a batch of one only: TVP views its (width, hidden) column
# position embeddings as (batch, 1, width, hidden).
ONE_EXAMPLE = ("tvp",)


def _vocab(config):
    return getattr(config, "vocab_size", None) or getattr(
        getattr(config, "text_config", None) or config, "vocab_size", VOCAB)


def _text_length(config):
    # Perceiver's masked-LM decoder queries a fixed max_position_embeddings positions, the
    # length its tokenizer pads every input to.
    if getattr(config, "d_latents", None) and isinstance(
            getattr(config, "max_position_embeddings", None), int):
        return config.max_position_embeddings
    return SEQ


def _labels(task, config, inputs, g):
    import torch

    if task in CLASSIFICATION:
        return torch.randint(0, NUM_LABELS, (BATCH,), generator=g)
    if task == "ctc":
        return torch.randint(1, min(_vocab(config), 20), (BATCH, 3), generator=g)
    if task in SEQ2SEQ:
        return torch.randint(3, model_inputs.decoder_vocab(config), (BATCH, SEQ), generator=g)
    ids = inputs.get("input_ids")
    return ids.clone() if ids is not None else None


def _series(config, params, g):
    """A time-series forecaster's history: (batch, steps, channels) where the configuration
    counts input channels (PatchTST, PatchTSMixer), else (batch, steps) with TimesFM's padding
    mask (no step padded) and frequency class; steps are the context length (PatchTST takes no
    other), or four patches where that is longer than 64 (TimesFM's 512 and 16384)."""
    import torch

    context = getattr(config, "context_length", None)
    steps = context if context and context <= 64 else 4 * (getattr(config, "patch_length", None) or 8)
    channels = getattr(config, "num_input_channels", None)
    shape = (BATCH, steps, channels) if isinstance(channels, int) else (BATCH, steps)
    inputs = {"past_values": torch.randn(*shape, generator=g)}
    if "past_values_padding" in params:
        inputs["past_values_padding"] = torch.zeros(BATCH, steps)
    if "freq" in params:
        inputs["freq"] = torch.zeros(BATCH, 1, dtype=torch.long)
    return inputs


def _waveform(config, g):
    """A mono waveform, or for a spectrogram transformer (batch, frames, mel bins)."""
    import torch

    bins, frames = getattr(config, "num_mel_bins", None), getattr(config, "max_length", None)
    if isinstance(bins, int) and isinstance(frames, int):
        return torch.randn(BATCH, frames, bins, generator=g)
    shape = (BATCH, SAMPLES)
    layout = model_inputs.extractor_layout(config.model_type, "input_values")
    if layout and layout[0] == 3:
        shape = (BATCH, 1, SAMPLES)  # a channel axis, as the model's feature extractor gives it
    return torch.randn(*shape, generator=g)


def _features(model, config, g):
    """Spectrogram features laid out as the model's feature extractor lays them out: (batch,
    bins, frames) for Whisper's kind (whose encoder takes exactly twice max_source_positions
    frames), (batch, frames, bins) for the conformer and Speech2Text kind."""
    import torch

    bins = model_inputs.feature_size(config)
    if model_inputs.extractor_layout(config.model_type, "input_features") is None:
        # No extractor to ask: frames stacked with their deltas (Granite Speech 5's) show as
        # a first projection taking a multiple of the mel bins.
        width = model_inputs.first_linear_width(model)
        if width and width > bins and width % bins == 0:
            bins = width
    positions = model_inputs.find(config, "max_source_positions")
    if _channels_first(config):
        frames = 2 * positions if isinstance(positions, int) else FRAMES
        return torch.randn(BATCH, bins, frames, generator=g)
    return torch.randn(BATCH, FRAMES, bins, generator=g)


def _channels_first(config):
    layout = model_inputs.extractor_layout(config.model_type, "input_features")
    if layout:
        return layout[1] == 1
    # Without an extractor to ask (one for another input, or a library missing): Whisper's
    # kind has mel bins and source positions.
    return isinstance(model_inputs.find(config, "max_source_positions"), int) and \
        isinstance(model_inputs.find(config, "num_mel_bins"), int)
