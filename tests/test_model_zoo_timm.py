"""The model zoo's timm entries (torch_tpu.tools.model_zoo.timm_models): a residual network and a
vision transformer pass forward and a training step against the CPU, every timm model family has
a variant, and every entry builds small from it."""
import pytest
import torch

from torch_tpu.tools import model_zoo as zoo
from torch_tpu.tools.model_zoo import timm_models
from torch_tpu.tools.model_zoo.zoo_model import ZooModel

timm = timm_models._import_timm()
if timm is None:
    pytest.skip("timm is not installed: `make zoo-deps` installs it (requirements-zoo.txt)",
                allow_module_level=True)

EAGER = ["strict", "defer_and_fuse"]


# resnet: convolutions, batch norm in training mode, max pooling; vision_transformer: patches,
# attention, layer norm and a class token.
@pytest.mark.parametrize("entry", ["timm/resnet", "timm/vision_transformer"])
def test_timm_model_matches_cpu_in_eager_modes(entry):
    record = zoo.run_arch(entry, EAGER)
    assert record["status"] == "attempted", record.get("reason")
    assert record["family"] == "vision" and record["task"] == "image_classification"
    for mode in EAGER:
        result = record["modes"][mode]
        assert result["forward"] == "pass", (mode, result["error"])
        assert result["train"] == "pass", (mode, result["error"])
        assert result["native"], (mode, result["fallbacks"])


def test_variants_cover_every_family():
    # A timm upgrade that adds a family fails here until VARIANTS has a row for it.
    registered = timm_models._registered_families(timm)
    assert registered == set(timm_models.VARIANTS)
    names = set(timm.list_models())
    for family, variant in timm_models.VARIANTS.items():
        assert variant.name in names, family
    assert [e for e, _, _ in timm_models.entries()] == [f"timm/{f}" for f in timm_models.VARIANTS]


def test_every_entry_builds_small_and_takes_its_inputs():
    for entry, task, name in timm_models.entries():
        config, built_task, model = zoo.build(entry)
        assert built_task == task == "image_classification"
        assert isinstance(model, ZooModel) and type(model).__name__ == name
        assert sum(p.numel() for p in model.parameters()) < 100_000_000, entry
        assert not any(isinstance(m, torch.nn.Dropout) and m.p for m in model.modules()), entry
        inputs, labels = model.example_inputs()
        side = timm_models.VARIANTS[entry.partition("/")[2]].image
        assert inputs["pixel_values"].shape == (zoo.BATCH, 3, side, side)
        assert labels.shape == (zoo.BATCH,) and int(labels.max()) < timm_models.CLASSES


def test_an_unknown_family_is_not_applicable():
    with pytest.raises(zoo.NotApplicable):
        zoo.build("timm/no_such_family")
