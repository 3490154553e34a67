"""Which Hugging Face architectures the zoo runs, and in which family each is counted: the model
types of the task mappings, one task per model type and one model type per modelling module of
transformers (`select`); the CI sample (`QUICK`); the family of each (`family`, with fallbacks
for an architecture whose config cannot be built); and the round-robin order over families
that a full run takes (`interleave_families`)."""
import json
import re

from torch_tpu.tools.model_zoo.configs import EXPERTS, small_config

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
    for key in EXPERTS:
        if re.search(rf'"{key}": ([2-9]|\d\d+)', flat):
            return "mixture-of-experts"
    if getattr(config, "is_encoder_decoder", False) or task == "seq2seq_lm":
        return "encoder-decoder"
    if re.search(r'"(vision_config|audio_config|vq_config|image_size)"', flat):
        return "multimodal"
    if task in ("masked_lm", "sequence_classification"):
        return "encoder-only"
    return "decoder-only"


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
