"""The per-op program cache: keyed by layouts and dtypes, never by the values of numbers."""
import torch

import torch_tpu


def compiles_during(fn):
    before = torch_tpu.metrics()
    fn()
    torch.tpu.synchronize()
    after = torch_tpu.metrics()
    return after["compiles"] - before["compiles"], after["cache_hits"] - before["cache_hits"]


def test_repeated_work_compiles_once(mode):
    x = torch.randn(7, 3, device="tpu")
    torch.tpu.synchronize()  # in defer_and_fuse, creating x would otherwise join the first graph

    def work():
        return [x.sin() for _ in range(5)]

    compiles_during(work)
    compiles, hits = compiles_during(work)
    assert compiles == 0 and hits >= 1  # one fused graph, or five per-op programs


def test_new_number_values_do_not_recompile(mode):
    x = torch.randn(9, device="tpu")
    torch.tpu.synchronize()

    def step(v):
        result = x * v + v
        torch.tpu.synchronize()  # one graph per step in defer_and_fuse, as a training step would be
        return result

    compiles_during(lambda: step(0.5))
    values = [0.25, 3.0, -1.5, 1e-3]
    compiles, _ = compiles_during(lambda: [step(v) for v in values])
    assert compiles == 0
    results = [(x * v + v).cpu() for v in values]
    for v, r in zip(values, results):
        torch.testing.assert_close(r, x.cpu() * v + v)


def test_a_training_loop_stops_compiling_after_its_first_steps(mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("tpu")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = torch.randn(4, 6, device="tpu"), torch.randn(4, 2, device="tpu")

    def step():
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    for _ in range(3):
        step()
    compiles, hits = compiles_during(lambda: [step() for _ in range(5)])
    assert compiles == 0, "the learning-rate schedule / step count must be runtime arguments"
    assert hits > 0


def test_different_shapes_and_dtypes_are_different_programs(mode):
    size = {"debug": 101, "strict": 103, "defer_and_fuse": 107}[mode]  # unseen by earlier tests
    a = torch.randn(size, device="tpu")
    compiles_during(lambda: a.cos())
    compiles, _ = compiles_during(lambda: torch.randn(size + 1, device="tpu").cos())
    assert compiles >= 1
    compiles, _ = compiles_during(lambda: a.double().cos())
    assert compiles >= 1


def test_the_plugin_execute_time_is_counted_and_reset(mode):
    x = torch.randn(7, 3, device="tpu")
    (x + 1).sum().item()  # compiled before the count
    torch_tpu.reset_metrics()
    assert torch_tpu.metrics()["execute_call_seconds"] == 0
    (x * 2).sum().item()
    metrics = torch_tpu.metrics()
    assert metrics["executions"] >= 1 and metrics["execute_call_seconds"] > 0
