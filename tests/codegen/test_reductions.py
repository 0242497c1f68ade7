"""Welford var/std/var_mean and vectorized max/min through the C++ kernels, against eager."""
import pytest
import torch

from codegen_helpers import run


CASES = [((8, 100), [1]), ((4, 3, 5, 7), [0, 2, 3]), ((5, 40), None), ((6, 16), [1]), ((3, 5), [0]), ((2, 33), [1])]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape,dims", CASES, ids=str)
def test_welford_var_std_var_mean(shape, dims, dtype):
    torch.manual_seed(0)
    x = (torch.randn(*shape) * 3 + 1000).to(dtype)  # a large mean: one-pass sum-of-squares would cancel
    for fn in (lambda x: torch.var_mean(x, dims, correction=1, keepdim=True),
               lambda x: torch.std(x, dims, correction=0), lambda x: torch.var(x, dims)):
        got, graphs = run(fn, x)
        torch.testing.assert_close(got, fn(x), rtol=1e-4, atol=1e-4)
        assert not graphs[0].fallbacks
        assert "welford" in "".join(graphs[0].kernels.values())


def test_max_min_reductions_propagate_nan_and_vectorize():
    x = torch.randn(16, 1000)
    x[3, 17] = float("nan")
    x[5, 999] = float("-nan")
    got, graphs = run(lambda x: (x.amax(1), x.amin(1), x.amax()), x)
    expected = (x.amax(1), x.amin(1), x.amax())
    for ours, theirs in zip(got, expected):
        torch.testing.assert_close(ours, theirs, equal_nan=True)
    source = "".join(graphs[0].kernels.values())
    assert "reduction(ember_max_float" in source and "reduction(ember_min_float" in source


@pytest.mark.parametrize("columns", [128, 37], ids=str)
def test_column_reductions_loop_rows_outside_and_match_eager(columns):
    x = torch.randn(4, 64, columns)
    x[1, 2, 3] = float("nan")
    fn = lambda x: (x.sum([0, 1]), (x * 2).amax([0, 1]), x.sum(0))  # noqa: E731
    got, graphs = run(fn, x)
    for ours, theirs in zip(got, fn(x)):
        torch.testing.assert_close(ours, theirs, equal_nan=True, rtol=1e-5, atol=1e-5)
    source = "".join(graphs[0].kernels.values())
    assert "xb += 16" in source  # rows outside, 16 outputs per vector inside


@pytest.mark.parametrize("shape", [(14, 64, 5), (6, 40, 20), (6, 40, 17), (6, 40, 33)], ids=str)
def test_welford_over_a_short_inner_dimension_keeps_layer_norm_accurate(shape):
    """A row [64, 5] of mostly equal values (2.0, a few above): its normalized values are
    x - mean over a small spread, so the mean must be accurate to a few ulps.  With 5 < 16
    lanes every element fell to the scalar tail, whose one float running mean rounded 320 times
    (1.4e-4 off against float64, 2.8 times eager's error; fuzz layout 14776).  Accumulated in
    double, as ATen's CPU var: held to twice eager's own error."""
    torch.manual_seed(0)
    x = torch.maximum(torch.full(shape, 2.0), torch.randn(shape) * 0.7)
    fn = lambda x: torch.nn.functional.layer_norm(x, shape[1:])  # noqa: E731
    got, graphs = run(fn, x)
    want = fn(x.double())
    ours, eagers = (got.double() - want).abs().max(), (fn(x).double() - want).abs().max()
    assert ours <= 2 * eagers + 1e-6, (float(ours), float(eagers))
    assert not graphs[0].fallbacks
