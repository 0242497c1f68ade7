"""var/std of equal values and their gradients, against eager (the fuzzer found each)."""
import pytest
import torch

import ember


def _var_of_var(a):
    v0 = torch.var(a, 0, unbiased=False)
    return torch.var(v0, -1, unbiased=True)


@pytest.mark.parametrize("scale", [1.0, 1e3, 1e6])
def test_gradient_of_the_variance_of_equal_values_is_exactly_zero(scale):
    """var(v) of 16 equal values is 0 and so is its gradient, 2 / (n - 1) * (v - mean(v)): the
    mean of the equal values must come out exact (issue 32: ember summed them one after the
    other, 3v rounded, and the gradient of an input expanded along dim 1 was 1e-5, not 0)."""
    gen = torch.Generator().manual_seed(3)
    base = torch.randn(9, 1, dtype=torch.float64, generator=gen) * scale
    leaf = base.clone().requires_grad_(True)
    expected = _var_of_var(leaf.expand(9, 16))
    (expected_grad,) = torch.autograd.grad(expected, leaf)
    assert bool((expected_grad == 0).all())  # (eager's)
    leaf2 = base.clone().requires_grad_(True)
    got = ember.compile(_var_of_var, backend="ember")(leaf2.expand(9, 16))
    (grad,) = torch.autograd.grad(got, leaf2)
    assert got.item() == 0.0
    assert torch.equal(grad, torch.zeros_like(grad))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
@pytest.mark.parametrize("n", [3, 8, 9, 16, 31])
@pytest.mark.parametrize("op", ["var", "std"])
def test_gradient_of_statistics_of_equal_rows_is_zero(op, n, dtype):
    """Rows of n equal values (any n, the values from an expanded input): var's gradient is
    exactly 0 (std's is NaN, 0/0, as eager's); rows that differ get eager's gradient."""
    gen = torch.Generator().manual_seed(n)
    base = (torch.randn(4, 1, generator=gen) * 37.3).to(dtype)
    varied = torch.randn(2, n, generator=gen).to(dtype)

    def fn(a, b):
        statistic = getattr(torch, op)
        return statistic(a, -1).sum() + statistic(b, -1).sum()

    results = []
    for compiled in (False, True):
        a = base.clone().requires_grad_(True)
        b = varied.clone().requires_grad_(True)
        run = ember.compile(fn, backend="ember") if compiled else fn
        out = run(a.expand(4, n), b)
        results.append((out, *torch.autograd.grad(out, (a, b))))
    (eager_out, eager_ga, eager_gb), (out, ga, gb) = results
    if op == "var":
        assert torch.equal(ga, torch.zeros_like(ga))
    else:
        assert bool(ga.isnan().all()) == bool(eager_ga.isnan().all())
    tolerance = {torch.float16: 1e-2}.get(dtype, 1e-5)
    torch.testing.assert_close(gb, eager_gb, rtol=tolerance, atol=tolerance)


def test_centering_a_row_of_equal_values_gives_zeros():
    """x - x.mean(-1, keepdim=True) of a row of equal values is 0 (a row of -0.0 has mean +0,
    as eager's); an overflowing sum still gives eager's inf mean; other rows eager's values."""
    def fn(x):
        return x - x.mean(-1, keepdim=True), x.mean(-1, keepdim=True)

    x = torch.tensor([[0.1] * 16, [-0.0] * 16, [1e308] * 16, [1.0, 2.0] * 8, [0.3] * 15 + [0.7]],
                     dtype=torch.float64)
    (centered, mean), (eager_centered, eager_mean) = ember.compile(fn, backend="ember")(x), fn(x)
    assert torch.equal(centered[:2], torch.zeros(2, 16, dtype=torch.float64))
    assert not torch.signbit(mean[1]).any()
    assert torch.equal(mean[2:4], eager_mean[2:4]) and torch.equal(centered[2:4], eager_centered[2:4])
    torch.testing.assert_close(mean, eager_mean, rtol=1e-15, atol=0)
    torch.testing.assert_close(centered[4], eager_centered[4], rtol=0, atol=1e-15)


def test_a_mean_the_partitioner_keeps_in_the_forward_stays_exact_for_equal_values(caplog):
    """Fuzz stats 706258 (H200): var's backward subtracts mean(x) from x; the partitioner kept the
    mean in the forward and recomputed x in the backward, so the lowering no longer saw the two
    meet and summed 16 equal values with rounding (gradient 1e-5, eager's 0).  The joint graph's
    mark travels with the mean: the forward computes it exactly where the row's values are equal."""
    import logging

    def f(b):
        v0 = torch.stack([b, b, b], 0)
        return torch.var(v0.narrow(3, 0, 1).expand_as(v0) * 3.0, 3, correction=2)

    leaf = torch.randn(3, 3, 16, requires_grad=True)
    with caplog.at_level(logging.DEBUG, logger="ember.ir"):
        out = ember.compile(f, backend="ember")(leaf)
    forward_ir = caplog.text
    assert "mean_dim = aten.mean.dim" in forward_ir and "max over [16]" in forward_ir, forward_ir
    out.backward(torch.randn_like(out))
    assert torch.equal(leaf.grad, torch.zeros_like(leaf))
