"""torch.no_grad() / enable_grad() used as decorators inside the compiled code: each call of the
decorated function runs inside that grad mode (in the graph), and a decorated function that
leaves the frame is rebuilt decorated."""
import torch

import ember
from capture_helpers import assert_matches_eager


def test_no_grad_decorator_made_in_the_frame():
    def f(x):
        @torch.no_grad()
        def augment(t):
            return (t + 1) * 2

        y = augment(x)
        return y, y.requires_grad, (x * 3).requires_grad, torch.is_grad_enabled()

    assert_matches_eager(f, torch.randn(3, requires_grad=True), graphs=1)


def test_decorators_without_parentheses_and_nested_modes():
    def f(x):
        @torch.enable_grad
        def inner(t):
            return t * 2, torch.is_grad_enabled()

        @torch.no_grad
        def outer(t):
            return inner(t), (t + 1).requires_grad, torch.is_grad_enabled()

        (y, inner_mode), outer_requires, outer_mode = outer(x)
        return y, y.requires_grad, inner_mode, outer_requires, outer_mode

    assert_matches_eager(f, torch.randn(3, requires_grad=True), graphs=1)


def test_decorated_function_raising_restores_the_mode():
    def f(x):
        @torch.no_grad()
        def fail(t):
            raise ValueError("no")

        try:
            fail(x)
        except ValueError:
            pass
        y = x * 2
        return y, y.requires_grad, torch.is_grad_enabled()

    assert_matches_eager(f, torch.randn(3, requires_grad=True), graphs=1)


def test_decorated_function_returned_keeps_its_mode():
    def f(x):
        scale = x * 2

        @torch.no_grad()
        def apply(t):
            return t * scale

        return apply, scale

    x = torch.randn(3, requires_grad=True)
    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        apply, scale = ember.compile(f, backend="eager")(x)
    out = apply(torch.ones(3, requires_grad=True))
    assert not out.requires_grad and torch.equal(out, scale.detach())
    assert apply.__name__ == "apply" and apply.__wrapped__.__name__ == "apply"
