"""The per-op adapter table (csrc/aten/op_adapters.cpp): every op whose handling differs from the
boxed kernel's generic path says why, names an op PyTorch has, and names a test that exists."""
import ast
import os

import torch

import torch_tpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _test_functions(path):
    with open(os.path.join(ROOT, path)) as source:
        tree = ast.parse(source.read())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_adapter_names_real_ops_a_reason_and_an_existing_test():
    table = torch_tpu._C._op_adapters()
    assert table, "the adapter table is empty"
    seen = set()
    for ops, reason, test in table:
        assert len(reason.split()) >= 5, (ops, reason)
        for op in ops:
            assert op.startswith("aten::"), op
            assert hasattr(torch.ops.aten, op[len("aten::"):]), f"{op} is not an ATen op in this torch"
            assert op not in seen, f"{op} has two adapters"
            seen.add(op)
        path, _, name = test.partition("::")
        assert name in _test_functions(path), f"{ops}: {test} does not exist"
