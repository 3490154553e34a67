"""diffusers architectures for the model zoo (see `libraries`): the denoisers (UNets, DiT-style
transformers, ControlNets) and the autoencoders that `diffusers.models` exports, each built
from a small configuration with random weights from a fixed seed (nothing is downloaded).

Every class has one row in SPECS: its task, its configuration and a builder of its inputs, named
as the class's `forward` names them (`sample` or `hidden_states` for the noisy latent). The
wrapper owns what a training script would:

  noise_prediction  the noisy latent, a timestep per sample and the conditioning the class
                    needs; the prediction is the module's first output, the labels a noise
                    target of its shape (in train() mode) and the loss their mean squared error;
  controlnet        (counted as noise_prediction) the same inputs plus the control input; the
                    residuals a ControlNet hands its base model are its outputs, the last one
                    (the mid block's, or the last block's) the main one: the loss is its squared
                    error against the labels plus the mean of every other residual's mean
                    square, so that every control block gets a gradient;
  autoencoding      images (or video, or audio) in, the reconstruction out, the input itself as
                    the labels and the loss their mean squared error; a variational autoencoder
                    decodes its posterior's mode (sample_posterior=False), so nothing is drawn.

Nothing in a forward is random, since compare trains in train() mode: every argument of a class
whose name holds "dropout" and whose default is not zero is set to 0; a Dropout the configuration
cannot reach (UNet3DConditionModel's temporal convolutions hard-code p=0.1) gets p=0, and so does
the class-label dropout of DiT's label embedding (classifier-free guidance training replaces
random labels in train() mode). Parameters whose entries are all equal (the zero convolutions of
ControlNets, zero-initialised output projections, norm scales) get the small noise that
Transformers' models get, or the output would not depend on the input at all.

Classes of `diffusers.models` with no row, and why:
  AnyFlowFARTransformer3DModel, Kandinsky6SRTransformer3DModel
      attend through flex_attention (block-causal chunks, NABLA sparsity), whose backward the
      CPU, the reference, has only under torch.compile;
  AutoencoderKLAllegro
      encodes only in tiles of 24 frames overlapping by 120 x 80 pixels, so no input is small;
  RFD4ProteinaAutoencoder
      decodes protein structures (coordinates, atom masks): no input that it reconstructs;
  MultiControlNetModel, MultiControlNetUnionModel, FluxMultiControlNetModel,
  SD3MultiControlNetModel, HunyuanDiT2DMultiControlNetModel, QwenImageMultiControlNetModel
      containers that sum the residuals of ControlNets that have rows of their own;
  UVit2DModel
      aMUSEd's masked-token transformer predicts codebook logits, not noise.
CosmosControlNetModel has a row but is listed only where torchvision is installed: its forward
resizes the padding mask with it whatever the configuration."""
import inspect
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F

from torch_tpu.tools.model_zoo.inputs import BATCH
from torch_tpu.tools.model_zoo.zoo_model import ZooModel, named_subclass

NOISE, CONTROL, AUTOENCODING = "noise_prediction", "controlnet", "autoencoding"
TASKS = (NOISE, AUTOENCODING)
B = BATCH


class Spec(NamedTuple):
    kind: str                      # NOISE, CONTROL or AUTOENCODING
    config: dict                   # keyword arguments of the class
    inputs: Callable               # torch.Generator -> {argument: CPU tensor}
    static: dict = {}              # keyword arguments that are no tensors (sizes, flags)
    nest: dict = {}                # {argument: (input, ...)}: inputs the class takes as a dict
    lists: dict = {}               # {argument: (input, ...)}: inputs the class takes as a list
    prepare: Callable = None       # (module, kwargs) -> kwargs: what a pipeline derives from the
                                   # module before each call (a rotary table, an empty KV cache)
    make: Callable = None          # (class, config) -> module, for a class built from another
    requires: tuple = ()           # optional packages its forward imports


# --- Inputs. Every builder draws from the generator it is given in a fixed order, so that one
# seed gives one set of inputs; shapes are (batch, ...) unless a class takes per-sample lists.

def _randn(g, *shape):
    return torch.randn(*shape, generator=g)


def _steps(g, high=1000):
    """Integer diffusion timesteps (or class labels below `high`), one per sample."""
    return torch.randint(0, high, (B,), generator=g)


def _unit_steps(g):
    """Flow-matching timesteps in (0, 1), one per sample."""
    return torch.rand(B, generator=g) * 0.9 + 0.05


def _latent(g, channels=4, size=8):
    return _randn(g, B, channels, size, size)


def _video(g, channels=4, frames=2, size=8):
    return _randn(g, B, channels, frames, size, size)


def _text(g, tokens=8, dim=16):
    return _randn(g, B, tokens, dim)


def _ones(*shape, dtype=None):
    return torch.ones(*shape, dtype=dtype)


def _ids(tokens=None, grid=None):
    """Flux's position ids, (t, h, w) per token: zeros for `tokens` text tokens, the grid's
    rows and columns for an image of `grid` (h, w) tokens."""
    if grid is None:
        return torch.zeros(tokens, 3)
    axes = torch.meshgrid(torch.zeros(1), torch.arange(float(grid[0])),
                          torch.arange(float(grid[1])), indexing="ij")
    return torch.stack(axes, -1).reshape(grid[0] * grid[1], 3)


def _ids4(tokens=None, grid=None, batched=False):
    """Flux 2's position ids, (t, h, w, l) per token, l counting the text tokens."""
    a = torch.arange
    ids = torch.cartesian_prod(a(1), a(1), a(1), a(tokens)) if grid is None else \
        torch.cartesian_prod(a(1), a(grid[0]), a(grid[1]), a(1))
    return ids.unsqueeze(0).expand(B, -1, -1).clone() if batched else ids


# --- Configurations and inputs that several classes share.

# Stable Diffusion XL's UNet: cross-attention to the text, plus pooled text embeddings and the
# six size and crop ids as added conditioning; its ControlNet is the UNet's down half.
_UNET2D_CONDITION = dict(
    block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8, sample_size=16,
    in_channels=4, out_channels=4, cross_attention_dim=32, attention_head_dim=8,
    down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    addition_embed_type="text_time", addition_time_embed_dim=8,
    projection_class_embeddings_input_dim=32 + 6 * 8)
_CONTROLNET = dict({k: v for k, v in _UNET2D_CONDITION.items()
                    if k not in ("up_block_types", "out_channels", "sample_size")},
                   conditioning_embedding_out_channels=(8, 16))
_SDXL_NEST = {"added_cond_kwargs": ("text_embeds", "time_ids")}


def _sdxl_inputs(g):
    return {"sample": _latent(g, 4, 16), "timestep": _steps(g),
            "encoder_hidden_states": _text(g, 6, 32), "text_embeds": _randn(g, B, 32),
            "time_ids": _randn(g, B, 6)}


_SD3 = dict(sample_size=16, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8,
            num_attention_heads=2, caption_projection_dim=16, joint_attention_dim=32,
            pooled_projection_dim=32, out_channels=4, pos_embed_max_size=16)


def _sd3_inputs(g):
    return {"hidden_states": _latent(g, 4, 16), "encoder_hidden_states": _text(g, 8, 32),
            "pooled_projections": _randn(g, B, 32), "timestep": _steps(g)}


_FLUX = dict(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
             attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
             pooled_projection_dim=32, axes_dims_rope=(4, 4, 8))


def _flux_inputs(g, grid=(4, 4), channels=4, text=8, dim=32, pooled=32, guidance=False):
    """Packed latent tokens of a grid (batch, h * w, channels), text tokens and their ids."""
    inputs = {"hidden_states": _randn(g, B, grid[0] * grid[1], channels),
              "encoder_hidden_states": _text(g, text, dim), "timestep": _unit_steps(g),
              "img_ids": _ids(grid=grid), "txt_ids": _ids(tokens=text)}
    if pooled:
        inputs["pooled_projections"] = _randn(g, B, pooled)
    if guidance:
        inputs["guidance"] = torch.full((B,), 3.5)
    return inputs


_HUNYUAN_DIT = dict(sample_size=8, patch_size=2, in_channels=4, attention_head_dim=8,
                    num_attention_heads=2, cross_attention_dim=8, cross_attention_dim_t5=8,
                    pooled_projection_dim=4, hidden_size=16, text_len=4, text_len_t5=4)
_HUNYUAN_ROPE = {"image_rotary_emb": ("rope_cos", "rope_sin")}


def _hunyuan_dit_inputs(g, size=8, dim=8, text=4):
    """CLIP and T5 text with their masks, SDXL-style size ids (original size, target size,
    crop corner), a style id and the rotary table of the patch grid, as its pipeline builds."""
    from diffusers.models.embeddings import get_2d_rotary_pos_embed

    grid = size // 2
    cos, sin = get_2d_rotary_pos_embed(8, ((0, 0), (grid, grid)), (grid, grid), use_real=True)
    return {"hidden_states": _latent(g, 4, size), "timestep": _steps(g).float(),
            "encoder_hidden_states": _text(g, text, dim), "text_embedding_mask": _ones(B, text),
            "encoder_hidden_states_t5": _text(g, text, dim),
            "text_embedding_mask_t5": _ones(B, text),
            "image_meta_size": torch.tensor([[1024.0, 1024, 16, 16, 0, 0]] * B),
            "style": torch.zeros(B, dtype=torch.long), "rope_cos": cos, "rope_sin": sin}


_SANA = dict(patch_size=1, in_channels=4, out_channels=4, num_layers=1, attention_head_dim=4,
             num_attention_heads=4, num_cross_attention_heads=2, cross_attention_head_dim=8,
             cross_attention_dim=16, caption_channels=8, sample_size=8)


def _sana_inputs(g):
    return {"hidden_states": _latent(g, 4, 8), "encoder_hidden_states": _text(g, 8, 8),
            "timestep": _steps(g)}


_QWEN_IMAGE = dict(patch_size=2, in_channels=16, out_channels=4, num_layers=2,
                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                   axes_dims_rope=(8, 4, 4))
_QWEN_SHAPES = dict(img_shapes=[(1, 2, 2)] * B)


