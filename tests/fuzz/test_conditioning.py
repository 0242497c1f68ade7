"""The fuzzer's ill-conditioning watch: flags sums that are mostly rounding error, and only those."""
import torch

from .conditioning import ConditionWatch


def _watched(fn, *args):
    with ConditionWatch() as watch:
        fn(*args)
    return watch.ill_conditioned


def test_cancelling_huge_terms_are_ill_conditioned():
    x = torch.tensor([1.7e38, 0.3, -1.7e38, 0.5], dtype=torch.float64)
    assert _watched(torch.sum, x)
    y = torch.tensor([[1e20, 0.3, -1e20, 0.5]], dtype=torch.float64)
    assert _watched(lambda t: t @ torch.ones(4, 1, dtype=torch.float64), y)


def test_ordinary_sums_are_not():
    x = torch.randn(64, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert not _watched(lambda t: (t.sum(0), t.mean(), t.cumsum(1), t @ t.T, t.abs().sum()), x)


def test_sine_of_a_huge_argument_is_ill_conditioned():
    assert _watched(torch.sin, torch.tensor([22026.47, 0.5], dtype=torch.float64))
    assert not _watched(torch.sin, torch.tensor([3.0, -20.0], dtype=torch.float64))


def test_layer_norm_beyond_float32_statistics_is_ill_conditioned():
    """Eager's float32 layer_norm of [2.5, -1.7e38, -1] (and of a constant row of 1e20) is NaN."""
    layer_norm = torch.nn.functional.layer_norm
    assert _watched(lambda t: layer_norm(t, (3,)), torch.tensor([2.5, -1.7e38, -1.0], dtype=torch.float64))
    assert _watched(lambda t: layer_norm(t, (3,)), torch.full((3,), 1e20, dtype=torch.float64))
    assert not _watched(lambda t: layer_norm(t, (3,)), torch.tensor([2.5, -1e6, -1.0], dtype=torch.float64))
