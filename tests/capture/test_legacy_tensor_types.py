"""Tensor.type() with a legacy tensor class (torch.HalfTensor, torch.DoubleTensor) converts as in
eager, in the graph."""
import torch

from capture_helpers import assert_matches_eager


def test_type_with_a_tensor_class_converts_in_the_graph():
    def f(a, b):
        m = a.type(torch.HalfTensor)
        return m, b.type(m.type()), a.type(torch.DoubleTensor) * 2, m.type()

    assert_matches_eager(f, torch.randn(3), torch.randn(3), graphs=1)

