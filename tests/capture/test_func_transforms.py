"""torch.func.vmap of Python functions and torch.func.grad / grad_and_value under
fullgraph=True: the function is a subgraph of one node running the transform; results and
gradients equal eager's, and ember's AOT tracer traces the transform's ATen ops."""
import pytest
import torch
import torch.utils._pytree as pytree

import ember
from capture_helpers import assert_matches_eager
from subgraph_helpers import compile_recorded, gradients

aten = torch.ops.aten
_SCALE = torch.randn(3)


# -- vmap ------------------------------------------------------------------------------------------
def test_vmap_of_a_closure_over_a_tensor_is_one_graph():
    def f(x, w):
        return torch.vmap(lambda row: (row.sin() * w).sum())(x) + 1

    assert_matches_eager(f, torch.randn(4, 3), torch.randn(3), graphs=1, breaks=0)
    backend, _ = compile_recorded(f, torch.randn(4, 3), torch.randn(3))
    assert any(name.startswith("ember_vmap") for name in backend.captured_targets())
    assert aten.sin.default in backend.aten_ops()


def test_vmap_with_in_dims_out_dims_and_several_results():
    def f(x, y):
        return torch.func.vmap(lambda r, s: (r * s, r + _SCALE[0]), in_dims=(1, None), out_dims=(0, 1))(x, y)

    assert_matches_eager(f, torch.randn(4, 3), torch.randn(4), graphs=1, breaks=0)


def test_nested_vmap_of_python_functions():
    def f(x, y):
        inner = torch.vmap(lambda a, b: a * b + 1, in_dims=(0, None))
        return torch.vmap(lambda row: inner(row, y).cos())(x)

    assert_matches_eager(f, torch.randn(2, 3, 4), torch.randn(4), graphs=1, breaks=0)


def test_vmap_of_a_function_with_keyword_and_constant_arguments():
    def g(row, scale, power=2):
        return (row * scale) ** power

    def f(x):
        return torch.vmap(g, in_dims=(0, None))(x, 3.0, power=3)

    assert_matches_eager(f, torch.randn(5, 2), graphs=1, breaks=0)


def test_vmap_of_a_python_function_gradients_equal_eager():
    def f(x, w):
        return torch.vmap(lambda row: (row.tanh() @ w).exp())(x)

    x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True)
    compiled = ember.compile(f, backend="aot_eager", fullgraph=True)
    expected, got = gradients(f, compiled, [x, w])
    for left, right in zip(got, expected):
        torch.testing.assert_close(left, right)
    ember.reset()


def test_vmap_of_a_function_writing_its_batched_arguments_returns_them():
    # (PyTorch's DefaultsTests.test_is_init_in_compile_vmapped_mutated_tensor_tensor_multi_arg)
    def f(y, z):
        a = y.clone()
        b = z.clone()

        def g(a, b):
            return a.acos_(), b.acos_()

        c, d = torch.vmap(g)(a, b)
        return a is c is b is d, a is c, b is d, c, d

    assert_matches_eager(f, torch.rand(4, 2), torch.rand(4, 10), graphs=1, breaks=0)


# -- grad ------------------------------------------------------------------------------------------
def test_grad_of_a_closure_is_one_graph():
    def f(x, w):
        return torch.func.grad(lambda t: (t.sin() * w).sum())(x) * 2

    assert_matches_eager(f, torch.randn(3), torch.randn(3), graphs=1, breaks=0)
    backend, _ = compile_recorded(f, torch.randn(3), torch.randn(3))
    assert any(name.startswith("ember_grad") for name in backend.captured_targets())
    assert aten.cos.default in backend.aten_ops()  # (sin's derivative, traced)


def test_grad_with_argnums_and_aux_and_grad_and_value():
    def f(x, y):
        loss = lambda a, b: ((a * b).sum(), a.cos())  # noqa: E731
        grads, aux = torch.func.grad(loss, argnums=(0, 1), has_aux=True)(x, y)
        g, (value, aux2) = torch.func.grad_and_value(loss, argnums=1, has_aux=True)(x, y)
        g3, value3 = torch.func.grad_and_value(lambda a: (a ** 3).sum())(x)
        return grads, aux, g, value, aux2, g3, value3

    assert_matches_eager(f, torch.randn(3), torch.randn(3), graphs=1, breaks=0)


def test_grad_with_constant_arguments_and_keywords():
    def loss(a, scale, b, power=2):
        return ((a * scale - b) ** power).sum()

    def f(x, y):
        return torch.func.grad(loss, argnums=(0, 2))(x, 3.0, y, power=3), torch.func.grad(loss)(x, 0.5, b=y)

    assert_matches_eager(f, torch.randn(4), torch.randn(4), graphs=1, breaks=0)


def test_nested_grad_and_grad_inside_vmap():
    def f(x):
        second = torch.func.grad(torch.func.grad(lambda t: t.sin() * t))(x[0, 0])
        per_row = torch.vmap(torch.func.grad(lambda r: (r ** 2).sum()))(x)
        return second, per_row

    assert_matches_eager(f, torch.randn(4, 3), graphs=1, breaks=0)


def test_gradient_through_a_grad_result_equals_eager():
    def f(x, w):
        return torch.func.grad(lambda t: (t.sin() * w).sum())(x)

    x, w = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    for backend in ("eager", "aot_eager", "ember"):
        ember.reset()
        compiled = ember.compile(f, backend=backend, fullgraph=True)
        expected, got = gradients(f, compiled, [x, w])
        for left, right in zip(got, expected):
            torch.testing.assert_close(left, right)
    ember.reset()


@pytest.mark.parametrize("transform", [torch.func.grad, torch.func.vmap])
def test_function_changing_python_state_is_refused_with_a_reason(transform):
    seen = []

    def f(x):
        def noisy(t):
            seen.append(t)
            return t.sum()

        return transform(noisy)(x)

    ember.reset()
    with pytest.raises(Exception, match="the function changes Python state"):
        ember.compile(f, backend="eager", fullgraph=True)(torch.ones(3))
    ember.reset()
    assert pytree.tree_leaves(seen) == []
