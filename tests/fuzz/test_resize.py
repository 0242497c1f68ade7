"""The dynamic backends' third call runs on inputs grown to other sizes (resize.py)."""
import torch

from .program import Program, Statement
from .resize import GROWTH, grown


def test_grown_inputs_keep_relations_layouts_and_leaves():
    leaf = torch.randn(4, 3).requires_grad_()
    permuted = torch.randn(3, 4).t()                       # dense, dim 1 outermost
    expanded = torch.randn(4, 1).expand(4, 5)              # stride 0 in dim 1
    index = torch.tensor([0, 3, 1])
    scalar = torch.tensor(2.0)
    inputs, leaves = grown([leaf.clone(), permuted, expanded, index, scalar], [leaf, None, None, None, None])
    a, p, e, i, s = inputs
    assert a.shape == (4 + GROWTH, 3 + GROWTH) and a.grad_fn is not None and leaves[0].is_leaf
    assert p.shape == (4 + GROWTH, 3 + GROWTH) and p.stride()[1] > p.stride()[0]
    assert e.shape == (4 + GROWTH, 5 + GROWTH) and e.stride()[1] == 0
    assert i.shape == (3 + GROWTH,) and int(i.max()) <= 3   # tiled: indices stay in range
    assert s.shape == ()
    torch.testing.assert_close(p[:4, :3], permuted)


def test_live_only_drops_what_the_outputs_do_not_use():
    statements = [Statement("v0 = a + 1", "add", defs=("v0",), uses=("a",)),
                  Statement("v1 = a.reshape(3, 4)", "reshape", defs=("v1",), uses=("a",)),
                  Statement("v0.add_(1)", "add_", uses=("v0",), mutates=("v0",)),
                  Statement("v2 = v0 * 2", "mul", defs=("v2",), uses=("v0",))]
    program = Program(seed=0, mode="default", inputs=[], statements=statements, outputs=["v2"])
    assert [s.op for s in program.live_only().statements] == ["add", "add_", "mul"]
    # a write into an intermediate nothing later reads is dropped with it (fuzz 73335)
    dead_write = Statement("v1.add_(1)", "add_", uses=("v1",), mutates=("v1",))
    program = Program(seed=0, mode="default", inputs=[], statements=statements[:2] + [dead_write] + statements[2:],
                      outputs=["v2"])
    assert [s.op for s in program.live_only().statements] == ["add", "add_", "mul"]
