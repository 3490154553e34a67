"""Hugging Face architectures on the tpu device, unmodified, in every mode.

    python -m torch_tpu.tools.model_zoo [--quick | --arch NAME[,NAME]] [--modes strict,...]
        [--out DIR] [--timeout S] [--jobs N] [--fresh] [--list]

Every architecture that the installed `transformers` ships is built from a small configuration
(2 layers, hidden size 32, vocabulary 99, random weights from a fixed seed; nothing is
downloaded) and run, in each mode (strict, defer_and_fuse, compiled = torch.compile(model,
backend="tpu") in strict eager), on tpu and on the CPU with the same inputs:

  forward   model.eval() under no_grad; every floating output agrees with the CPU's;
  train     model.train() with dropout off: loss, backward, one SGD step; the loss, every
            parameter gradient and every updated parameter agree with the CPU's.

Tolerances (float32 through another compiler, whose reductions and fusions reorder sums): a
forward output or the loss agrees when |tpu - cpu| <= 2e-3 + 2e-3 |cpu| elementwise; a gradient or
updated parameter when max |tpu - cpu| <= 1e-2 max |cpu| + 1e-5 over the tensor (gradients of
near-zero entries are dominated by rounding, so they are judged against the tensor's scale).

Selection: the model types of the task mappings (causal LM, masked LM, seq2seq LM, sequence
classification, image classification, CTC, audio classification, speech seq2seq), one task per
model type (seq2seq first, then masked LM for encoders, causal LM, the vision and audio heads,
sequence classification last), and one model type per modelling module of transformers, so
variants that share one implementation (gemma3 and gemma3_text, the *_text halves of
multimodal models, aliases of one config) count once. Each is put in one family (see
`family`). An architecture whose small configuration cannot be built offline, or whose CPU
reference run fails with the generic inputs, is `not applicable` with the reason; it is not
attempted, since the CPU failing says nothing about the device.

Parameters whose entries are all equal (zero-initialised routers, biases, norm scales) get
N(0, 0.02) noise added, so that no two experts tie in a router's topk: PyTorch leaves the order
of tied elements open, and the CPU's differs from every accelerator's.

Each architecture runs in a worker process (a crash or a hang past --timeout costs that
architecture only). Results go to DIR/model_zoo.json after each architecture (a rerun resumes
from it; --fresh starts over) and DIR/model_zoo.md; the totals are the last line of stdout:
per mode attempted, forward_pass, train_pass, native (forward and train passed and no op ran
through the CPU fallback).
"""
import argparse
import json
import os
import re
import sys
import time

from torch_tpu.tools import worker_pool

MODES = ("strict", "defer_and_fuse", "compiled")
FAMILIES = ("decoder-only", "encoder-only", "encoder-decoder", "vision", "audio",
            "mixture-of-experts", "state-space", "multimodal")

# A fixed sample for CI: every family, the most common attention and normalisation variants.
QUICK = ("llama", "gpt2", "qwen2_moe", "mixtral", "mamba", "bert", "roberta", "distilbert",
         "t5", "bart", "vit", "resnet", "convnext", "wav2vec2", "whisper")

