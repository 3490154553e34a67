"""Several Python threads on the device at once, the three scenarios that used to serialise or
starve (all in one process, against an empty temporary compilation cache):

- four threads each training a small MLP for 10 steps in defer_and_fuse, against the same four
  trainings one after another (both after a warm-up run that compiles their programs):
  together_s, one_after_another_s and their ratio;
- a thread reading .item() of a cached op in a loop while another thread compiles a large fused
  graph: the reads it completed during that compile and the compile's seconds;
- a cached one-op strict call on a second thread while the first compiles: its latency.

The last line is JSON with those figures.
"""
import json
import os
import tempfile
import threading
import time

os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="torch_tpu_threads_"))

import torch  # noqa: E402

import torch_tpu  # noqa: E402


def train(seed, steps=10):
    with torch_tpu.eager_mode("defer_and_fuse"):
        generator = torch.Generator().manual_seed(seed)
        w1 = (torch.randn(32, 64, generator=generator) * 0.1).to("tpu").requires_grad_()
        w2 = (torch.randn(64, 1, generator=generator) * 0.1).to("tpu").requires_grad_()
        x = torch.randn(64, 32, generator=generator).to("tpu")
        y = torch.randn(64, 1, generator=generator).to("tpu")
        opt = torch.optim.SGD([w1, w2], lr=0.05)
        for _ in range(steps):
            opt.zero_grad()
            loss = ((x @ w1).tanh() @ w2 - y).pow(2).mean()
            loss.backward()
            opt.step()
            loss.item()


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_threads(targets):
    threads = [threading.Thread(target=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def big_compile():
    with torch_tpu.eager_mode("defer_and_fuse"):
        x = torch.arange(4099.0, device="tpu")
        for i in range(400):
            x = (x * 1.0001 + i).sin()
        x.sum().item()


def main():
    train(0)  # compiles the training's programs
    one_after_another = timed(lambda: [train(seed) for seed in range(4)])
    together = timed(lambda: run_threads([lambda s=seed: train(s) for seed in range(4)]))

    small = torch.arange(5.0, device="tpu")
    (small + 1).sum().item()  # cached from here on
    reads = [0]
    compiling = threading.Event()
    done = threading.Event()

    def reader():
        compiling.wait()
        while not done.is_set():
            (small + 1).sum().item()
            reads[0] += 1

    def compiler():
        compiling.set()
        big_compile()
        done.set()

    reader_thread = threading.Thread(target=reader)
    reader_thread.start()
    compile_s = timed(lambda: run_threads([compiler]))
    reader_thread.join()

    latency = []

    def one_op():
        compiling.wait()
        time.sleep(0.2)  # well inside the other thread's compile
        latency.append(timed(lambda: (small * 3).sum().item()))

    (small * 3).sum().item()
    compiling.clear()
    other = threading.Thread(target=one_op)
    other.start()

    def second_compile():
        compiling.set()
        with torch_tpu.eager_mode("defer_and_fuse"):
            x = torch.arange(4111.0, device="tpu")
            for i in range(400):
                x = (x * 1.0001 + i).cos()
            x.sum().item()

    second_compile()
    other.join()
    print(json.dumps({
        "together_s": round(together, 3), "one_after_another_s": round(one_after_another, 3),
        "together_over_one_after_another": round(together / one_after_another, 3),
        "reads_during_compile": reads[0], "compile_s": round(compile_s, 3),
        "cached_op_latency_during_compile_s": round(latency[0], 4),
    }))


if __name__ == "__main__":
    main()
