"""timm architectures for the model zoo (see `libraries`): one entry per model family, a family
being a module of `timm.models` (`timm/resnet`, `timm/vision_transformer`, ...), as timm's own
registry groups its variants. Each family runs one small variant from VARIANTS, built with
pretrained=False (nothing is downloaded), ten classes, no dropout and no stochastic depth, at the
smallest image size that the variant takes (its patch grid, window sizes and downsampling
decide it): images in, class logits out, trained on the cross-entropy of random labels.

How VARIANTS was chosen: for each family, the registered variant with the fewest parameters
(counted on the meta device over `timm.list_models()`); where even that one is large (hundreds
of millions of parameters, or an image size past 256), the same class with fewer blocks or a
narrower width through the keyword arguments timm passes to it. `test_variants_cover_every_family`
in the tests fails when a timm upgrade adds a family that has no row.

Where timm comes from: timm imports torchvision, and the torchvision wheels published for the
pinned torch are CUDA builds whose C++ ops need libtorch_cuda, so with the CPU build of torch
its import raises (its Python code registers fake kernels for `torchvision::nms` and `qnms`,
ops that only its C++ library defines). timm uses none of those ops, so `_import_timm` declares
the two schemas (no kernels) when the C++ library cannot load, and then imports torchvision's
Python half. `make zoo-deps` installs timm and torchvision outside the virtual environment's
site-packages (ZOO_PACKAGES), so that nothing else, Transformers' vision models in the test
suite included, imports this torchvision; the zoo puts that folder on its path itself."""
import importlib
import importlib.util
import os
import sys
from typing import NamedTuple

import torch
import torch.nn.functional as F

from torch_tpu.tools.model_zoo.inputs import BATCH
from torch_tpu.tools.model_zoo.zoo_model import ZooModel, named_subclass

TASK = "image_classification"
CLASSES = 10

# Where `make zoo-deps` installs the zoo's own packages (see the module's docstring).
ZOO_PACKAGES = os.environ.get(
    "TORCH_TPU_ZOO_PACKAGES",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 3, ".venv", "zoo-packages"))


class Variant(NamedTuple):
    name: str              # the registered model name
    image: int             # the square input's side
    kwargs: dict = {}      # architecture arguments timm hands to the model class


