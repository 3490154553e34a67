"""Small configurations: each architecture is built from its default configuration made small
(2 layers, hidden size 32, 4 heads, vocabulary 99, no dropout), so that it runs in seconds from
random weights with nothing downloaded. What becomes small is decided by tables: `_INT_SIZES`
for the counts and widths that architectures name each in their own way, `_CAPS`, `_LISTS` and
`_FIXED` for single attributes, `_PER_STAGE` and `_TOKEN_IDS` for hierarchical models and token
ids; `_small_value` looks an attribute up in them and `_small_values` adds the rules that look
at several attributes at once (widths that follow others, sizes a default leaves unset, layer
kinds a hybrid needs). `_rebuilt` constructs the configuration anew from those values, so that
what its class derives from them (head widths, per-layer kinds) follows; `_shrink` does so for a
configuration and its sub-configurations, and `small_config` builds one for a model type as its
zoo head class takes it."""

import re

VOCAB = 99
NUM_LABELS = 3

_LAYERS = {"num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers",
           "decoder_layers", "num_encoder_layers", "num_decoder_layers", "n_layers_per_block"}
_HIDDEN = {"hidden_size", "d_model", "n_embd", "n_embed", "embed_dim", "model_dim", "dim",
           "word_embed_proj_dim", "embedding_size", "d_embed", "hidden_size_global",
           "cross_hidden_size",
           # SAM 2's feature pyramid hands its maps to the mask decoder, of the hidden size.
           "fpn_hidden_size"}
_HEADS = {"num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
          "decoder_attention_heads", "num_attention_heads_text", "cross_num_attention_heads"}
_KV_HEADS = {"num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num",
             "cross_num_key_value_heads"}
_FFN = {"intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner",
        "moe_intermediate_size", "shared_expert_intermediate_size", "ffn_hidden_size",
        "expert_intermediate_size", "intermediate_size_mlp", "dense_intermediate_size"}
EXPERTS = {"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts",
           "num_routed_experts"}
_TOPK = {"num_experts_per_tok", "moe_topk", "top_k", "num_selected_experts", "moe_k",
         "num_experts_per_token", "top_k_experts"}
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
    # Gemma 3n's per-layer token embeddings.
    "vocab_size_per_layer_input": (VOCAB, VOCAB),
}

# Numbers lowered to these values (never raised).
_CAPS = {
    "head_dim": 8, "cross_head_dim": 8, "kv_channels": 8, "attention_head_size": 8, "d_kv": 8,
    # Gemma 3n's per-layer token embeddings.
    "hidden_size_per_layer_input": 8,
    "qk_rope_head_dim": 4, "qk_nope_head_dim": 4, "v_head_dim": 8, "kv_lora_rank": 16,
    "q_lora_rank": 16,
    # Group-limited routing splits the experts into n_group groups: 4 experts make one.
    "n_group": 1, "topk_group": 1, "n_shared_experts": 1, "num_shared_experts": 1,
    "image_size": 32, "patch_size": 8, "num_channels": 3,
    # Two-stage detectors (RT-DETR, Grounding DINO) take their queries as the top-k of the
    # encoder's tokens, of which a 32-pixel image has a few dozen at most.
    "num_queries": 8,
    # Their denoising queries in training are noised copies of the labelled boxes, the noise
    # drawn at random (the CPU's draws are not the device's, as for the masks below): none.
    "num_denoising": 0,
    # Windowed attention (Swin) in windows of 2 x 2 patches; the image is sized to leave one
    # in every stage (_vision_widths).
    "window_size": 2,
    # LW-DETR's ViT splits the image into num_windows square windows, whose side must divide
    # the 32-pixel image's side by a multiple of their count per side (16 leaves 2 pixels).
    "num_windows": 4,
    # The subsampling convolutions of speech encoders, and the input features per frame.
    "subsampling_conv_channels": 16, "conv_channels": 32, "input_feat_per_channel": 16,
    # Gemma 3's vision tower pools its 4 x 4 patches to this many image tokens.
    "mm_tokens_per_image": 16,
    # Learned queries that become image tokens (BLIP-2's Q-Former, one set per frame of a clip;
    # Kosmos-2's): few enough that a clip's and the text's tokens fit in 64 positions.
    "num_query_tokens": 8, "latent_query_num": 8,
    # Whisper's encoder takes exactly twice this many frames, which make_inputs builds.
    "max_source_positions": 32,
    # Conformers attend within blocks of this many frames, at most their positions.
    "context_size": 16,
    "num_mel_bins": 16, "sliding_window": 16, "attention_window": 4,
    "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4, "xvector_output_dim": 16,
    "classifier_proj_size": 16, "proj_codevector_dim": 16, "codevector_dim": 16,
    "num_codevectors_per_group": 8, "adapter_stride": 2, "output_hidden_size": 32,
    # Masks, jitter and dropped layers are drawn at random in training, and the CPU's draws
    # are not the device's.
    "mask_time_prob": 0.0, "mask_feature_prob": 0.0, "router_jitter_noise": 0.0,
    # VITS samples its latents and durations with noise of these scales.
    "noise_scale": 0.0, "noise_scale_duration": 0.0,
    "layerdrop": 0.0, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
    "ssm_state_size": 8, "state_size": 8, "time_step_rank": 4, "mamba_d_state": 8,
    "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_n_groups": 1, "mamba_chunk_size": 8,
    "chunk_size": 8, "n_groups": 1, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "linear_key_head_dim": 8, "linear_value_head_dim": 8,
    # Of 2 layers, the first dense and the second with experts: both kinds run.
    "first_k_dense_replace": 1,
    "bucket_size": 4, "num_buckets": 4, "local_attn_chunk_length": 4, "lsh_attn_chunk_length": 4,
    # MPNet buckets relative positions into 32 whatever its configuration says.
    "relative_attention_num_buckets": 32, "relative_attention_max_distance": 16,
    "use_cache": False, "block_size": 8, "num_groups": 2,
    # Hybrids place attention (and experts) by period and offset: with 2 layers, the second.
    "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
    "expert_layer_offset": 1, "qk_head_dim": 8, "mamba_d_ssm": 64,
    # Autoformer's decoder starts from this many of the context's last steps, which the small
    # context (the prediction length, _UNSET_SIZES) must hold.
    "label_length": 4,
    # CLAP's audio tower stretches the spectrogram to a square image this wide.
    "spec_size": 64,
    # Diffusion Gemma's decoder denoises a canvas of this many tokens, as many as the inputs'.
    "canvas_length": 8,
}

# Lists replaced whole.
_LISTS = {
    # Two feature-extractor convolutions (wav2vec2 and its kind) turn the inputs' 1600 samples
    # into 159 frames.
    "conv_dim": [16, 16], "conv_stride": [5, 2], "conv_kernel": [10, 3],
    "tdnn_dim": [16, 16], "tdnn_kernel": [3, 1], "tdnn_dilation": [1, 1],
    # Reformer's axial positions multiply to the inputs' sequence length in training.
    "axial_pos_shape": [2, 4], "axial_pos_embds_dim": [16, 16],
}

# Numbers set to these values whatever the default: the labels make_inputs draws for a
# classification head are below NUM_LABELS.
_FIXED = {"num_labels": NUM_LABELS, "tie_word_embeddings": True}
# Training-time random augmentations (DINOv3-style rotary coordinates shifted, jittered and
# rescaled at random), turned off (None) like dropout: the CPU's draws are not the device's.
_RANDOM_AUGMENTATIONS = {"pos_embed_shift", "pos_embed_jitter", "pos_embed_rescale"}


def _stage_widths(stages):
    return [8 * 2 ** min(i, 2) for i in range(stages)]


def _one_each(stages):
    return [1] * stages


# Per-stage integer lists of hierarchical vision models: attribute -> the small list for a
# number of stages.
_PER_STAGE = {
    **dict.fromkeys(("hidden_sizes", "embed_dims", "hidden_dims", "widths", "dims"),
                    _stage_widths),
    **dict.fromkeys(("depths", "num_layers_per_stage", "block_repeats", "blocks_per_stage"),
                    _one_each),
    # Hiera (SAM 2's image encoder) pools its skip connection only where a stage widens, so
    # each stage doubles the width, as the default does.
    "embed_dim_per_stage": lambda stages: [8 * 2 ** i for i in range(stages)],
    # LeViT's per-stage key width, which its subsampling attention divides the width by.
    "key_dim": lambda stages: [4] * stages,
}

# Token ids past the small vocabulary; any other such id becomes 4.
_TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 2,
              "sep_token_id": 2, "cls_token_id": 1, "mask_token_id": 3}

# Per-layer kinds of hybrids, in the order they are looked for; a string
# hybrid_override_pattern is cut to the kept layers but never decides them.
_LAYER_KINDS = ("layer_types", "layers_block_type", "block_types", "hybrid_override_pattern",
                "mlp_layer_types", "attn_type_list", "layer_block_types")

# Layers named by index (SegGPT's: where the prompt and input halves merge, and the layers whose
# outputs its decoder takes): the same places among the kept layers.
_LAYER_INDICES = ("merge_index", "intermediate_hidden_state_indices")