# Task mappings in the order a model type's one task is chosen.
TASKS = (
    ("seq2seq_lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("speech_seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
    ("masked_lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("causal_lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("image_classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("ctc", "MODEL_FOR_CTC_MAPPING_NAMES"),
    ("audio_classification", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
    ("sequence_classification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
)

FORWARD_RTOL = FORWARD_ATOL = 2e-3
GRAD_RTOL, GRAD_ATOL = 1e-2, 1e-5
SGD_LR = 1e-2
BATCH, SEQ = 2, 8
VOCAB = 99
NUM_LABELS = 3


# ----------------------------------------------------------------------------- selection

def _mappings():
    from transformers.models.auto import modeling_auto

    return {task: getattr(modeling_auto, name) for task, name in TASKS}


def _module_of(model_type):
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    return model_type_to_module_name(model_type)


def _task_of(model_type, mappings):
    for task, _ in TASKS:
        if model_type in mappings[task]:
            return task
    return None


def _is_text_half(model_type):
    return model_type.endswith("_text") or "_text_" in model_type


def select():
    """[(model_type, task, class name)]: one task per model type, one model type per modelling
    module; within a module the text model is preferred over the composite multimodal one."""
    mappings = _mappings()
    types = sorted({t for m in mappings.values() for t in m})
    by_module = {}
    for model_type in types:
        by_module.setdefault(_module_of(model_type), []).append(model_type)
    chosen = []
    for module, candidates in sorted(by_module.items()):
        def rank(t):
            # The plain model type first (its name is the module's), then text halves of
            # multimodal models, then the rest.
            return (t.replace("-", "_") != module, not _is_text_half(t), t)
        model_type = min(candidates, key=rank)
        task = _task_of(model_type, mappings)
        chosen.append((model_type, task, mappings[task][model_type]))
    return chosen


def interleave_families(selection):
    """The selected model types in round-robin order over their families, so that a partial
    (or resumed) full run covers every family evenly instead of the alphabet's first part."""
    groups = {}
    for model_type, task, _ in selection:
        try:
            fam = family(model_type, task, small_config(model_type))
        except Exception:  # noqa: BLE001 the worker reports why; only the order is decided here
            fam = _guess_family(model_type)
        groups.setdefault(fam, []).append(model_type)
    order = []
    lists = [groups[f] for f in sorted(groups)]
    for i in range(max(map(len, lists), default=0)):
        order += [names[i] for names in lists if i < len(names)]
    return order


# ----------------------------------------------------------------------------- small configs

_LAYERS = {"num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers",
           "decoder_layers", "num_encoder_layers", "num_decoder_layers", "n_layers_per_block"}
_HIDDEN = {"hidden_size", "d_model", "n_embd", "n_embed", "embed_dim", "model_dim", "dim",
           "word_embed_proj_dim", "embedding_size", "d_embed"}
_HEADS = {"num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
          "decoder_attention_heads", "encoder_attention_heads", "num_attention_heads_text"}
_KV_HEADS = {"num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num"}
_FFN = {"intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner",
        "moe_intermediate_size", "shared_expert_intermediate_size", "ffn_hidden_size",
        "expert_intermediate_size", "intermediate_size_mlp", "dense_intermediate_size"}
_EXPERTS = {"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts",
            "num_routed_experts"}
_TOPK = {"num_experts_per_tok", "moe_topk", "top_k", "num_selected_experts", "moe_k",
         "num_experts_per_token"}
_POSITIONS = {"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len",
              "max_sequence_length", "seq_length", "max_target_positions"}
_SMALL = {
    "head_dim": 8, "kv_channels": 8, "attention_head_size": 8, "d_kv": 8, "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 4, "v_head_dim": 8, "kv_lora_rank": 16, "q_lora_rank": 16,
    "n_group": 1, "topk_group": 1, "n_shared_experts": 1, "num_shared_experts": 1,
    "image_size": 32, "patch_size": 8, "num_channels": 3, "max_source_positions": 32,
    "num_mel_bins": 16, "sliding_window": 16, "attention_window": 4,
    "conv_dim": [16, 16], "conv_stride": [5, 2], "conv_kernel": [10, 3],
    "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4,
    "tdnn_dim": [16, 16], "tdnn_kernel": [3, 1], "tdnn_dilation": [1, 1], "xvector_output_dim": 16,
    "classifier_proj_size": 16, "proj_codevector_dim": 16, "codevector_dim": 16,
    "num_codevectors_per_group": 8, "adapter_stride": 2, "output_hidden_size": 32,
    "mask_time_prob": 0.0, "mask_feature_prob": 0.0, "ssm_state_size": 8, "state_size": 8,
    "time_step_rank": 4, "mamba_d_state": 8, "mamba_n_heads": 4, "mamba_d_head": 16,
    "mamba_n_groups": 1, "mamba_chunk_size": 8, "chunk_size": 8, "n_groups": 1,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
    "linear_value_head_dim": 8, "first_k_dense_replace": 1, "bucket_size": 4,
    "num_buckets": 4, "local_attn_chunk_length": 4, "lsh_attn_chunk_length": 4,
    "axial_pos_shape": [4, 4], "axial_pos_embds_dim": [16, 16], "relative_attention_num_buckets": 8,
    "relative_attention_max_distance": 16, "router_jitter_noise": 0.0, "layerdrop": 0.0,
    "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "use_cache": False,
    "num_labels": NUM_LABELS, "tie_word_embeddings": True, "block_size": 8, "num_groups": 2,
    # Hybrids place attention (and experts) by period and offset: with 2 layers, the second.
    "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
    "expert_layer_offset": 1, "qk_head_dim": 8, "mamba_d_ssm": 64,
}


def _layer_list_indices(layer_types, count):
    """Indices of the layers to keep: the first of each distinct kind (so a hybrid keeps an
    attention and a state-space layer), padded with the first layers to `count`."""
    keep = []
    seen = set()
    for i, kind in enumerate(layer_types):
        if kind not in seen:
            seen.add(kind)
            keep.append(i)
    for i in range(len(layer_types)):
        if len(keep) >= count:
            break
        if i not in keep:
            keep.append(i)
    return sorted(keep)


def _shrink(config):
    """Makes one (sub-)configuration small in place."""
    values = config.to_dict()
    old_layers = next((values[k] for k in ("num_hidden_layers", "n_layer", "num_layers")
                       if isinstance(values.get(k), int)), None)
    kept = None
    for key in ("layer_types", "layers_block_type", "block_types", "hybrid_override_pattern",
                "mlp_layer_types", "attn_type_list", "layer_block_types"):
        kinds = values.get(key)
        if isinstance(kinds, (list, tuple)) and old_layers and len(kinds) == old_layers:
            kept = _layer_list_indices(list(kinds), 2)
            break
    layers = len(kept) if kept else 2
    heads = None
    for key, value in values.items():
        if key.endswith("_config") or isinstance(value, dict) and key != "rope_scaling":
            continue
        if isinstance(value, bool):
            continue
        new = _UNSET = object()
        if key in _LAYERS and isinstance(value, int) and value > 0:
            new = layers
        elif key in _HIDDEN and isinstance(value, int) and value > 0:
            new = 32
        elif key in _HEADS and isinstance(value, int) and value > 0:
            new = heads = 4
        elif key in _KV_HEADS and isinstance(value, int) and value > 0:
            mha = value == next((values[h] for h in _HEADS if isinstance(values.get(h), int)), -1)
            new = 4 if mha else 2
        elif key in _FFN and isinstance(value, int) and value > 0:
            new = 64
        elif key in _EXPERTS and isinstance(value, int) and value > 1:
            new = 4
        elif key in _TOPK and isinstance(value, int) and value > 1:
            new = 2
        elif key in _POSITIONS and isinstance(value, int) and value > 64:
            new = 64
        elif key == "vocab_size" and isinstance(value, int) and value > VOCAB:
            new = VOCAB
        elif key in _SMALL and value is not None and not isinstance(value, str):
            small = _SMALL[key]
            if isinstance(small, list) and isinstance(value, (list, tuple)):
                new = small
            elif isinstance(small, (int, float)) and isinstance(value, (int, float)):
                new = min(value, small) if key not in ("num_labels", "tie_word_embeddings") \
                    else small
        elif ("dropout" in key or key.endswith("_pdrop") or "drop_path" in key or
              "drop_prob" in key) and isinstance(value, float):
            new = 0.0
        elif ("dropout" in key or "drop_path" in key or "drop_prob" in key) and \
                isinstance(value, (list, tuple)) and all(isinstance(v, float) for v in value):
            new = [0.0] * len(value)
        elif key in ("hidden_sizes", "embed_dims", "hidden_dims", "widths", "dims") and \
                isinstance(value, (list, tuple)) and value and isinstance(value[0], int):
            new = [8 * 2 ** min(i, 2) for i in range(len(value))]
        elif key in ("depths", "num_layers_per_stage", "block_repeats") and \
                isinstance(value, (list, tuple)) and value and isinstance(value[0], int):
            new = [1] * len(value)
        elif key in ("num_heads", "num_attention_heads") and isinstance(value, (list, tuple)):
            new = [1] * len(value)
        elif key.endswith(("_token_id", "_token_index")) and isinstance(value, int) and \
                value >= VOCAB:
            new = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
                   "decoder_start_token_id": 2, "sep_token_id": 2, "cls_token_id": 1,
                   "mask_token_id": 3}.get(key, 4)
        elif key in ("layer_types", "layers_block_type", "block_types", "mlp_layer_types",
                     "attn_type_list", "layer_block_types") and kept and \
                isinstance(value, (list, tuple)) and len(value) == old_layers:
            new = [value[i] for i in kept]
        elif key in ("attn_layer_indices", "attention_layer_indices", "full_attn_idxs") and \
                (value is None or isinstance(value, (list, tuple))):
            # None means no attention layer at all, which the hybrids' own cache code rejects.
            new = [1]
        elif key == "hybrid_override_pattern" and kept and isinstance(value, str):
            new = "".join(value[i] for i in kept)
        if new is not _UNSET:
            try:
                setattr(config, key, new)
            except Exception:  # noqa: BLE001 read-only derived attributes keep their value
                pass
    if isinstance(getattr(config, "conv_dim", None), (list, tuple)) and \
            hasattr(config, "num_feat_extract_layers"):
        config.num_feat_extract_layers = len(config.conv_dim)
    if "id2label" in values:
        config.num_labels = NUM_LABELS
    try:
        if heads and isinstance(getattr(config, "head_dim", None), int):
            config.head_dim = 8
    except Exception:  # noqa: BLE001 derived (property) or per-layer head_dim: left to the config
        pass
    if getattr(config, "pad_token_id", 0) is None and hasattr(config, "vocab_size"):
        config.pad_token_id = 0
    for key, value in values.items():
        # Sub-configurations: text_config, vision_config, ..., and the encoder and decoder of
        # the generic encoder-decoder models.
        if isinstance(value, dict):
            sub = getattr(config, key, None)
            if sub is not None and hasattr(sub, "to_dict") and hasattr(sub, "model_type"):
                _shrink(sub)


def small_config(model_type):
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    _shrink(config)
    for key in ("pad_token_id",):
        if getattr(config, key, None) is None:
            try:
                setattr(config, key, 0)
            except Exception:  # noqa: BLE001
                pass
    if getattr(config, "is_encoder_decoder", False) and \
            getattr(config, "decoder_start_token_id", None) is None:
        config.decoder_start_token_id = 2
    # Eager attention everywhere: the comparison is of the model's own ops, not of which
    # fused attention kernel a device may pick.
    config._attn_implementation = "eager"
    return config


# ----------------------------------------------------------------------------- inputs


def family(model_type, task, config):
    """decoder-only, encoder-only, encoder-decoder, vision, audio, mixture-of-experts,
    state-space or multimodal: a model's inputs decide vision and audio; then a state-space or
    hybrid layer, then routed experts, then an encoder-decoder stack, then a vision or audio
    tower next to the language model; what remains is an encoder (masked LM, classification)
    or a decoder (causal LM)."""
    if task in ("image_classification",):
        return "vision"
    if task in ("ctc", "audio_classification", "speech_seq2seq"):
        return "audio"
    flat = json.dumps(config.to_dict(), default=str).lower()
    if re.search(r'"(ssm_state_size|state_size|mamba_[a-z_]+|time_step_rank|'
                 r'linear_num_value_heads|lru_width|rescale_every)"', flat) or \
            re.search(r'"(mamba|mamba2|linear_attention|recurrent|rwkv|ssm|m|linear)"', flat) \
            and re.search(r'"(layer_types|layers_block_type|block_types|'
                          r'hybrid_override_pattern)"', flat) or \
            model_type in ("rwkv", "xlstm", "recurrent_gemma", "mamba", "mamba2", "falcon_mamba"):
        return "state-space"
    for key in _EXPERTS:
        if re.search(rf'"{key}": ([2-9]|\d\d+)', flat):
            return "mixture-of-experts"
    if getattr(config, "is_encoder_decoder", False) or task == "seq2seq_lm":
        return "encoder-decoder"
    if re.search(r'"(vision_config|audio_config|vq_config|image_size)"', flat):
        return "multimodal"
    if task in ("masked_lm", "sequence_classification"):
        return "encoder-only"
    return "decoder-only"


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


# ----------------------------------------------------------------------------- comparison


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


# ----------------------------------------------------------------------------- one architecture


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
                    fail("forward", "mismatch " + bad)
                else:
                    record["forward"] = "pass"
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
            if bad:
                fail("train", "mismatch " + bad)
            else:
                record["train"] = "pass"
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


def _family_of(model_type):
    """The family of an architecture whose worker died or hung: from its small config when that
    builds, else from its task."""
    try:
        return family(model_type, _task_of(model_type, _mappings()), small_config(model_type))
    except Exception:  # noqa: BLE001
        return _guess_family(model_type)


def _guess_family(model_type):
    """A family for an architecture whose config could not be built: from its task only."""
    try:
        task = _task_of(model_type, _mappings())
    except Exception:  # noqa: BLE001
        return "unknown"
    return {"image_classification": "vision", "ctc": "audio", "audio_classification": "audio",
            "speech_seq2seq": "audio", "seq2seq_lm": "encoder-decoder",
            "masked_lm": "encoder-only", "sequence_classification": "encoder-only"}.get(
                task, "decoder-only")


# ----------------------------------------------------------------------------- reports


def totals(records, modes=MODES):
    """Per mode: attempted, forward_pass, train_pass, native; plus not_applicable and, per
    family, attempted and the strict forward passes."""
    attempted = [r for r in records if r["status"] == "attempted"]
    out = {"architectures": len(records), "not_applicable": len(records) - len(attempted)}
    for mode in modes:
        ran = [r["modes"][mode] for r in attempted if mode in r["modes"]]
        out[mode] = {"attempted": len(ran),
                     "forward_pass": sum(m["forward"] == "pass" for m in ran),
                     "train_pass": sum(m["train"] == "pass" for m in ran),
                     "native": sum(bool(m.get("native")) for m in ran)}
    fams = {}
    for r in attempted:
        f = fams.setdefault(r["family"], {"attempted": 0, "forward_pass": {}})
        f["attempted"] += 1
        for mode in modes:
            if r["modes"].get(mode, {}).get("forward") == "pass":
                f["forward_pass"][mode] = f["forward_pass"].get(mode, 0) + 1
    out["families"] = dict(sorted(fams.items()))
    return out


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(records, modes=MODES, command="python -m torch_tpu.tools.model_zoo"):
    t = totals(records, modes)
    lines = ["# Hugging Face architectures on tpu", "",
             f"Generated by `{command}`. Per mode: forward and training step against the CPU "
             "(`F`/`T`: pass, `f`/`t`: fail); `native`: both passed with no CPU fallback.", "",
             "| mode | attempted | forward pass | train pass | native |",
             "| --- | --- | --- | --- | --- |"]
    for mode in modes:
        m = t[mode]
        pct = (lambda n: f"{n} ({100 * n / m['attempted']:.1f} %)") if m["attempted"] else str
        lines.append(f"| {mode} | {m['attempted']} | {pct(m['forward_pass'])} | "
                     f"{pct(m['train_pass'])} | {pct(m['native'])} |")
    lines += ["", f"Not applicable: {t['not_applicable']} of {t['architectures']}.", "",
              "| family | attempted | " + " | ".join(f"forward pass ({m})" for m in modes) + " |",
              "| --- | --- | " + " | ".join("---" for _ in modes) + " |"]
    for name, f in t["families"].items():
        lines.append(f"| {name} | {f['attempted']} | " +
                     " | ".join(str(f["forward_pass"].get(m, 0)) for m in modes) + " |")
    lines += ["", "| architecture | family | task | " + " | ".join(modes) +
              " | fallback ops | compiles | seconds | first error |",
              "| --- | --- | --- | " + " | ".join("---" for _ in modes) + " | --- | --- | --- | --- |"]
    for r in records:
        if r["status"] != "attempted":
            continue
        cells, fallbacks, compiles, error = [], set(), [], ""
        for mode in modes:
            m = r["modes"].get(mode)
            if m is None:
                cells.append("-")
                continue
            cells.append(("F" if m["forward"] == "pass" else "f") +
                         ("T" if m["train"] == "pass" else "t") +
                         (" native" if m.get("native") else ""))
            fallbacks |= set(m["fallbacks"])
            compiles.append(str(m["compiles"]))
            if m["error"] and not error:
                error = f"{mode}: {m['error']}" + (f" [{m['op']}]" if m.get("op") else "")
        lines.append(f"| {r['arch']} | {r['family']} | {r.get('task', '')} | " +
                     " | ".join(cells) +
                     f" | {_cell(', '.join(sorted(fallbacks)) or '-')} | {'/'.join(compiles)} | "
                     f"{r['seconds']} | {_cell(error[:200])} |")
    lines += ["", "## Not applicable", "", "| architecture | family | reason |",
              "| --- | --- | --- |"]
    for r in records:
        if r["status"] == "not_applicable":
            lines.append(f"| {r['arch']} | {r['family']} | {_cell(r['reason'][:200])} |")
    return "\n".join(lines) + "\n"


def write_results(out_dir, records, modes, meta):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "model_zoo.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"meta": meta, "totals": totals(records, modes), "architectures": records},
                  f, indent=1)
    os.replace(tmp, path)
    with open(os.path.join(out_dir, "model_zoo.md"), "w") as f:
        f.write(markdown(records, modes))


# ----------------------------------------------------------------------------- orchestration


def _quiet_transformers():
    # Default configs of large models warn about token ids outside the vocabulary they are
    # about to be shrunk to; thousands of such lines would bury the progress bar.
    import transformers

    transformers.logging.set_verbosity_error()


def _worker():
    import torch  # noqa: F401

    import torch_tpu  # noqa: F401

    _quiet_transformers()
    worker_pool.announce_ready()
    for job in worker_pool.jobs():
        try:
            record = run_arch(job["arch"], job["modes"])
        except BaseException as error:  # noqa: BLE001
            record = {"arch": job["arch"], "status": "attempted", "family": _family_of(job["arch"]),
                      "modes": {m: _crash(f"worker: {_first_line(error)}") for m in job["modes"]},
                      "seconds": 0.0}
        worker_pool.answer(record)


def _crash(reason):
    return {"forward": "fail", "train": "fail", "error": reason, "op": failing_op(reason),
            "fallbacks": {}, "compiles": 0, "seconds": 0.0, "native": False}


def _bar(done, total, width=30):
    filled = int(width * done / total) if total else width
    return "#" * filled + "." * (width - filled)


def _needs_rerun(record, modes, rerun):
    if record["status"] == "not_applicable":
        return "na" in rerun
    if any(m not in record["modes"] for m in modes):
        return True
    return "failed" in rerun and any(
        record["modes"][m]["forward"] != "pass" or record["modes"][m]["train"] != "pass"
        for m in modes)


def run(archs, modes=MODES, out_dir="model_zoo", jobs=1, timeout=600.0, resume=True,
        progress=True, command=None, rerun=()):
    """Runs the architectures in worker processes; returns (records, totals). Records already
    in out_dir/model_zoo.json for the same architecture and modes are kept (resume), except
    those `rerun` names: "na" (not applicable) and "failed" (a failure in one of the modes)."""
    progress = sys.stderr if progress is True else progress
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "model_zoo.json")
    previous = {}
    if resume and os.path.exists(path):
        with open(path) as f:
            for r in json.load(f).get("architectures", []):
                previous[r["arch"]] = r
    records = {}
    todo = []
    for arch in archs:
        old = previous.get(arch)
        if old and not _needs_rerun(old, modes, rerun):
            records[arch] = old
        else:
            todo.append(arch)
    meta = {"command": command or "python -m torch_tpu.tools.model_zoo", "modes": list(modes)}
    for arch, old in previous.items():
        # A resumed run keeps what an earlier, wider run recorded.
        if arch not in records and arch not in todo:
            records[arch] = old
    log = open(os.path.join(out_dir, "model_zoo_workers.log"), "a")
    start = time.monotonic()
    done = len(archs) - len(todo)

    def finish(job, record):
        nonlocal done
        old = records.get(record["arch"]) or previous.get(record["arch"])
        if old and old.get("modes") and record["status"] == "attempted":
            # Modes that an earlier run recorded and this one did not run stay.
            record["modes"] = {**old["modes"], **record.get("modes", {})}
        records[record["arch"]] = record
        done += 1
        write_results(out_dir, _ordered(records, archs), modes, meta)
        if progress:
            print(f"[{_bar(done, len(archs))}] {done}/{len(archs)} "
                  f"{time.monotonic() - start:.0f}s {record['arch']}: {_summary(record, modes)}",
                  file=progress, flush=True)

    def crashed(job, reason, seconds):
        finish(job, {"arch": job["arch"], "status": "attempted", "family": _family_of(job["arch"]),
                     "modes": {m: _crash(reason) for m in modes}, "seconds": round(seconds, 1)})

    if progress and todo != list(archs):
        print(f"resuming: {done} of {len(archs)} already in {path}", file=progress, flush=True)
    worker_pool.run([sys.executable, "-m", "torch_tpu.tools.model_zoo", "--worker"],
                    [{"arch": arch, "modes": list(modes)} for arch in todo], jobs, timeout, log, finish,
                    crashed)
    ordered = _ordered(records, archs)
    write_results(out_dir, ordered, modes, meta)
    return ordered, totals(ordered, modes)


def _ordered(records, archs):
    first = [records[a] for a in archs if a in records]
    rest = [r for a, r in sorted(records.items()) if a not in archs]
    return first + rest


def _summary(record, modes):
    if record["status"] == "not_applicable":
        return "not applicable: " + record["reason"][:100]
    parts = []
    for mode in modes:
        m = record["modes"].get(mode)
        if m:
            parts.append(f"{mode} fwd {m['forward']} train {m['train']}"
                         + (" native" if m.get("native") else ""))
    err = next((m["error"] for m in record["modes"].values() if m.get("error")), "")
    return "; ".join(parts) + (f" ({err[:120]})" if err else "")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_tpu.tools.model_zoo",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"the fixed CI sample of {len(QUICK)} architectures")
    parser.add_argument("--arch", default="", help="comma-separated model types")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out", default="model_zoo_results")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per architecture")
    parser.add_argument("--fresh", action="store_true", help="ignore earlier results in --out")
    parser.add_argument("--rerun", default="",
                        help="with resume, also run again: na (not applicable), failed, or both")
    parser.add_argument("--list", action="store_true", help="print the selection and exit")
    parser.add_argument("--report", action="store_true",
                        help="run nothing: rewrite the table and totals from the results in --out")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker()
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {unknown}; use {','.join(MODES)}")
    _quiet_transformers()
    selection = select()
    if args.arch:
        archs = [a.strip() for a in args.arch.split(",") if a.strip()]
    elif args.quick:
        archs = list(QUICK)
    else:
        archs = interleave_families(selection)
    if args.list:
        tasks = {t: (task, cls) for t, task, cls in selection}
        for model_type in archs:
            task, cls = tasks.get(model_type, ("-", "-"))
            print(f"{model_type}\t{task}\t{cls}")
        return
    command = "python -m torch_tpu.tools.model_zoo" + (" --quick" if args.quick else "") + \
        (f" --arch {args.arch}" if args.arch else "")
    if args.report:
        path = os.path.join(args.out, "model_zoo.json")
        with open(path) as f:
            saved = json.load(f)
        records = _ordered({r["arch"]: r for r in saved["architectures"]}, archs)
        records = [r for r in records if r["arch"] in archs]
        for r in records:
            if r.get("family", "unknown") == "unknown":
                r["family"] = _family_of(r["arch"])
        write_results(args.out, records, modes, saved.get("meta", {}))
        final = totals(records, modes)
        print(json.dumps({m: final[m] for m in modes} |
                         {"architectures": final["architectures"],
                          "not_applicable": final["not_applicable"]}))
        return final
    rerun = {r.strip() for r in args.rerun.split(",") if r.strip()}
    if rerun - {"na", "failed"}:
        parser.error("--rerun takes na, failed or na,failed")
    records, t = run(archs, modes, args.out, args.jobs, args.timeout, not args.fresh,
                     command=command, rerun=rerun)
    print(f"wrote {os.path.join(args.out, 'model_zoo.md')}", file=sys.stderr)
    ran = [r for r in records if r["arch"] in archs]
    final = totals(ran, modes)
    print(json.dumps({m: final[m] for m in modes} |
                     {"architectures": final["architectures"],
                      "not_applicable": final["not_applicable"]}))
    return t


if __name__ == "__main__":
    main()
