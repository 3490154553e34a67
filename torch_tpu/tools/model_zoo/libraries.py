"""Architectures from libraries other than Transformers: entries are named `<library>/<name>`
("diffusers/UNet2DModel"), and each library's module (`<library>_models`) gives

  entries()     [(entry, task, class or variant)], empty when the library is not installed;
  build(entry)  (config, task, model): the model on the CPU in float32, raising NotApplicable
                with the reason when it cannot be built offline;
  family(entry) the family it is counted in.

("diffusers/UNet2DModel", "timm/resnet": a diffusers class, a timm model family.)

The model a library builds is a `zoo_model.ZooModel`: the library's own module, unmodified, inside a thin
wrapper that owns what a training script would (the inputs the module takes, its loss), so that
the comparison in `compare` treats every library alike."""
import importlib

# diffusers' denoisers and autoencoders; timm's image classifiers, one per model family.
LIBRARIES = ("diffusers", "timm")


def library_of(entry):
    """The library an entry comes from ("transformers" for a bare model type)."""
    prefix, _, rest = entry.partition("/")
    return prefix if rest and prefix in LIBRARIES else "transformers"


def _module(library):
    return importlib.import_module(f"torch_tpu.tools.model_zoo.{library}_models")


def entries():
    """Every library's entries, in the libraries' order."""
    return [e for library in LIBRARIES for e in _module(library).entries()]


def build(entry):
    return _module(library_of(entry)).build(entry)


def family(entry):
    return _module(library_of(entry)).family(entry)
