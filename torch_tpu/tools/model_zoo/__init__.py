"""Hugging Face architectures (Transformers, diffusers) and timm's model families on the tpu
device, unmodified, in every mode.

    python -m torch_tpu.tools.model_zoo [--quick | --arch NAME[,NAME] | --tier 1|2]
        [--modes strict,...] [--out DIR] [--timeout S] [--jobs N] [--fresh] [--list]

Every architecture that the installed `transformers` ships is built from a small configuration
(2 layers, hidden size 32, vocabulary 99, random weights from a fixed seed; nothing is
downloaded) and run, in each mode (strict, defer_and_fuse, compiled = torch.compile(model,
backend="tpu") in strict eager), on tpu and on the CPU with the same inputs:

  forward   model.eval() under no_grad; every floating output agrees with the CPU's;
  train     model.train() with dropout off: loss, backward, one SGD step; the loss, every
            parameter gradient and every updated parameter agree with the CPU's;
  generate  causal LMs only: greedy generate() of 16 tokens with a dynamic and a static cache
            (compiled: the forward under torch.compile) gives the CPU's tokens ("tie" when
            they first differ where the CPU's two best scores were within the tolerance).

Tolerances (float32 through another compiler, whose reductions and fusions reorder sums): a
forward output or the loss agrees when |tpu - cpu| <= 2e-3 + 2e-3 |cpu| elementwise; a gradient or
updated parameter when max |tpu - cpu| <= 1e-2 max |cpu| + 1e-5 over the tensor (gradients of
near-zero entries are dominated by rounding, so they are judged against the tensor's scale).
A training step that fails this is judged once more against the CPU's float64 step: it passes
when every tensor is no further from float64 than twice the CPU float32's own distance plus
that tolerance (networks that amplify rounding, such as batch norm over a few values per
channel, put the CPU's own float32 gradients percents away from float64); the record then
says train_judged_by: float64. A step that fails that too is run once more on tpu in float64,
in the same mode: it passes when every loss, gradient and updated parameter equals the CPU's
float64 step within 1e-6 of the tensor's scale and the run took no CPU fallback the float32
one did not (train_judged_by: float64 on tpu). That is the case of networks that are chaotic
in float32 (a ReLU input a rounding error from zero flips, batch norm over a few values
magnifies it): their float32 steps on two correct compilers end apart, their float64 steps
agree, and a wrong lowering fails both. A forward that misses its tolerance is judged the
same way (forward_judged_by: float64 on tpu): near ties that decide a discrete choice (the
queries a detector keeps by top-k, a depth's reciprocal near zero) fall differently under two
float32 compilers and the same way in float64. A model whose own loss cannot run in float64
(D-FINE's casts its targets to float32) is judged there on its training-mode outputs and the
gradients of a fixed random weighting of them, each gradient within 1e-6 of the step's largest
(train_judged_by: float64 on tpu, without the loss). A training step that draws random numbers
on the CPU (noise no config turns off: GroupViT's Gumbel-softmax) draws the CPU's numbers on tpu
too (`random_draws`), since the device's generator gives other ones for the same seed. Native
counts, fallbacks and compile counts are those of the float32 run.

Selection (`selection`), in two tiers: tier one is a fixed list of widely used model types
(WIDELY_USED) and then their extra task entries ("bert@question_answering": heads whose ops
differ from the type's own task, counted as entries, not architectures); tier two is one model
type per modelling module of transformers for every other module (variants that share one
implementation, such as gemma3 and gemma3_text, count once) and the other libraries' entries
("diffusers/UNet2DConditionModel", "timm/resnet", see `libraries`), interleaved by family. A model type's
one task is the first of its heads in TASKS' order (a type with no head runs its base model).
Each entry is put in one family (see `family`). An entry whose small configuration cannot be
built offline, or whose CPU reference run fails with the inputs built for it, is `not
applicable` with the reason; it is not attempted, since the CPU failing says nothing about the
device.

Parameters whose entries are all equal (zero-initialised routers, biases, norm scales) get
N(0, 0.02) noise added, so that no two experts tie in a router's topk: PyTorch leaves the order
of tied elements open, and the CPU's differs from every accelerator's.

Each architecture runs in a worker process (a crash or a hang past --timeout costs that
architecture only; a worker is replaced after a few architectures, and an architecture whose
worker died after running others is run again in a fresh one). Results go to DIR/model_zoo.json after each architecture (a rerun resumes
from it; --fresh starts over) and DIR/model_zoo.md; the totals are the last line of stdout:
per mode attempted, forward_pass, train_pass, native (forward and train passed and no op ran
through the CPU fallback) and the generate counts; the architectures (extra task entries apart)
and the attempted entries per library.

Across machines: each runs `--shard i/n --out DIR_i` (every n-th architecture of the interleaved
selection, so each shard gets every family), then one runs `--report --merge DIR_1,...,DIR_n
--out DIR` to combine the shards' results into one table and one line of totals.

The package, by idea: selection (which entries, their tiers and families), libraries (entries
from diffusers and timm, through a `<library>_models` module each, in a `zoo_model.ZooModel`), configs
(the small configurations), inputs and task_inputs (a head's labels), compare (one entry on
the CPU and on tpu), report (totals and the tables), sweep (worker processes and resume) and
cli (the command line).
"""
# timm and torchvision live apart from the environment (see timm_models); they must be on the
# path before Transformers is imported, which looks for them once.
from torch_tpu.tools.model_zoo import timm_models  # noqa: E402,I001
timm_models.prepare()

# Tests and other code use these through `from torch_tpu.tools import model_zoo`; the
# worker pool stays reachable for tests that run the workers in-process.
from torch_tpu.tools import worker_pool  # noqa: F401
from torch_tpu.tools.model_zoo.cli import main
from torch_tpu.tools.model_zoo.compare import (FORWARD_ATOL, FORWARD_RTOL, GRAD_ATOL, GRAD_RTOL,
                                               MODES, SGD_LR, NotApplicable, build,
                                               elementwise_mismatch, failing_op, generation_verdict,
                                               reference, run_arch, run_mode, scaled_mismatch)
from torch_tpu.tools.model_zoo.configs import NUM_LABELS, VOCAB, small_config
from torch_tpu.tools.model_zoo.inputs import BATCH, SEQ, make_inputs
from torch_tpu.tools.model_zoo.report import markdown, totals, write_results
from torch_tpu.tools.model_zoo.selection import (EXTRA_TASKS, FAMILIES, QUICK, TASKS,  # noqa: F401
                                                 WIDELY_USED, _module_of, extra_tasks, family,
                                                 interleave_families, select, tiers)
from torch_tpu.tools.model_zoo.sweep import run

__all__ = ["BATCH", "EXTRA_TASKS", "WIDELY_USED", "extra_tasks", "generation_verdict", "tiers", "FAMILIES", "FORWARD_ATOL", "FORWARD_RTOL", "GRAD_ATOL", "GRAD_RTOL", "MODES",
           "NUM_LABELS", "QUICK", "SEQ", "SGD_LR", "TASKS", "VOCAB", "NotApplicable", "build",
           "elementwise_mismatch", "failing_op", "family", "interleave_families", "main",
           "make_inputs", "markdown", "reference", "run", "run_arch", "run_mode",
           "scaled_mismatch", "select", "small_config", "totals", "write_results"]
