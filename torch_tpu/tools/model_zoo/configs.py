"""Small configurations: each architecture is built from its default configuration made small
(2 layers, hidden size 32, 4 heads, vocabulary 99, no dropout), so that it runs in seconds from
random weights with nothing downloaded. What becomes small is decided by tables: `_INT_SIZES`
for the counts and widths that architectures name each in their own way, `_CAPS`, `_LISTS` and
`_FIXED` for single attributes, `_PER_STAGE` and `_TOKEN_IDS` for hierarchical models and token
ids; `_small_value` looks an attribute up in them, `_shrink` applies that to a configuration and
its sub-configurations, and `small_config` builds one for a model type."""

VOCAB = 99
NUM_LABELS = 3

_LAYERS = {"num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers",
           "decoder_layers", "num_encoder_layers", "num_decoder_layers", "n_layers_per_block"}
_HIDDEN = {"hidden_size", "d_model", "n_embd", "n_embed", "embed_dim", "model_dim", "dim",
           "word_embed_proj_dim", "embedding_size", "d_embed"}
_HEADS = {"num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
          "decoder_attention_heads", "num_attention_heads_text"}
_KV_HEADS = {"num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num"}
_FFN = {"intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner",
        "moe_intermediate_size", "shared_expert_intermediate_size", "ffn_hidden_size",
        "expert_intermediate_size", "intermediate_size_mlp", "dense_intermediate_size"}
EXPERTS = {"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts",
           "num_routed_experts"}
_TOPK = {"num_experts_per_tok", "moe_topk", "top_k", "num_selected_experts", "moe_k",
         "num_experts_per_token"}
_POSITIONS = {"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len",
              "max_sequence_length", "seq_length", "max_target_positions"}


# Stand-ins in _INT_SIZES for small values that depend on the configuration (_Plan.resolve).
_KEPT_LAYERS = object()
_KV_HEAD_COUNT = object()


def _each(names, floor, small):
    return dict.fromkeys(names, (floor, small))


# Integer counts and widths: attribute -> (changed only when above this, small value).
_INT_SIZES = {
    # 2, or one layer of each kind where a hybrid has more kinds.
    **_each(_LAYERS, 0, _KEPT_LAYERS),
    **_each(_HIDDEN, 0, 32),
    **_each(_HEADS, 0, 4),
    # Multi-head attention stays multi-head and grouped-query attention stays grouped.
    **_each(_KV_HEADS, 0, _KV_HEAD_COUNT),
    **_each(_FFN, 0, 64),
    # One expert is a dense layer, and stays one rather than becoming a mixture.
    **_each(EXPERTS, 1, 4),
    **_each(_TOPK, 1, 2),
    # Lowered only: 64 positions already hold the inputs' 8 tokens.
    **_each(_POSITIONS, 64, 64),
    "vocab_size": (VOCAB, VOCAB),
}

# Numbers lowered to these values (never raised).
_CAPS = {
    "head_dim": 8, "kv_channels": 8, "attention_head_size": 8, "d_kv": 8, "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 4, "v_head_dim": 8, "kv_lora_rank": 16, "q_lora_rank": 16,
    # Group-limited routing splits the experts into n_group groups: 4 experts make one.
    "n_group": 1, "topk_group": 1, "n_shared_experts": 1, "num_shared_experts": 1,
    "image_size": 32, "patch_size": 8, "num_channels": 3,
    # Whisper's encoder takes exactly twice this many frames, which make_inputs builds.
    "max_source_positions": 32,
    "num_mel_bins": 16, "sliding_window": 16, "attention_window": 4,
    "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4, "xvector_output_dim": 16,
    "classifier_proj_size": 16, "proj_codevector_dim": 16, "codevector_dim": 16,
    "num_codevectors_per_group": 8, "adapter_stride": 2, "output_hidden_size": 32,
    # Masks, jitter and dropped layers are drawn at random in training, and the CPU's draws
    # are not the device's.
    "mask_time_prob": 0.0, "mask_feature_prob": 0.0, "router_jitter_noise": 0.0,
    "layerdrop": 0.0, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
    "ssm_state_size": 8, "state_size": 8, "time_step_rank": 4, "mamba_d_state": 8,
    "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_n_groups": 1, "mamba_chunk_size": 8,
    "chunk_size": 8, "n_groups": 1, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "linear_key_head_dim": 8, "linear_value_head_dim": 8,
    # Of 2 layers, the first dense and the second with experts: both kinds run.
    "first_k_dense_replace": 1,
    "bucket_size": 4, "num_buckets": 4, "local_attn_chunk_length": 4, "lsh_attn_chunk_length": 4,
    "relative_attention_num_buckets": 8, "relative_attention_max_distance": 16,
    "use_cache": False, "block_size": 8, "num_groups": 2,
    # Hybrids place attention (and experts) by period and offset: with 2 layers, the second.
    "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
    "expert_layer_offset": 1, "qk_head_dim": 8, "mamba_d_ssm": 64,
}

# Lists replaced whole.
_LISTS = {
    # Two feature-extractor convolutions (wav2vec2 and its kind) turn the inputs' 1600 samples
    # into 159 frames.
    "conv_dim": [16, 16], "conv_stride": [5, 2], "conv_kernel": [10, 3],
    "tdnn_dim": [16, 16], "tdnn_kernel": [3, 1], "tdnn_dilation": [1, 1],
    "axial_pos_shape": [4, 4], "axial_pos_embds_dim": [16, 16],
}

