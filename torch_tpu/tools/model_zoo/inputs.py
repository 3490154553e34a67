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
        if model_inputs.takes_image_pairs(model):
            inputs[name] = torch.stack([inputs[name], model_inputs.pixels(source, params, g, BATCH)], dim=1)
        if "input_ids" in params:
            # A captioner (BLIP) decodes text about the image.
            ids = torch.randint(3, _vocab(config), (BATCH, SEQ), generator=g)
            inputs.update(input_ids=ids, attention_mask=torch.ones_like(ids))
    elif name == "input_values":
        inputs = {name: _waveform(source, g, model)}
    elif name == "past_values":
        inputs = _series(config, params, g)
    elif name == "states":
        inputs = _trajectory(config, g)
    elif name == "input_features":
        inputs = {name: _features(model, source, g)}
    elif name == "flattened_patches":
        inputs = model_inputs.flattened_patches(config, g, BATCH)
    else:
        length = _text_length(config)
        ids = torch.randint(3, _vocab(config), (BATCH, length), generator=g)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        inputs.update(_audio_beside_text(model, config, params, g))
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
    if "input_ids" not in inputs and "decoder_input_ids" in params and \
            "input_ids" not in params:
        # An image-to-text encoder-decoder (VisionEncoderDecoder): the text is its decoder's.
        label_task = "seq2seq_lm"
    labels = _labels(label_task, config, inputs, g)
    if name == "state" and "actions" in params:
        inputs.update(_robot_policy(model, config, inputs["input_ids"], g))
        labels = None  # the actions are the policy's labels, taken by name
    if (task in SEQ2SEQ or label_task in SEQ2SEQ) and "decoder_input_ids" in params:
        inputs["decoder_input_ids"] = torch.randint(3, model_inputs.decoder_vocab(config),
                                                    (BATCH, SEQ), generator=g)
    elif "decoder_input_ids" in params and isinstance(getattr(config, "canvas_length", None), int):
        # A block-diffusion decoder (Diffusion Gemma) denoises a canvas of this many tokens,
        # which it draws at random where none is given: the CPU's draw is not the device's.
        inputs["decoder_input_ids"] = torch.randint(3, _vocab(config), (BATCH, config.canvas_length),
                                                    generator=g)
    elif "decoder_input_ids" in params and name != "input_ids" and \
            isinstance(getattr(config, "blank_token_id", None), int):
        # A transducer's prediction network reads the transcript so far, from the blank on;
        # the joint network scores every pair of audio frame and transcript position.
        ids = torch.randint(3, _vocab(config), (BATCH, SEQ), generator=g)
        inputs["decoder_input_ids"] = ids.index_fill(1, torch.tensor([0]), config.blank_token_id)
    labels = model_inputs.add_extras(model, config, inputs, labels, params, g)
    if "input_ids" in inputs and "input_values" in params and "input_values" not in inputs and \
            "pixel_values_videos" in inputs and \
            model_inputs.find(config, "audio_config") is not None:
        # PE Audio-Video embeds audio, video and text together (its video-text-only path reads
        # outputs its video model does not return): a waveform for its audio encoder too, of
        # four frames of the DAC codec that encoder starts with.
        hop = _hop(config.audio_config) or 1
        inputs["input_values"] = _waveform(config.audio_config, g, samples=max(SAMPLES, 4 * hop))
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
    vocab = getattr(config, "vocab_size", None) or getattr(
        getattr(config, "text_config", None) or config, "vocab_size", VOCAB)
    # Text never holds the ids a vocabulary map gives to image tokens (Chameleon's, whose
    # logits for them are the float minimum: as labels they would make the loss infinite).
    mapped = getattr(config, "vocabulary_map", None)
    if isinstance(mapped, dict) and mapped:
        vocab = min(vocab, min(mapped.values()))
    return vocab


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


