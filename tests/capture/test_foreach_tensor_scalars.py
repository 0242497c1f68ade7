"""torch._foreach_* ops given a 0-d tensor where they take a number: one graph, eager's values."""
import torch

import ember
from capture_helpers import assert_matches_eager


def _pow_tensor_base(base, exponents):
    return torch._foreach_pow(base, exponents)


def test_foreach_pow_with_a_zero_dim_tensor_base():
    exponents = [torch.tensor(3.4), torch.randn(3), torch.tensor([1, 2, 3])]
    for base in (torch.tensor(0.8), torch.tensor(0.8, dtype=torch.float64), torch.tensor(3)):
        assert_matches_eager(_pow_tensor_base, base, exponents, graphs=1)


def test_foreach_pow_base_carries_no_gradient_as_in_eager():
    base = torch.tensor(0.8, requires_grad=True)
    exponent = torch.randn(3, requires_grad=True)
    out = ember.compile(_pow_tensor_base, backend="aot_eager", fullgraph=True)(base, [exponent])
    out[0].sum().backward()
    expected_exponent = exponent.detach().clone().requires_grad_(True)
    torch._foreach_pow(base.detach(), [expected_exponent])[0].sum().backward()
    assert base.grad is None
    torch.testing.assert_close(exponent.grad, expected_exponent.grad)


def _lerp_tensor_weight(xs, ends, weight):
    result = torch._foreach_lerp_(xs, ends, weight)
    return result is xs, xs


def test_foreach_lerp_with_a_zero_dim_tensor_weight():
    for weight in (torch.tensor(0.5), torch.tensor(0.3, dtype=torch.float64), torch.tensor(0.7)):
        xs = [torch.ones(2, 2) * 4.26, torch.randn(3, dtype=torch.float64)]
        ends = [torch.ones(2, 2), torch.randn(3, dtype=torch.float64)]
        assert_matches_eager(_lerp_tensor_weight, xs, ends, weight, graphs=1)
