"""A sweep of the public surface a CUDA program touches besides ops: torch.tpu.*, torch.accelerator,
the Tensor and storage methods that touch storage, Generator, Stream and Event methods, with
valid and invalid arguments, some under FakeTensorMode (which torch.compile's tracing uses).

Every call runs in a worker subprocess (one per eager mode, restarted after a call that kills
it), so a call that dies by a signal or hangs fails the test instead of the session. A call with
a CPU counterpart must end as it does on the CPU (a result, or the same exception type); a
device-only call must end as its entry says (CUDA's behaviour)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

# name: (code, expected). The code runs with `d` bound to the device ("tpu", or "cpu" for the
# comparison) and leaves its outcome in `result`. expected: "cpu" (same outcome type as on the
# CPU), "ok", or the name of the exception CUDA's counterpart raises.
CALLS = {
    # torch.tpu, valid
    "device_count": ("result = torch.tpu.device_count()", "ok"),
    "current_device": ("result = torch.tpu.current_device()", "ok"),
    "is_available": ("result = torch.tpu.is_available()", "ok"),
    "is_initialized": ("result = torch.tpu.is_initialized()", "ok"),
    "init": ("result = torch.tpu.init()", "ok"),
    "synchronize": ("result = torch.tpu.synchronize()", "ok"),
    "set_device": ("torch.tpu.set_device(1); result = torch.tpu.current_device(); torch.tpu.set_device(0)", "ok"),
    "device_context": ("with torch.tpu.device(1): result = torch.tpu.current_device()", "ok"),
    "get_device_name": ("result = torch.tpu.get_device_name()", "ok"),
    "get_device_properties": ("result = torch.tpu.get_device_properties(0)", "ok"),
    "get_device_capability": ("result = torch.tpu.get_device_capability()", "ok"),
    "get_arch_list": ("result = torch.tpu.get_arch_list()", "ok"),
    "mem_get_info": ("result = torch.tpu.mem_get_info()", "ok"),
    "memory_stats": ("result = torch.tpu.memory_stats()", "ok"),
    "memory_summary": ("result = torch.tpu.memory_summary()", "ok"),
    "memory_snapshot": ("result = torch.tpu.memory_snapshot()", "ok"),
    "memory_allocated": ("result = torch.tpu.memory_allocated()", "ok"),
    "max_memory_allocated": ("result = torch.tpu.max_memory_allocated()", "ok"),
    "memory_reserved": ("result = torch.tpu.memory_reserved()", "ok"),
    "reset_peak_memory_stats": ("result = torch.tpu.reset_peak_memory_stats()", "ok"),
    "empty_cache": ("result = torch.tpu.empty_cache()", "ok"),
    "ipc_collect": ("result = torch.tpu.ipc_collect()", "ok"),
    "host_memory_stats": ("result = torch.tpu.host_memory_stats()", "ok"),
    "manual_seed": ("result = torch.tpu.manual_seed(3)", "ok"),
    "manual_seed_all": ("result = torch.tpu.manual_seed_all(3)", "ok"),
    "seed": ("result = torch.tpu.seed()", "ok"),
    "initial_seed": ("result = torch.tpu.initial_seed()", "ok"),
    "rng_state_round_trip": ("torch.tpu.set_rng_state(torch.tpu.get_rng_state()); result = 1", "ok"),
    "rng_state_all": ("torch.tpu.set_rng_state_all(torch.tpu.get_rng_state_all()); result = 1", "ok"),
    "is_bf16_supported": ("result = torch.tpu.is_bf16_supported()", "ok"),
    "streams": ("s = torch.tpu.Stream()\nwith torch.tpu.stream(s): result = torch.tpu.current_stream() == s", "ok"),
    "default_stream": ("result = torch.tpu.default_stream()", "ok"),
    "is_current_stream_capturing": ("result = torch.tpu.is_current_stream_capturing()", "ok"),
    # torch.tpu, invalid
    "synchronize_bad_index": ("torch.tpu.synchronize(99)", "RuntimeError"),
    "set_device_bad_index": ("torch.tpu.set_device(99)", "RuntimeError"),
    "set_device_other_type": ("torch.tpu.set_device('cpu')", "ValueError"),
    "get_device_name_bad_index": ("torch.tpu.get_device_name(99)", "AssertionError"),
    "get_device_properties_bad_index": ("torch.tpu.get_device_properties(99)", "AssertionError"),
    "memory_stats_bad_index": ("torch.tpu.memory_stats(99)", "RuntimeError"),
    "mem_get_info_bad_index": ("torch.tpu.mem_get_info(99)", "RuntimeError"),
    "current_stream_bad_index": ("torch.tpu.current_stream(99)", "RuntimeError"),
    "get_rng_state_bad_index": ("torch.tpu.get_rng_state(99)", "RuntimeError"),
    "set_rng_state_float": ("torch.tpu.set_rng_state(torch.zeros(16))", "TypeError"),
    "set_rng_state_device_tensor": ("torch.tpu.set_rng_state(torch.tpu.get_rng_state().to('tpu'))", "TypeError"),
    "set_rng_state_short": ("torch.tpu.set_rng_state(torch.zeros(3, dtype=torch.uint8))", "RuntimeError"),
    "memory_fraction_out_of_range": ("torch.tpu.set_per_process_memory_fraction(2.0)", "ValueError"),
    "graph_capture": ("torch.tpu.CUDAGraph()", "RuntimeError"),
    "tensor_on_missing_device": ("torch.ones(3, device='tpu:99')", "RuntimeError"),
    "generator_on_missing_device": ("torch.Generator('tpu:99')", "RuntimeError"),
    "stream_on_missing_device": ("torch.Stream(device='tpu:99')", "RuntimeError"),
    # torch.accelerator
    "accelerator_current": ("result = str(torch.accelerator.current_accelerator())", "ok"),
    "accelerator_device_count": ("result = torch.accelerator.device_count()", "ok"),
    "accelerator_set_device": ("torch.accelerator.set_device_index(0); result = torch.accelerator.current_device_index()", "ok"),
    "accelerator_set_bad_device": ("torch.accelerator.set_device_index(99)", "RuntimeError"),
    "accelerator_synchronize": ("result = torch.accelerator.synchronize()", "ok"),
    "accelerator_stream": ("result = torch.accelerator.current_stream()", "ok"),
    "accelerator_capability": ("result = torch.accelerator.get_device_capability()", "ok"),
    "accelerator_memory": ("result = (torch.accelerator.memory_allocated(), torch.accelerator.memory_stats(), "
                           "torch.accelerator.get_memory_info())", "ok"),
    "accelerator_memory_resets": ("torch.accelerator.reset_peak_memory_stats(); torch.accelerator.empty_cache(); result = 1",
                                  "ok"),
    # Tensor and storage methods that touch storage (compared with the CPU)
    "set_storage": ("x = torch.arange(6.0, device=d); result = torch.empty(0, device=d).set_(x.untyped_storage(), 1, (2, 2)).sum().item()", "cpu"),
    "set_storage_strided": ("x = torch.arange(6.0, device=d); result = torch.empty(0, device=d).set_(x.untyped_storage(), 0, (2, 2), (1, 2)).sum().item()", "cpu"),
    "set_storage_negative_offset": ("x = torch.arange(6.0, device=d); torch.empty(0, device=d).set_(x.untyped_storage(), -1, (2,))", "cpu"),
    "set_storage_bad_strides": ("x = torch.arange(6.0, device=d); torch.empty(0, device=d).set_(x.untyped_storage(), 0, (2, 2), (1,))", "cpu"),
    "set_tensor": ("result = torch.empty(0, device=d).set_(torch.arange(3.0, device=d)).sum().item()", "cpu"),
    "set_other_device_storage": ("other = 'cpu' if d != 'cpu' else 'meta'; torch.empty(0, device=d).set_(torch.ones(3, device=other).untyped_storage())", "RuntimeError"),
    "resize": ("x = torch.arange(3.0, device=d); x.resize_(5); result = x[:3].sum().item()", "cpu"),
    "resize_negative": ("torch.ones(3, device=d).resize_(-1)", "cpu"),
    "resize_overflow": ("torch.ones(3, device=d).resize_(2**62)", "cpu"),
    "storage_resize": ("s = torch.ones(3, device=d).untyped_storage(); s.resize_(7); result = s.nbytes()", "cpu"),
    "storage_resize_negative": ("torch.ones(3, device=d).untyped_storage().resize_(-1)", "RuntimeError"),
    "storage_new_negative": ("torch.UntypedStorage(-1, device=d)", "RuntimeError"),
    "storage_tolist": ("result = torch.ones(2, device=d).untyped_storage().tolist()", "cpu"),
    "storage_fill": ("s = torch.ones(2, device=d).untyped_storage(); s.fill_(1); result = s.tolist()", "cpu"),
    "storage_copy": ("s = torch.zeros(2, device=d).untyped_storage(); s.copy_(torch.ones(2).untyped_storage()); result = s.tolist()", "cpu"),
    "storage_clone_cpu": ("result = torch.ones(2, device=d).untyped_storage().clone().cpu().tolist()", "cpu"),
    "storage_index": ("result = torch.ones(2, device=d).untyped_storage()[1]", "cpu"),
    "share_memory": ("x = torch.ones(2, device=d); x.share_memory_(); result = x.is_shared()", "ok"),
    "pin_memory_of_device_tensor": ("torch.ones(2, device=d).pin_memory()", "RuntimeError"),
    "is_pinned": ("result = torch.ones(2, device=d).is_pinned()", "cpu"),
    "pin_memory": ("result = torch.ones(2).pin_memory().is_pinned()", "ok"),
    "dlpack_export": ("torch.ones(2, device=d).__dlpack__()", "BufferError"),
    "record_stream": ("torch.ones(2, device=d).record_stream(torch.tpu.current_stream()); result = 1", "ok"),
    # Generator
    "generator_seed": ("g = torch.Generator(d); g.manual_seed(5); result = g.initial_seed()", "cpu"),
    "generator_negative_seed": ("result = torch.Generator(d).manual_seed(-1).initial_seed()", "cpu"),
    "generator_string_seed": ("torch.Generator(d).manual_seed('x')", "cpu"),
    "generator_state": ("g = torch.Generator(d); g.set_state(g.get_state()); result = 1", "cpu"),
    "generator_bad_state": ("torch.Generator(d).set_state(torch.zeros(3, dtype=torch.uint8))", "cpu"),
    "generator_float_state": ("torch.Generator(d).set_state(torch.zeros(16))", "cpu"),
    "generator_clone_state": ("result = torch.Generator(d).clone_state().initial_seed()", "cpu"),
    "generator_offset": ("g = torch.Generator(d); g.set_offset(16); result = g.get_offset()", "ok"),
    # Stream and Event
    "stream_methods": ("s = torch.Stream(device=d)\ns.synchronize(); e = s.record_event(); s.wait_event(e); "
                       "s.wait_stream(torch.Stream(device=d)); result = (s.query(), e.query())", "ok"),
    "stream_context": ("s = torch.Stream(device=d)\nwith s: result = torch.accelerator.current_stream() == s", "ok"),
    "event_methods": ("e = torch.Event(device=d, enable_timing=True); f = torch.Event(device=d, enable_timing=True)\n"
                      "e.record(); f.record(); f.synchronize(); e.wait(); result = (e.query(), e.elapsed_time(f) >= 0)", "ok"),
    "event_unrecorded_elapsed": ("torch.Event(device=d, enable_timing=True).elapsed_time(torch.Event(device=d, enable_timing=True))",
                                 "ValueError"),
    # Under FakeTensorMode
    "fake_tensor": ("from torch._subclasses import FakeTensorMode\n"
                    "with FakeTensorMode(): x = torch.ones(3, device=d); result = (x * 2).shape", "cpu"),
    "fake_rng_state": ("from torch._subclasses import FakeTensorMode\n"
                       "with FakeTensorMode(): result = torch.tpu.get_rng_state().shape", "ok"),
    "fake_generator_state": ("from torch._subclasses import FakeTensorMode\n"
                             "with FakeTensorMode(): g = torch.Generator(d); result = (g.get_state().shape, g.clone_state().get_state().shape)",
                             "cpu"),
    "fake_storage": ("from torch._subclasses import FakeTensorMode\n"
                     "with FakeTensorMode(): x = torch.ones(3, device=d); result = x.untyped_storage().nbytes()", "cpu"),
}

WORKER = textwrap.dedent(r"""
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import torch, torch_tpu
    torch_tpu.set_eager_mode(sys.argv[1])
    torch_tpu.set_fallback_warnings(False)

    def outcome(code, device):
        scope = {"torch": torch, "d": device, "result": None}
        try:
            exec(code, scope)
            if device != "cpu":
                torch.tpu.synchronize()
            return "ok"
        except Exception as error:  # noqa: BLE001
            return type(error).__name__ + ": " + str(error).splitlines()[0][:200] if str(error) else type(error).__name__

    for line in sys.stdin:
        name, code, compare = json.loads(line)
        print("START " + name, flush=True)
        got = outcome(code, "tpu")
        cpu = outcome(code, "cpu") if compare else None
        print("DONE " + json.dumps([name, got, cpu]), flush=True)
