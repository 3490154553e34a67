"""The compilation cache: what its key covers, its directory across processes, and its faults.

The directory is read at a process's first use of the cache, so every test of the disk cache runs
a fresh Python process (WORKER) with TORCH_TPU_CACHE_DIR pointing at a temporary directory. The
worker checks its results against the CPU itself and prints its statistics as JSON.
"""
import ctypes
import json
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys

import pytest
import torch

import torch_tpu
import torch_tpu.cache
from torch_tpu import _C

WORKER = r"""
import json, os, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch, torch_tpu
    if os.environ.get("TEST_CACHE_SALT"):
        torch_tpu._C._cache_key_salt(os.environ["TEST_CACHE_SALT"])
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 24, generator=generator), torch.randn(24, 8, generator=generator)

    def work(x, y):
        return [x.sin(), x @ y, (x * 2 + 1).relu(), x.sum(1), torch.softmax(x, -1), x.t().exp()]

    # allclose, not torch.testing.assert_close: importing that costs each worker a second.
    for expected, actual in zip(work(a, b), work(a.to("tpu"), b.to("tpu"))):
        assert torch.allclose(actual.cpu(), expected, rtol=1e-4, atol=1e-5), (actual, expected)
    for n in range(int(os.environ.get("TEST_EXTRA_PROGRAMS", "0"))):
        x = torch.arange(3.0 + n)
        assert torch.allclose(x.to("tpu").cos().cpu(), x.cos(), rtol=1e-4, atol=1e-5)
    torch.manual_seed(1)
    random = torch.rand(5, device="tpu").sum().item()  # a program with generator-state parameters
    stats = torch_tpu.cache_stats()
    compiles = torch_tpu.metrics()["compiles"]
print(json.dumps({"stats": stats, "compiles": compiles, "random": random,
                  "warnings": [str(w.message) for w in caught if "torch_tpu:" in str(w.message)]}))
"""


def worker_env(directory, **extra):
    env = dict(os.environ)
    env.pop("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", None)
    env.pop("TORCH_TPU_CACHE_MAX_BYTES", None)
    env.pop("TORCH_TPU_INJECT_COMPILE_FAILURE", None)  # it turns the disk cache off
    env["TORCH_TPU_CACHE_DIR"] = str(directory)
    env["TORCH_TPU_EAGER_MODE"] = "strict"  # the program counts below are strict mode's, whatever the caller's
    env.update({k: str(v) for k, v in extra.items()})
    return env


def finish(proc, stdout, stderr):
    assert proc.returncode == 0, stderr[-4000:]
    return json.loads(stdout.strip().splitlines()[-1])


def run_worker(directory, preexec_fn=None, **extra):
    proc = subprocess.run([sys.executable, "-c", WORKER], env=worker_env(directory, **extra), capture_output=True,
                          text=True, timeout=180, preexec_fn=preexec_fn)
    return finish(proc, proc.stdout, proc.stderr)


def entries(directory):
    return sorted(name for name in os.listdir(directory) if name.endswith(".tpuexec"))


def damage_warnings(result):
    return [w for w in result["warnings"] if "compilation cache entry" in w]


def write_warnings(result):
    return [w for w in result["warnings"] if "cannot write" in w]


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """A directory filled by one cold run of the worker, and that run's report."""
    directory = tmp_path_factory.mktemp("populated")
    return directory, run_worker(directory)


@pytest.fixture
def populated_copy(populated, tmp_path):
    source, cold = populated
    directory = tmp_path / "cache"
    shutil.copytree(source, directory)
    return directory, cold


# What the key covers -------------------------------------------------------------------------


def test_the_file_name_hash_is_fnv1a_64():
    assert _C._cache_stable_hash(b"") == 0xCBF29CE484222325
    assert _C._cache_stable_hash(b"a") == 0xAF63DC4C8601EC8C
    assert _C._cache_stable_hash(b"foobar") == 0x85944171F73967E8


@pytest.mark.parametrize("field, change", [
    ("library_version", lambda v: "torch_tpu-9.9.9" + v[len("torch_tpu-0.1.0"):]),
    ("platform", lambda v: v + "-other"),
    ("platform_version", lambda v: v + ".1"),
    ("plugin_build", lambda v: v + "0"),
    ("api_major", lambda v: v + 1),
    ("api_minor", lambda v: v + 1),
    ("device_kind", lambda v: "TPU v5 lite"),
    ("device_count", lambda v: v + 1),
    ("host_isa", lambda v: v + "0000000000000000."),
    ("compile_options", lambda v: v + b"\x20\x00"),
    ("compiler_flags", lambda v: v + "--xla_cpu_enable_fast_math=true"),
    ("salt", lambda v: "another version"),
])
def test_every_part_of_the_context_changes_the_key(field, change):
    context = _C._cache_key_context()
    program = b"sin.\x00\x01f32[3]"
    base = _C._cache_full_key(program, context)
    assert _C._cache_full_key(program, dict(context)) == base  # deterministic
    changed = _C._cache_full_key(program, dict(context, **{field: change(context[field])}))
    assert changed != base
    assert _C._cache_entry_file_name(changed) != _C._cache_entry_file_name(base)


