"""tpu_dist under torchrun: two processes on the CPU plugin, each with its own PJRT client.

Each test launches one script of tests/distributed/ with `torchrun --nproc-per-node 2`; a script
runs its checks in all three eager modes itself (one launch instead of three keeps the suite
cheap) and exits non-zero on the first mismatch, so these tests check the exit status and the
lines each rank prints per mode."""
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["debug", "strict", "defer_and_fuse"]
pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="this torch build has no torch.distributed with Gloo")


def launch(script, timeout=600, **env):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
               "2", os.path.join(HERE, "distributed", script)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "OMP_NUM_THREADS": "1", **env})
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{script} failed:\n{output[-6000:]}"
    return output


def test_backend_is_registered_for_tpu():
    assert "tpu_dist" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["tpu"] == "tpu_dist"
    # The CPU keeps Gloo as its default backend; tpu_dist also serves CPU tensors of its groups.
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"
    assert set(dist.Backend.backend_capability["tpu_dist"]) == {"tpu", "cpu"}


def test_collectives_agree_with_cpu():
    output = launch("collectives.py")
    for rank in range(2):
        for mode in MODES:
            assert f"rank {rank}: collectives agree with CPU in {mode}" in output, output[-3000:]


def test_ddp_fsdp2_checkpoint_and_dtensor_agree_with_cpu(tmp_path):
    output = launch("parallel.py", CHECKPOINT_DIR=str(tmp_path))
    for rank in range(2):
        for mode in MODES:
            assert f"rank {rank}: ddp,fsdp,dtensor agree with CPU in {mode} " in output, output[-3000:]
    # Both ranks wrote their shards of the checkpoint.
    assert len(list((tmp_path / "strict").glob("*.distcp"))) == 2


def test_divergent_ranks_neither_hang_nor_recompile():
    output = launch("mpmd.py")
    for mode in MODES:
        assert f"rank 1: {mode}: new programs after warm-up 0, extra work 0 times" in output
        assert f"rank 0: {mode}: new programs after warm-up" in output


def test_mismatch_timeout_and_dead_peer_raise_instead_of_hanging():
    output = launch("failures.py", timeout=300)
    assert "rank 0: mismatch reported: tpu_dist: the ranks called different collectives" in output
    assert "rank 1: mismatch reported: tpu_dist: the ranks called different collectives" in output
    for rank in range(2):
        for mode in ["strict", "defer_and_fuse"]:
            assert f"rank {rank}: {mode}: size and dtype mismatches reported" in output
    for mode in ["strict", "defer_and_fuse"]:
        assert f"rank 0: {mode}: timed out after" in output
    assert "rank 0: dead peer reported after" in output
