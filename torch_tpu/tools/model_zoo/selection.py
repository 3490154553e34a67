"""Which Hugging Face architectures the zoo runs, and in which family each is counted: the model
types of the task mappings, one task per model type and one model type per modelling module of
transformers (`select`); the CI sample (`QUICK`); the family of each (`family`, with fallbacks
for an architecture whose config cannot be built); and the round-robin order over families
that a full run takes (`interleave_families`)."""
import json
import re

from torch_tpu.tools.model_zoo.configs import EXPERTS, small_config
from torch_tpu.tools.model_zoo.libraries import entries as library_entries
from torch_tpu.tools.model_zoo.libraries import family as library_family
from torch_tpu.tools.model_zoo.libraries import library_of

FAMILIES = ("decoder-only", "encoder-only", "encoder-decoder", "vision", "audio",
            "mixture-of-experts", "state-space", "multimodal", "diffusion")

# A fixed sample for CI: every family, the most common attention and normalisation variants.
QUICK = ("llama", "gpt2", "qwen2_moe", "mixtral", "mamba", "bert", "roberta", "distilbert",
         "t5", "bart", "vit", "resnet", "convnext", "wav2vec2", "whisper",
         "bert@question_answering", "segformer@semantic_segmentation",
         "diffusers/UNet2DConditionModel", "diffusers/DiTTransformer2DModel", "diffusers/AutoencoderKL",
         "timm/resnet", "timm/vision_transformer", "timm/efficientnet")