def _qwen_image_inputs(g):
    """Packed 2x2 patches of a 4x4 latent of 4 channels: (batch, 4 tokens, 16)."""
    return {"hidden_states": _randn(g, B, 4, 16), "encoder_hidden_states": _text(g, 8, 16),
            "encoder_hidden_states_mask": _ones(B, 8, dtype=torch.long),
            "timestep": _unit_steps(g)}


def _qwen21_slots(text, image_tokens):
    """Qwen-Image 2.1's joint layout: the text positions, then a slot per 2x2 image tokens."""
    return torch.cat([torch.zeros(B, text, dtype=torch.bool),
                      torch.ones(B, image_tokens // 4, dtype=torch.bool)], 1)


_Z_IMAGE = dict(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=4, dim=16, n_layers=1,
                n_refiner_layers=1, n_heads=1, n_kv_heads=1, qk_norm=True, cap_feat_dim=16,
                axes_dims=(8, 4, 4), axes_lens=(64, 16, 16))
_Z_IMAGE_LISTS = {"x": ("x_0", "x_1"), "cap_feats": ("cap_0", "cap_1")}


def _z_image_inputs(g):
    """Per-sample lists: (channels, frames, h, w) latents and (tokens, dim) captions."""
    return {"x_0": _randn(g, 4, 1, 8, 8), "x_1": _randn(g, 4, 1, 8, 8),
            "cap_0": _randn(g, 8, 16), "cap_1": _randn(g, 8, 16), "t": _unit_steps(g)}


def _z_image_controlnet(cls, config):
    """Z-Image's ControlNet shares the embedders and refiners of its transformer."""
    from diffusers import ZImageTransformer2DModel

    controlnet = cls.from_transformer(cls(**config), ZImageTransformer2DModel(**_Z_IMAGE))
    # Its forward reads the flag under autograd, but its __init__ never sets it; False is what
    # disable_gradient_checkpointing() would leave.
    controlnet.gradient_checkpointing = False
    return controlnet


# Wan and the video models built on it (SkyReels, ChronoEdit, VACE, Helios, AnyFlow, Animate):
# rotary positions over (frames, height, width), cross-attention to T5 text.
_WAN = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
            out_channels=4, text_dim=16, freq_dim=32, ffn_dim=32, num_layers=2,
            cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=32)


def _without(config, *names):
    return {k: v for k, v in config.items() if k not in names}


def _wan_inputs(g):
    return {"hidden_states": _video(g), "encoder_hidden_states": _text(g, 12, 16),
            "timestep": _steps(g)}


def _anyflow_inputs(g, frames=2):
    return {"hidden_states": _randn(g, B, frames, 4, 8, 8),
            # A timestep per frame: the flow time and the one its step jumps to.
            "timestep": torch.full((B, frames), 500.0),
            "r_timestep": torch.full((B, frames), 250.0),
            "encoder_hidden_states": _text(g, 12, 16)}


def _helios_inputs(g, frames=2):
    """Helios denoises a chunk of frames given short, mid and long histories of clean ones."""
    past = frames - 1
    return dict(_wan_inputs(g), indices_hidden_states=_ones(B, frames),
                indices_latents_history_short=_ones(B, past),
                indices_latents_history_mid=_ones(B, past),
                indices_latents_history_long=_ones(B, 4 * past),
                latents_history_short=_video(g, 4, past), latents_history_mid=_video(g, 4, past),
                latents_history_long=_video(g, 4, 4 * past))


def _wan_animate_inputs(g, frames=20, size=8):
    """Wan-Animate: the latents with their reference and pose channels, the driving pose
    video's latents, a CLIP image embedding and face crops (77 frames at the motion encoder's
    size)."""
    return {"hidden_states": _video(g, 12, frames + 1, size), "timestep": _steps(g),
            "encoder_hidden_states": _text(g, 12, 16),
            "encoder_hidden_states_image": _text(g, 12, 16),
            "pose_hidden_states": _video(g, 4, frames, size),
            "face_pixel_values": _video(g, 3, 77, 16)}


def _fresh_kv_cache(inner, kwargs):
    """Wan-Animate 2's reference pass writes every layer's keys and values into a new cache."""
    from diffusers.models.transformers.transformer_wan_animate_2 import WanAnimate2KVCache

    kwargs["kv_cache"] = WanAnimate2KVCache(inner.config.num_layers)
    return kwargs


# --- Inputs of one class each.

def _size_conditions():
    """CogView's original size, target size and crop corner, one row per sample."""
    return {"original_size": torch.tensor([[64, 64]] * B),
            "target_size": torch.tensor([[64, 64]] * B), "crop_coords": torch.tensor([[0, 0]] * B)}


def _glm_image_inputs(g):
    return {"hidden_states": _latent(g), "encoder_hidden_states": _text(g, 12, 32),
            # A prior token (of GLM-Image's autoregressive stage) per image patch.
            "prior_token_id": torch.randint(0, 64, (B, 16), generator=g),
            "prior_token_drop": torch.zeros(B, dtype=torch.bool), "timestep": _steps(g),
            "target_size": torch.tensor([[8.0, 8.0]] * B), "crop_coords": torch.zeros(B, 2)}


def _ideogram_inputs(g, text=4, grid=(2, 2), channels=16, llm=24):
    """Text and image tokens in one sequence: the LLM features fill the text positions, the
    latents the image ones, whose positions start at Ideogram's offset."""
    from diffusers.models.transformers import transformer_ideogram4 as ideogram

    image = grid[0] * grid[1]
    hidden = torch.zeros(B, text + image, channels)
    hidden[:, text:] = _randn(g, B, image, channels)
    features = torch.zeros(B, text + image, llm)
    features[:, :text] = _randn(g, B, text, llm)
    positions = torch.zeros(B, text + image, 3, dtype=torch.long)
    positions[:, :text] = torch.arange(text)[:, None]
    h, w = torch.meshgrid(torch.arange(grid[0]), torch.arange(grid[1]), indexing="ij")
    offset = ideogram.IMAGE_POSITION_OFFSET
    positions[:, text:, 0] = offset
    positions[:, text:, 1] = h.flatten() + offset
    positions[:, text:, 2] = w.flatten() + offset
    indicator = torch.full((B, text + image), ideogram.OUTPUT_IMAGE_INDICATOR)
    indicator[:, :text] = ideogram.LLM_TOKEN_INDICATOR
    return {"hidden_states": hidden, "encoder_hidden_states": features,
            "timestep": _unit_steps(g), "position_ids": positions,
            "segment_ids": torch.ones(B, text + image, dtype=torch.long), "indicator": indicator}


def _krea_inputs(g, text=4, grid=(2, 2), channels=16, text_dim=16, text_layers=3):
    positions = torch.zeros(text + grid[0] * grid[1], 3)
    positions[text:, 1] = torch.arange(grid[0]).repeat_interleave(grid[1])
    positions[text:, 2] = torch.arange(grid[1]).repeat(grid[0])
    mask = torch.ones(B, text, dtype=torch.bool)
    mask[:, -1] = False  # a padded text token, so that the key-padding mask is exercised
    return {"hidden_states": _randn(g, B, grid[0] * grid[1], channels),
            # The hidden states of several layers of the text encoder, stacked.
            "encoder_hidden_states": _randn(g, B, text, text_layers, text_dim),
            "timestep": _unit_steps(g), "position_ids": positions, "encoder_attention_mask": mask}


def _omnigen_inputs(g, text=8, size=8):
    tokens = text + 1 + (size // 2) ** 2  # the text, the timestep token, the image's patches
    return {"hidden_states": _latent(g, 4, size), "timestep": _unit_steps(g),
            "input_ids": torch.randint(0, 10, (B, text), generator=g),
            "attention_mask": _ones(B, tokens, tokens),
            "position_ids": torch.arange(tokens).expand(B, -1).clone()}


def _lumina_next_inputs(g, size=8, text=8):
    from diffusers.models.embeddings import get_2d_rotary_pos_embed_lumina

    # The complex rotary table of the patch grid (head dim 8), as Lumina's pipeline builds it.
    return {"hidden_states": _latent(g, 4, size), "timestep": _unit_steps(g),
            "encoder_hidden_states": _text(g, text, 16), "encoder_mask": _ones(B, text),
            "image_rotary_emb": get_2d_rotary_pos_embed_lumina(8, size, size)}


def _framepack_inputs(g, frames=3, size=4):
    """FramePack: the frames being generated, clean frames and 2x/4x-compressed history."""
    past = frames - 1
    return {"hidden_states": _video(g, 4, frames, size), "timestep": _steps(g),
            "encoder_hidden_states": _text(g, 8, 16), "encoder_attention_mask": _ones(B, 8),
            "pooled_projections": _randn(g, B, 8), "image_embeds": _text(g, 8, 16),
            "indices_latents": _ones(frames), "guidance": _steps(g),
            "latents_clean": _video(g, 4, past, size), "indices_latents_clean": _ones(past),
            "latents_history_2x": _video(g, 4, past, size),
            "indices_latents_history_2x": _ones(past),
            "latents_history_4x": _video(g, 4, 4 * past, size),
            "indices_latents_history_4x": _ones(4 * past)}


def _kandinsky5_inputs(g, frames=2, size=8, text=8):
    """Channels-last latents (batch, frames, h, w, channels); rotary positions of the 2x2
    patches along each axis."""
    return {"hidden_states": _randn(g, B, frames, size, size, 4),
            "encoder_hidden_states": _text(g, text, 16), "timestep": _steps(g).float(),
            "pooled_projections": _randn(g, B, 8), "text_rope_pos": torch.arange(text),
            "rope_t": torch.arange(frames), "rope_h": torch.arange(size // 2),
            "rope_w": torch.arange(size // 2)}


def _minimax_h3_inputs(g, text=4, audio=6, video=8):
    """One packed sequence of text, audio and video rows, tagged with their modality (0 video,
    1 text, 2 audio) and their noise level (two timesteps: video's and audio's)."""
    length = text + audio + video
    text_rows, audio_rows = torch.arange(text), torch.arange(text, text + audio)
    video_rows = torch.arange(text + audio, length)
    tags = torch.zeros(length, dtype=torch.long)
    tags[text_rows], tags[audio_rows] = 1, 2
    timestep_rows = torch.zeros(length, dtype=torch.long)
    timestep_rows[audio_rows] = 1
    positions = torch.zeros(length, 3)
    positions[:, 0] = torch.arange(float(length))
    positions[video_rows, 1] = torch.arange(float(video)) % 4
    positions[video_rows, 2] = torch.arange(float(video)) % 2
    return {"hidden_states": _randn(g, B, video, 16), "audio_hidden_states": _randn(g, B, audio, 6),
            "encoder_hidden_states": _text(g, text, 8), "timestep": torch.tensor([0.7, 0.3]),
            "timestep_indices": timestep_rows, "token_tags": tags, "position_ids": positions,
            "video_indices": video_rows, "audio_indices": audio_rows, "text_indices": text_rows}


def _refiner_rope(inner, kwargs):
    """The SANA-WM refiner's rotary table of its active frames, as its pipeline builds it."""
    kwargs["video_rotary_emb"] = inner.build_rotary_emb_for_absolute_positions(
        B, [0, 1], 8, 8, kwargs["hidden_states"].device, fps=24.0)
    return kwargs


SPECS = {
    # ---------------------------------------------------------------- UNets
    # diffusers' reinforcement-learning planner: a temporal UNet over trajectories.
    "UNet1DModel": Spec(NOISE, dict(
        block_out_channels=(8, 16, 16), in_channels=8, out_channels=8,
        time_embedding_type="positional", use_timestep_embedding=True, flip_sin_to_cos=False,
        freq_shift=1.0, out_block_type="OutConv1DBlock", mid_block_type="MidResTemporalBlock1D",
        down_block_types=("DownResnetBlock1D",) * 3, up_block_types=("UpResnetBlock1D",) * 2,
        act_fn="swish"),
        lambda g: {"sample": _randn(g, B, 8, 16), "timestep": _steps(g)}),
    "UNet2DModel": Spec(NOISE, dict(
        block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8, sample_size=16,
        in_channels=3, out_channels=3, attention_head_dim=8,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D")),
        lambda g: {"sample": _latent(g, 3, 16), "timestep": _steps(g)}),
    "UNet2DConditionModel": Spec(NOISE, _UNET2D_CONDITION, _sdxl_inputs, nest=_SDXL_NEST),
    # One level: each of its layers is a spatial and a temporal convolution and transformer,
    # and with two levels compiled mode alone took about a minute.
    "UNet3DConditionModel": Spec(NOISE, dict(
        block_out_channels=(32,), layers_per_block=1, norm_num_groups=8, sample_size=8,
        in_channels=4, out_channels=4, cross_attention_dim=16, attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock3D",), up_block_types=("CrossAttnUpBlock3D",)),
        lambda g: {"sample": _video(g), "timestep": _steps(g),
                   "encoder_hidden_states": _text(g, 4, 16)}),
    "UNetMotionModel": Spec(NOISE, dict(
        block_out_channels=(16, 32), layers_per_block=1, norm_num_groups=8, sample_size=8,
        in_channels=4, out_channels=4, cross_attention_dim=16, num_attention_heads=2,
        down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"),
        up_block_types=("UpBlockMotion", "CrossAttnUpBlockMotion")),
        # AnimateDiff's text conditioning is per frame: batch x frames prompts.
        lambda g: {"sample": _video(g), "timestep": _steps(g),
                   "encoder_hidden_states": _randn(g, 2 * B, 4, 16)}),
    "UNetSpatioTemporalConditionModel": Spec(NOISE, dict(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=8, in_channels=4,
        out_channels=4, cross_attention_dim=16, num_attention_heads=2,
        down_block_types=("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
        up_block_types=("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"),
        addition_time_embed_dim=8, projection_class_embeddings_input_dim=3 * 8),
        # Stable Video Diffusion: (batch, frames, channels, h, w), one image embedding, and
        # (fps, motion bucket, noise augmentation) as the added time ids.
        lambda g: {"sample": _randn(g, B, 2, 4, 8, 8), "timestep": _steps(g),
                   "encoder_hidden_states": _text(g, 1, 16), "added_time_ids": _randn(g, B, 3)}),
    "UNetControlNetXSModel": Spec(NOISE, dict(
        sample_size=16, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), block_out_channels=(16, 32),
        cross_attention_dim=16, transformer_layers_per_block=1, num_attention_heads=2,
        norm_num_groups=8, upcast_attention=False, ctrl_block_out_channels=(8, 16),
        ctrl_num_attention_heads=2, ctrl_max_norm_num_groups=4,
        ctrl_conditioning_embedding_out_channels=(8, 8)),
        lambda g: {"sample": _latent(g, 4, 16), "timestep": _steps(g),
                   "encoder_hidden_states": _text(g, 4, 16),
                   "controlnet_cond": _latent(g, 3, 32)}),
    "DreamLiteUNetModel": Spec(NOISE, dict(
        block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8, sample_size=16,
        in_channels=4, out_channels=4, cross_attention_dim=32, attention_head_dim=8,
        down_block_types=("DreamLiteCrossAttnNoSelfAttnDownBlock2D",
                          "DreamLiteCrossAttnDownBlock2D"),
        up_block_types=("DreamLiteCrossAttnUpBlock2D", "DreamLiteUpBlock2D"), ff_mult=2),
        lambda g: {"sample": _latent(g, 4, 16), "timestep": _steps(g),
                   "encoder_hidden_states": _text(g, 6, 32)}),
    "I2VGenXLUNet": Spec(NOISE, dict(
        sample_size=8, block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8,
        cross_attention_dim=16, attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
        up_block_types=("UpBlock3D", "CrossAttnUpBlock3D")),
        # Image-to-video: the first frame's latents, its CLIP embedding, the frame rate.
        lambda g: {"sample": _video(g), "timestep": _steps(g), "fps": _ones(B) * 8,
                   "image_latents": _video(g), "image_embeddings": _randn(g, B, 16),
                   "encoder_hidden_states": _text(g, 4, 16)}),
    "Kandinsky3UNet": Spec(NOISE, dict(
        # Two layers per block: with one, the widths of its up blocks do not line up.
        in_channels=4, time_embedding_dim=32, groups=8, attention_head_dim=8,
        layers_per_block=2, block_out_channels=(32, 64), cross_attention_dim=32,
        encoder_hid_dim=16),
        lambda g: {"sample": _latent(g, 4, 16), "timestep": _steps(g),
                   "encoder_hidden_states": _text(g, 6, 16),
                   "encoder_attention_mask": _ones(B, 6)}),
    # Stable Cascade's stage C: CLIP text and image conditioning, two levels.
    "StableCascadeUNet": Spec(NOISE, dict(
        in_channels=4, out_channels=4, timestep_ratio_embedding_dim=16, patch_size=1,
        conditioning_dim=32, block_out_channels=(32, 32), num_attention_heads=(2, 2),
        down_num_layers_per_block=(1, 1), up_num_layers_per_block=(1, 1),
        clip_text_in_channels=16, clip_text_pooled_in_channels=16, clip_image_in_channels=16,
        clip_seq=2, switch_level=(False,)),
        lambda g: {"sample": _latent(g), "timestep_ratio": _unit_steps(g),
                   "clip_text_pooled": _text(g, 1, 16), "clip_text": _text(g, 6, 16),
                   "clip_img": _text(g, 1, 16)}),

    # ---------------------------------------------------------------- image transformers
    # The spatial transformer of Stable Diffusion's UNet: continuous input, no timestep.
    "Transformer2DModel": Spec(NOISE, dict(
        num_attention_heads=2, attention_head_dim=16, in_channels=32, num_layers=1,
        norm_num_groups=8, cross_attention_dim=16),
        lambda g: {"hidden_states": _latent(g, 32, 8), "encoder_hidden_states": _text(g, 6, 16)}),
    # Versatile Diffusion's pair of spatial transformers: the text splits at the fixed lengths
    # of its two encoders (77 and 257 tokens).
    "DualTransformer2DModel": Spec(NOISE, dict(
        num_attention_heads=2, attention_head_dim=16, in_channels=32, num_layers=1,
        norm_num_groups=8, cross_attention_dim=16),
        lambda g: {"hidden_states": _latent(g, 32, 8),
                   "encoder_hidden_states": _text(g, 77 + 257, 16)}),
    "DreamLiteTransformer2DModel": Spec(NOISE, dict(
        num_attention_heads=2, attention_head_dim=16, in_channels=32, num_layers=1,
        norm_num_groups=8, cross_attention_dim=16),
        lambda g: {"hidden_states": _latent(g, 32, 8), "encoder_hidden_states": _text(g, 6, 16)}),
    "DiTTransformer2DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=8, num_attention_heads=2, attention_head_dim=8,
        num_layers=2, norm_type="ada_norm_zero", num_embeds_ada_norm=10, patch_size=2,
        sample_size=8, activation_fn="gelu-approximate", attention_bias=True),
        lambda g: {"hidden_states": _latent(g), "timestep": _steps(g),
                   "class_labels": _steps(g, 10)}),
    "PixArtTransformer2DModel": Spec(NOISE, dict(
        sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8, num_attention_heads=2,
        in_channels=4, out_channels=8, cross_attention_dim=16, attention_bias=True,
        activation_fn="gelu-approximate", num_embeds_ada_norm=1000, norm_type="ada_norm_single",
        norm_elementwise_affine=False, norm_eps=1e-6, caption_channels=24,
        use_additional_conditions=False),
        lambda g: {"hidden_states": _latent(g), "timestep": _steps(g),
                   "encoder_hidden_states": _text(g, 6, 24)}),
    "HunyuanDiT2DModel": Spec(NOISE, dict(_HUNYUAN_DIT, num_layers=2,
                                          activation_fn="gelu-approximate"),
                              _hunyuan_dit_inputs, lists=_HUNYUAN_ROPE),
    "LuminaNextDiT2DModel": Spec(NOISE, dict(
        sample_size=8, patch_size=2, in_channels=4, hidden_size=24, num_layers=2,
        num_attention_heads=3, num_kv_heads=1, multiple_of=16, norm_eps=1e-5, learn_sigma=False,
        qk_norm=True, cross_attention_dim=16), _lumina_next_inputs,
        static=dict(cross_attention_kwargs={})),
    "Lumina2Transformer2DModel": Spec(NOISE, dict(
        sample_size=8, patch_size=2, in_channels=4, hidden_size=24, num_layers=2,
        num_refiner_layers=1, num_attention_heads=3, num_kv_heads=1, multiple_of=16,
        norm_eps=1e-5, axes_dim_rope=(4, 2, 2), axes_lens=(32, 32, 32), cap_feat_dim=16),
        lambda g: {"hidden_states": _latent(g), "encoder_hidden_states": _text(g, 8, 16),
                   "timestep": _unit_steps(g),
                   "encoder_attention_mask": _ones(B, 8, dtype=torch.bool)}),
    "SanaTransformer2DModel": Spec(NOISE, _SANA, _sana_inputs),
    "SD3Transformer2DModel": Spec(NOISE, dict(_SD3, dual_attention_layers=(0,),
                                              qk_norm="rms_norm"), _sd3_inputs),
    "AuraFlowTransformer2DModel": Spec(NOISE, dict(
        sample_size=16, patch_size=2, in_channels=4, num_mmdit_layers=1,
        num_single_dit_layers=1, attention_head_dim=8, num_attention_heads=2,
        caption_projection_dim=16, joint_attention_dim=32, out_channels=4,
        pos_embed_max_size=64),
        lambda g: {"hidden_states": _latent(g, 4, 16), "encoder_hidden_states": _text(g, 8, 32),
                   "timestep": _steps(g)}),
    "FluxTransformer2DModel": Spec(NOISE, dict(_FLUX, guidance_embeds=True),
                                   lambda g: _flux_inputs(g, guidance=True)),
    "Flux2Transformer2DModel": Spec(NOISE, dict(
        patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, timestep_guidance_channels=32,
        axes_dims_rope=(4, 4, 4, 4)),
        lambda g: {"hidden_states": _randn(g, B, 16, 4), "encoder_hidden_states": _text(g, 8, 32),
                   "img_ids": _ids4(grid=(4, 4), batched=True),
                   "txt_ids": _ids4(8, batched=True), "timestep": _unit_steps(g),
                   "guidance": _ones(B)}),
    "Flux3Transformer2DModel": Spec(NOISE, dict(
        in_channels=4, cond_in_channels=4, num_layers=1, num_single_layers=1,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
        timestep_channels=32, axes_dims_rope=(4, 4, 4, 4)),
        lambda g: {"hidden_states": _randn(g, B, 16, 4), "encoder_hidden_states": _text(g, 8, 32),
                   "timestep": _unit_steps(g), "img_ids": _ids4(grid=(4, 4)),
                   "txt_ids": _ids4(8)}),
    "ChromaTransformer2DModel": Spec(NOISE, dict(
        _without(_FLUX, "pooled_projection_dim"), approximator_num_channels=8,
        approximator_hidden_dim=16, approximator_layers=1),
        lambda g: _flux_inputs(g, pooled=0)),
    "BriaTransformer2DModel": Spec(NOISE, dict(
        _without(_FLUX, "pooled_projection_dim"), attention_head_dim=8, axes_dims_rope=(0, 4, 4)),
        lambda g: _flux_inputs(g, pooled=0)),
    "BriaFiboTransformer2DModel": Spec(NOISE, dict(
        _without(_FLUX, "pooled_projection_dim"), attention_head_dim=8, text_encoder_dim=16,
        axes_dims_rope=(0, 4, 4)),
        # A hidden state of the text encoder per block (num_layers + num_single_layers).
        lambda g: dict(_flux_inputs(g, pooled=0), layer_a=_text(g, 8, 16),
                       layer_b=_text(g, 8, 16)),
        lists={"text_encoder_layers": ("layer_a", "layer_b")}),
    "BriaFibo2Transformer2DModel": Spec(NOISE, dict(
        in_channels=4, patch_size=2, dim=32, n_layers=2, n_refiner_layers=1, n_heads=2,
        cap_feat_dim=16, injection_layer_ids=(1,), perceiver_num_layers=1,
        min_num_gist_tokens=4, max_num_gist_tokens=8, gist_step=4, gist_min_text_len=4,
        gist_max_text_len=16, axes_dims=(4, 6, 6), axes_lens=(64, 32, 32)),
        # The text features: the Perceiver's bundle, then one per injection layer.
        lambda g: {"hidden_states": _latent(g), "timestep": _unit_steps(g),
                   "encoder_hidden_states": _randn(g, B, 2, 8, 16)}),
    "LongCatImageTransformer2DModel": Spec(NOISE, _FLUX,
                                           lambda g: dict(_flux_inputs(g, pooled=0),
                                                          guidance=_ones(B) * 3.5)),
    "OvisImageTransformer2DModel": Spec(NOISE, dict(
        _without(_FLUX, "pooled_projection_dim"), out_channels=4),
        lambda g: _flux_inputs(g, pooled=0)),
    "CogView3PlusTransformer2DModel": Spec(NOISE, dict(
        patch_size=2, in_channels=4, num_layers=2, attention_head_dim=4, num_attention_heads=2,
        out_channels=4, text_embed_dim=8, time_embed_dim=8, condition_dim=2,
        pos_embed_max_size=8, sample_size=8),
        lambda g: dict(hidden_states=_latent(g), encoder_hidden_states=_text(g, 8, 8),
                       timestep=_steps(g), **_size_conditions())),
    "CogView4Transformer2DModel": Spec(NOISE, dict(
        patch_size=2, in_channels=4, num_layers=2, attention_head_dim=4, num_attention_heads=4,
        out_channels=4, text_embed_dim=8, time_embed_dim=8, condition_dim=4),
        lambda g: dict(hidden_states=_latent(g), encoder_hidden_states=_text(g, 8, 8),
                       timestep=_steps(g), **_size_conditions())),
    "GlmImageTransformer2DModel": Spec(NOISE, dict(
        patch_size=2, in_channels=4, out_channels=4, num_layers=1, attention_head_dim=8,
        num_attention_heads=2, text_embed_dim=32, time_embed_dim=16, condition_dim=8,
        prior_vq_quantizer_codebook_size=64), _glm_image_inputs),
    "ErnieImageTransformer2DModel": Spec(NOISE, dict(
        hidden_size=16, num_attention_heads=1, num_layers=1, ffn_hidden_size=16, in_channels=4,
        out_channels=4, patch_size=1, text_in_dim=16, rope_theta=256, rope_axes_dim=(8, 4, 4),
        eps=1e-6, qk_layernorm=True),
        # Text of two lengths in one padded batch.
        lambda g: {"hidden_states": _latent(g), "timestep": _unit_steps(g),
                   "text_bth": _text(g, 8, 16), "text_lens": torch.tensor([8, 5])}),
    "HiDreamImageTransformer2DModel": Spec(NOISE, dict(
        patch_size=2, in_channels=4, out_channels=4, num_layers=1, num_single_layers=1,
        attention_head_dim=8, num_attention_heads=4, caption_channels=(8, 4), text_emb_dim=8,
        # Every routed expert active: no top-k choice between tied scores. In train() mode the
        # experts run on the tokens routed to them (the eval path runs under no_grad) and the
        # prediction stays in patches, the layout the labels then take.
        num_routed_experts=2, num_activated_experts=2, axes_dims_rope=(4, 2, 2),
        max_resolution=(16, 16), llama_layers=(0, 1)),
        lambda g: {"hidden_states": _latent(g, 4, 16), "timesteps": _steps(g),
                   "encoder_hidden_states_t5": _text(g, 8, 8),
                   # Llama's hidden states of the two layers in llama_layers.
                   "encoder_hidden_states_llama3": _randn(g, 2, B, 8, 4),
                   "pooled_embeds": _randn(g, B, 8)}),
    "HunyuanImageTransformer2DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=8,
        num_layers=1, num_single_layers=1, num_refiner_layers=1, mlp_ratio=2.0,
        patch_size=(1, 1), text_embed_dim=16, rope_axes_dim=(4, 4)),
        lambda g: {"hidden_states": _latent(g), "timestep": _steps(g).float(),
                   "encoder_hidden_states": _text(g, 6, 16),
                   "encoder_attention_mask": _ones(B, 6)}),
    "Ideogram4Transformer2DModel": Spec(NOISE, dict(
        in_channels=16, num_layers=2, attention_head_dim=8, num_attention_heads=4,
        intermediate_size=32, adaln_dim=16, llm_features_dim=24, rope_theta=10_000,
        mrope_section=(2, 1, 1), norm_eps=1e-5), _ideogram_inputs),
    "Krea2Transformer2DModel": Spec(NOISE, dict(
        in_channels=16, num_layers=2, attention_head_dim=8, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=32, timestep_embed_dim=8,
        text_hidden_dim=16, num_text_layers=3, text_num_attention_heads=2,
        text_num_key_value_heads=1, text_intermediate_size=16, num_layerwise_text_blocks=1,
        num_refiner_text_blocks=1, axes_dims_rope=(4, 2, 2), rope_theta=1000.0,
        norm_eps=1e-5), _krea_inputs),
    "NucleusMoEImageTransformer2DModel": Spec(NOISE, dict(
        _QWEN_IMAGE, moe_enabled=False), _qwen_image_inputs, static=_QWEN_SHAPES),
    "OmniGenTransformer2DModel": Spec(NOISE, dict(
        hidden_size=16, num_attention_heads=4, num_key_value_heads=4, intermediate_size=32,
        num_layers=2, pad_token_id=0, vocab_size=100, in_channels=4, time_step_dim=4,
        rope_scaling={"long_factor": [1, 2], "short_factor": [1, 2]}),
        # Text to image: no input images.
        _omnigen_inputs, static=dict(input_img_latents=[], input_image_sizes={})),
    "PRXTransformer2DModel": Spec(NOISE, dict(
        in_channels=4, patch_size=2, context_in_dim=16, hidden_size=32, mlp_ratio=2.0,
        num_heads=2, depth=2, axes_dim=(8, 8)),
        lambda g: {"hidden_states": _latent(g), "timestep": _unit_steps(g),
                   "encoder_hidden_states": _text(g, 8, 16)}),
    "QwenImageTransformer2DModel": Spec(NOISE, _QWEN_IMAGE, _qwen_image_inputs,
                                        static=_QWEN_SHAPES),
    # Its prediction covers the whole joint sequence (text slots too), as its forward returns.
    "QwenImage21Transformer2DModel": Spec(NOISE, dict(
        patch_size=1, in_channels=4, out_channels=4, num_layers=2, attention_head_dim=16,
        num_attention_heads=2, context_in_dim=16, mlp_ratio=2, axes_dims_rope=(8, 4, 4)),
        lambda g: {"hidden_states": _randn(g, B, 16, 4), "encoder_hidden_states": _text(g, 8, 16),
                   "timestep": _unit_steps(g), "img_mask": _qwen21_slots(8, 16),
                   "encoder_hidden_states_mask": _ones(B, 8, dtype=torch.bool)},
        static=dict(img_shapes=[[(1, 4, 4)]] * B)),
    "ZImageTransformer2DModel": Spec(NOISE, _Z_IMAGE, _z_image_inputs, lists=_Z_IMAGE_LISTS),

    # ---------------------------------------------------------------- video transformers
    # CogVideoX 1.5: latents (batch, frames, channels, h, w), patches over time too.
    "CogVideoXTransformer3DModel": Spec(NOISE, dict(
        num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
        time_embed_dim=8, text_embed_dim=8, num_layers=2, sample_width=8, sample_height=8,
        sample_frames=9, patch_size=2, patch_size_t=2, temporal_compression_ratio=4,
        max_text_seq_length=8, use_rotary_positional_embeddings=True),
        lambda g: {"hidden_states": _randn(g, B, 2, 4, 8, 8),
                   "encoder_hidden_states": _text(g, 8, 8), "timestep": _steps(g)}),
    "ConsisIDTransformer3DModel": Spec(NOISE, dict(
        num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
        time_embed_dim=2, text_embed_dim=8, num_layers=1, sample_width=8, sample_height=8,
        sample_frames=8, patch_size=2, temporal_compression_ratio=4, max_text_seq_length=8,
        cross_attn_interval=1, is_kps=False, is_train_face=True, cross_attn_dim_head=1,
        cross_attn_num_heads=1, LFE_id_dim=2, LFE_vit_dim=2, LFE_depth=5, LFE_dim_head=8,
        LFE_num_heads=2, LFE_num_id_token=1, LFE_num_querie=1, LFE_output_dim=10,
        LFE_ff_mult=1, LFE_num_scale=1),
        # The identity: a face embedding and one layer of the face ViT's hidden states.
        lambda g: {"hidden_states": _randn(g, B, 1, 4, 8, 8),
                   "encoder_hidden_states": _text(g, 8, 8), "timestep": _steps(g),
                   "id_cond": _randn(g, B, 2), "vit_0": _randn(g, B, 2, 2)},
        lists={"id_vit_hidden": ("vit_0",)}),
    "AllegroTransformer3DModel": Spec(NOISE, dict(
        num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
        num_layers=1, cross_attention_dim=16, sample_width=8, sample_height=8,
        sample_frames=8, caption_channels=8),
        lambda g: {"hidden_states": _video(g), "encoder_hidden_states": _text(g, 8, 8),
                   "timestep": _steps(g)}),
    "LatteTransformer3DModel": Spec(NOISE, dict(
        sample_size=8, num_layers=1, patch_size=2, attention_head_dim=4, num_attention_heads=2,
        caption_channels=8, in_channels=4, cross_attention_dim=8, out_channels=8,
        attention_bias=True, activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
        norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
        video_length=2),
        lambda g: {"hidden_states": _video(g), "encoder_hidden_states": _text(g, 8, 8),
                   "timestep": _steps(g)}),
    "MochiTransformer3DModel": Spec(NOISE, dict(
        patch_size=2, num_attention_heads=2, attention_head_dim=8, num_layers=2,
        pooled_projection_dim=16, in_channels=4, qk_norm="rms_norm", text_embed_dim=16,
        time_embed_dim=4, activation_fn="swiglu", max_sequence_length=8),
        lambda g: {"hidden_states": _video(g), "encoder_hidden_states": _text(g, 8, 16),
                   "timestep": _steps(g),
                   "encoder_attention_mask": _ones(B, 8, dtype=torch.bool)}),
    "CosmosTransformer3DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=12,
        num_layers=2, mlp_ratio=2, text_embed_dim=16, adaln_lora_dim=4, max_size=(4, 16, 16),
        # The padding mask is resized with torchvision, which the zoo does without: off.
        patch_size=(1, 2, 2), rope_scale=(2.0, 1.0, 1.0), concat_padding_mask=False,
        extra_pos_embed_type="learnable"),
        lambda g: {"hidden_states": _video(g, 4, 1, 8), "timestep": _steps(g),
                   "encoder_hidden_states": _text(g, 12, 16), "attention_mask": _ones(B, 12)},
        static=dict(fps=30)),
    "EasyAnimateTransformer3DModel": Spec(NOISE, dict(
        attention_head_dim=16, num_attention_heads=2, in_channels=4, mmdit_layers=1,
        num_layers=2, out_channels=4, patch_size=2, sample_height=16, sample_width=16,
        text_embed_dim=16, time_embed_dim=8, time_position_encoding_type="3d_rope",
        timestep_activation_fn="silu"),
        lambda g: {"hidden_states": _video(g), "timestep": _steps(g),
                   "encoder_hidden_states": _text(g, 8, 16)}),
    "HunyuanVideoTransformer3DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=10,
        num_layers=1, num_single_layers=1, num_refiner_layers=1, patch_size=1, patch_size_t=1,
        guidance_embeds=True, text_embed_dim=16, pooled_projection_dim=8,
        rope_axes_dim=(2, 4, 4)),
        lambda g: {"hidden_states": _video(g, 4, 1, 8), "timestep": _steps(g).float(),
                   "encoder_hidden_states": _text(g, 8, 16), "pooled_projections": _randn(g, B, 8),
                   "encoder_attention_mask": _ones(B, 8), "guidance": _steps(g).float()}),
    "HunyuanVideoFramepackTransformer3DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=10,
        num_layers=1, num_single_layers=1, num_refiner_layers=1, patch_size=2, patch_size_t=1,
        guidance_embeds=True, text_embed_dim=16, pooled_projection_dim=8,
        rope_axes_dim=(2, 4, 4), has_image_proj=True, image_proj_dim=16,
        has_clean_x_embedder=True), _framepack_inputs),
    # Its ByT5 glyph-text projection has a fixed width of 2048: most of its parameters.
    "HunyuanVideo15Transformer3DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=8,
        num_layers=2, num_refiner_layers=1, mlp_ratio=2.0, patch_size=1, patch_size_t=1,
        text_embed_dim=16, text_embed_2_dim=8, image_embed_dim=12, rope_axes_dim=(2, 2, 4),
        target_size=16, task_type="t2v"),
        lambda g: {"hidden_states": _video(g, 4, 1, 8), "timestep": _unit_steps(g) * 1000,
                   "encoder_hidden_states": _text(g, 6, 16),
                   "encoder_hidden_states_2": _text(g, 4, 8),
                   "encoder_attention_mask": _ones(B, 6), "encoder_attention_mask_2": _ones(B, 4),
                   # Text to video: no image, its embedding zero.
                   "image_embeds": torch.zeros(B, 3, 12)}),
    # Packed latents: (batch, frames * h * w, channels).
    "LTXVideoTransformer3DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=8,
        cross_attention_dim=16, num_layers=1, qk_norm="rms_norm_across_heads",
        caption_channels=16),
        lambda g: {"hidden_states": _randn(g, B, 2 * 8 * 8, 4),
                   "encoder_hidden_states": _text(g, 8, 16), "timestep": _steps(g),
                   "encoder_attention_mask": _ones(B, 8)},
        static=dict(num_frames=2, height=8, width=8)),
    # Video and audio denoised together; the video prediction is the main output.
    "LTX2VideoTransformer3DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=4, patch_size=1, patch_size_t=1, num_attention_heads=2,
        attention_head_dim=8, cross_attention_dim=16, audio_in_channels=4,
        audio_out_channels=4, audio_num_attention_heads=2, audio_attention_head_dim=4,
        audio_cross_attention_dim=8, num_layers=2, qk_norm="rms_norm_across_heads",
        caption_channels=16, rope_double_precision=False),
        lambda g: {"hidden_states": _randn(g, B, 2 * 8 * 8, 4),
                   "audio_hidden_states": _randn(g, B, 9, 4),
                   "encoder_hidden_states": _text(g, 8, 16),
                   "audio_encoder_hidden_states": _text(g, 8, 16),
                   "timestep": _unit_steps(g) * 1000, "encoder_attention_mask": _ones(B, 8)},
        static=dict(num_frames=2, height=8, width=8, audio_num_frames=9, fps=25.0)),
    "SanaWMLTX2RefinerTransformer3DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=4, patch_size=1, patch_size_t=1, num_attention_heads=2,
        attention_head_dim=8, cross_attention_dim=16, audio_in_channels=4,
        audio_out_channels=4, audio_num_attention_heads=2, audio_attention_head_dim=4,
        audio_cross_attention_dim=8, num_layers=2, caption_channels=16,
        rope_double_precision=False),
        lambda g: {"hidden_states": _randn(g, B, 2 * 8 * 8, 4),
                   "encoder_hidden_states": _text(g, 8, 16),
                   # A timestep per video token, scaled as the refiner's pipeline does.
                   "timestep": (_unit_steps(g) * 1000)[:, None].expand(B, 128).clone()},
        prepare=_refiner_rope),
    "SanaVideoTransformer3DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=12,
        num_layers=2, num_cross_attention_heads=2, cross_attention_head_dim=12,
        cross_attention_dim=24, caption_channels=16, mlp_ratio=2.5, sample_size=8,
        patch_size=(1, 2, 2), norm_elementwise_affine=False, norm_eps=1e-6,
        qk_norm="rms_norm_across_heads", rope_max_seq_len=32),
        lambda g: {"hidden_states": _video(g), "encoder_hidden_states": _text(g, 12, 16),
                   "timestep": _steps(g)}),
    "SanaWMTransformer3DModel": Spec(NOISE, dict(
        in_channels=4, num_layers=2, hidden_size=32, num_attention_heads=2,
        linear_head_dim=16, caption_channels=16, chunk_plucker_post_attn_blocks=2,
        mixed_precision="fp32", image_size=64),
        # Timesteps per frame, (batch, 1, frames), and text as (batch, 1, tokens, dim).
        lambda g: {"hidden_states": _video(g),
                   "timestep": _steps(g)[:, None, None].expand(B, 1, 2).float(),
                   "encoder_hidden_states": _randn(g, B, 1, 8, 16),
                   "encoder_attention_mask": _ones(B, 8)}),
    "WanTransformer3DModel": Spec(NOISE, _WAN, _wan_inputs),
    "SkyReelsV2Transformer3DModel": Spec(NOISE, _WAN, _wan_inputs),
    "ChronoEditTransformer3DModel": Spec(NOISE, dict(_WAN, freq_dim=16,
                                                     rope_temporal_skip_len=8), _wan_inputs),
    # The control video: 3 x in_channels (inactive, reactive and mask latents).
    "WanVACETransformer3DModel": Spec(NOISE, dict(_WAN, vace_layers=(0,), vace_in_channels=12),
                                      lambda g: dict(_wan_inputs(g),
                                                     control_hidden_states=_video(g, 12))),
    "WanAnimateTransformer3DModel": Spec(NOISE, dict(
        _WAN, in_channels=12, latent_channels=4, image_dim=16,
        # Small motion and face encoders: at their default sizes they would hold most of the
        # parameters.
        motion_encoder_channel_sizes={"4": 16, "8": 16, "16": 16}, motion_encoder_size=16,
        motion_style_dim=8, motion_dim=4, motion_encoder_dim=16, face_encoder_hidden_dim=16,
        face_encoder_num_heads=2, inject_face_latents_blocks=2), _wan_animate_inputs),
    "WanAnimate2Transformer3DModel": Spec(NOISE, dict(
        patch_size=(1, 2, 2), text_len=8, in_dim=8, dim=32, ffn_dim=64, freq_dim=32,
        text_dim=16, out_dim=4, num_heads=2, num_layers=2, cross_attn_norm=True,
        use_img_emb=True),
        # The reference pass over two latent frames of 4x4 (per-sample lists, no batch axis);
        # the CLIP image features are 1280 wide, which its projection hard-codes.
        lambda g: {"x_0": _randn(g, 4, 2, 4, 4), "x_1": _randn(g, 4, 2, 4, 4),
                   "text_0": _randn(g, 8, 16), "text_1": _randn(g, 8, 16),
                   "cond_0": _randn(g, 4, 2, 4, 4), "cond_1": _randn(g, 4, 2, 4, 4),
                   "timestep": _ones(B), "encoder_hidden_states_image": _randn(g, B, 4, 1280),
                   "offset_grid_sizes": torch.tensor([[2, 2, 2]] * B)},
        static=dict(kv_cache_mode="extract", seq_len=8),
        lists={"hidden_states": ("x_0", "x_1"), "encoder_hidden_states": ("text_0", "text_1"),
               "condition_latents": ("cond_0", "cond_1")},
        prepare=_fresh_kv_cache),
    "HeliosTransformer3DModel": Spec(NOISE, dict(
        _without(_WAN, "rope_max_seq_len"), rope_dim=(4, 4, 4), has_multi_term_memory_patch=True,
        guidance_cross_attn=True, zero_history_timestep=True, is_amplify_history=False),
        _helios_inputs),
    # AnyFlow: Wan with a second ("r") timestep, the one its flow-map step jumps to.
    "AnyFlowTransformer3DModel": Spec(NOISE, dict(
        _without(_WAN, "qk_norm"), gate_value=0.25, deltatime_type="r"), _anyflow_inputs),
    "MotifVideoTransformer3DModel": Spec(NOISE, dict(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=12,
        num_layers=1, num_single_layers=1, num_decoder_layers=0, mlp_ratio=2.0, patch_size=1,
        patch_size_t=1, qk_norm="rms_norm", norm_type="layer_norm", text_embed_dim=16,
        rope_theta=256.0, rope_axes_dim=(4, 4, 4)),
        lambda g: {"hidden_states": _video(g), "encoder_hidden_states": _text(g, 8, 16),
                   "timestep": _steps(g)}),
    "JoyImageEditTransformer3DModel": Spec(NOISE, dict(
        patch_size=(1, 2, 2), in_channels=4, hidden_size=32, num_attention_heads=2,
        text_dim=16, num_layers=2, rope_dim_list=(4, 6, 6), theta=256),
        lambda g: {"hidden_states": _video(g, 4, 1, 8), "encoder_hidden_states": _text(g, 12, 16),
                   "timestep": _unit_steps(g)}),
    "JoyImageEditPlusTransformer3DModel": Spec(NOISE, dict(
        patch_size=(1, 2, 2), in_channels=4, hidden_size=32, num_attention_heads=2,
        text_dim=16, num_layers=2, rope_dim_list=(4, 6, 6), theta=256),
        # The target and a reference image of 4x4 tokens each, as a stack of their 1x2x2
        # patches: (batch, patches, channels, 1, 2, 2).
        lambda g: {"hidden_states": _randn(g, B, 32, 4, 1, 2, 2),
                   "encoder_hidden_states": _text(g, 12, 16), "timestep": _unit_steps(g)},
        static=dict(shape_list=[[(1, 4, 4), (1, 4, 4)]] * B)),
    "Kandinsky5Transformer3DModel": Spec(NOISE, dict(
        in_visual_dim=4, in_text_dim=16, in_text_dim2=8, time_dim=16, out_visual_dim=4,
        patch_size=(1, 2, 2), model_dim=32, ff_dim=64, num_text_blocks=1, num_visual_blocks=2,
        axes_dims=(4, 6, 6)), _kandinsky5_inputs,
        lists={"visual_rope_pos": ("rope_t", "rope_h", "rope_w")}),
    # Video only (no audio latents), channels last: (batch, frames, h, w, channels).
    "Kandinsky6Transformer3DModel": Spec(NOISE, dict(
        in_visual_dim=4, out_visual_dim=4, in_text_dim=16, in_text_dim2=8, time_dim=16,
        patch_size=(1, 2, 2), model_dim=32, ff_dim=64, num_text_blocks=1, num_visual_blocks=2,
        axes_dims=(4, 6, 6), visual_cond=False, in_audio_dim=4, out_audio_dim=4,
        model_dim_a=16, time_dim_a=16, ff_dim_a=32, axes_dims_a=(16,)),
        lambda g: {"hidden_states": _randn(g, B, 2, 8, 8, 4),
                   "encoder_hidden_states": _text(g, 8, 16),
                   "pooled_projections": _randn(g, B, 8), "timestep": _steps(g).float()}),
    "MiniMaxH3Transformer3DModel": Spec(NOISE, dict(
        num_attention_heads=2, attention_head_dim=16, hidden_size=24, num_layers=2,
        num_refiner_layers=1, ffn_dim=32, in_channels=4, audio_in_channels=6,
        patch_size=(1, 2, 2), text_dim=8, freq_dim=8, time_embed_hidden_dim=24,
        time_embed_dim=16, rope_freq_dim=2), _minimax_h3_inputs),

    # ---------------------------------------------------------------- ControlNets
    "ControlNetModel": Spec(CONTROL, _CONTROLNET,
                            lambda g: dict(_sdxl_inputs(g), controlnet_cond=_latent(g, 3, 32)),
                            nest=_SDXL_NEST),
    # Two control images (of the first and of the second type) at once.
    "ControlNetUnionModel": Spec(CONTROL, dict(
        _CONTROLNET, num_control_type=2, num_trans_channel=32, num_trans_head=2,
        num_proj_channel=32),
        lambda g: dict(_sdxl_inputs(g), cond_a=_latent(g, 3, 32), cond_b=_latent(g, 3, 32),
                       control_type=_ones(B, 2)),
        static=dict(control_type_idx=[0, 1]), nest=_SDXL_NEST,
        lists={"controlnet_cond": ("cond_a", "cond_b")}),
    # SparseCtrl: control latents for some frames of the video, the mask saying which.
    "SparseControlNetModel": Spec(CONTROL, dict(
        block_out_channels=(16, 32), layers_per_block=1, norm_num_groups=8,
        down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"),
        cross_attention_dim=16, attention_head_dim=8, motion_num_attention_heads=2,
        motion_max_seq_length=8, conditioning_channels=4,
        conditioning_embedding_out_channels=(8, 16)),
        lambda g: {"sample": _video(g), "timestep": _steps(g),
                   "encoder_hidden_states": _randn(g, 2 * B, 4, 16),
                   "controlnet_cond": _video(g), "conditioning_mask": _ones(B, 1, 2, 8, 8)}),
    "SD3ControlNetModel": Spec(CONTROL, dict(_SD3, num_layers=1, extra_conditioning_channels=0),
                               lambda g: dict(_sd3_inputs(g), controlnet_cond=_latent(g, 4, 16))),
    "FluxControlNetModel": Spec(CONTROL, dict(_FLUX, guidance_embeds=False),
                                lambda g: dict(_flux_inputs(g),
                                               controlnet_cond=_randn(g, B, 16, 4))),
    # A control block per layer of the first half but one: four layers make one.
    "HunyuanDiT2DControlNetModel": Spec(CONTROL, dict(_HUNYUAN_DIT, transformer_num_layers=4),
                                        lambda g: dict(_hunyuan_dit_inputs(g),
                                                       controlnet_cond=_latent(g)),
                                        lists=_HUNYUAN_ROPE),
    "SanaControlNetModel": Spec(CONTROL, dict(_SANA, num_layers=2),
                                lambda g: dict(_sana_inputs(g), controlnet_cond=_latent(g))),
    "QwenImageControlNetModel": Spec(CONTROL, _QWEN_IMAGE,
                                     lambda g: dict(_qwen_image_inputs(g),
                                                    controlnet_cond=_randn(g, B, 4, 16)),
                                     static=_QWEN_SHAPES),
    "ZImageControlNetModel": Spec(CONTROL, dict(
        control_layers_places=(0,), control_refiner_layers_places=(0,), control_in_dim=4,
        add_control_noise_refiner="control_layers",
        **{k: _Z_IMAGE[k] for k in ("all_patch_size", "all_f_patch_size", "dim",
                                    "n_refiner_layers", "n_heads", "n_kv_heads", "qk_norm")}),
        lambda g: dict(_z_image_inputs(g), control_0=_randn(g, 4, 1, 8, 8),
                       control_1=_randn(g, 4, 1, 8, 8)),
        lists=dict(_Z_IMAGE_LISTS, control_context=("control_0", "control_1")),
        make=_z_image_controlnet),
    "CosmosControlNetModel": Spec(CONTROL, dict(
        n_controlnet_blocks=2, in_channels=6, latent_channels=6, model_channels=24,
        num_attention_heads=2, attention_head_dim=12, mlp_ratio=2, text_embed_dim=16,
        adaln_lora_dim=4, patch_size=(1, 2, 2), max_size=(4, 16, 16),
        rope_scale=(2.0, 1.0, 1.0), img_context_dim_in=16, img_context_dim_out=24),
        # Control and noisy latents of 4 channels, the condition and padding masks, and the
        # text and image context. The padding mask is one for the batch: the forward repeats it
        # batch-size times.
        lambda g: {"controls_latents": _video(g, 4, 1, 8), "latents": _video(g, 4, 1, 8),
                   "timestep": _unit_steps(g), "text": _text(g, 8, 16), "image": _text(g, 4, 16),
                   "condition_mask": _ones(B, 1, 1, 8, 8), "padding_mask": torch.zeros(1, 1, 8, 8)},
        lists={"encoder_hidden_states": ("text", "image")}, requires=("torchvision",),
        # It takes the text and image context as a tuple, not a list.
        prepare=lambda inner, kwargs: dict(kwargs, encoder_hidden_states=tuple(kwargs["encoder_hidden_states"]))),

    # ---------------------------------------------------------------- autoencoders
    "AutoencoderKL": Spec(AUTOENCODING, dict(
        block_out_channels=(32, 64), in_channels=3, out_channels=3, norm_num_groups=8,
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
        latent_channels=4, layers_per_block=1, sample_size=16),
        lambda g: {"sample": _latent(g, 3, 16)}),
    # Its decoder also takes the inpainting mask (all ones: nothing of the input is kept).
    "AsymmetricAutoencoderKL": Spec(AUTOENCODING, dict(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
        down_block_out_channels=(16, 32), layers_per_down_block=1,
        up_block_types=("UpDecoderBlock2D",) * 2, up_block_out_channels=(16, 32),
        layers_per_up_block=1, latent_channels=4, norm_num_groups=8, sample_size=16),
        lambda g: {"sample": _latent(g, 3, 16), "mask": _ones(B, 1, 16, 16)}),
    "AutoencoderTiny": Spec(AUTOENCODING, dict(
        in_channels=3, out_channels=3, encoder_block_out_channels=(16, 16),
        decoder_block_out_channels=(16, 16), num_encoder_blocks=(1, 1),
        num_decoder_blocks=(1, 1), latent_channels=4),
        lambda g: {"sample": _latent(g, 3, 16)}),
    "VQModel": Spec(AUTOENCODING, dict(
        block_out_channels=(32, 64), in_channels=3, out_channels=3, norm_num_groups=8,
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
        latent_channels=4, layers_per_block=1, num_vq_embeddings=32, vq_embed_dim=4,
        sample_size=16),
        lambda g: {"sample": _latent(g, 3, 16)}),
    "AutoencoderDC": Spec(AUTOENCODING, dict(
        in_channels=3, latent_channels=4, attention_head_dim=2,
        encoder_block_types=("ResBlock", "EfficientViTBlock"),
        decoder_block_types=("ResBlock", "EfficientViTBlock"),
        encoder_block_out_channels=(8, 8), decoder_block_out_channels=(8, 8),
        encoder_qkv_multiscales=((), (5,)), decoder_qkv_multiscales=((), (5,)),
        encoder_layers_per_block=(1, 1), decoder_layers_per_block=(1, 1),
        downsample_block_type="conv", upsample_block_type="interpolate",
        decoder_norm_types="rms_norm", decoder_act_fns="silu"),
        lambda g: {"sample": _latent(g, 3, 16)}),
    "AutoencoderKLFlux2": Spec(AUTOENCODING, dict(
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
        block_out_channels=(16, 32), layers_per_block=1, latent_channels=8, norm_num_groups=8,
        sample_size=16),
        lambda g: {"sample": _latent(g, 3, 16)}),
    # Several VAEs hard-code 32 groups in their norms: 32 channels at the least.
    "AutoencoderKLHunyuanImage": Spec(AUTOENCODING, dict(
        in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(32, 64),
        layers_per_block=1, spatial_compression_ratio=2, sample_size=16),
        lambda g: {"sample": _latent(g, 3, 16)}),
    "AutoencoderKLKVAE": Spec(AUTOENCODING, dict(
        in_channels=3, channels=32, num_enc_blocks=1, num_dec_blocks=1, z_channels=4,
        double_z=True, ch_mult=(1, 2), sample_size=16),
        lambda g: {"sample": _latent(g, 3, 16)}),
    # A randomly initialised DINOv2 encoder (Transformers') of one layer, 64 wide (its heads
    # are 64 wide), and a ViT decoder.
    "AutoencoderRAE": Spec(AUTOENCODING, dict(
        encoder_type="dinov2", encoder_hidden_size=64, encoder_patch_size=4,
        encoder_num_hidden_layers=1, encoder_input_size=16, patch_size=4, image_size=16,
        decoder_hidden_size=32, decoder_num_hidden_layers=1, decoder_num_attention_heads=4,
        decoder_intermediate_size=64, num_channels=3, encoder_norm_mean=[0.5] * 3,
        encoder_norm_std=[0.5] * 3, noise_tau=0.0, reshape_to_2d=True),
        lambda g: {"sample": _latent(g, 3, 16)}),
    # Stable Video Diffusion's decoder: the batch is the frames of one video.
    "AutoencoderKLTemporalDecoder": Spec(AUTOENCODING, dict(
        block_out_channels=(32, 64), down_block_types=("DownEncoderBlock2D",) * 2,
        latent_channels=4, layers_per_block=1),
        lambda g: {"sample": _latent(g, 3, 16)}, static=dict(num_frames=B)),
    # Video autoencoders: (batch, channels, frames, h, w), frames as their causal temporal
    # compression wants them (1 + a multiple of it, mostly).
    "AutoencoderKLCogVideoX": Spec(AUTOENCODING, dict(
        down_block_types=("CogVideoXDownBlock3D",) * 4, up_block_types=("CogVideoXUpBlock3D",) * 4,
        block_out_channels=(8, 8, 8, 8), latent_channels=4, layers_per_block=1,
        norm_num_groups=2, temporal_compression_ratio=4),
        lambda g: {"sample": _video(g, 3, 8, 16)}),
    "AutoencoderKLCosmos": Spec(AUTOENCODING, dict(
        latent_channels=4, encoder_block_out_channels=(8, 8, 8, 8),
        decode_block_out_channels=(8, 8, 8, 8), attention_resolutions=(8,), resolution=64,
        num_layers=2, patch_size=4, patch_type="haar", spatial_compression_ratio=4,
        temporal_compression_ratio=4),
        lambda g: {"sample": _video(g, 3, 9, 16)}),
    "AutoencoderKLHunyuanVideo": Spec(AUTOENCODING, dict(
        latent_channels=4, down_block_types=("HunyuanVideoDownBlock3D",) * 4,
        up_block_types=("HunyuanVideoUpBlock3D",) * 4, block_out_channels=(8, 8, 8, 8),
        layers_per_block=1, norm_num_groups=4, spatial_compression_ratio=8,
        temporal_compression_ratio=4, mid_block_add_attention=True),
        lambda g: {"sample": _video(g, 3, 9, 16)}),
    # Small inputs for these two: at 16 x 16 pixels and 5 frames compiled mode took minutes
    # (their mid-block attention builds its causal mask a row at a time, in a Python loop over
    # the latent positions). A batch of one for the first: its (batch, L, L) mask is broadcast
    # against the batch a second time.
    "AutoencoderKLHunyuanVideo15": Spec(AUTOENCODING, dict(
        latent_channels=4, block_out_channels=(16, 32), layers_per_block=1,
        spatial_compression_ratio=2, temporal_compression_ratio=2),
        lambda g: {"sample": _randn(g, 1, 3, 3, 8, 8)}),
    "AutoencoderKLHunyuanImageRefiner": Spec(AUTOENCODING, dict(
        latent_channels=4, block_out_channels=(16, 32), layers_per_block=1,
        spatial_compression_ratio=2, temporal_compression_ratio=2),
        lambda g: {"sample": _video(g, 3, 3, 8)}),
    "AutoencoderKLKVAEVideo": Spec(AUTOENCODING, dict(
        ch=32, ch_mult=(1, 2), num_res_blocks=1, in_channels=3, out_ch=3, z_channels=4,
        temporal_compress_times=2),
        lambda g: {"sample": _video(g, 3, 3, 16)}),
    "AutoencoderKLLTXVideo": Spec(AUTOENCODING, dict(
        latent_channels=8, block_out_channels=(8, 8, 8, 8),
        decoder_block_out_channels=(8, 8, 8, 8), layers_per_block=(1, 1, 1, 1, 1),
        decoder_layers_per_block=(1, 1, 1, 1, 1),
        spatio_temporal_scaling=(True, True, False, False),
        decoder_spatio_temporal_scaling=(True, True, False, False),
        decoder_inject_noise=(False,) * 5, upsample_residual=(False,) * 4,
        upsample_factor=(1, 1, 1, 1), timestep_conditioning=False, patch_size=1,
        patch_size_t=1, encoder_causal=True, decoder_causal=False),
        lambda g: {"sample": _video(g, 3, 9, 16)}),
    "AutoencoderKLLTX2Video": Spec(AUTOENCODING, dict(
        latent_channels=8, block_out_channels=(8, 8, 8, 8),
        decoder_block_out_channels=(16, 32, 64), layers_per_block=(1, 1, 1, 1, 1),
        decoder_layers_per_block=(1, 1, 1, 1), spatio_temporal_scaling=(True, True, True, True),
        decoder_spatio_temporal_scaling=(True, True, True), decoder_inject_noise=(False,) * 4,
        downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
        upsample_residual=(True, True, True), upsample_factor=(2, 2, 2),
        timestep_conditioning=False, patch_size=1, patch_size_t=1, encoder_causal=True,
        decoder_causal=False),
        lambda g: {"sample": _video(g, 3, 9, 16)}),
    "AutoencoderKLMagvit": Spec(AUTOENCODING, dict(
        latent_channels=4, block_out_channels=(8, 8, 8, 8),
        down_block_types=("SpatialDownBlock3D",) + ("SpatialTemporalDownBlock3D",) * 3,
        up_block_types=("SpatialUpBlock3D",) + ("SpatialTemporalUpBlock3D",) * 3,
        layers_per_block=1, norm_num_groups=8, spatial_group_norm=True),
        lambda g: {"sample": _video(g, 3, 9, 16)}),
    # Frames enough for its decoder's temporal chunking at the released clip length (17).
    "AutoencoderKLMiniMaxH3": Spec(AUTOENCODING, dict(
        latent_channels=4, block_out_channels=(8, 16), layers_per_block=1,
        spatial_downsample_factors=(2, 2), temporal_downsample_factors=(2, 2),
        norm_num_groups=8, decoder_num_layers=2, decoder_num_attention_heads=2,
        decoder_attention_head_dim=8, decoder_num_register_tokens=2, decoder_ffn_mult=2,
        latents_mean=(0.0,) * 4, latents_std=(1.0,) * 4),
        lambda g: {"sample": _video(g, 3, 22, 8)}),
    # Mochi's encoder takes 3 channels with their Fourier features (15).
    "AutoencoderKLMochi": Spec(AUTOENCODING, dict(
        in_channels=15, out_channels=3, latent_channels=4,
        encoder_block_out_channels=(32,) * 4, decoder_block_out_channels=(32,) * 4,
        layers_per_block=(1, 1, 1, 1, 1)),
        lambda g: {"sample": _video(g, 3, 7, 16)}),
    "AutoencoderKLWan": Spec(AUTOENCODING, dict(
        base_dim=8, z_dim=4, dim_mult=[1, 2], num_res_blocks=1, temperal_downsample=[True]),
        lambda g: {"sample": _video(g, 3, 5, 16)}),
    # Qwen-Image's VAEs: Wan's, on an image as a one-frame video.
    "AutoencoderKLQwenImage": Spec(AUTOENCODING, dict(
        base_dim=8, z_dim=4, dim_mult=[1, 2], num_res_blocks=1, temperal_downsample=[False],
        latents_mean=[0.0] * 4, latents_std=[1.0] * 4),
        lambda g: {"sample": _video(g, 3, 1, 16)}),
    # Its residual shortcuts fold space into channels: every stage must keep its width times
    # the fold divisible, which (16, 32, 32) does.
    "AutoencoderKLQwenImage21": Spec(AUTOENCODING, dict(
        base_dim=16, decoder_base_dim=16, z_dim=4, dim_mult=[1, 2, 2], num_res_blocks=1,
        temperal_downsample=[False, True], latents_mean=[0.0] * 4, latents_std=[1.0] * 4,
        in_channels=3, out_channels=3),
        lambda g: {"sample": _video(g, 3, 1, 16)}),
    "AutoencoderVidTok": Spec(AUTOENCODING, dict(
        in_channels=3, out_channels=3, ch=16, ch_mult=(1, 2), z_channels=4, num_res_blocks=1,
        regularizer="kl", is_causal=False),
        lambda g: {"sample": _video(g, 3, 4, 16)}),
    # Audio autoencoders: waveforms (batch, channels, samples) or spectrograms.
    "AutoencoderOobleck": Spec(AUTOENCODING, dict(
        encoder_hidden_size=12, decoder_channels=12, decoder_input_channels=6, audio_channels=2,
        downsampling_ratios=[2, 4], channel_multiples=[1, 2]),
        lambda g: {"sample": _randn(g, B, 2, 24)}),
    "AutoencoderSAME": Spec(AUTOENCODING, dict(
        audio_channels=2, patch_size=4, encoder_channels=16, encoder_c_mults=(1, 2),
        encoder_strides=(2, 2), encoder_transformer_depths=(1, 1), latent_dim=8,
        use_differential_attention=False, dim_heads=8, ff_mult=2),
        lambda g: {"sample": _randn(g, B, 2, 128)}),
    "AutoencoderKLKVAEAudio": Spec(AUTOENCODING, dict(
        encoder_dim=8, encoder_rates=(2, 2), latent_dim=16, codebook_dim=8, decoder_dim=16,
        decoder_rates=(2, 2), num_channels=1, attn_num_heads=2),
        lambda g: {"sample": _randn(g, B, 1, 64)}),
    "AutoencoderKLMiniMaxH3Audio": Spec(AUTOENCODING, dict(
        encoder_dim=4, encoder_rates=(2, 2), latent_dim=32, latent_channels=8,
        num_attention_heads=2, decoder_dim=16, decoder_rates=(2, 2), decoder_kernel_sizes=(4, 4),
        resblock_kernel_sizes=(3, 7), resblock_dilation_sizes=((1, 3), (1, 3)),
        latents_mean=[0.0] * 8, latents_std=[1.0] * 8),
        lambda g: {"sample": _randn(g, B, 1, 32)}),
    # A stereo mel spectrogram (batch, channels, frames, mel bins) of 4k + 1 frames, which its
    # causal decoder gives back as many.
    "AutoencoderKLLTX2Audio": Spec(AUTOENCODING, dict(
        in_channels=2, output_channels=2, latent_channels=4, base_channels=16,
        ch_mult=(1, 2, 4), resolution=16, num_res_blocks=1, norm_type="pixel",
        causality_axis="height", is_causal=True, mel_bins=16, double_z=True),
        lambda g: {"sample": _randn(g, B, 2, 9, 16)}),
}


