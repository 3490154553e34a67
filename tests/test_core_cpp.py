"""Runs the torch-free C++ unit tests (builder, printer, proto encoder, PJRT binding, lowerings,
view access, program keys, program cache)."""
import os
import subprocess

import torch

import torch_tpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_core_unit_tests_pass():
    binary = os.path.join(ROOT, "build", "core_tests")
    assert os.path.exists(binary), "build/core_tests is missing: run `make build`"
    plugin = torch_tpu._C._plugin_path()
    result = subprocess.run([binary, plugin], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 failed" in result.stdout and "FAIL" not in result.stdout, result.stdout
    assert torch.tpu.platform()  # the plugin the unit tests used is the one the device uses