def test_the_key_names_this_build_and_the_program():
    context = _C._cache_key_context()
    assert context["library_version"].startswith("torch_tpu-0.1.0/format-")
    assert "build-id:" in context["library_version"], "the extension should be linked with a build id"
    assert context["platform"] == torch.tpu.platform()
    assert context["device_count"] == torch.tpu.device_count()
    assert context["compile_options"]
    # The CPU plugin compiles for this CPU: an entry must not reach a CPU without its extensions.
    if context["platform"].lower() != "cpu":
        assert context["host_isa"] == ""
    elif platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64"):
        assert context["host_isa"]
    assert context["host_isa"] == _C._cache_key_context()["host_isa"]
    one, other = (_C._cache_full_key(p, context) for p in (b"sin", b"cos"))
    assert one != other
    assert re.fullmatch(r"[0-9a-f]{16}\.tpuexec", _C._cache_entry_file_name(one))


def test_the_directory_comes_from_the_environment(monkeypatch):
    for name in ("TORCH_TPU_CACHE_DIR", "TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/home/someone")
    assert _C._cache_directory_from_environment() == "/home/someone/.cache/torch_tpu"
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert _C._cache_directory_from_environment() == "/xdg/torch_tpu"
    monkeypatch.setenv("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", "/tier3")
    assert _C._cache_directory_from_environment() == "/tier3"
    monkeypatch.setenv("TORCH_TPU_CACHE_DIR", "/ours")
    assert _C._cache_directory_from_environment() == "/ours"
    monkeypatch.setenv("TORCH_TPU_CACHE_DIR", "")
    assert _C._cache_directory_from_environment() is None


def test_a_repeated_program_is_a_memory_hit(mode):
    x = torch.randn(5, 7, device="tpu")
    x.cpu()
    x.tanh().cpu()
    before = torch_tpu.cache_stats()
    x.tanh().cpu()
    after = torch_tpu.cache_stats()
    assert after["memory_hits"] > before["memory_hits"]
    assert after["misses"] == before["misses"]
    assert {"disk_hits", "compile_seconds", "bytes_on_disk", "entries_on_disk", "directory"} <= after.keys()


# Across processes ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_restarted_process_loads_every_program_from_disk(mode, populated_copy):
    directory, cold = populated_copy
    if mode != "strict":  # fused graphs: other programs, with runtime numbers as parameters
        shutil.rmtree(directory)
        cold = run_worker(directory, TORCH_TPU_EAGER_MODE=mode)
    assert cold["stats"]["misses"] > 0 and cold["compiles"] > 0
    assert cold["stats"]["disk_writes"] == cold["stats"]["entries_on_disk"] == len(entries(directory))
    for name in entries(directory):  # old enough to see the warm run refresh them (the LRU clock)
        os.utime(directory / name, (1e9, 1e9))

    warm = run_worker(directory, TORCH_TPU_EAGER_MODE=mode)  # it checks its results against the CPU
    assert warm["stats"]["disk_hits"] == cold["stats"]["entries_on_disk"]
    assert warm["stats"]["misses"] == 0 and warm["compiles"] == 0
    assert warm["stats"]["compile_seconds"] == 0 and warm["stats"]["disk_writes"] == 0
    assert warm["random"] == cold["random"]
    assert all(os.path.getmtime(directory / name) > 1e9 for name in entries(directory))
    assert not warm["warnings"]


def test_a_version_change_misses(populated_copy):
    directory, cold = populated_copy
    other = run_worker(directory, TEST_CACHE_SALT="torch_tpu-9.9.9")
    assert other["stats"]["disk_hits"] == 0 and other["compiles"] == cold["compiles"]
    assert len(entries(directory)) == 2 * cold["stats"]["entries_on_disk"]


def test_other_compiler_flags_miss(populated_copy):
    directory, cold = populated_copy
    other = run_worker(directory, XLA_FLAGS="--xla_cpu_enable_fast_min_max=false")
    assert other["stats"]["disk_hits"] == 0 and other["compiles"] == cold["compiles"]