def _flat_tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat_tensors(v)]
    if isinstance(value, dict):  # Z-Image's ControlNet: {layer: residual}
        return [t for k in sorted(value) for t in _flat_tensors(value[k])]
    return []


class DiffusersModel(ZooModel):
    """A diffusers module with the inputs of its row in SPECS and its task's loss. Each class
    gets a subclass of its own name (see `zoo_model.named_subclass`), which the zoo's reports show."""

    def __init__(self, inner, spec):
        super().__init__(inner)
        self.spec = spec
        takes = inspect.signature(inner.forward).parameters
        self.fixed = {"return_dict": False} if "return_dict" in takes else {}
        if "sample_posterior" in takes:
            self.fixed["sample_posterior"] = False

    def _call(self, inputs):
        kwargs = dict(inputs)
        for group, names in self.spec.nest.items():
            kwargs[group] = {name: kwargs.pop(name) for name in names}
        for group, names in self.spec.lists.items():
            kwargs[group] = [kwargs.pop(name) for name in names]
        if self.spec.prepare is not None:
            kwargs = self.spec.prepare(self.inner, kwargs)
        return self.inner(**kwargs, **self.spec.static, **self.fixed)

    def _outputs(self, inputs):
        """(main output, the other outputs the loss covers)."""
        out = self._call(inputs)
        if self.spec.kind == CONTROL:
            residuals = _flat_tensors(out)
            return residuals[-1], residuals[:-1]
        main = out[0]
        if isinstance(main, (list, tuple)):  # a prediction per sample (list inputs)
            main = torch.stack(list(main))
        return main, []

    def example_inputs(self, seed=0):
        g = torch.Generator().manual_seed(seed)
        inputs = self.spec.inputs(g)
        if self.spec.kind == AUTOENCODING:
            return inputs, inputs["sample"].clone()
        # The target has the shape of the train() prediction: twice the input's channels for
        # DiTs that learn the variance, the mid block's for ControlNets, patches for HiDream.
        training = self.training
        with torch.no_grad():
            shape = self.train()._outputs(inputs)[0].shape
        self.train(training)
        return inputs, torch.randn(shape, generator=g)

    def forward(self, labels=None, **inputs):
        main, others = self._outputs(inputs)
        result = {"sample": main}
        if others:
            result["residuals"] = others
        if labels is not None:
            loss = F.mse_loss(main, labels)
            if others:
                loss = loss + sum(r.pow(2).mean() for r in others) / len(others)
            result["loss"] = loss
        return result


