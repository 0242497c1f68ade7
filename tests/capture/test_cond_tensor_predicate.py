"""torch.cond with a data-dependent bool tensor predicate under fullgraph=True: both branches
are subgraphs of one node; results and gradients equal eager's for either outcome, and ember's
AOT tracer traces both branches (the graph holds their ops and torch.where selects)."""
import pytest
import torch

import ember
from capture_helpers import assert_matches_eager
from subgraph_helpers import compile_recorded, gradients

aten = torch.ops.aten


def _branches(x, y):
    return torch.cond(x.sum() > 0, lambda a, b: (a.sin() + b, a * 2), lambda a, b: (a.cos() - b, a + b), (x, y))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tensor_predicate_is_one_graph_with_eager_results(sign):
    x = torch.rand(4) * sign
    assert_matches_eager(_branches, x, torch.randn(4), graphs=1, breaks=0)
    backend, result = compile_recorded(_branches, x, torch.randn(4))
    assert any(name.startswith("ember_cond") for name in backend.captured_targets())
    ops = backend.aten_ops()
    assert {aten.sin.default, aten.cos.default, aten.where.self} <= ops, ops


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tensor_predicate_gradients_follow_the_taken_branch(sign):
    x = (torch.rand(5) + 0.5) * sign
    y = torch.randn(5, requires_grad=True)
    compiled = ember.compile(_branches, backend="aot_eager", fullgraph=True)
    (expected_x, expected_y), (got_x, got_y) = gradients(_branches, compiled, [x.requires_grad_(), y])
    torch.testing.assert_close(got_x, expected_x)
    torch.testing.assert_close(got_y, expected_y)
    ember.reset()


def test_untaken_branch_with_an_infinite_derivative_leaves_the_gradient_finite():
    # sqrt at 0 has an infinite derivative: a torch.where over both branches' values would give
    # NaN through where's backward (0 * inf); the taken branch alone gives 1.
    def f(x):
        return torch.cond(x.min() >= 0, lambda t: t + 1, lambda t: t.sqrt(), (x,))

    x = torch.zeros(3, requires_grad=True)
    for backend in ("eager", "aot_eager"):
        ember.reset()
        compiled = ember.compile(f, backend=backend, fullgraph=True)
        (expected,), (got,) = gradients(f, compiled, [x])
        torch.testing.assert_close(got, expected)
        assert torch.isfinite(got).all()
    ember.reset()


def test_branches_closing_over_parameters_get_their_gradients():
    class Gate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(3, 3)
            self.down = torch.nn.Linear(3, 3)

        def forward(self, x):
            return torch.cond(x.mean() > 0, lambda t: self.up(t).relu(), lambda t: self.down(t).tanh(), (x,))

    torch.manual_seed(0)
    model = Gate()
    for sign in (1.0, -1.0):
        x = torch.rand(2, 3) * sign
        ember.reset()
        compiled = ember.compile(model, backend="aot_eager", fullgraph=True)
        expected = model(x)
        expected.sum().backward()
        eager_grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        got = compiled(x)
        torch.testing.assert_close(got, expected)
        got.sum().backward()
        for p, g in zip(model.parameters(), eager_grads):
            torch.testing.assert_close(p.grad, g)
        model.zero_grad()
    ember.reset()


def test_tensor_predicate_with_the_ember_backend():
    def f(x):
        out = torch.cond(x[0] > 0.5, lambda t: (t * 3).exp(), lambda t: t.abs().log1p(), (x,))
        return out + 1

    for x in (torch.tensor([0.9, -1.0, 2.0]), torch.tensor([0.1, -1.0, 2.0])):
        assert_matches_eager(f, x, graphs=1, backends=("ember",))


def test_branch_that_mutates_python_state_is_refused_with_a_reason():
    # (eager torch.cond refuses it too: its branches must be pure)
    seen = []

    def f(x):
        def noisy(t):
            seen.append(1)
            return t + 1

        return torch.cond(x.sum() > 0, noisy, lambda t: t - 1, (x,))

    ember.reset()
    with pytest.raises(Exception, match="torch.cond's true branch: the function changes Python state"):
        ember.compile(f, backend="eager", fullgraph=True)(torch.ones(3))
    assert seen == []
    ember.reset()


def test_branch_drawing_random_numbers_is_refused_with_a_reason():
    def f(x):
        return torch.cond(x.sum() > 0, lambda t: torch.nn.functional.dropout(t, 0.5), lambda t: t * 2, (x,))

    ember.reset()
    with pytest.raises(Exception, match="torch.cond's true branch draws random numbers"):
        ember.compile(f, backend="eager", fullgraph=True)(torch.ones(3))
    ember.reset()
