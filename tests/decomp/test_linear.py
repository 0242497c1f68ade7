"""Matrix-product decompositions against eager's kernels (the fuzzer found each)."""
import pytest
import torch

import ember

INT_DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
FACTORS = [(0.5, 1), (1, 0.5), (0.5, 2.5), (1.7, 1), (-1.5, -2.9), (2, 3), (0, 1), (3.0, 0)]


@pytest.mark.parametrize("backend", ["aot_eager", "ember"])
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_addmm_with_float_factors_keeps_dtype_and_truncates_factors(backend, dtype):
    """Eager's addmm of integer tensors converts beta and alpha to the tensors' dtype (0.5 -> 0,
    -1.5 -> -1): the result stays int8 for `addmm(int8, int8, int8, beta=0.5)` (issue 32: the
    decomposition multiplied by 0.5 and returned float32)."""
    gen = torch.Generator().manual_seed(0)
    low = 0 if dtype == torch.uint8 else -9
    bias = torch.randint(low, 10, (16,), dtype=dtype, generator=gen)
    mat1 = torch.randint(low, 10, (12, 33), dtype=dtype, generator=gen)
    mat2 = torch.randint(low, 10, (33, 16), dtype=dtype, generator=gen)
    for beta, alpha in FACTORS:
        if dtype == torch.uint8 and (beta < 0 or alpha < 0):
            continue  # eager refuses a negative factor for uint8
        ember.reset()
        fn = ember.compile(lambda b, m1, m2: torch.addmm(b, m1, m2, beta=beta, alpha=alpha), backend=backend)
        expected = torch.addmm(bias, mat1, mat2, beta=beta, alpha=alpha)
        got = fn(bias, mat1, mat2)
        assert got.dtype == expected.dtype, (beta, alpha)
        assert torch.equal(got, expected), (beta, alpha)


def test_integer_addmm_with_a_factor_out_of_range_raises_like_eager():
    """int8 addmm with beta=300: eager refuses the factor; the ATen call does so too."""
    ones = torch.ones(3, 3, dtype=torch.int8)
    fn = ember.compile(lambda a: torch.addmm(a, a, a, beta=300), backend="ember")
    with pytest.raises(RuntimeError, match="overflow"):
        fn(ones)


@pytest.mark.parametrize("beta", [0, 1, 0.5])
def test_addmm_with_alpha_zero_ignores_the_product_like_blas(beta):
    """alpha=0: eager's BLAS call never forms the product, so an inf or NaN in it does not reach
    the result (fuzz intmm 14300: `addmm(c, c, d, beta=0, alpha=0)` was NaN, eager 0)."""
    c = torch.tensor([[float("inf"), 1.0, -0.0], [2.0, float("nan"), 3.0]])
    d = torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0], [5.0, 1.0, 0.0]])
    fn = lambda c, d: torch.addmm(c, c, d, beta=beta, alpha=0)  # noqa: E731
    expected = fn(c, d)
    got = ember.compile(fn, backend="ember")(c, d)
    torch.testing.assert_close(got, expected, equal_nan=True)
    assert torch.equal(torch.signbit(got), torch.signbit(expected))