# family -> Variant. Families whose smallest variant is large are narrowed (see the docstring).
_VIT_SMALL = dict(embed_dim=64, depth=2, num_heads=2)
VARIANTS = {
    "beit": Variant("beit_base_patch16_224", 64, dict(_VIT_SMALL, img_size=64)),
    "byoanet": Variant("lambda_resnet26t", 64),
    "byobnet": Variant("test_byobnet", 64),
    "cait": Variant("cait_xxs24_224", 64, dict(img_size=64, depth=2)),
    "coat": Variant("coat_tiny", 64, dict(img_size=64)),
    "convit": Variant("convit_tiny", 64, dict(img_size=64, depth=2)),
    "convmixer": Variant("convmixer_768_32", 64),
    "convnext": Variant("test_convnext", 64),
    "cpubone": Variant("cpubone_nano", 64),
    "crossvit": Variant("crossvit_tiny_240", 240),
    "csatv2": Variant("csatv2", 64),
    "cspnet": Variant("cs3darknet_focus_s", 64),
    "cspnext": Variant("cspnext_tiny", 64),
    "davit": Variant("davit_tiny", 64, dict(depths=(1, 1, 1, 1))),
    "deepseek_vit": Variant("deepseek_vit_412m", 56, dict(_VIT_SMALL, img_size=56)),
    "deit": Variant("deit_tiny_patch16_224", 64, dict(img_size=64)),
    "densenet": Variant("densenet121", 64, dict(block_config=(1, 1, 1, 1))),
    "dla": Variant("dla46x_c", 64),
    "dpn": Variant("dpn48b", 64),
    "edgenext": Variant("edgenext_xx_small", 64),
    "efficientformer": Variant("efficientformer_l1", 224),
    "efficientformer_v2": Variant("efficientformerv2_s0", 64, dict(img_size=64)),
    "efficientnet": Variant("test_efficientnet", 64),
    "efficientvim": Variant("efficientvim_m1", 64),
    "efficientvit_mit": Variant("efficientvit_b0", 64),
    "efficientvit_msra": Variant("efficientvit_m0", 64, dict(img_size=64)),
    "eva": Variant("vit_tiny_patch16_dinov3_qkvb", 64, dict(img_size=64, depth=2)),
    "fasternet": Variant("fasternet_t0", 64),
    "fastvit": Variant("fastvit_t8", 64),
    "focalnet": Variant("focalnet_tiny_srf", 64),
    "gcvit": Variant("gcvit_xxtiny", 64, dict(img_size=64)),
    "gemma4_vit": Variant("gemma4_vit_167m_enc", 64, dict(_VIT_SMALL, img_size=64, global_pool="avg")),
    "ghostnet": Variant("ghostnet_050", 64),
    "hardcorenas": Variant("hardcorenas_b", 64),
    "hgnet": Variant("hgnetv2_b0", 64),
    "hiera": Variant("hiera_tiny_224", 64, dict(img_size=(64, 64))),
    "hieradet_sam2": Variant("sam2_hiera_tiny", 64),
    "hrnet": Variant("hrnet_w18_small", 64),
    "iformer": Variant("iformer_t", 64),
    "inception_next": Variant("inception_next_atto", 64),
    "inception_resnet_v2": Variant("inception_resnet_v2", 96),
    "inception_v3": Variant("inception_v3", 96),
    "inception_v4": Variant("inception_v4", 96),
    "lcnetv2": Variant("lcnetv2_small", 64),
    "levit": Variant("levit_128s", 64, dict(img_size=64)),
    "lowformer": Variant("lowformer_b0", 64),
    "mambaout": Variant("test_mambaout", 64),
    "maxxvit": Variant("test_coatnet", 64, dict(img_size=64)),
    "metaformer": Variant("poolformerv2_s12", 64),
    "mlp_mixer": Variant("gmlp_ti16_224", 64, dict(img_size=64)),
    "mobilenetv3": Variant("lcnet_035", 64),
    "mobilenetv5": Variant("mobilenetv5_base", 64),
    "mobilevit": Variant("mobilevit_xxs", 64),
    "mvitv2": Variant("mvitv2_tiny", 64, dict(img_size=64)),
    "naflexvit": Variant("naflexvit_base_patch16_parfac_gap", 64, dict(_VIT_SMALL, img_size=64)),
    "nasnet": Variant("nasnetalarge", 96, dict(stem_size=48, num_features=2016)),
    "nest": Variant("nest_tiny", 64, dict(img_size=64)),
    "nextvit": Variant("nextvit_small", 64),
    "nfnet": Variant("test_nfnet", 64),
    "pit": Variant("pit_ti_224", 64, dict(img_size=64)),
    "pnasnet": Variant("pnasnet5large", 96),
    "pvt_v2": Variant("pvt_v2_b0", 64),
    "qwen3_vit": Variant("qwen3_vit_88m", 64, dict(_VIT_SMALL, img_size=64)),
    "rdnet": Variant("rdnet_tiny", 64),
    "regnet": Variant("regnetx_002", 64),
    "repghost": Variant("repghostnet_050", 64),
    "repvit": Variant("repvit_m1", 64),
    "res2net": Variant("res2next50", 64),
    "resnest": Variant("resnest14d", 64),
    "resnet": Variant("test_resnet", 64),
    "resnetv2": Variant("resnetv2_18", 64),
    "rexnet": Variant("rexnet_100", 64),
    "selecsls": Variant("selecsls42", 64),
    "senet": Variant("legacy_seresnet18", 64),
    "sequencer": Variant("sequencer2d_s", 64, dict(layers=(1, 1, 1, 1))),
    "shvit": Variant("shvit_s1", 64),
    "sknet": Variant("skresnet18", 64),
    "starnet": Variant("starnet_s050", 64),
    "swiftformer": Variant("swiftformer_xs", 64),
    "swin_transformer": Variant("swin_tiny_patch4_window7_224", 64,
                                dict(img_size=64, window_size=4, depths=(1, 1, 1, 1))),
    "swin_transformer_v2": Variant("swinv2_tiny_window16_256", 64,
                                   dict(img_size=64, window_size=4, depths=(1, 1, 1, 1))),
    "swin_transformer_v2_cr": Variant("swinv2_cr_tiny_224", 64,
                                      dict(img_size=(64, 64), window_size=4, depths=(1, 1, 1, 1))),
    "tiny_vit": Variant("tiny_vit_5m_224", 64),
    "tnt": Variant("tnt_s_legacy_patch16_224", 64, dict(img_size=64, depth=2)),
    "tresnet": Variant("tresnet_m", 64),
    "twins": Variant("twins_svt_small", 64, dict(img_size=64, depths=(1, 1, 1, 1))),
    "vgg": Variant("vgg11", 64, dict(mlp_ratio=0.0625)),
    "visformer": Variant("visformer_tiny", 64, dict(img_size=64)),
    "vision_transformer": Variant("test_vit", 64, dict(img_size=64)),
    "vision_transformer_hybrid": Variant("vit_tiny_r_s16_p8_224", 64, dict(img_size=64)),
    "vision_transformer_relpos": Variant("test_vit_relpos", 64, dict(img_size=64)),
    "vision_transformer_sam": Variant("samvit_base_patch16_224", 64, dict(_VIT_SMALL, img_size=64)),
    "vitamin": Variant("vitamin_small_224", 64, dict(img_size=64)),
    "volo": Variant("volo_d1_224", 64, dict(img_size=64)),
    "vovnet": Variant("ese_vovnet19b_slim_dw", 64),
    "xception": Variant("legacy_xception", 96),
    "xception_aligned": Variant("xception41p", 64),
    "xcit": Variant("xcit_nano_12_p8_224", 64, dict(img_size=64, depth=2)),
}


