"""torch.vmap of one of torch's own functions is one graph node running vmap itself: values,
in-place writes into inputs and `is` answer as in eager.  (vmap of Python functions:
test_func_transforms.py.)"""
import torch

from capture_helpers import assert_matches_eager


def test_vmap_of_an_in_place_method_writes_the_input_and_returns_it():
    def f(z):
        x = z.clone()
        y = torch.vmap(torch.Tensor.acos_)(x)
        return y is x, y is z, x, y * 2

    assert_matches_eager(f, torch.rand(4, 3), graphs=1)


def test_vmap_of_an_in_place_method_on_an_input():
    def f(x):
        y = torch.vmap(torch.Tensor.mul_)(x, torch.full((4,), 2.0))
        return y is x, x + 1

    assert_matches_eager(f, torch.rand(4, 3), graphs=1)


def test_vmap_of_torch_functions_with_in_dims():
    def f(a, b):
        dot = torch.func.vmap(torch.dot)(a, b)
        outer = torch.vmap(torch.outer, in_dims=(0, None))(a, b[0])
        return dot, outer, torch.vmap(torch.sum, in_dims=1)(a)

    assert_matches_eager(f, torch.randn(5, 3), torch.randn(5, 3), graphs=1)


def test_vmap_of_a_python_function_is_captured_in_the_same_graph():
    def f(a):
        return torch.vmap(lambda row: row.sin() * 2)(a) + 1

    assert_matches_eager(f, torch.randn(4, 3), graphs=1, breaks=0)