# Numbers set to these values whatever the default: the labels make_inputs draws for a
# classification head are below NUM_LABELS.
_FIXED = {"num_labels": NUM_LABELS, "tie_word_embeddings": True}


def _stage_widths(stages):
    return [8 * 2 ** min(i, 2) for i in range(stages)]


def _one_each(stages):
    return [1] * stages


# Per-stage integer lists of hierarchical vision models: attribute -> the small list for a
# number of stages.
_PER_STAGE = {
    **dict.fromkeys(("hidden_sizes", "embed_dims", "hidden_dims", "widths", "dims"),
                    _stage_widths),
    **dict.fromkeys(("depths", "num_layers_per_stage", "block_repeats"), _one_each),
}

# Token ids past the small vocabulary; any other such id becomes 4.
_TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 2,
              "sep_token_id": 2, "cls_token_id": 1, "mask_token_id": 3}

# Per-layer kinds of hybrids, in the order they are looked for; a string
# hybrid_override_pattern is cut to the kept layers but never decides them.
_LAYER_KINDS = ("layer_types", "layers_block_type", "block_types", "hybrid_override_pattern",
                "mlp_layer_types", "attn_type_list", "layer_block_types")

# Dropout off, for the same reason as the masks above (of the *_pdrop attributes, single rates).
_DROPOUT_WORDS = ("dropout", "drop_path", "drop_prob")

_KEEP = object()


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


class _Plan:
    """What the small values of one configuration depend on: its layer count, the layers kept
    (one of each kind a hybrid has), and the head count that marks key/value heads as
    multi-head attention."""

    def __init__(self, values):
        self.old_layers = next((values[k] for k in ("num_hidden_layers", "n_layer", "num_layers")
                                if isinstance(values.get(k), int)), None)
        self.kept = None
        for key in _LAYER_KINDS:
            kinds = values.get(key)
            if isinstance(kinds, (list, tuple)) and self.old_layers and \
                    len(kinds) == self.old_layers:
                self.kept = _layer_list_indices(list(kinds), 2)
                break
        self.layers = len(self.kept) if self.kept else 2
        self.heads = next((values[h] for h in _HEADS if isinstance(values.get(h), int)), -1)

    def resolve(self, small, value):
        if small is _KEPT_LAYERS:
            return self.layers
        if small is _KV_HEAD_COUNT:
            return 4 if value == self.heads else 2
        return small


def _is_dropout(key):
    return any(word in key for word in _DROPOUT_WORDS)


def _small_value(key, value, plan):
    """The small value of one attribute of a configuration, or _KEEP."""
    if isinstance(value, int) and key in _INT_SIZES:
        floor, small = _INT_SIZES[key]
        if value > floor:
            return plan.resolve(small, value)
    number = isinstance(value, (int, float))
    if number and key in _CAPS:
        return min(value, _CAPS[key])
    if number and key in _FIXED:
        return _FIXED[key]
    if isinstance(value, (list, tuple)) and key in _LISTS:
        return _LISTS[key]
    if isinstance(value, float) and (_is_dropout(key) or key.endswith("_pdrop")):
        return 0.0
    if _is_dropout(key) and isinstance(value, (list, tuple)) and \
            all(isinstance(v, float) for v in value):
        return [0.0] * len(value)
    if key in _PER_STAGE and isinstance(value, (list, tuple)) and value and \
            isinstance(value[0], int):
        return _PER_STAGE[key](len(value))
    if key in ("num_heads", "num_attention_heads") and isinstance(value, (list, tuple)):
        return [1] * len(value)
    if key.endswith(("_token_id", "_token_index")) and isinstance(value, int) and value >= VOCAB:
        return _TOKEN_IDS.get(key, 4)
    if key in _LAYER_KINDS and plan.kept:
        if key == "hybrid_override_pattern":
            if isinstance(value, str):
                return "".join(value[i] for i in plan.kept)
        elif isinstance(value, (list, tuple)) and len(value) == plan.old_layers:
            return [value[i] for i in plan.kept]
    if key in ("attn_layer_indices", "attention_layer_indices", "full_attn_idxs") and \
            (value is None or isinstance(value, (list, tuple))):
        # None means no attention layer at all, which the hybrids' own cache code rejects.
        return [1]
    return _KEEP


def _shrink(config):
    """Makes one (sub-)configuration small in place."""
    values = config.to_dict()
    plan = _Plan(values)
    for key, value in values.items():
        if key.endswith("_config") or isinstance(value, dict) and key != "rope_scaling":
            continue
        if isinstance(value, bool):
            continue
        new = _small_value(key, value, plan)
        if new is not _KEEP:
            try:
                setattr(config, key, new)
            except Exception:  # noqa: BLE001 read-only derived attributes keep their value
                pass
    if isinstance(getattr(config, "conv_dim", None), (list, tuple)) and \
            hasattr(config, "num_feat_extract_layers"):
        config.num_feat_extract_layers = len(config.conv_dim)
    if "id2label" in values:
        config.num_labels = NUM_LABELS
    heads_shrunk = any(isinstance(values.get(h), int) and not isinstance(values[h], bool) and
                       values[h] > 0 for h in _HEADS)
    try:
        if heads_shrunk and isinstance(getattr(config, "head_dim", None), int):
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