def _torchvision_ops_load():
    """Whether torchvision's C++ library loads with this torch (False for a CUDA build of it
    beside the CPU build of torch)."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return True  # nothing to declare: timm's import will say torchvision is missing
    folder = list(spec.submodule_search_locations)[0]
    library = next((os.path.join(folder, f) for f in sorted(os.listdir(folder))
                    if f.startswith("_C") and f.endswith(".so")), None)
    if library is None:
        return False
    try:
        torch.ops.load_library(library)
    except OSError:
        return False
    return True


_DECLARED = []


def prepare():
    """Puts ZOO_PACKAGES on the path and, where torchvision's C++ library cannot load, declares
    the two torchvision ops its Python code registers fake kernels for. The zoo does this before
    it imports Transformers, which then finds timm and torchvision too (its TimmWrapper and
    TimmBackbone models, and the vision towers built on them)."""
    if os.path.isdir(ZOO_PACKAGES) and ZOO_PACKAGES not in sys.path:
        sys.path.append(ZOO_PACKAGES)
    if "torchvision" not in sys.modules and not _DECLARED and not _torchvision_ops_load():
        library = torch.library.Library("torchvision", "DEF")
        for op in ("nms", "qnms"):
            library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _DECLARED.append(library)  # a Library's definitions last as long as the object


def _import_timm():
    """timm, or None when it is not installed (see the module's docstring)."""
    prepare()
    if importlib.util.find_spec("timm") is None:
        return None
    try:
        return importlib.import_module("timm")
    except Exception:  # noqa: BLE001 - a broken installation counts as none
        return None


def _registered_families(timm):
    from timm.models import _registry

    return {_registry._model_to_module[name] for name in timm.list_models()}


class TimmModel(ZooModel):
    """A timm classifier on images of its variant's size; each family gets a subclass named for
    its variant (see `zoo_model.named_subclass`), which the zoo's reports show."""

    def __init__(self, inner, image):
        super().__init__(inner)
        self.image = image

    def example_inputs(self, seed=0):
        g = torch.Generator().manual_seed(seed)
        pixels = torch.randn(BATCH, 3, self.image, self.image, generator=g)
        return {"pixel_values": pixels}, torch.randint(0, CLASSES, (BATCH,), generator=g)

    def forward(self, pixel_values, labels=None):
        logits = self.inner(pixel_values)
        result = {"logits": logits}
        if labels is not None:
            result["loss"] = F.cross_entropy(logits, labels)
        return result


def entries():
    timm = _import_timm()
    if timm is None:
        return []
    registered = _registered_families(timm)
    return [(f"timm/{family}", TASK, variant.name) for family, variant in VARIANTS.items()
            if family in registered and variant.name in timm.list_models()]


def _without_randomness(model):
    """No dropout or stochastic depth in train() mode, whatever the class hard-codes."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for attribute in ("drop_prob", "drop_path_prob", "drop_rate"):
            if isinstance(getattr(module, attribute, None), float):
                setattr(module, attribute, 0.0)


def build(entry):
    from torch_tpu.tools.model_zoo.compare import NotApplicable, _perturb_constant_parameters

    family = entry.partition("/")[2]
    variant = VARIANTS.get(family)
    if variant is None:
        raise NotApplicable(f"{entry} is no timm entry of the model zoo")
    timm = _import_timm()
    if timm is None:
        raise NotApplicable("timm is not installed (make zoo-deps)")
    torch.manual_seed(0)
    try:
        inner = timm.create_model(variant.name, pretrained=False, num_classes=CLASSES,
                                  **variant.kwargs)
    except Exception as error:  # noqa: BLE001
        first = str(error).splitlines()[0] if str(error) else ""
        raise NotApplicable(f"{variant.name} from its small config: {type(error).__name__}: "
                            f"{first}") from None
    _without_randomness(inner)
    _perturb_constant_parameters(inner)
    config = {"variant": variant.name, "image_size": variant.image, **variant.kwargs}
    return config, TASK, named_subclass(TimmModel, variant.name)(inner, variant.image)


def family(entry):
    return "vision"