def test_two_processes_fill_one_directory_at_once(tmp_path, populated):
    procs = [subprocess.Popen([sys.executable, "-c", WORKER], env=worker_env(tmp_path), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [finish(proc, *proc.communicate(timeout=180)) for proc in procs]
    assert all(not r["warnings"] for r in results)
    assert entries(tmp_path) == entries(populated[0])  # the same programs under the same names
    assert all(_C._cache_check_entry(str(tmp_path / name)) == "" for name in entries(tmp_path))
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


# Faults --------------------------------------------------------------------------------------


def test_damaged_entries_are_deleted_and_recompiled(populated_copy):
    directory, cold = populated_copy
    names = entries(directory)
    assert len(names) >= 4
    truncated, flipped, foreign, unreadable = (directory / name for name in names[:4])
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    data = bytearray(flipped.read_bytes())
    data[-1] ^= 0x40  # a payload byte: only the checksum notices
    flipped.write_bytes(bytes(data))
    data = bytearray(foreign.read_bytes())
    data[8:12] = (99).to_bytes(4, "little")  # the header's format version
    foreign.write_bytes(bytes(data))
    # chmod 000 would not stop root (the tests run as root), but nothing reads a directory.
    unreadable.unlink()
    unreadable.mkdir()
    assert "truncated" in _C._cache_check_entry(str(truncated))
    assert "checksum" in _C._cache_check_entry(str(flipped))
    assert "format 99" in _C._cache_check_entry(str(foreign))
    assert "unreadable" in _C._cache_check_entry(str(unreadable))

    result = run_worker(directory)  # it also checks every result against the CPU
    assert result["stats"]["damaged_entries"] == 4 and result["compiles"] == 4
    assert result["stats"]["disk_hits"] == len(names) - 4
    assert len(damage_warnings(result)) == 1, result["warnings"]
    assert entries(directory) == names
    assert all(_C._cache_check_entry(str(directory / name)) == "" for name in names)


def without_root_file_access():
    # The tests run as root, which writes into a 0555 directory anyway: dropping the capabilities
    # that bypass permission checks (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) from the bounding set
    # makes the worker's root obey them. prctl(PR_CAPBSET_DROP = 24, capability).
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_a_read_only_directory_still_serves_hits_and_warns_once(populated_copy):
    directory, cold = populated_copy
    os.chmod(directory, 0o555)
    try:
        preexec_fn = without_root_file_access if os.geteuid() == 0 else None
        try:
            result = run_worker(directory, preexec_fn=preexec_fn, TEST_EXTRA_PROGRAMS=3)
        except subprocess.SubprocessError:
            pytest.skip("cannot drop root's file-access capabilities here")
    finally:
        os.chmod(directory, 0o755)
    assert result["stats"]["disk_hits"] == cold["stats"]["entries_on_disk"]
    assert result["compiles"] == 3 and not result["stats"]["writable"]
    assert len(write_warnings(result)) == 1, result["warnings"]
    assert len(entries(directory)) == cold["stats"]["entries_on_disk"]


def limit_file_size():
    # A full disk, simulated: writes past 512 bytes fail with EFBIG instead of raising SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))


def test_a_full_disk_degrades_to_memory_with_one_warning(tmp_path):
    result = run_worker(tmp_path, preexec_fn=limit_file_size)
    assert len(write_warnings(result)) == 1, result["warnings"]
    assert not result["stats"]["writable"] and result["stats"]["disk_writes"] == 0
    assert os.listdir(tmp_path) == []  # no partial files left behind


def test_a_directory_that_cannot_exist_leaves_the_cache_in_memory(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    result = run_worker(tmp_path / "file" / "cache")
    assert result["stats"]["misses"] > 0 and result["stats"]["disk_writes"] == 0
    assert len([w for w in result["warnings"] if "cannot be used" in w]) == 1, result["warnings"]


# Size cap ------------------------------------------------------------------------------------


def test_eviction_removes_the_least_recently_used_entries(tmp_path):
    names = [f"{i:016x}.tpuexec" for i in range(5)]
    for i, name in enumerate(names):
        (tmp_path / name).write_bytes(b"x" * 1000)
        os.utime(tmp_path / name, (1e9 + 100 * ((i + 2) % 5), 1e9 + 100 * ((i + 2) % 5)))
    (tmp_path / "notes.txt").write_bytes(b"y" * 10000)  # not ours: neither counted nor deleted
    assert _C._cache_scan(str(tmp_path)) == (5, 5000)
    assert _C._cache_evict(str(tmp_path), 3500) == 2
    # mtimes were 2,3,4,0,1 (x100): the two oldest are names[3] and names[4].
    assert sorted(os.listdir(tmp_path)) == sorted(names[:3] + ["notes.txt"])


def test_the_directory_stays_under_its_size_cap(tmp_path, populated):
    _, cold = populated
    cap = cold["stats"]["bytes_on_disk"] // 2
    result = run_worker(tmp_path, TORCH_TPU_CACHE_MAX_BYTES=cap)
    assert result["stats"]["disk_writes"] == cold["stats"]["disk_writes"]
    assert result["stats"]["evicted_entries"] > 0
    assert 0 < result["stats"]["bytes_on_disk"] <= cap
    assert _C._cache_scan(str(tmp_path))[1] <= cap


# Command line --------------------------------------------------------------------------------


def test_stats_and_clear_from_the_command_line(populated_copy, capsys):
    directory, cold = populated_copy
    (directory / "keep.txt").write_text("not an entry")
    proc = subprocess.run([sys.executable, "-m", "torch_tpu.cache", "stats", "--json"], env=worker_env(directory),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stats == {"directory": str(directory), "entries_on_disk": cold["stats"]["entries_on_disk"],
                     "bytes_on_disk": cold["stats"]["bytes_on_disk"]}

    assert torch_tpu.cache.main(["clear", "--dir", str(directory)]) == 0
    assert f"deleted {cold['stats']['entries_on_disk']} entries" in capsys.readouterr().out
    assert os.listdir(directory) == ["keep.txt"]
    assert torch_tpu.cache.directory_stats(str(directory))["entries_on_disk"] == 0
