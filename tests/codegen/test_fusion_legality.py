"""What the scheduler may fuse: a node that shares a loop body with the node whose output it
reads reads only the element that iteration wrote (fuzz reductions 14376: `stack([v, v, v])[i]`
read at a data-dependent row inside the loop that was still writing the stack, for rows not yet
written: uninitialized memory in the result).  On the C++ kernels, and Triton's under its
interpreter on the CPU (or on a GPU)."""
import pytest
import torch

import ember
from codegen_helpers import run

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _stack_read_at_a_row(a, i0):
    v0 = a.prod(-1)
    v1 = v0.argmax()  # (a full reduction first: the kernel's outer loop is empty)
    v4 = torch.stack([v0, v0, v0], 0)
    return torch.relu(v4) + torch.flatten(v4[i0]), v1


def _shifted_read(a):
    b = a * 2
    return b + b.flip(-1), b


@pytest.mark.parametrize("kernels", ["cpp", "triton"])
@pytest.mark.parametrize("row", [0, 2])
def test_a_read_at_another_element_of_a_loop_mate_is_not_fused_into_its_loop(kernels, row):
    if kernels == "triton":
        pytest.importorskip("triton")
    device = DEVICE if kernels == "triton" else "cpu"
    gen = torch.Generator().manual_seed(1437601)
    a = torch.randint(-8, 9, (16, 7), generator=gen, dtype=torch.int64).t().to(device)
    i0 = torch.tensor([row], device=device)
    with ember.config.patch(cpu_kernels=kernels):
        for _ in range(3):  # (garbage differs from run to run: a few tries)
            got, _ = run(_stack_read_at_a_row, a, i0)
            expected = _stack_read_at_a_row(a, i0)
            for ours, theirs in zip(got, expected):
                assert torch.equal(ours, theirs), (ours, theirs)


@pytest.mark.parametrize("kernels", ["cpp", "triton"])
def test_a_flipped_read_of_a_loop_mate_matches_eager(kernels):
    if kernels == "triton":
        pytest.importorskip("triton")
    device = DEVICE if kernels == "triton" else "cpu"
    a = torch.arange(24.0, device=device).reshape(4, 6)
    with ember.config.patch(cpu_kernels=kernels):
        got, graphs = run(_shifted_read, a)
    for ours, theirs in zip(got, _shifted_read(a)):
        assert torch.equal(ours, theirs)


def test_a_same_element_read_still_fuses():
    """The rule costs no ordinary fusion: `(a * 2) + 1` reading the element it wrote stays one kernel."""
    a = torch.randn(8, 5)
    got, graphs = run(lambda a: ((a * 2).relu() + 1, a * 2), a)
    assert len(graphs[0].kernels) == 1
