"""The model zoo's diffusers entries (torch_tpu.tools.model_zoo.diffusers_models): a few
representative denoisers and an autoencoder pass forward and a training step against the CPU,
and every entry is named, tasked and built from its small config."""
import os

import pytest
import torch

pytest.importorskip("diffusers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from torch_tpu.tools import model_zoo as zoo  # noqa: E402
from torch_tpu.tools.model_zoo import diffusers_models  # noqa: E402
from torch_tpu.tools.model_zoo.zoo_model import ZooModel  # noqa: E402

EAGER = ["strict", "defer_and_fuse"]


# UNet2DConditionModel: SDXL's UNet (convolutions, group norm, cross-attention, added text and
# time conditioning); DiTTransformer2DModel: patches, adaLN-zero and class labels;
# AutoencoderKL: Stable Diffusion's VAE, decoding its posterior's mode.
@pytest.mark.parametrize("entry", ["diffusers/UNet2DConditionModel",
                                   "diffusers/DiTTransformer2DModel", "diffusers/AutoencoderKL"])
def test_diffusers_model_matches_cpu_in_eager_modes(entry):
    record = zoo.run_arch(entry, EAGER)
    assert record["status"] == "attempted", record.get("reason")
    assert record["family"] == "diffusion"
    for mode in EAGER:
        result = record["modes"][mode]
        assert result["forward"] == "pass", (mode, result["error"])
        assert result["train"] == "pass", (mode, result["error"])
        assert result["native"], (mode, result["fallbacks"])
        assert result["compiles"] >= 1 or result["cache_hits"] >= 1


def test_every_entry_is_named_tasked_and_builds():
    entries = diffusers_models.entries()
    names = [name for _, _, name in entries]
    assert len(names) == len(set(names)) >= 30
    for must in ("UNet2DModel", "UNet2DConditionModel", "DiTTransformer2DModel",
                 "PixArtTransformer2DModel", "SD3Transformer2DModel", "FluxTransformer2DModel",
                 "AutoencoderKL", "AutoencoderTiny", "VQModel", "ControlNetModel"):
        assert must in names
    for entry, task, name in entries:
        assert entry == f"diffusers/{name}"
        assert task in ("noise_prediction", "autoencoding")
        assert zoo.family(entry, task, None) == "diffusion"
        _, built_task, model = zoo.build(entry)
        assert built_task == task
        assert isinstance(model, ZooModel) and type(model).__name__ == name
        assert type(model.inner).__name__ == name
        assert all(p.dtype == torch.float32 for p in model.parameters()
                   if p.is_floating_point()), entry


def test_an_unknown_entry_is_not_applicable():
    with pytest.raises(zoo.NotApplicable):
        zoo.build("diffusers/NoSuchModel")
