"""Host cost per small op in instructions, which a noisy machine does not blur.

Timings of a 2-3 µs op move by 20-50 % between runs on a shared machine, more than most changes
to the dispatch path are worth. This counts the instructions one `x + y` on 16-element float32
tensors executes instead, under valgrind's callgrind, from Python's call of `Tensor.__add__` to
its return (PyTorch's binding, autograd and dispatcher included, as in `benchmarks/dispatch.py`):

- cpu: PyTorch CPU eager;
- strict: tpu in strict mode, the plugin's execute call included;
- defer_and_fuse: tpu in defer-and-fuse mode, the recording alone (the graphs run outside).

Each figure is (instructions of a run of 3000 ops - those of a run of 1000) / 2000, which leaves
out the first op's one-off costs (meta tables, compiles). Instructions are not time (a cache miss
or a lock that waits costs more than its count), but two builds compared this way differ only by
what changed; repeated runs differ by up to about 1k instructions, when glibc consolidates its free
lists inside the counted calls in one run and not in the other. Needs valgrind (Debian: `apt-get
install valgrind`); a run takes about ten minutes.

    python benchmarks/dispatch_instructions.py [--modes cpu,strict,defer_and_fuse]

The last line is JSON.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, torch, torch_tpu
mode, n = sys.argv[1], int(sys.argv[2])
if mode == "cpu":
    x, y = torch.randn(16), torch.randn(16)
else:
    torch_tpu.set_eager_mode(mode)
    x, y = torch.randn(16).to("tpu"), torch.randn(16).to("tpu")
for _ in range(n // 200):
    for _ in range(200):
        x + y
    if mode != "cpu":
        torch.tpu.synchronize()
"""
# The binding's outermost frame for Tensor.__add__: collection is on only inside it.
TOGGLE = "*TypeError_to_NotImplemented_*THPVariable_add*"


def instructions(mode, ops, workdir):
    out = os.path.join(workdir, f"callgrind.{mode}.{ops}")
    env = dict(os.environ)
    env.pop("TORCH_TPU_EAGER_MODE", None)
    # Compiled with full optimisation at once: a quick compile's upgrade runs on another thread, and
    # callgrind would count it when it lands while the main thread is inside an op.
    env["TORCH_TPU_QUICK_COMPILE"] = "0"
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", f"--toggle-collect={TOGGLE}",
                           sys.executable, "-c", CHILD, mode, str(ops)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{mode}: the run under valgrind failed: {done.stderr.strip().splitlines()[-1:]}")
    with open(out) as f:
        totals = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.MULTILINE)
    if not totals:
        raise RuntimeError(f"{mode}: callgrind wrote no instruction count")
    return int(totals.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="cpu,strict,defer_and_fuse")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind); benchmarks/dispatch.py times the same ops")
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        for mode in args.modes.split(","):
            if mode != "cpu":
                # Compiled under valgrind first, whose CPU lacks this machine's newer extensions (the
                # CPU plugin's cache keys on them): a cold compile's background work (its disk-cache
                # write) landing in the counted calls read 55k instead of 37k per strict op.
                instructions(mode, 200, workdir)
            results[f"{mode}_instructions_per_op"] = round(
                (instructions(mode, 3000, workdir) - instructions(mode, 1000, workdir)) / 2000)
            print(f"{mode:>16}: {results[f'{mode}_instructions_per_op']} instructions per op", flush=True)
    if "cpu_instructions_per_op" in results:
        for mode in ("strict", "defer_and_fuse"):
            if f"{mode}_instructions_per_op" in results:
                results[f"{mode}_over_cpu"] = round(
                    results[f"{mode}_instructions_per_op"] / results["cpu_instructions_per_op"], 2)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
