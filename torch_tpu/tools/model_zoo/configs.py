"""Small configurations: each architecture is built from its default configuration made small
(2 layers, hidden size 32, 4 heads, vocabulary 99, no dropout), so that it runs in seconds from
random weights with nothing downloaded; `_shrink` makes a configuration and its
sub-configurations small in place, and `small_config` builds one for a model type."""

VOCAB = 99
NUM_LABELS = 3

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
EXPERTS = {"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts",
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
        elif key in EXPERTS and isinstance(value, int) and value > 1:
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