# Dropout, drop path and drop connect off, for the same reason as the masks above (of the *_pdrop
# attributes, single rates; Grounding DINO draws its fusion layer's drop path from `fusion_droppath`).
_DROPOUT_WORDS = ("dropout", "drop_path", "droppath", "drop_prob", "drop_rate", "drop_connect")

_KEEP = object()


# Layer kinds whose one block is shared by every layer of the kind (Zamba ties each hybrid
# layer's attention to the first's): two are kept, or there is nothing to tie.
_SHARED_KINDS = {"hybrid"}


def _layer_list_indices(layer_types, count):
    """Indices of the layers to keep: the first of each distinct kind (so a hybrid keeps an
    attention and a state-space layer; two of a shared kind), padded with the first layers
    to `count`."""
    keep = []
    seen = {}
    for i, kind in enumerate(layer_types):
        wanted = 2 if isinstance(kind, str) and kind in _SHARED_KINDS else 1
        if seen.get(kind, 0) < wanted:
            seen[kind] = seen.get(kind, 0) + 1
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
        # A stack in sections (Dory: input, recurrent, output layers) keeps one layer of each.
        self.sections = [k for k in values if _is_section(k)]
        wanted = max(2, len(self.sections))
        self.kept = None
        self.shared = None
        for key in _LAYER_KINDS:
            kinds = values.get(key)
            if isinstance(kinds, (list, tuple)) and self.old_layers and \
                    len(kinds) == self.old_layers:
                self.kept = _layer_list_indices(list(kinds), wanted)
                self._keep_cache_sharing(list(kinds), values.get("num_kv_shared_layers"))
                break
        overrides = values.get("per_layer_config")
        if self.kept is None and isinstance(overrides, dict) and overrides and self.old_layers:
            # A heterogeneous configuration: layers differ by their overrides, so one of each
            # distinct set of overrides is kept.
            by_layer = {int(i): repr(sorted(o.items())) for i, o in overrides.items()}
            self.kept = _layer_list_indices([by_layer.get(i, "") for i in
                                             range(self.old_layers)], wanted)
        self.layers = len(self.kept) if self.kept else wanted
        self.heads = next((values[h] for h in _HEADS if isinstance(values.get(h), int)), -1)

    def _keep_cache_sharing(self, kinds, shared):
        """Gemma 3n's last num_kv_shared_layers layers reuse the key/value cache of the last
        earlier layer of their kind: after one producing layer of each kind, one consuming
        layer of each kind is kept too."""
        if not isinstance(shared, int) or not 0 < shared < self.old_layers:
            return
        first = self.old_layers - shared
        producers = [i for i in self.kept if i < first]
        if {kinds[i] for i in producers} != set(kinds):
            return
        consumers = {kind: i for i, kind in enumerate(kinds) if i >= first}
        self.kept = sorted(set(producers) | set(consumers.values()))
        self.shared = len(consumers)

    def resolve(self, small, value):
        if small is _KEPT_LAYERS:
            return self.layers
        if small is _KV_HEAD_COUNT:
            return 4 if value == self.heads else 2
        return small


def _is_section(key):
    return key.startswith("n_") and key.endswith("_layers") and key not in _LAYERS


def _is_dropout(key):
    return any(word in key for word in _DROPOUT_WORDS)


# Lists that may hold one value per layer (Gemma 3n's widths and activation sparsity).
_PER_LAYER = _FFN | {"activation_sparsity_pattern"}


def _small_value(key, value, plan):
    """The small value of one attribute of a configuration, or _KEEP."""
    if key in _PER_LAYER and isinstance(value, (list, tuple)) and plan.old_layers and \
            len(value) == plan.old_layers > 2:
        # One per layer: the kept layers', each made small.
        kept = plan.kept or range(plan.layers)
        return [v if (n := _small_value(key, v, plan)) is _KEEP else n
                for v in (value[i] for i in kept)]
    if isinstance(value, int) and key in _INT_SIZES:
        floor, small = _INT_SIZES[key]
        if value > floor:
            return plan.resolve(small, value)
    number = isinstance(value, (int, float))
    if number and key in _RANDOM_AUGMENTATIONS:
        return None
    if number and key in _CAPS:
        return min(value, _CAPS[key])
    if number and key in _FIXED:
        return _FIXED[key]
    if isinstance(value, (list, tuple)) and key in _LISTS:
        return type(value)(_LISTS[key])
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
    if _is_section(key) and isinstance(value, int):
        return 1
    if key in _LAYER_KINDS and isinstance(value, (list, tuple)) and plan.old_layers and \
            len(value) < plan.old_layers:
        # A pattern the layers repeat (RecurrentGemma's block_types): each kind once, in order.
        return list(dict.fromkeys(value))[:plan.layers]
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