def _diffusers():
    try:
        import diffusers
        import diffusers.models
    except Exception:  # noqa: BLE001 - a broken installation counts as none
        return None
    return diffusers


def _class(name):
    """The class from diffusers' top level, or from diffusers.models (DualTransformer2DModel)."""
    diffusers = _diffusers()
    if diffusers is None:
        return None
    return getattr(diffusers, name, None) or getattr(diffusers.models, name, None)


def _missing(packages):
    import importlib.util

    return [p for p in packages if importlib.util.find_spec(p) is None]


def entries():
    if _diffusers() is None:
        return []
    return [(f"diffusers/{name}", TASKS[spec.kind == AUTOENCODING], name)
            for name, spec in SPECS.items()
            if _class(name) is not None and not _missing(spec.requires)]


def _without_dropout(cls, config):
    config = dict(config)
    for name, parameter in inspect.signature(cls.__init__).parameters.items():
        if "dropout" in name and name not in config and \
                isinstance(parameter.default, float) and parameter.default:
            config[name] = 0.0
    return config


def build(entry):
    from torch_tpu.tools.model_zoo.compare import NotApplicable, _perturb_constant_parameters

    name = entry.partition("/")[2]
    spec = SPECS.get(name)
    if spec is None:
        raise NotApplicable(f"{entry} is no diffusers entry of the model zoo")
    diffusers = _diffusers()
    if diffusers is None:
        raise NotApplicable("diffusers is not installed")
    cls = _class(name)
    if cls is None:
        raise NotApplicable(f"diffusers {diffusers.__version__} has no class {name}")
    if _missing(spec.requires):
        raise NotApplicable(f"{name} needs {', '.join(_missing(spec.requires))}, not installed")
    config = _without_dropout(cls, spec.config)
    torch.manual_seed(0)
    try:
        inner = cls(**config) if spec.make is None else spec.make(cls, config)
    except Exception as error:  # noqa: BLE001
        first = str(error).splitlines()[0] if str(error) else ""
        raise NotApplicable(f"{name} from its small config: {type(error).__name__}: "
                            f"{first}") from None
    for module in inner.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "dropout_prob", None), float):  # DiT's label dropout
            module.dropout_prob = 0.0
    _perturb_constant_parameters(inner)
    task = TASKS[spec.kind == AUTOENCODING]
    # DualTransformer2DModel is a plain module without a config of its own.
    return getattr(inner, "config", config), task, named_subclass(DiffusersModel, name)(inner, spec)


def family(entry):
    return "diffusion"