""")

CALL_TIMEOUT_S = 60


def _sweep(mode):
    """{name: (tpu outcome, cpu outcome or None)}; a crash or hang is the outcome "died: ..."."""
    pending = list(CALLS.items())
    outcomes = {}
    while pending:
        proc = subprocess.Popen([sys.executable, "-c", WORKER, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=dict(os.environ))
        lines = "".join(json.dumps([name, code, expected == "cpu"]) + "\n" for name, (code, expected) in pending)
        try:
            out, err = proc.communicate(lines, timeout=CALL_TIMEOUT_S * 3 + 10 * len(pending))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err = "hung: " + err
        started = None
        for line in out.splitlines():
            if line.startswith("START "):
                started = line[6:]
            elif line.startswith("DONE "):
                name, got, cpu = json.loads(line[5:])
                outcomes[name] = (got, cpu)
                started = None
        done = set(outcomes)
        if started is not None:  # the worker died (or hung) inside this call
            outcomes[started] = (f"died: exit {proc.returncode}: {err[-500:]}", None)
            done.add(started)
        elif proc.returncode != 0 and len(done) == 0:
            raise AssertionError(f"the sweep worker failed before any call: {err[-2000:]}")
        pending = [(name, spec) for name, spec in pending if name not in done]
    return outcomes


@pytest.mark.parametrize("mode", ["debug", "strict", "defer_and_fuse"])
def test_every_call_ends_like_cpu_or_cuda(mode):
    outcomes = _sweep(mode)
    wrong = []
    for name, (code, expected) in CALLS.items():
        got, cpu = outcomes[name]
        got_type = got.split(":")[0]
        if expected == "cpu":
            want = cpu.split(":")[0]
        else:
            want = expected
        if got_type != want:
            wrong.append(f"{name}: got {got!r}, expected {want}" + (f" (CPU: {cpu!r})" if cpu else ""))
    assert not wrong, "\n".join(wrong)