# Task mappings in the order a model type's one task is chosen: the heads that train on a task's
# loss first; a model type in none of them (a vision backbone, a segmentation or mask model, a
# base model with no head) runs its base model, trained on the mean square of its first output.
TASKS = (
    ("seq2seq_lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("speech_seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
    ("masked_lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("causal_lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("image_classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("ctc", "MODEL_FOR_CTC_MAPPING_NAMES"),
    ("audio_classification", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
    ("sequence_classification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    ("image_text_to_text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
    ("object_detection", "MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES"),
    ("semantic_segmentation", "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES"),
    ("depth_estimation", "MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES"),
    ("backbone", "MODEL_FOR_BACKBONE_MAPPING_NAMES"),
    ("base", "MODEL_MAPPING_NAMES"),
)

# The tasks a widely used model type also runs as an extra entry ("bert@question_answering"),
# where its head uses other ops than its own task's: span logits and their two-position loss,
# per-token logits (an encoder's masked-LM head is a transform and a tied decoder), choices
# folded into the batch, box regression with a matching loss, per-pixel logits and depth maps,
# text generated from an image. A decoder's token classification head is its LM head's linear
# layer again, so decoders skip it. Counted as entries, not as architectures.
EXTRA_TASKS = (
    ("token_classification", "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"),
    ("question_answering", "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES"),
    ("multiple_choice", "MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES"),
    ("object_detection", "MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES"),
    ("semantic_segmentation", "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES"),
    ("depth_estimation", "MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES"),
    ("image_text_to_text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
)
_DECODER_EXTRA_TASKS = ("question_answering", "image_text_to_text")

# Tier one: the model types a user is most likely to bring, run first. Chosen by hand (this
# tool runs offline) from the architectures of the Hub's most-downloaded checkpoints in each
# common task (text generation, fill-mask and sentence embeddings, translation and
# summarisation, speech recognition, image classification and embeddings, detection,
# segmentation, depth, image-text); tier two is every other modelling module, for diversity.
WIDELY_USED = (
    # text generation
    "llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "gemma", "gemma2", "gemma3",
    "phi", "phi3", "gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "mixtral", "starcoder2",
    "olmo2", "deepseek_v3", "granite", "gpt_oss", "smollm3", "mamba",
    # encoders: fill-mask, sentence embeddings, classification
    "bert", "roberta", "distilbert", "xlm-roberta", "deberta-v2", "electra", "albert", "mpnet",
    "modernbert", "camembert",
    # translation, summarisation
    "t5", "mt5", "bart", "mbart", "marian", "pegasus",
    # speech
    "whisper", "wav2vec2", "hubert",
    # vision
    "vit", "clip", "siglip", "dinov2", "resnet", "convnext", "swin", "deit", "beit", "segformer",
    "mobilenet_v2", "detr", "dpt", "depth_anything", "mask2former",
    # image-text
    "llava", "qwen2_vl", "qwen2_5_vl", "paligemma", "blip", "idefics3",
    # diffusion: Stable Diffusion's UNet, VAE and ControlNet, the SD3 and Flux transformers
    "diffusers/UNet2DConditionModel", "diffusers/AutoencoderKL", "diffusers/ControlNetModel",
    "diffusers/SD3Transformer2DModel", "diffusers/FluxTransformer2DModel",
    # timm: the families of its most-downloaded image classifiers and backbones
    "timm/resnet", "timm/vision_transformer", "timm/efficientnet", "timm/convnext",
    "timm/mobilenetv3", "timm/regnet", "timm/eva", "timm/swin_transformer",
)


def _mappings():
    from transformers.models.auto import modeling_auto

    return {task: getattr(modeling_auto, name) for task, name in TASKS}


def _module_of(model_type):
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    return model_type_to_module_name(model_type)


def _task_of(model_type, mappings):
    if "@" in model_type:  # an extra task's entry
        return model_type.partition("@")[2]
    for task, _ in TASKS:
        if model_type in mappings[task]:
            return task
    return None


def head_of(entry, mappings=None):
    """(model type, task, class name) of an entry: its one task's head, or for an extra task's
    entry (model_type@task) that task's."""
    from transformers.models.auto import modeling_auto

    mappings = _mappings() if mappings is None else mappings
    model_type, _, extra = entry.partition("@")
    if extra:
        heads = getattr(modeling_auto, dict(EXTRA_TASKS)[extra])
        return model_type, extra, heads.get(model_type)
    task = _task_of(model_type, mappings)
    return model_type, task, mappings[task][model_type] if task else None


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


def extra_tasks(model_types):
    """[(entry, task, class name)]: the EXTRA_TASKS each model type has a head for, besides its
    own task, as entries named model_type@task."""
    from transformers.models.auto import modeling_auto

    mappings = _mappings()
    out = []
    for model_type in model_types:
        own = _task_of(model_type, mappings)
        for task, name in EXTRA_TASKS:
            heads = getattr(modeling_auto, name)
            if own == "causal_lm" and task not in _DECODER_EXTRA_TASKS:
                continue
            if task != own and model_type in heads:
                out.append((f"{model_type}@{task}", task, heads[model_type]))
    return out


def tiers(selection=None):
    """(tier one, tier two) as lists of entries in the order a full run takes them: tier one is
    the WIDELY_USED model types (as the selection names their modules) and then their extra task
    entries; tier two is the rest of the selection and the other libraries' entries, interleaved
    by family."""
    selection = select() if selection is None else selection
    by_module = {_module_of(t): t for t, _, _ in selection}
    others = library_entries()
    first = [by_module[m] for m in dict.fromkeys(_module_of(t) for t in WIDELY_USED if "/" not in t)
             if m in by_module]
    first += [e for e, _, _ in extra_tasks(first)]
    first += [e for e, _, _ in others if e in WIDELY_USED]
    rest = [entry for entry in selection + others if entry[0] not in first]
    return first, interleave_families(rest)


def interleave_families(selection):
    """The selected model types in round-robin order over their families, so that a partial
    (or resumed) full run covers every family evenly instead of the alphabet's first part."""
    groups = {}
    for model_type, task, _ in selection:
        try:
            fam = family(model_type, task, small_config(model_type.partition("@")[0]))
        except Exception:  # noqa: BLE001 the worker reports why; only the order is decided here
            fam = _guess_family(model_type)
        groups.setdefault(fam, []).append(model_type)
    order = []
    lists = [groups[f] for f in sorted(groups)]
    for i in range(max(map(len, lists), default=0)):
        order += [names[i] for names in lists if i < len(names)]
    return order


def family(model_type, task, config):
    """decoder-only, encoder-only, encoder-decoder, vision, audio, mixture-of-experts,
    state-space or multimodal: a model's inputs decide vision and audio; then a state-space or
    hybrid layer, then routed experts, then an encoder-decoder stack, then a vision or audio
    tower next to the language model; what remains is an encoder (masked LM, classification)
    or a decoder (causal LM). An entry of another library is counted where that library says."""
    if library_of(model_type) != "transformers":
        return library_family(model_type)
    if task in ("image_classification", "object_detection", "semantic_segmentation",
                "depth_estimation", "backbone"):
        return "vision"
    if task == "image_text_to_text":
        return "multimodal"
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
    for key in EXPERTS:
        if re.search(rf'"{key}": ([2-9]|\d\d+)', flat):
            return "mixture-of-experts"
    if getattr(config, "is_encoder_decoder", False) or task == "seq2seq_lm":
        return "encoder-decoder"
    if re.search(r'"(vision_config|audio_config|vq_config|image_size)"', flat):
        return "multimodal"
    if task in ("masked_lm", "sequence_classification", "token_classification",
                "question_answering", "multiple_choice"):
        return "encoder-only"
    if task == "base":  # no head: a decoder only when its config says it is one
        if re.search(r'"(num_mel_bins|sampling_rate|feat_extract_norm)"', flat):
            return "audio"
        if re.search(r'"(image_size|patch_size|num_channels)"', flat):
            return "vision"
        return "decoder-only" if getattr(config, "is_decoder", False) else "encoder-only"
    return "decoder-only"


def _family_of(model_type):
    """The family of an architecture whose worker died or hung: from its small config when that
    builds, else from its task."""
    try:
        return family(model_type, _task_of(model_type, _mappings()),
                      small_config(model_type.partition("@")[0]))
    except Exception:  # noqa: BLE001
        return _guess_family(model_type)


def _guess_family(model_type):
    """A family for an architecture whose config could not be built: from its task only."""
    if library_of(model_type) != "transformers":
        return library_family(model_type)
    try:
        task = _task_of(model_type, _mappings())
    except Exception:  # noqa: BLE001
        return "unknown"
    return {"image_classification": "vision", "ctc": "audio", "audio_classification": "audio",
            "speech_seq2seq": "audio", "seq2seq_lm": "encoder-decoder",
            "masked_lm": "encoder-only", "sequence_classification": "encoder-only"}.get(
                task, "decoder-only")
