"""The inputs each architecture runs on: one batch for its main input (token ids, pixels, a
waveform, a spectrogram or mel features), with labels for its task, generated on the CPU from a
fixed seed so that the CPU and the device see the same values."""
from torch_tpu.tools.model_zoo.configs import NUM_LABELS, VOCAB

BATCH, SEQ = 2, 8


def make_inputs(model, task, config, seed=0):
    """CPU inputs for one forward and one training step, from the model's main input."""
    import torch

    g = torch.Generator().manual_seed(seed)
    name = getattr(model, "main_input_name", "input_ids")
    vocab = getattr(config, "vocab_size", None) or getattr(
        getattr(config, "text_config", None) or config, "vocab_size", VOCAB)
    inputs, labels = {}, None
    if name == "pixel_values":
        channels = getattr(config, "num_channels", 3)
        size = getattr(config, "image_size", 32)
        size = size if isinstance(size, int) else 32
        inputs[name] = torch.randn(BATCH, channels, size, size, generator=g)
        labels = torch.randint(0, NUM_LABELS, (BATCH,), generator=g)
    elif name == "input_values" and isinstance(getattr(config, "num_mel_bins", None), int) and \
            isinstance(getattr(config, "max_length", None), int):
        # A spectrogram transformer: (batch, frames, mel bins).
        inputs[name] = torch.randn(BATCH, config.max_length, config.num_mel_bins, generator=g)
        labels = torch.randint(0, NUM_LABELS, (BATCH,), generator=g)
    elif name == "input_values":
        inputs[name] = torch.randn(BATCH, 1600, generator=g)
        if task == "ctc":
            labels = torch.randint(1, min(vocab, 20), (BATCH, 3), generator=g)
        else:
            labels = torch.randint(0, NUM_LABELS, (BATCH,), generator=g)
    elif name == "input_features":
        bins = getattr(config, "num_mel_bins", 16)
        frames = 2 * getattr(config, "max_source_positions", 32)
        inputs[name] = torch.randn(BATCH, bins, frames, generator=g)
        labels = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
        inputs["decoder_input_ids"] = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
    else:
        ids = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
        inputs["input_ids"] = ids
        inputs["attention_mask"] = torch.ones_like(ids)
        if task == "sequence_classification":
            labels = torch.randint(0, NUM_LABELS, (BATCH,), generator=g)
        else:
            labels = ids.clone()
        if task == "seq2seq_lm":
            labels = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
            inputs["decoder_input_ids"] = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
    return inputs, labels
