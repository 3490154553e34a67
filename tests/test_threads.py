"""Several Python threads using the device at once. Each thread records into its own pending
graph (so defer-and-fuse graphs keep their structure and hit the cache), a compile does not hold
up other threads, the autograd engine runs each backward pass in the mode of the thread that
started it, and strict mode gives the same bits as one thread alone."""
import threading

import pytest
import torch

import torch_tpu


def _problem(width, seed):
    """A model's initial weights and data, made on this thread (PyTorch's CPU generator is global)."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(width, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    generator = torch.Generator().manual_seed(seed)
    return model.state_dict(), torch.randn(16, width, generator=generator), torch.randn(16, 1, generator=generator)


def _train(mode, problem, steps=6):
    state, x, y = problem
    width = x.shape[1]
    with torch_tpu.eager_mode(mode):
        model = torch.nn.Sequential(torch.nn.Linear(width, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
        model.load_state_dict(state)
        model.to("tpu")
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        x, y = x.to("tpu"), y.to("tpu")
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().cpu() for p in model.parameters()]


def _in_threads(work, count):
    results = [None] * count
    errors = []

    def run(i):
        try:
            results[i] = work(i)
        except BaseException as error:  # noqa: BLE001  (re-raised below, in the test's thread)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_threads_training_at_once_get_what_each_gets_alone(mode):
    width = 23 if mode == "strict" else 29  # shapes of its own: compile counts below are this test's
    problems = [_problem(width, seed) for seed in range(4)]
    alone = [_train(mode, problem) for problem in problems]
    torch_tpu.reset_metrics()
    together = _in_threads(lambda i: _train(mode, problems[i]), 4)
    for (losses_a, params_a), (losses_t, params_t) in zip(alone, together):
        if mode == "strict":  # the same per-op programs on the same data: the same bits
            assert losses_a == losses_t
            for a, t in zip(params_a, params_t):
                assert torch.equal(a, t)
        else:
            torch.testing.assert_close(losses_t, losses_a)
            for a, t in zip(params_a, params_t):
                torch.testing.assert_close(t, a)
    # Every program the threads needed was compiled when they ran alone: their graphs kept the
    # structure they have alone instead of interleaving into new ones.
    assert torch_tpu.metrics()["compiles"] == 0


def test_two_threads_needing_the_same_new_program_compile_it_once():
    start = threading.Barrier(2)
    results = [None, None]

    def work(i):
        with torch_tpu.eager_mode("defer_and_fuse"):
            x = torch.arange(37.0, device="tpu")
            start.wait()
            for _ in range(60):  # a graph big enough that both threads reach its compile together
                x = (x * 1.001).sin() + 0.5
            results[i] = x.cpu()

    torch_tpu.reset_metrics()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=0)
    assert torch_tpu.metrics()["compiles_fused_graph"] == 1


def test_each_backward_pass_runs_in_the_mode_of_the_thread_that_started_it():
    default = torch_tpu.mode_from_environment()
    chosen = torch_tpu.EagerMode.DEFER_AND_FUSE
    if default is chosen:
        chosen = torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
    seen = {}
    inside, checked = threading.Event(), threading.Event()

    def backward_in_chosen_mode():
        with torch_tpu.eager_mode(chosen):
            w = torch.ones(5, device="tpu", requires_grad=True)
            y = (w * 3).exp()

            def hook(grad):
                seen["engine thread"] = torch_tpu.get_eager_mode()
                inside.set()
                checked.wait(60)
                return grad

            y.register_hook(hook)
            y.sum().backward()
            seen["grad"] = w.grad.cpu()

    def bystander():
        # A thread that never chose a mode, working while the other thread's backward runs.
        seen["bystander"] = torch_tpu.get_eager_mode()
        seen["value"] = (torch.arange(3.0, device="tpu") + 1).sum().item()

    thread = threading.Thread(target=backward_in_chosen_mode)
    thread.start()
    assert inside.wait(60)
    other = threading.Thread(target=bystander)
    other.start()
    other.join(60)
    checked.set()
    thread.join(60)
    assert seen["engine thread"] is chosen
    assert seen["bystander"] is default
    assert seen["value"] == 6.0
    torch.testing.assert_close(seen["grad"], torch.full((5,), 3.0) * torch.exp(torch.full((5,), 3.0)))


def test_a_thread_reads_what_another_thread_left_pending():
    box = {}

    def writer():
        with torch_tpu.eager_mode("defer_and_fuse"):
            box["t"] = torch.arange(4.0, device="tpu") * 2 + 1  # left pending in this thread's graph

    t = threading.Thread(target=writer)
    t.start()
    t.join(60)
    torch.testing.assert_close(box["t"].cpu(), torch.arange(4.0) * 2 + 1)