def _trajectory(config, g):
    """An offline reinforcement-learning trajectory (Decision Transformer): per step a state,
    an action, a reward, the return still to go and the step's index in its episode."""
    import torch

    steps = SEQ
    return {"states": torch.randn(BATCH, steps, config.state_dim, generator=g),
            "actions": torch.randn(BATCH, steps, config.act_dim, generator=g),
            "rewards": torch.randn(BATCH, steps, 1, generator=g),
            "returns_to_go": torch.randn(BATCH, steps, 1, generator=g),
            "timesteps": torch.arange(steps).expand(BATCH, steps).clone(),
            "attention_mask": torch.ones(BATCH, steps, dtype=torch.long)}


def _series(config, params, g):
    """A time-series forecaster's history: (batch, steps, channels) where the configuration
    counts input channels (PatchTST, PatchTSMixer), else (batch, steps) with TimesFM's padding
    mask (no step padded) and frequency class; steps are the context length (PatchTST takes no
    other), or four patches where that is longer than 64 (TimesFM's 512 and 16384)."""
    import torch

    if "past_time_features" in params:
        return _lagged_series(config, params, g)
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


def _lagged_series(config, params, g):
    """A probabilistic forecaster's (Time Series Transformer, Informer, Autoformer) history and
    future: its context plus the longest lag of past values, with their time features (the
    configured time and dynamic real features per step), all observed, static features where
    it has any, and the prediction window's values and time features, which train its decoder
    (the future values are what its loss measures)."""
    import torch

    past = config.context_length + max(config.lags_sequence)
    future = config.prediction_length
    size = config.input_size

    def values(steps):
        shape = (BATCH, steps) if size == 1 else (BATCH, steps, size)
        return torch.randn(*shape, generator=g)

    features = config.num_time_features + getattr(config, "num_dynamic_real_features", 0)
    inputs = {"past_values": values(past),
              "past_time_features": torch.randn(BATCH, past, features, generator=g),
              "past_observed_mask": torch.ones(*values(past).shape)}
    if config.num_static_categorical_features > 0:
        inputs["static_categorical_features"] = torch.stack(
            [torch.randint(0, c, (BATCH,), generator=g) for c in config.cardinality], dim=1)
    if config.num_static_real_features > 0:
        inputs["static_real_features"] = torch.randn(BATCH, config.num_static_real_features,
                                                     generator=g)
    if "future_values" in params:
        inputs["future_values"] = values(future)
        inputs["future_time_features"] = torch.randn(BATCH, future, features, generator=g)
    return inputs


def _robot_policy(model, config, ids, g):
    """A flow-matching robot policy (PI0) trains on the robot's state and a chunk of actions
    beside its prompt and one camera's image (a camera axis and mask of the cameras given,
    as many image tokens after the first token as its vision tower makes features): the noise
    and the denoising time it would otherwise draw at random (the CPU's draws are not the
    device's) are given, one time per example."""
    import torch

    vlm = config.vlm_config
    pixels = model_inputs.pixels(vlm, set(), g, BATCH)
    with torch.no_grad():
        count = model.model.vlm.get_image_features(pixels).pooler_output.shape[1]
    text = ids.masked_fill(ids == vlm.image_token_id, model_inputs.plain_token(vlm))
    image = torch.full((BATCH, count), vlm.image_token_id, dtype=ids.dtype)
    ids = torch.cat([text[:, :1], image, text[:, 1:]], dim=1)
    chunk = (BATCH, config.chunk_size, config.max_action_dim)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "pixel_values": pixels[:, None],
            "pixel_attention_mask": torch.ones(BATCH, 1, dtype=torch.bool),
            "state": torch.randn(BATCH, config.max_state_dim, generator=g),
            "noise": torch.randn(*chunk, generator=g),
            "timestep": torch.rand(BATCH, generator=g) * 0.9 + 0.05,
            "actions": torch.randn(*chunk, generator=g)}