def _small_values(config):
    """{attribute: small value} of one (sub-)configuration, its sub-configurations made small
    too, by `_small_value` and the rules that look at several attributes at once."""
    values = _attributes(config)
    plan = _Plan(values)
    small = {}
    # An attribute stored under another name (attribute_map: n_group kept as num_expert_group)
    # is capped by either name; its counts are not, since an alias of num_hidden_layers may
    # count stages (ConvNeXt's num_stages) that the per-stage lists fix.
    aliases = {}
    for alias, target in getattr(type(config), "attribute_map", {}).items():
        if alias in _CAPS:
            aliases.setdefault(target, []).append(alias)
    for key, value in values.items():
        if key.endswith("_config") or _is_config(value) or \
                isinstance(value, dict) and key != "rope_scaling":
            continue
        if isinstance(value, bool):
            continue
        for name in (key, *aliases.get(key, ())):
            new = _small_value(name, value, plan)
            if new is not _KEEP:
                small[key] = new
                break
    hidden = values.get("hidden_size")
    for key, value in values.items():
        # Depthwise convolutions: as many groups as channels, which follow the hidden size.
        if key.endswith("groups") and isinstance(value, int) and value > 1 and value == hidden:
            small[key] = small.get("hidden_size", hidden)
        # So do projections into it (PaliGemma's of the image features into the text model)
        # and codebooks quantizing it without a projection (WavTokenizer's).
        if key.endswith(("projection_dim", "codebook_dim")) and isinstance(value, int) and \
                value == hidden and \
                key not in small:
            small[key] = small.get("hidden_size", hidden)
    d_model = values.get("d_model")
    for key, value in values.items():
        # Widths the default makes the detector's model width (OmDet-Turbo's decoder, the
        # encoder's output channels per level that its decoder takes, RT-DETR's encoder) follow
        # it.
        if isinstance(d_model, int) and "d_model" in small and key not in small and \
                key.endswith(("_hidden_dim", "features_channels", "decoder_in_channels")):
            if value == d_model and not isinstance(value, bool):
                small[key] = small["d_model"]
            elif isinstance(value, (list, tuple)) and value and all(v == d_model for v in value):
                small[key] = [small["d_model"]] * len(value)
    if isinstance(small.get("conv_dim", values.get("conv_dim")), (list, tuple)) and \
            "num_feat_extract_layers" in values:
        small["num_feat_extract_layers"] = len(small.get("conv_dim", values.get("conv_dim")))
    heads_shrunk = any(isinstance(values.get(h), int) and not isinstance(values[h], bool) and
                       values[h] > 0 for h in _HEADS)
    if heads_shrunk:
        _widths_of_small_heads(values, small)
    if values.get("model_type") in _HEADS_OF_64 and isinstance(values.get("hidden_size"), int):
        small["hidden_size"] = 128
    _vision_widths(values, small)
    _spectrogram_image(values, small)
    if values.get("model_type") == "clvp_encoder":
        # CLVP's encoders rotate at least 32 dimensions of each head, whatever its width: one
        # head of the small hidden size.
        small["num_attention_heads"] = 1
    _sizes_left_unset(values, small, plan)
    _one_attention_layer(values, small)
    if isinstance(values.get("window_block_indices"), (list, tuple)) and plan.old_layers:
        # Layers that attend within windows, by index: those the kept layers still have.
        small["window_block_indices"] = [i for i in values["window_block_indices"]
                                         if i < plan.layers]
    if plan.old_layers:
        for key in _LAYER_INDICES:
            value = values.get(key)
            scaled = lambda i: min(plan.layers - 1, i * plan.layers // plan.old_layers)  # noqa: E731
            if isinstance(value, int) and not isinstance(value, bool):
                small[key] = scaled(value)
            elif isinstance(value, (list, tuple)) and value and all(isinstance(i, int) for i in value):
                small[key] = list(dict.fromkeys(scaled(i) for i in value))
    widths = values.get("out_features")
    if isinstance(widths, (list, tuple)) and widths and all(isinstance(w, int) for w in widths) and \
            values.get("hidden_size") == widths[-1] and isinstance(values.get("stage_num_blocks"), list):
        # EfficientLoFTR's RepVGG backbone names its stages' widths out_features; the last is
        # the coarse features its transformer takes, of the hidden size (the earlier ones,
        # which the fine matching slices, stay wider than its fine_matching_slice_dim).
        hidden = small.get("hidden_size", widths[-1])
        small["out_features"] = [max(16, hidden // 2 ** (len(widths) - 1 - i)) for i in range(len(widths))]
        small["stage_num_blocks"] = [1] * len(values["stage_num_blocks"])
    if values.get("projector_scale_factors") in ((), []):
        # LW-DETR's default names no scale of its multi-scale projector (each checkpoint names
        # its own: the small ones one level at the backbone's scale), and without one the
        # decoder has no feature map at all.
        small["projector_scale_factors"] = [1.0]
    if values.get("default_language", 0) is None and values.get("languages"):
        # X-MOD picks its language adapters by this (set_default_language); a checkpoint's first.
        small["default_language"] = list(values["languages"])[0]
    if "qk_dim_factor" in values and values.get("use_cache"):
        # xLSTM's cache takes the query/key and value widths (hidden size times these factors)
        # rounded up to multiples of 64, its projections do not, and its state updates in place
        # break the backward: no cache.
        small["use_cache"] = False
    _rotary_of_small_heads(values, small)
    _rotary_of_hidden_share(values, small)
    _multimodal_rotary(config, values, small)
    if plan.shared is not None:
        small["num_kv_shared_layers"] = plan.shared
    if isinstance(values.get("per_layer_config"), dict):
        small["per_layer_config"] = _small_per_layer(values["per_layer_config"], plan)
    if values.get("pad_token_id", 0) is None and "vocab_size" in values:
        small["pad_token_id"] = 0
    for key, value in values.items():
        # Sub-configurations: text_config, vision_config, ..., and the encoder and decoder of
        # the generic encoder-decoder models.
        if _is_config(value):
            small[key] = _shrink(value)
    _query_token_ids(values, small)
    _vision_tower_layout(values, small)
    if all(isinstance(values.get(k), int) for k in ("max_img_size", "visual_prompt_size",
                                                     "num_frames")):
        # TVP adds learned pads visual_prompt_size wide around each of num_frames frames of
        # max_img_size (448) square: two small frames, a border that leaves a middle, and 2 x 2
        # of its backbone's (stride 32) features for the 2 x 2 max pool that follows.
        small.update(max_img_size=64, visual_prompt_size=16, num_frames=2)
    _widths_of_siblings(values, small)
    return small


# Vision-language model types whose projector maps the image features into the language
# model's embeddings with a width named projection_dim in these sub-configurations: a
# checkpoint's text hidden size, which the default text configuration does not always share
# (Janus's 2048 against Llama's 4096; Janus's image-generation aligner too).
_PROJECTED_INTO_TEXT = {"janus": ("vision_config", "vq_config"), "florence2": ("vision_config",)}


def _vision_tower_layout(values, small):
    """What a vision-language model's configuration says about its vision tower's default
    sizes, made to follow the small tower: the any-resolution grid (LLaVA-NeXT's
    image_grid_pinpoints, multiples of the tower's image size) in multiples of the small
    image size; the width the tower's features are projected to, where that is the language
    model's (_PROJECTED_INTO_TEXT); and the layers whose features the projector takes
    (ViP-LLaVA's five, counted in a 24-layer tower) clamped to the small tower's hidden
    states."""
    vision, tower = values.get("vision_config"), small.get("vision_config")
    if not (_is_config(vision) and _is_config(tower)):
        return
    size, new_size = getattr(vision, "image_size", None), getattr(tower, "image_size", None)
    grid = values.get("image_grid_pinpoints")
    if isinstance(size, int) and isinstance(new_size, int) and isinstance(grid, (list, tuple)) \
            and all(isinstance(v, int) and v % size == 0 for pair in grid for v in pair):
        small["image_grid_pinpoints"] = [[v // size * new_size for v in pair] for pair in grid]
    text = small.get("text_config")
    width = getattr(text, "hidden_size", None)
    for key in _PROJECTED_INTO_TEXT.get(values.get("model_type"), ()):
        sub = small.get(key)
        if isinstance(width, int) and isinstance(getattr(sub, "projection_dim", None), int):
            sub.projection_dim = width
    layers = getattr(tower, "num_hidden_layers", None)
    if not isinstance(layers, int):
        return
    for key in ("vision_feature_layer", "vision_feature_layers"):
        value = values.get(key)
        if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
            small[key] = [max(-layers - 1, min(v, layers)) for v in value]


def _query_token_ids(values, small):
    """A Q-Former's num_query_tokens outputs (BLIP-2, InstructBLIP) replace as many image (or
    video) tokens, whose id the processor adds to the tokenizer and a checkpoint's
    configuration names; the default leaves it None. The small one is the text vocabulary's
    last id (the one before it for video)."""
    if not isinstance(values.get("num_query_tokens"), int):
        return
    text = small.get("text_config")
    vocab = getattr(text, "vocab_size", None) or VOCAB
    for offset, key in enumerate(("image_token_index", "video_token_index")):
        if key in values and values[key] is None:
            small[key] = vocab - 1 - offset


def _widths_of_siblings(values, small):
    """A sub-configuration's width named after another sub-configuration (Nemotron 3
    Diarization's head_config.audio_hidden_size, the width of the audio_config's frames it
    projects) follows that one's small hidden size, where the defaults agree."""
    for key, sub in small.items():
        if not _is_config(sub) or not _is_config(values.get(key)):
            continue
        for name, width in _attributes(values[key]).items():
            prefix = name[:-len("_hidden_size")] if name.endswith("_hidden_size") else None
            sibling = f"{prefix}_config"
            if prefix and sibling != key and _is_config(small.get(sibling)) and \
                    isinstance(width, int) and width == _get(values[sibling], "hidden_size"):
                setattr(sub, name, small[sibling].hidden_size)


def _is_config(value):
    return hasattr(value, "to_dict") and hasattr(value, "model_type")


def _attributes(config):
    """The configuration's attributes by the names to_dict gives them, as the model reads them
    (to_dict serialises some in a checkpoint's older layout)."""
    read = getattr(config, "_getattr_without_heterogeneous_validation", None) or \
        (lambda key, default: getattr(config, key, default))
    values = {}
    for key, serialised in config.to_dict().items():
        value = read(key, serialised)
        values[key] = serialised if key == "per_layer_config" else value
    return values


def _vision_widths(values, small):
    """Image sizes and channel widths of vision models that follow others: a patch size kept
    where it names the total stride of a fixed convolution stem (LeViT's four stride-2
    convolutions); an image size given per side; an image large enough for the model's total
    stride (MobileViT unfolds 2 x 2 patches of its last, output_stride-times smaller map) and
    for its stages (each halves the patch grid, which keeps at least one window); a stem whose
    output is the first stage's width; stages that name their own in, mid and out channels
    (HGNet-V2: each stage's input is the previous stage's output, the head reads
    hidden_sizes)."""
    if all(isinstance(values.get(k), int) for k in ("stride", "kernel_size", "patch_size")):
        small.pop("patch_size", None)  # the stride of a fixed stem
    size, patch = values.get("image_size"), small.get("patch_size", values.get("patch_size"))
    if isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(v, int) for v in size):
        small["image_size"] = type(size)(min(v, 32) for v in size)
    stride = values.get("output_stride")
    if isinstance(stride, int) and isinstance(patch, int) and isinstance(size, int):
        small["image_size"] = min(size, max(32, stride * patch))
    stages = next((len(values[k]) for k in ("depths", "hidden_sizes")
                   if isinstance(values.get(k), (list, tuple))), 0)
    window = small.get("window_size", values.get("window_size"))
    if stages and isinstance(patch, int) and isinstance(size, int):
        # Each stage after the first halves the patch grid, which keeps at least one window.
        least = patch * 2 ** (stages - 1) * (window if isinstance(window, int) else 1)
        small["image_size"] = min(size, max(small.get("image_size", 32), least))
    sizes = values.get("backbone_feature_sizes")
    if isinstance(sizes, (list, tuple)) and sizes and \
            all(isinstance(s, (list, tuple)) for s in sizes):
        # SAM 2's feature map sizes are its default 1024 x 1024 image's: for the small 32 x 32
        # image (the image_size cap of its prompt encoder), 32 times smaller.
        small["backbone_feature_sizes"] = [[max(1, v * _CAPS["image_size"] // 1024) for v in s]
                                           for s in sizes]
    per_stage = values.get("embed_dim_per_stage")
    if isinstance(per_stage, (list, tuple)) and per_stage and \
            values.get("hidden_size") == per_stage[0]:
        # Hiera's patch embedding is its first stage's width.
        small["hidden_size"] = small["embed_dim_per_stage"][0]
    windows, stride = values.get("window_size_per_stage"), values.get("patch_stride")
    size = small.get("image_size", size)
    if isinstance(windows, (list, tuple)) and isinstance(stride, (list, tuple)) and \
            isinstance(size, (list, tuple)):
        # Hiera's windows, each at most its stage's map (the patch grid, halved by each
        # stage's query pooling): a larger one pads the map into a window whose pooled query
        # the stage cannot crop back to the halved map.
        side = size[0] // stride[0]
        small["window_size_per_stage"] = [max(1, min(w, side // 2 ** i)) for i, w in enumerate(windows)]
    widths = small.get("hidden_sizes", values.get("hidden_sizes"))
    if isinstance(widths, (list, tuple)) and widths and \
            isinstance(values.get("stem_out_channels"), int) and \
            values["stem_out_channels"] == values["hidden_sizes"][0]:
        small["stem_out_channels"] = widths[0]
    ins, outs = values.get("stage_in_channels"), values.get("stage_out_channels")
    if isinstance(ins, (list, tuple)) and isinstance(outs, (list, tuple)) and \
            list(ins[1:]) == list(outs[:-1]):
        outs = list(widths) if isinstance(widths, (list, tuple)) and len(widths) == len(outs) \
            else _stage_widths(len(outs))
        small["stage_out_channels"] = outs
        small["stage_in_channels"] = [ins[0], *outs[:-1]]
        if isinstance(values.get("stage_mid_channels"), (list, tuple)):
            small["stage_mid_channels"] = list(outs)


def _spectrogram_image(values, small):
    """CLAP's audio tower (HTSAT) folds the spectrogram into a square image and after its
    stages (each halving the patch grid) groups the frequency rows left by the ratio of the
    image size to the mel bins: the bins must be at least the tower's total stride, or no row
    is left to group."""
    stride, depths = values.get("patch_stride"), values.get("depths")
    if not isinstance(values.get("spec_size"), int) or not isinstance(depths, (list, tuple)) or \
            not isinstance(stride, (list, tuple)) or not isinstance(small.get("num_mel_bins"), int):
        return
    small["num_mel_bins"] = max(small["num_mel_bins"], 2 ** (len(depths) - 1) * stride[0])
    # Its stages double the patch embedding's width, and its output is as wide as the last.
    growth = 2 ** (len(depths) - 1)
    width = values.get("patch_embeds_hidden_size")
    if isinstance(width, int) and width * growth == values.get("hidden_size"):
        small["patch_embeds_hidden_size"] = max(1, small.get("hidden_size", width) // growth)


def _rotary_of_small_heads(values, small):
    """A partial rotary factor that leaves fewer than 4 of the small head's dimensions rotated
    is raised to 4 of them: rotation pairs dimensions, and interleaved layouts (NeoMME's rows
    and columns) pair the pairs."""
    head = small.get("head_dim", values.get("head_dim"))
    if not isinstance(head, int) or head < 4:
        return

    def raised(params):
        factor = params.get("partial_rotary_factor")
        if isinstance(factor, float) and 0 < factor and head * factor < 4:
            return dict(params, partial_rotary_factor=4 / head)
        return params

    rope = values.get("rope_parameters")
    if isinstance(rope, dict) and rope:
        if all(isinstance(v, dict) or v is None for v in rope.values()):  # one per layer kind
            new = {kind: raised(p) if isinstance(p, dict) else p for kind, p in rope.items()}
        else:
            new = raised(rope)
        if new != rope:
            small["rope_parameters"] = new
    factor = values.get("partial_rotary_factor")
    if isinstance(factor, float) and 0 < factor and head * factor < 4:
        small["partial_rotary_factor"] = 4 / head


def _rotary_of_hidden_share(values, small):
    """A rotary factor above 1 rotates more than a head: a share of the hidden size (EfficientLoFTR
    rotates half of it, 2-D positions over the whole feature), which its embedding is sized by.
    The factor keeps that share for the small heads."""
    rope = small.get("rope_parameters", values.get("rope_parameters"))
    factor = rope.get("partial_rotary_factor") if isinstance(rope, dict) else None
    hidden, heads = values.get("hidden_size"), values.get("num_attention_heads")
    if not isinstance(factor, (int, float)) or factor <= 1 or not isinstance(hidden, int) or \
            not isinstance(heads, int) or values.get("head_dim") is not None:
        return
    share = factor / heads  # of the hidden size: head_dim * factor = hidden * share
    new_heads = small.get("num_attention_heads", heads)
    small["rope_parameters"] = dict(rope, partial_rotary_factor=float(share * new_heads))


def _multimodal_rotary(config, values, small):
    """Multimodal RoPE splits the rotary frequencies into temporal, height and width sections
    that sum to half the rotated part of the head; a model that defaults the split in its own
    code (Qwen2-VL's 16, 24, 24 for heads of 128, declared by its configuration or only read
    with that default by its rotary embedding, PaddleOCR-VL's) gets one for the small head:
    2, 1, 1 of 4. A partial rotary factor that leaves fewer than 8 of the head's dimensions
    rotated (GLM-4V's half) is raised to 8 of them, so that each section keeps a pair.
    Ernie 4.5 VL's sections are height, width, temporal, and it interleaves the first two,
    which must be equal: 1, 1, 2."""
    rope = small.get("rope_parameters", values.get("rope_parameters"))
    if not isinstance(rope, dict) or any(isinstance(v, dict) for v in rope.values()):
        return
    heads = small.get("num_attention_heads", values.get("num_attention_heads"))
    head = small.get("head_dim", values.get("head_dim")) or (
        small.get("hidden_size", values.get("hidden_size")) // heads if heads else None)
    declared = "mrope_section" in getattr(type(config), "ignore_keys_at_rope_validation", ())
    section = rope.get("mrope_section")
    if not isinstance(head, int) or head < 8 or not (declared or section or
                                                     _code_default_mrope(config)):
        return
    # Sections that split the rotated frequencies exactly (interleaved sections only index).
    exact = re.search(r"split\(\[?\*?self\.mrope_section", _modelling_source(config))
    factor = rope.get("partial_rotary_factor") if exact else None
    if isinstance(factor, float) and 0 < factor < 1 and head * factor < 8:
        factor = 8 / head
        rope = dict(rope, partial_rotary_factor=factor)
    half = int(head * (factor if isinstance(factor, float) else 1)) // 2
    quarter = half // 4
    if "ernie4_5_vl" in type(config).__module__:
        wanted = [quarter, quarter, half - 2 * quarter]
    else:
        wanted = [half - 2 * quarter, quarter, quarter]
    if isinstance(section, (list, tuple)) and sum(section) == half and \
            ("ernie4_5_vl" not in type(config).__module__ or section[0] == section[1]):
        wanted = list(section)
    if rope != small.get("rope_parameters", values.get("rope_parameters")) or \
            wanted != section:
        small["rope_parameters"] = dict(rope, mrope_section=wanted)


def _code_default_mrope(config):
    """Whether the configuration's modelling code reads mrope_section with a default of its
    own (its rotary embedding's `rope_parameters.get("mrope_section", [...])`)."""
    return re.search(r'get\("mrope_section", \[\d', _modelling_source(config)) is not None


def _modelling_source(config):
    """The source of the modelling module beside the configuration's ("" where none)."""
    import importlib.util

    module = type(config).__module__.replace(".configuration_", ".modeling_")
    try:
        spec = importlib.util.find_spec(module)
        with open(spec.origin, encoding="utf-8") as source:
            return source.read()
    except Exception:  # noqa: BLE001 no modelling module beside the configuration's
        return ""


def _one_attention_layer(values, small):
    """A hybrid with attention heads whose default layers are all linear attention (Granite
    MoE hybrid's) gets its last layer as full attention: the hybrids' own cache code asks an
    attention layer for the sequence length."""
    if not isinstance(values.get("num_attention_heads"), int):
        return
    for key in _LAYER_KINDS:
        kinds = small.get(key, values.get(key))
        if isinstance(kinds, (list, tuple)) and len(kinds) > 1 and \
                set(kinds) == {"linear_attention"}:
            small[key] = [*kinds[:-1], "full_attention"]


def _small_per_layer(overrides, plan):
    """The per-layer overrides of the kept layers, renumbered, their values made small."""
    import copy

    kept = plan.kept or list(range(plan.layers))
    small = {}
    for new_index, old_index in enumerate(kept):
        layer = next((o for i, o in overrides.items() if int(i) == old_index), None)
        if layer:
            # Key/value heads are told from multi-head attention by the layer's own head count.
            own = copy.copy(plan)
            own.heads = next((layer[h] for h in _HEADS if isinstance(layer.get(h), int)),
                             plan.heads)
            small[new_index] = {
                k: v if (n := _small_value(k, v, own)) is _KEEP else n for k, v in layer.items()}
    return small


def _widths_of_small_heads(values, small):
    """Per-head widths that follow the 4 heads of hidden size 32: a head of 8 (whatever the
    default, even unset: attention reads head_dim with the hidden size's share as fallback
    only where the attribute is missing, not where it is None), a rotary part of half that,
    and 2-D layout embeddings that split the hidden size six ways."""
    if "head_dim" in values and (values["head_dim"] is None or
                                 isinstance(values["head_dim"], int)):
        small["head_dim"] = 8
        if isinstance(values["head_dim"], int) and \
                values["head_dim"] == values.get("qk_rope_head_dim"):
            # Latent attention whose head_dim names the rotary part (LongCat's).
            small["head_dim"] = small.get("qk_rope_head_dim", values["head_dim"])
    _state_space_heads(values, small)
    if isinstance(values.get("rotary_dim"), int) and values["rotary_dim"] > 4:
        small["rotary_dim"] = 4
    if isinstance(values.get("dim_bbox"), int) and isinstance(values.get("hidden_size"), int):
        # Bros embeds each of a box's dim_bbox coordinates in a sinusoid of hidden_size / 4 /
        # dim_bbox widths: two at least, a sine and a cosine.
        small["hidden_size"] = 8 * values["dim_bbox"]
    if "max_2d_position_embeddings" in values and isinstance(values.get("hidden_size"), int):
        # Boxes embed as x0, y0, x1, y1 (and width, height) concatenated to the hidden size.
        small["hidden_size"] = 48
        for key in ("coordinate_size", "shape_size"):
            if isinstance(values.get(key), int):
                small[key] = 8


# Configurations without a head count whose model divides the width into heads of 64 (as
# OpenAI's CLIP code): two such heads.
_HEADS_OF_64 = ("bridgetower_vision_model",)


def _state_space_heads(values, small):
    """A state-space mixer's heads split its expanded width exactly, as the default has it:
    Mamba-2's num_heads x head_dim = expand x hidden_size, Falcon-H1's mamba_n_heads x
    mamba_d_head = mamba_d_ssm."""
    def now(key):
        return small.get(key, values.get(key))

    def ints(*keys):
        return all(isinstance(values.get(k), int) and not isinstance(values.get(k), bool)
                   for k in keys)

    if ints("num_heads", "head_dim", "expand", "hidden_size") and \
            values["num_heads"] * values["head_dim"] == values["expand"] * values["hidden_size"]:
        small["head_dim"] = now("expand") * now("hidden_size") // now("num_heads")
    if ints("mamba_n_heads", "mamba_d_head", "mamba_d_ssm") and \
            values["mamba_n_heads"] * values["mamba_d_head"] == values["mamba_d_ssm"]:
        small["mamba_d_ssm"] = now("mamba_n_heads") * now("mamba_d_head")


# Sizes a default configuration leaves None for a checkpoint to fill in while the model reads
# them as numbers wherever the layer kinds name the feature (Qwen4-Exp's indexed attention).
_UNSET_SIZES = {**dict.fromkeys(EXPERTS, 4), **dict.fromkeys(_TOPK, 2), "n_shared_experts": 1,
                "vocab_size": VOCAB, "indexer_n_heads": 4, "indexer_kv_heads": 1,
                "indexer_head_dim": 8, "indexer_budget": 4, "indexer_compress_ratio": 2,
                # Diffusion Gemma's layers all have experts, whatever its default says.
                "moe_intermediate_size": 64,
                # DBRX clamps q, k and v to this unconditionally.
                "clip_qkv": 8.0,
                # Time-series transformers forecast this many steps and, unless told otherwise,
                # look back as many (their context length defaults to it).
                "prediction_length": 8}


def _sizes_left_unset(values, small, plan):
    """Sizes a default configuration leaves None for a checkpoint to fill in, which the model
    reads as numbers: the small vocabulary, multi-head attention, a few experts; per-layer
    kinds (every layer full attention, the kind every model has) and default RoPE for each
    kind where the model indexes its rotary parameters by the kind."""
    for key, value in _UNSET_SIZES.items():
        if key in values and values[key] is None:
            small[key] = value
    for key in _KV_HEADS:
        if key in values and values[key] is None:
            small[key] = small.get("num_attention_heads", 4)
    if "sliding_window" in values and values["sliding_window"] is None and \
            any(k.startswith("num_sliding_") for k in values):
        # Sliding-attention layers sized (Step 3.7's heads) but their window left to a
        # checkpoint: the model builds their mask whatever kinds its layers are.
        small["sliding_window"] = _CAPS["sliding_window"]
    if "layer_types" in values and values["layer_types"] is None and plan.old_layers:
        small["layer_types"] = ["full_attention"] * plan.layers
    if "mlp_layer_types" in values and values["mlp_layer_types"] is None and plan.old_layers and \
            any(isinstance(values.get(k), int) for k in EXPERTS):
        # Dense then routed experts (DeepSeek-OCR 2's checkpoint lists them): both kinds run.
        small["mlp_layer_types"] = ["dense"] + ["sparse"] * (plan.layers - 1)
    kinds = small.get("layer_types") or values.get("layer_types")
    if values.get("rope_parameters") == {} and isinstance(kinds, (list, tuple)):
        small["rope_parameters"] = {kind: {"rope_type": "default", "rope_theta": 10000.0}
                                    for kind in dict.fromkeys(kinds)}


def _rebuilt(config, small):
    """The configuration constructed anew with the small values, so that what its
    __post_init__ derives (head_dim from the rotary and latent widths, a default width from the
    hidden size, per-layer kinds from the layer count) follows them; an attribute the default
    configuration had derived from None is derived again. Where the class cannot be
    constructed that way, the small values are set in place."""
    import dataclasses

    cls = type(config)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init} \
        if dataclasses.is_dataclass(cls) else {}
    aliases = {target: name for name, target in getattr(cls, "attribute_map", {}).items()}
    read = getattr(config, "_getattr_without_heterogeneous_validation", None) or \
        (lambda key: getattr(config, key))
    kwargs = {}
    for name, field in fields.items():
        value = read(name)
        kwargs[name] = None if field.default is None else value
    for key, value in small.items():
        name = key if key in fields else aliases.get(key)
        if name in fields or key == "per_layer_config":  # the latter taken by __post_init__
            kwargs[name or key] = value
    if fields:
        try:
            rebuilt = cls(**kwargs)
        except Exception:  # noqa: BLE001 validators that the in-place values escape
            rebuilt = None
        if rebuilt is not None:
            # Attributes a composite's defaults give its timm tower beyond the fields (FastVLM's
            # hidden_size, PE Video's global_pool) are kept, made small where they are sizes.
            for key, value in vars(config).items() if _is_timm_tower(config) else ():
                if key not in fields and not key.startswith("_") and not _has(rebuilt, key):
                    try:
                        setattr(rebuilt, key, small.get(key, value))
                    except Exception:  # noqa: BLE001 read-only derived attributes
                        pass
            # Attributes that are no field of the class (a composite's defaults for its
            # backbone: CHMv2's return_class_token) are kept as the default had them.
            have = rebuilt.to_dict()
            for key, value in config.to_dict().items():
                if key not in have and key not in fields and not _is_config(value):
                    try:
                        setattr(rebuilt, key, value)
                    except Exception:  # noqa: BLE001 read-only derived attributes
                        pass
            return rebuilt
    for key, value in small.items():
        try:
            setattr(config, key, value)
        except Exception:  # noqa: BLE001 read-only derived attributes keep their value
            pass
    return config


def _shrink(config):
    """A small copy of one (sub-)configuration."""
    # TimmWrapper's configuration serialises its labels as timm's num_classes.
    labels = bool({"id2label", "num_classes"} & set(config.to_dict()))
    default = config
    stages, indices = _get(config, "stage_names"), _get(config, "out_indices")
    config = _rebuilt(config, _small_values(config))
    _semantic_hop(default, config)
    _concatenated_width(default, config)
    if indices and stages and _get(config, "stage_names") == stages and \
            list(_get(config, "out_indices") or ()) != list(indices):
        # A backbone keeps its stages (per-stage lists shrink each stage), so it keeps handing
        # on the feature maps its detector's default asked for (RT-DETR's last three), which
        # the rebuild would derive again as the last stage only.
        config.set_output_features_output_indices(out_features=None, out_indices=list(indices))
    if labels:
        config.num_labels = NUM_LABELS
    _add_missing(config)
    return config


def _semantic_hop(default, config):
    """A codec that concatenates a speech encoder's frames with its acoustic encoder's (X-Codec:
    HuBERT beside DAC) needs both at the same hop, which their defaults share: the speech
    encoder keeps its default feature-extractor strides and kernels (narrow, as _LISTS makes
    them) instead of the two small convolutions."""
    import math

    hop = _get(config, "hop_length")
    if not isinstance(hop, int) or isinstance(hop, bool):
        return
    for key, sub in _attributes(config).items():
        strides = getattr(_get(default, key), "conv_stride", None)
        if not _is_config(sub) or not isinstance(strides, (list, tuple)) or \
                math.prod(strides) != hop or math.prod(sub.conv_stride) == hop:
            continue
        sub.conv_stride = list(strides)
        sub.conv_kernel = list(_get(default, key).conv_kernel)
        sub.conv_dim = [_LISTS["conv_dim"][0]] * len(strides)
        sub.num_feat_extract_layers = len(strides)


def _concatenated_width(default, config):
    """A width that is the hidden size plus a sub-configuration's (X-Codec 2's quantizer
    takes the acoustic and the speech encoders' frames concatenated) follows both."""
    width = _get(default, "quantization_dim")
    hidden = _get(default, "hidden_size")
    if not isinstance(width, int) or not isinstance(hidden, int):
        return
    for key, sub in _attributes(default).items():
        if _is_config(sub) and width == hidden + (_get(sub, "hidden_size") or 0):
            config.quantization_dim = config.hidden_size + _get(config, key).hidden_size


def _add_missing(config):
    """Attributes a model reads that its default configuration lacks altogether (a checkpoint's
    configuration carries them): key/value heads as many as the attention heads, which is what
    any model that reads them as optional assumes, and in a sub-configuration without RoPE
    parameters of its own the RoPE theta of the configuration it belongs to."""
    heads = _get(config, "num_attention_heads")
    if isinstance(heads, int) and not isinstance(heads, bool) and \
            not _has(config, "num_key_value_heads"):
        config.num_key_value_heads = heads
    rope = _get(config, "rope_parameters")
    theta = rope.get("rope_theta") if isinstance(rope, dict) else None
    if theta is None:
        return
    for value in _attributes(config).values():
        if _is_config(value) and not _has(value, "rope_theta") and \
                not _has(value, "rope_parameters"):
            value.rope_theta = theta


def _has(config, key):
    try:
        return hasattr(config, key)
    except Exception:  # noqa: BLE001 a per-layer attribute of a heterogeneous configuration
        return True


def _get(config, key):
    try:
        return getattr(config, key, None)
    except Exception:  # noqa: BLE001 a per-layer attribute of a heterogeneous configuration
        return None


def _head_class(model_type):
    import transformers

    from torch_tpu.tools.model_zoo.selection import head_of

    name = head_of(model_type)[2]
    name = name[0] if isinstance(name, (list, tuple)) else name
    return getattr(transformers, name, None) if name else None


def _for_class(config, cls):
    """The configuration a head class is built from: a composite model type's causal LM (or
    MusicGen's decoder) is the class of one sub-configuration, which it takes as AutoModel's
    from_config hands it over."""
    wanted = getattr(cls, "config_class", None)
    if wanted is None or isinstance(config, wanted):
        return config
    for key in config.to_dict():
        sub = getattr(config, key, None)
        if isinstance(sub, wanted):
            return sub
    return config


def _token_defaults(cls, config):
    """Token ids a head reads from its configuration with a default of its own, past the
    small vocabulary (ShieldGemma 2's yes and no tokens), are set within it, each its own; so
    are those its modelling code reads that the default configuration lacks altogether, a
    checkpoint's configuration carrying them (Qwen2.5-Omni's thinker reads
    vision_start_token_id, which only its talker's default configuration has)."""
    import inspect
    import re
    import sys

    try:
        source = inspect.getsource(cls.__init__)
        module = inspect.getsource(sys.modules[cls.__module__])
    except (OSError, TypeError, KeyError):
        return
    vocab = getattr(config.get_text_config(), "vocab_size", None) or VOCAB
    found = re.findall(r"getattr\(config, \"(\w+_token_(?:id|index))\", ([\d_]+)\)", source)
    for offset, (key, default) in enumerate(found):
        if int(default) >= vocab and not _has(config, key):
            setattr(config, key, vocab - 1 - offset)
    # Only the markers of a modality's span, which position code reads on every input.
    read = sorted(set(re.findall(r"self\.config\.(\w+_start_token_id)\b", module)) -
                  set(_TOKEN_IDS))
    for offset, key in enumerate(read, start=len(found)):
        if not _has(config, key):
            setattr(config, key, vocab - 1 - offset)


def _backbone_without_timm(config):
    """DETR-style detectors default to a timm ResNet-50 backbone, which no small configuration
    reaches; Transformers' own ResNet, small, computes the same kind of feature maps."""
    backbone = getattr(config, "backbone_config", None)
    if getattr(backbone, "model_type", None) != "timm_backbone" and not getattr(config, "use_timm_backbone", False):
        return
    from transformers import ResNetConfig

    levels = max(1, min(4, int(getattr(config, "num_feature_levels", 1) or 1)))
    config.backbone_config = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 32, 32][:max(2, levels)],
                                          depths=[1] * max(2, levels),
                                          out_features=[f"stage{i}" for i in range(max(2, levels) - levels + 1,
                                                                                    max(2, levels) + 1)])
    for key, value in (("use_timm_backbone", False), ("backbone", None), ("use_pretrained_backbone", False)):
        if hasattr(config, key):
            setattr(config, key, value)
    if getattr(config, "timm_kwargs", None):
        config.timm_kwargs = {}  # timm's own arguments (OmDet-Turbo's Swin image size)
    channels = config.backbone_config.hidden_sizes[-levels:]
    if isinstance(getattr(config, "encoder_in_channels", None), (list, tuple)) and \
            len(config.encoder_in_channels) == levels:
        config.encoder_in_channels = list(channels)
    if getattr(config, "apply_layernorm_after_vision_backbone", False):
        # OmDet-Turbo normalises timm Swin's channels-last maps; the ResNet's are channels-first
        # and batch-normalised already.
        config.apply_layernorm_after_vision_backbone = False


def _backbone_feature_widths(config):
    """A width the configuration gives for one of its backbone's feature maps (PP-DocLayoutV3's
    x4_feat_dim: the first, stride-4 map's channels) follows the small backbone's."""
    if not isinstance(getattr(config, "x4_feat_dim", None), int) or \
            getattr(config, "backbone_config", None) is None:
        return
    from transformers import AutoBackbone

    try:
        channels = AutoBackbone.from_config(config.backbone_config).channels
    except Exception:  # noqa: BLE001 a backbone Transformers cannot build alone
        return
    config.x4_feat_dim = channels[0]


def _segment_anything_widths(default, config):
    """SAM's kind (SAM, SAM-HQ, SAM 2, SAM 3, and PP-FormulaNet on SAM's image encoder) hands
    its image embeddings from the vision encoder's neck to the prompt encoder and mask decoder
    (or a text decoder), whose widths the default gives each sub-configuration separately as
    equal numbers (256: the neck's output channels or FPN width, the mask decoder's IoU head;
    768: SAM-HQ's ViT features; 512: PP-FormulaNet's projection into its decoder): each such
    width follows the small hidden size of the sub-configuration it equalled. The image
    embedding's positional encoding makes 2 x num_pos_feats of them, the FPN's channel list is
    the encoder's stages' widths from the last, and the feature maps' sizes (which the default
    gives for a 1024-pixel image) are those the small vision encoder makes, the smallest the
    prompt encoder's grid."""
    vision = getattr(config, "vision_config", None)
    if vision is None or getattr(config, "mask_decoder_config", None) is None and \
            not isinstance(_get(vision, "output_channels"), int):
        return
    widths = {}
    for old, new in _config_pairs(default, config):
        for key in ("hidden_size", "d_model"):
            old_size, new_size = _get(old, key), _get(new, key)
            if isinstance(old_size, int) and isinstance(new_size, int) and old_size != new_size:
                widths.setdefault(old_size, new_size)
    for old, new in _config_pairs(default, config):
        for key, value in old.to_dict().items():
            if key.endswith(("channels", "_dim", "hidden_size")) and isinstance(value, int) and \
                    not isinstance(value, bool) and _get(new, key) == value and value in widths:
                setattr(new, key, widths[value])
    prompt = getattr(config, "prompt_encoder_config", None)
    if isinstance(_get(vision, "num_pos_feats"), int) and prompt is not None:
        vision.num_pos_feats = prompt.hidden_size // 2
    backbone = getattr(vision, "backbone_config", None)
    stages = _get(backbone, "embed_dim_per_stage")
    if isinstance(_get(vision, "backbone_channel_list"), list) and stages:
        vision.backbone_channel_list = list(reversed(stages))
    sizes = _feature_map_sizes(vision) if isinstance(_get(vision, "backbone_feature_sizes"), list) \
        else None
    if sizes:
        vision.backbone_feature_sizes = sizes
        if prompt is not None and isinstance(_get(prompt, "patch_size"), int):
            # The prompt encoder's dense embedding is laid over the smallest of them.
            prompt.patch_size = prompt.image_size // vision.backbone_feature_sizes[-1][0]


def _config_pairs(default, config):
    """(default, small) of a configuration and of each of its sub-configurations, depth first."""
    yield default, config
    for key, value in _attributes(default).items():
        new = _get(config, key)
        if _is_config(value) and _is_config(new):
            yield from _config_pairs(value, new)


def _feature_map_sizes(vision):
    """[height, width] of each FPN feature map the decoder reads (the last num_feature_levels,
    from the largest), as the vision encoder makes them of the zoo's image."""
    import torch
    from transformers import AutoModel

    from torch_tpu.tools.model_zoo.model_inputs import pixels

    try:
        encoder = AutoModel.from_config(vision).eval()
        with torch.no_grad():
            maps = encoder(pixels(vision, set(), torch.Generator().manual_seed(0), 1)).fpn_hidden_states
    except Exception:  # noqa: BLE001 an encoder that needs a library not installed (timm)
        return None
    levels = getattr(vision, "num_feature_levels", None) or len(vision.backbone_feature_sizes)
    return [list(m.shape[-2:]) for m in maps[:levels]]


# PP-OCR's intra-class blocks (PaddleOCR's IntraCLBlock): (kernel, stride, padding) of each
# convolution, long, mid and short (7, 5, 3) vertical, horizontal and square ones that keep the
# map's size, between 1 x 1 convolutions that reduce the channels and restore them.
_INTRACLASS_BLOCK = {
    "reduce_channel": [1, 1, 0], "return_channel": [1, 1, 0],
    **{f"vertical_long_to_small_conv_{r}ratio": [[k, 1], 1, [k // 2, 0]]
       for r, k in (("long", 7), ("mid", 5), ("short", 3))},
    **{f"horizontal_small_to_long_conv_{r}ratio": [[1, k], 1, [0, k // 2]]
       for r, k in (("long", 7), ("mid", 5), ("short", 3))},
    **{f"symmetric_conv_long_{r}ratio": [k, 1, k // 2]
       for r, k in (("long", 7), ("mid", 5), ("short", 3))},
}


def _ocr_detector_neck(config):
    """PP-OCR's server detectors leave their neck's layout to a checkpoint (None in the default
    configuration): the intra-class blocks' convolutions, each block's upsampling to the first
    (stride-4) map's size, which the later maps are 2, 4, 8 times smaller than, and the head's
    kernels (the documented default, [3, 2, 2])."""
    if not _has(config, "intraclass_block_config"):
        return
    if config.intraclass_block_config is None:
        config.intraclass_block_config = dict(_INTRACLASS_BLOCK)
    if _has(config, "scale_factor_list") and config.scale_factor_list is None:
        config.scale_factor_list = [2 ** i for i in range(config.intraclass_block_number)]
    if _has(config, "kernel_list") and config.kernel_list is None:
        config.kernel_list = [3, 2, 2]


def _ocr_detector_backbone(config):
    """A PP-OCRv6 detector's neck takes one feature map per stage of its PP-LCNet backbone, each
    half the previous one's size both ways (it upsamples each by 2 onto the next), and sizes its
    input convolutions by the stages' widths (the small detector names them in
    layer_list_out_channels). The backbone's default configuration is the recognizers' (the
    last stage only; strides of [2, 1] that halve the height only, none in the second stage):
    the detector's hands on every stage, each after the first opening with a stride of 2, as
    PaddleOCR lays out PP-LCNet for detection."""
    backbone = getattr(config, "backbone_config", None)
    blocks = _get(backbone, "block_configs")
    if not isinstance(blocks, list) or not (_has(config, "layer_list_out_channels") or
                                            _has(config, "intraclass_block_number")):
        return
    if not any(isinstance(b[3], (list, tuple)) for stage in blocks for b in stage):
        return  # a detection layout already (PP-OCRv5's PP-LCNetV3)
    backbone.block_configs = [[[*b[:3], 2 if i and not j else 1, *b[4:]] for j, b in enumerate(stage)]
                              for i, stage in enumerate(blocks)]
    backbone.set_output_features_output_indices(
        out_features=None, out_indices=list(range(1, len(backbone.stage_names))))
    if _has(config, "layer_list_out_channels"):
        config.layer_list_out_channels = list(backbone.stage_out_channels)


def _uvdoc_bridge(config):
    """UVDoc's head concatenates one map per bridge stage of its backbone (its bridge connector
    takes the bridge width times their count); the backbone's default configuration hands on
    the last only."""
    backbone = getattr(config, "backbone_config", None)
    stages = _get(backbone, "stage_configs")
    if isinstance(_get(config, "bridge_connector"), (list, tuple)) and isinstance(stages, (list, tuple)):
        names = backbone.stage_names
        backbone.set_output_features_output_indices(
            out_features=None, out_indices=list(range(len(names) - len(stages), len(names))))


def _hooked_layers(default, config):
    """Layers a model hooks by index for intermediate features (DepthPro's intermediate_hook_ids,
    of its patch encoder): the same places in the small encoder, scaled to its layer count;
    and the patches it cuts the image into for that encoder, of the small encoder's image."""
    hooks = _get(default, "intermediate_hook_ids")
    encoder_default, encoder = _get(default, "patch_model_config"), _get(config, "patch_model_config")
    if not isinstance(hooks, (list, tuple)) or encoder is None:
        return
    old, new = encoder_default.num_hidden_layers, encoder.num_hidden_layers
    config.intermediate_hook_ids = [min(new - 1, i * new // old) for i in hooks]
    # DepthPro's patch_size is the side of the image patches its patch encoder takes whole
    # (384 for its 384-pixel encoder), not a ViT patch: it follows the small encoder's image.
    if isinstance(_get(config, "patch_size"), int) and isinstance(encoder.image_size, int):
        config.patch_size = encoder.image_size


def _sapiens_head(config):
    """Sapiens2's dense-prediction head leaves its layout to each task's checkpoint (None in the
    default configuration): here transposed-convolution blocks that each double the patch
    grid back to the image's size, then one refining convolution, all 16 channels wide."""
    head = getattr(config, "head_config", None)
    if head is None or not _has(head, "upsample_out_channels") or head.upsample_out_channels is not None:
        return
    steps = max(1, int(config.patch_size).bit_length() - 1)
    head.upsample_out_channels = [16] * steps
    head.upsample_kernel_sizes = [head.upsample_kernel_size] * steps
    head.conv_out_channels = [16]
    head.conv_kernel_sizes = [head.conv_kernel_size]


def _compound_scaling(config):
    """EfficientNet's compound scaling (EfficientNet, ALIGN's vision tower) defaults to B7's:
    twice the widths and 3.1 times the blocks, 64 M parameters, whose training in three modes
    ran past the zoo's timeout. A quarter of each keeps one block per stage and channels of 8 to
    80; the widths set apart from the scaled ones follow them (the head's 1280 channels, ALIGN's
    projection of the last stage's)."""
    def scaled(vision, channels):
        divisor = vision.depth_divisor
        width = max(divisor, int(channels * vision.width_coefficient + divisor / 2) // divisor * divisor)
        return width + divisor if width < 0.9 * channels * vision.width_coefficient else width

    for vision in (config, getattr(config, "vision_config", None)):
        if not isinstance(_get(vision, "width_coefficient"), float) or \
                not isinstance(_get(vision, "depth_coefficient"), float):
            continue
        vision.width_coefficient = vision.depth_coefficient = 0.25
        if isinstance(_get(vision, "hidden_dim"), int):
            vision.hidden_dim = scaled(vision, 1280)
        if vision is not config and isinstance(_get(config, "projection_dim"), int):
            config.projection_dim = scaled(vision, vision.out_channels[-1])


def _depth_pro_widths(config):
    """DepthPro's neck and fusion stage keep their own widths apart from its encoders' (1024
    channels per scaled image, 256 per hooked layer and in the fusion): 33 M parameters at the
    small encoders' width, whose training ran past the zoo's timeout. 32 each."""
    if not isinstance(_get(config, "scaled_images_feature_dims"), (list, tuple)):
        return
    for key in ("scaled_images_feature_dims", "intermediate_feature_dims"):
        if isinstance(_get(config, key), (list, tuple)):
            setattr(config, key, [32] * len(getattr(config, key)))
    if isinstance(_get(config, "fusion_hidden_size"), int):
        config.fusion_hidden_size = 32


def _text_projection(config):
    """OmDet-Turbo projects its text model's pooled class names (text_projection_in_dim wide)
    into class embeddings (class_embed_dim, text_projection_out_dim) that its task prompts, the
    text model's unprojected states, share a width with: all the default text model's 512,
    all the small text model's width (twice the decoder's, as the default has it)."""
    text = getattr(config, "text_config", None)
    if isinstance(_get(config, "text_projection_in_dim"), int) and \
            isinstance(_get(text, "hidden_size"), int):
        decoder = _get(config, "decoder_hidden_dim")
        if text.hidden_size == decoder:
            # Its decoder reads a projection of the prompts that it builds only where their
            # width differs from its own: the text model keeps the default's twice the width.
            text.hidden_size = 2 * decoder
        for key in ("text_projection_in_dim", "text_projection_out_dim", "class_embed_dim"):
            if isinstance(_get(config, key), int):
                setattr(config, key, text.hidden_size)


def _per_label_settings(config):
    """Per-label settings a default configuration leaves None for a checkpoint to fill in, which
    the model reads one per label (PP-DocLayoutV2's score thresholds and reading-order
    classes): a threshold of one half, and each label its own class."""
    labels = getattr(config, "num_labels", None)
    if not isinstance(labels, int):
        return
    if _has(config, "class_thresholds") and config.class_thresholds is None:
        config.class_thresholds = [0.5] * labels
    if _has(config, "class_order") and config.class_order is None:
        config.class_order = list(range(labels))


# Image tokens of a VQ tokenizer's codebook in a small vocabulary map (_image_vocabulary).
VQ_CODEBOOK = 16


def _image_vocabulary(config):
    """Chameleon maps its VQ codebook into the text vocabulary by a map its checkpoint's
    tokenizer supplies (None in the default configuration): a map in its naming (the image
    placeholder "<image>", codebook entry i as "IMGIMG" + i's digits as letters + "Z") puts
    a small codebook at the top of the vocabulary and the placeholder just below it, as the
    model's own tests do. Text tokens stay below both (inputs._vocab)."""
    vq = getattr(config, "vq_config", None)
    if not _has(config, "vocabulary_map") or config.vocabulary_map is not None or \
            not isinstance(getattr(vq, "num_embeddings", None), int):
        return
    vq.num_embeddings = min(vq.num_embeddings, VQ_CODEBOOK)
    first = config.vocab_size - vq.num_embeddings
    names = {f"IMGIMG{''.join(chr(ord('A') + int(c)) for c in str(i))}Z": first + i
             for i in range(vq.num_embeddings)}
    config.vocabulary_map = {"<image>": first - 1, **names}
    config.image_token_id = first - 1


# A timm vision transformer made small through the keyword arguments timm passes to its
# class (as timm_models narrows its large variants): two blocks of width 32 on 32 x 32 images.
_TIMM_VIT_SMALL = {"embed_dim": 32, "depth": 2, "num_heads": 4, "img_size": 32}


# Vision towers whose default configuration leaves timm's default (ResNet-50) where the
# model expects another network, by the configuration holding them: (attribute, the
# checkpoints' architecture, its model_args). Perception LM reads a vision transformer's
# model_args (its checkpoints' PE Core); EdgeTAM's default misspells "architecture" for its
# RepViT feature extractor, whose four stages' widths its backbone_channel_list names. Gemma
# 3n's MobileNet-V5 encoder (300M parameters) keeps its blocks at a sixteenth of the widths
# (7M), its output features as many.
_TIMM_TOWERS = {
    "perception_lm": ("vision_config", "vit_pe_core_large_patch14_336", None),
    "edgetam_vision_model": ("backbone_config", "repvit_m1",
                             {"in_chans": 3, "features_only": True, "out_indices": [0, 1, 2, 3]}),
    "gemma3n": ("vision_config", None, {"channel_multiplier": 0.0625}),
    # FastVLM's FastViT-MCi3 (five stages, 2 to 24 blocks, widths to 1536): a block per stage,
    # widths to 128 (its attention stages' heads are 32 wide).
    "fast_vlm": ("vision_config", None, {"layers": (1, 1, 1, 1, 1),
                                         "embed_dims": (8, 16, 32, 64, 128)}),
}


def _small_timm(config):
    """Transformers' timm wrappers build the timm model their configuration names: none for
    a timm backbone (a checkpoint names it), ResNet-50 for a timm classifier by default. Both
    get the zoo's own small variant of timm's ResNet family (timm_models.VARIANTS). A vision
    tower that names a timm vision transformer (Perception LM's and PE Video's PE Core) keeps
    it, made small by its model_args, with the image size its pixels are drawn at."""
    from transformers import TimmWrapperConfig

    from torch_tpu.tools.model_zoo.timm_models import VARIANTS

    small = VARIANTS["resnet"].name
    for sub in _configs_within(config):
        key, architecture, args = _TIMM_TOWERS.get(sub.model_type, (None, None, None))
        tower = getattr(sub, key, None) if key else None
        if _is_timm_tower(tower):
            tower.architecture = architecture or tower.architecture
            if args:
                tower.model_args = {**(tower.model_args or {}), **args}
    for sub in _configs_within(config):
        if sub.model_type == "timm_backbone" and sub.backbone is None:
            sub.backbone = small
        if not _is_timm_tower(sub):
            continue
        if sub.architecture == TimmWrapperConfig.__dataclass_fields__["architecture"].default:
            sub.architecture = small
        elif _takes_vit_args(sub.architecture):
            sub.model_args = {**(sub.model_args or {}), **_TIMM_VIT_SMALL}
            sub.image_size = _TIMM_VIT_SMALL["img_size"]
        if isinstance(getattr(sub, "hidden_size", None), int):
            # A tower whose configuration names its output width (FastVLM's, which its
            # projector takes): the small timm model's.
            sub.hidden_size = _timm_width(sub) or sub.hidden_size


def _is_timm_tower(config):
    """A configuration of a timm model that Transformers wraps: TimmWrapper's, or one of its
    kind (Gemma 3n's vision configuration)."""
    import dataclasses

    return dataclasses.is_dataclass(config) and \
        {"architecture", "model_args"} <= {f.name for f in dataclasses.fields(config)}


def _configs_within(config):
    yield config
    for value in _attributes(config).values():
        if _is_config(value):
            yield from _configs_within(value)


def _timm_width(config):
    """Features of the timm model a tower's configuration builds (None where it cannot)."""
    import torch

    from torch_tpu.tools.model_zoo.timm_models import _import_timm

    timm = _import_timm()
    try:
        with torch.device("meta"):
            model = timm.create_model(config.architecture, pretrained=False, num_classes=0,
                                      **(config.model_args or {}))
    except Exception:  # noqa: BLE001 no timm, or a name it lacks
        return None
    return getattr(model, "num_features", None)


def _takes_vit_args(architecture):
    import torch

    from torch_tpu.tools.model_zoo.timm_models import _import_timm

    timm = _import_timm()
    if timm is None:
        return False
    try:
        with torch.device("meta"):
            timm.create_model(architecture, pretrained=False, **_TIMM_VIT_SMALL)
    except Exception:  # noqa: BLE001 another kind of network, or a name timm lacks
        return False
    return True


def _prompt_grid(config):
    """SAM 2's prompt encoder embeds masks on the grid of the image embeddings (the backbone's
    lowest-resolution feature map, 16 times smaller than the image): its patch size is that
    map's stride, which the patch-size cap would otherwise halve."""
    prompt = getattr(config, "prompt_encoder_config", None)
    sizes = getattr(getattr(config, "vision_config", None), "backbone_feature_sizes", None)
    if prompt is None or not isinstance(sizes, (list, tuple)) or not sizes or \
            not isinstance(getattr(prompt, "image_size", None), int):
        return
    prompt.patch_size = prompt.image_size // sizes[-1][0]


def _window_qformer(config):
    """Granite 4 Vision's projectors are window Q-Formers whose layout only its checkpoints
    give (None by default): a query window of 2 x 2 in key windows of 4 x 4 patches (the small
    image's whole 4 x 4 grid), the two vision layers' features injected into the two language
    layers, the four spatial offset groups into both; and its Q-Former's heads, which its
    configuration sets to the vision width over 64 (none of a width of 32), as many as the
    zoo's other heads."""
    if config.model_type != "granite4_vision":
        return
    if config.downsample_rate is None:
        config.downsample_rate = "2/4"
    if config.deepstack_layer_map is None:
        config.deepstack_layer_map = [(-2, 0), (-1, 1)]
    layers = config.text_config.num_hidden_layers
    config.spatial_target_layers = [min(t, layers - 1) for t in (0, 0, 1, 1)]
    config.qformer_config.num_attention_heads = 4


def _anyres_grid(config):
    """The LLaVA-NeXT kind's grids of tiles (image_grid_pinpoints) are multiples of its
    default vision tower's image side: the same grids of the small tower's side."""
    import math

    pins = getattr(config, "image_grid_pinpoints", None)
    side = getattr(getattr(config, "vision_config", None), "image_size", None)
    if not isinstance(pins, (list, tuple)) or not pins or not isinstance(side, int):
        return
    unit = math.gcd(*(v for pin in pins for v in pin))
    config.image_grid_pinpoints = [[v // unit * side for v in pin] for pin in pins]


def _feature_layers(config, count, first):
    """The configuration rebuilt with `count` layers, each handing its features on (out
    indices `first` .. `first` + count - 1), so that a neck or head that takes that many
    feature maps gets them from a small stack."""
    values = {k: v for k, v in config.to_dict().items() if k not in ("stage_names", "out_features")}
    values.update(num_hidden_layers=count, out_indices=list(range(first, first + count)))
    return type(config)(**values)


def _features_for_neck(config, task):
    """A DPT-style neck (DPT, Depth Anything, ZoeDepth) reassembles one feature map per entry of
    `neck_hidden_sizes`, and BEiT's segmentation head takes four: the small stack hands on as
    many as they take (two layers would hand on two)."""
    # CHMv2's neck names its per-map widths post_process_channels.
    neck = getattr(config, "neck_hidden_sizes", None) or getattr(config, "post_process_channels", None)
    if isinstance(neck, (list, tuple)) and getattr(config, "reassemble_factors", None):
        backbone = getattr(config, "backbone_config", None)
        if backbone is not None and hasattr(backbone, "out_indices"):
            config.backbone_config = _feature_layers(backbone, len(neck), 1)
            if isinstance(getattr(config, "reassemble_hidden_size", None), int):
                config.reassemble_hidden_size = config.backbone_config.hidden_size
        elif hasattr(config, "backbone_out_indices"):
            config.num_hidden_layers = len(neck)
            config.backbone_out_indices = tuple(range(len(neck)))
    elif task == "semantic_segmentation" and hasattr(config, "out_indices") and \
            hasattr(config, "use_auxiliary_head"):
        return _feature_layers(config, 4, 1)
    return config


def small_config(model_type, task=None):
    """The small configuration of a model type, as its zoo head class takes it (the head of
    `task` where an extra task's entry names one)."""
    import copy

    from transformers import AutoConfig

    default = AutoConfig.for_model(model_type)
    config = _shrink(copy.deepcopy(default))
    _backbone_without_timm(config)
    _image_vocabulary(config)
    _small_timm(config)
    _prompt_grid(config)
    _window_qformer(config)
    _anyres_grid(config)
    _segment_anything_widths(default, config)
    _hooked_layers(default, config)
    _backbone_feature_widths(config)
    _per_label_settings(config)
    _uvdoc_bridge(config)
    _sapiens_head(config)
    _compound_scaling(config)
    _depth_pro_widths(config)
    _text_projection(config)
    _ocr_detector_backbone(config)
    _ocr_detector_neck(config)
    config = _features_for_neck(config, task)
    cls = _head_class(model_type)
    config = _for_class(config, cls)
    _token_defaults(cls, config)
    if getattr(config, "use_cache", False) and not _has(config, "num_hidden_layers") and any(
            _is_config(v) and _has(v, "num_hidden_layers") for v in _attributes(config).values()):
        # The layer counts are the sub-configurations': a cache built from this configuration
        # (BLT's) asks it for one.
        config.use_cache = False
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
    config._attn_implementation = "sdpa" if model_type in _BOOLEAN_MASK_ONLY else "eager"
    return config


# Model types whose attention masks its relative-position scores by the mask's logical_not,
# which only SDPA's boolean mask means as a mask: eager's is additive (0 where a token is
# seen), so every score would be masked and every output NaN.
_BOOLEAN_MASK_ONLY = {"nemotron_asr_streaming", "nemotron3_5_asr"}