def _audio_beside_text(model, config, params, g):
    """The audio a contrastive text-audio model (CLAP, PE Audio) pairs with its token ids, as
    its audio tower's configuration and the model type's feature extractor shape it; or the
    mel spectrogram of a voice that a text-to-speech model conditions on (CLVP's decoder
    names its mel bins feature_size), laid out as its extractor lays it out."""
    import torch

    if "return_loss" not in params:
        # Not contrastive: audio placed among the tokens (Qwen2-Audio's) needs its tokens, and
        # runs on text alone; audio aligned to them (Voxtral Realtime's) is add_extras'.
        return {}
    voice = next((sub for sub in (getattr(config, k, None) for k in config.to_dict())
                  if hasattr(sub, "model_type") and isinstance(getattr(sub, "feature_size", None), int)),
                 None)
    if voice is not None and "input_features" in params:
        bins = voice.feature_size
        shape = (BATCH, bins, FRAMES) if _channels_first(config) else (BATCH, FRAMES, bins)
        return {"input_features": torch.randn(*shape, generator=g)}
    if getattr(config, "audio_config", None) is None:
        return {}
    if "input_features" in params:
        return {"input_features": _features(model, config, g)}
    if "input_values" in params:
        return {"input_values": _waveform(config, g, model)}
    return {}


def _hop(config):
    """Samples per frame of an audio codec's encoder (DAC's hop length, else the product of
    its downsampling ratios), looked for in the configuration and its sub-configurations,
    serialised or not."""
    import math

    def read(key):
        return config.get(key) if isinstance(config, dict) else getattr(config, key, None)

    value = read("hop_length")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    ratios = read("downsampling_ratios")
    if isinstance(ratios, (list, tuple)) and ratios and all(isinstance(r, int) for r in ratios):
        return math.prod(ratios)
    items = config.items() if isinstance(config, dict) else \
        ((k, getattr(config, k, None)) for k in config.to_dict()) if hasattr(config, "to_dict") \
        else ()
    for _, sub in items:
        if isinstance(sub, dict) or hasattr(sub, "to_dict") and hasattr(sub, "model_type"):
            found = _hop(sub)
            if found:
                return found
    return None


def _waveform(config, g, model=None, samples=None):
    """A mono waveform, or for a spectrogram transformer (batch, frames, mel bins)."""
    import torch

    bins, frames = getattr(config, "num_mel_bins", None), getattr(config, "max_length", None)
    if isinstance(bins, int) and isinstance(frames, int):
        return torch.randn(BATCH, frames, bins, generator=g)
    hop = _hop(config)
    if samples is None:
        samples = SAMPLES
    if hop and hop > samples:
        # Fewer samples than one frame's encode to nothing: two frames' worth, as the
        # feature extractor pads a waveform to a multiple of the hop.
        samples = 2 * hop
    shape = (BATCH, samples)
    layout = model_inputs.extractor_layout(config.model_type, "input_values")
    if layout and layout[0] == 3 or layout is None and \
            model_inputs.documented_channel_axis(model, "input_values"):
        # A channel axis, as the model's feature extractor gives it (or, where the extractor
        # needs a library not installed, as the forward's documentation shapes the input).
        shape = (BATCH, 1, samples)
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
    layout = model_inputs.extractor_layout(config.model_type, "input_features")
    if layout and layout[0] == 4:
        # One channel of (frames, bins), as CLAP's extractor gives a clip it does not fuse.
        return torch.randn(BATCH, 1, FRAMES, bins, generator=g)
    return torch.randn(BATCH, FRAMES, bins, generator=g)


def _channels_first(config):
    layout = model_inputs.extractor_layout(config.model_type, "input_features")
    if layout:
        return layout[1] == 1
    # Without an extractor to ask (one for another input, or a library missing): Whisper's
    # kind has mel bins and source positions.
    return isinstance(model_inputs.find(config, "max_source_positions"), int) and \
        isinstance(model_inputs.find(config, "num_mel_bins"), int)
