"""The fuzzer's ill-conditioning watch: flags sums that are mostly rounding error, and only those."""
import pytest
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


def test_normalizing_a_constant_or_overflowing_row_is_ill_conditioned():
    layer_norm = torch.nn.functional.layer_norm
    constant = torch.full((2, 7), -276.0, dtype=torch.float64)        # lowp 1478: 0 +- noise
    assert _watched(lambda t: layer_norm(t, (7,)), constant)
    huge = torch.tensor([[4.0, 1.7e38, -1.0]], dtype=torch.float64)   # index 1467: squares overflow
    assert _watched(lambda t: layer_norm(t, (3,)), huge)
    assert _watched(lambda t: t.std(1), huge)


def test_ordinary_normalizations_are_not():
    x = torch.randn(4, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    layer_norm = torch.nn.functional.layer_norm
    assert not _watched(lambda t: (layer_norm(t, (7,)), t.var(1), torch.std_mean(t, 0)), x)
    assert not _watched(lambda t: layer_norm(t, (1,)), x.reshape(28, 1))   # one element: exactly 0


def test_argmax_over_values_a_few_ulps_apart_is_ill_conditioned():
    quarter_pi = torch.tensor([0.7853981256484985, 0.0, 0.7853981852531433], dtype=torch.float32)  # intmath 1597
    assert _watched(lambda t: t.argmax(0), quarter_pi)
    assert _watched(lambda t: t.min(0), -quarter_pi)
    ties = torch.tensor([[1.0, 3.0, 3.0], [2.0, 0.5, 2.0]])            # exact ties: every kernel takes the first
    assert not _watched(lambda t: t.argmax(1), ties)
    assert not _watched(lambda t: t.argmax(), torch.randn(100, generator=torch.Generator().manual_seed(0)))


def test_argmin_over_tied_libm_results_is_ill_conditioned():
    # tanh of equal inputs: equal in eager, 1 ulp apart between a vectorized loop's lanes and its
    # scalar tail (default 30821); ties of exact values (inputs, relu's zeros) still count.
    row = torch.full((2, 3), -0.35428192986957335, dtype=torch.float64)
    assert _watched(lambda t: torch.tanh(t).min(1), row)
    assert _watched(lambda t: torch.tanh(t).clone().argmax(), row)
    assert not _watched(lambda t: t.min(1), row)
    assert not _watched(lambda t: (t.relu() * 2).argmax(), -row)


def test_layer_norm_beyond_float32_statistics_is_ill_conditioned():
    """Eager's float32 layer_norm of [2.5, -1.7e38, -1] (and of a constant row of 1e20) is NaN."""
    layer_norm = torch.nn.functional.layer_norm
    assert _watched(lambda t: layer_norm(t, (3,)), torch.tensor([2.5, -1.7e38, -1.0], dtype=torch.float64))
    assert _watched(lambda t: layer_norm(t, (3,)), torch.full((3,), 1e20, dtype=torch.float64))
    assert not _watched(lambda t: layer_norm(t, (3,)), torch.tensor([2.5, -1e6, -1.0], dtype=torch.float64))


def test_jumps_applied_a_few_ulps_from_the_jump_are_ill_conditioned():
    quotient_near_5 = (torch.expm1(torch.tensor([1.0], dtype=torch.float64)),
                       torch.tensor([0.34365636110305786], dtype=torch.float64))   # default 21269
    assert _watched(lambda a, b: torch.div(a, b, rounding_mode="floor"), *quotient_near_5)
    assert _watched(torch.floor, torch.tensor([2.0 - 1e-7, 0.5]))
    assert _watched(torch.lt, torch.tensor([1.0]), torch.tensor([1.0 + 1e-7]))
    assert _watched(lambda t: t.long(), torch.tensor([3.0 - 2e-7], dtype=torch.float64))


def test_jumps_on_exact_or_distant_values_are_not():
    ints = torch.arange(-5.0, 6.0)
    assert not _watched(lambda t: (t.floor(), t // 3, t % 2, t < 2, t.long()), ints)
    x = torch.randn(200, generator=torch.Generator().manual_seed(0))
    assert not _watched(lambda t: (t.floor(), t.round(), t > 0.5, torch.div(t, 0.7, rounding_mode="trunc")), x)


def test_layer_norm_gradient_over_two_elements_with_a_large_weight_is_ill_conditioned():
    x = torch.tensor([[3.0, 700.0], [1.0, 150.0]], dtype=torch.float64, requires_grad=True)   # default 21640
    weight = torch.tensor([1000.0, -800.0], dtype=torch.float64)
    out = torch.nn.functional.layer_norm(x, (2,), weight)
    with ConditionWatch() as watch:
        out.backward(torch.tensor([[0.3, 0.9], [-1.1, 0.2]], dtype=torch.float64))
    assert watch.ill_conditioned
    # reductions 4374: the bound is 1e-4 of the result (eager -3.64124, a decomposition -3.64111)
    x = torch.tensor([[-0.3333333432674408, 0.3333333432674408]], dtype=torch.float64, requires_grad=True)
    out = torch.nn.functional.layer_norm(x, (2,), torch.tensor([-921.15, -753.75], dtype=torch.float64), eps=1e-3)
    with ConditionWatch() as watch:
        out.backward(torch.ones_like(out))
    assert watch.ill_conditioned
    y = torch.randn(4, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    w = torch.randn(16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    out = torch.nn.functional.layer_norm(y, (16,), w)
    with ConditionWatch() as watch:
        out.backward(torch.randn(4, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1)))
    assert not watch.ill_conditioned


def test_dividing_by_a_normalized_element_equal_to_its_mean_is_ill_conditioned():
    """lowp 1679: layer_norm of small integers and +-0; an element equal to its row's mean is 0
    exactly but 0 +- rounding noise in every kernel (eager 2.3e-8, ember 1.5e-8, float64 -1e-17),
    and 1e-3 / (c * it) is then 208, 254 or NaN."""
    layer_norm = torch.nn.functional.layer_norm
    b = torch.tensor([[0.0, -0.0, 1.0, -1.0] * 4, [2.0, 0.0, 0.0, 1.0] * 4])   # row 0: mean 0
    weight = torch.randn(16, generator=torch.Generator().manual_seed(0))
    c = torch.randn(2, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert _watched(lambda b: (1e-3 / (c * layer_norm(b, (16,), weight, eps=1e-3))) ** 0.5, b)
    assert _watched(lambda b: c / layer_norm(b, (16,)).t().t(), b)
    assert _watched(lambda b: layer_norm(b, (16,)).mul(2.0).sqrt(), b)
    # the same quotients of rows without such an element, or with a bias lifting it off 0, or
    # products that divide nothing, are not
    odd = b + torch.linspace(0.01, 0.3, 16)
    assert not _watched(lambda b: 1e-3 / (c * layer_norm(b, (16,), weight, eps=1e-3)), odd)
    # (a bias of 1 leaves another element at -0.01, whose reciprocal moves 3e-5 with its noise)
    assert not _watched(lambda b: 1e-3 / layer_norm(b, (16,), weight, torch.full((16,), 10.0)), b)
    assert not _watched(lambda b: (c * layer_norm(b, (16,), weight)) ** 2 + 1, b)


def test_remainder_by_a_subnormal_divisor_is_ill_conditioned():
    """autograd 1608: ATen's vectorized fmod/remainder by 2 ** -1025 is NaN, its scalar tail
    (the last n % 8 float64 elements) and ember -0."""
    x = torch.full((17,), -0.7, dtype=torch.float64)
    assert _watched(torch.remainder, x, torch.tensor(2.0 ** -1025, dtype=torch.float64))
    assert _watched(torch.fmod, x.float(), torch.tensor(1e-40))
    assert _watched(lambda t: torch.remainder(t, 1e-320), x)
    assert not _watched(torch.remainder, x, torch.tensor([1e-300, 0.0, 3.0], dtype=torch.float64)[:, None])
    assert not _watched(torch.fmod, x.half(), torch.tensor(1e-7, dtype=torch.float16))   # normal in float32


def test_remainder_whose_quotient_overflows_is_ill_conditioned():
    # ATen's vector lanes compute a - trunc(a / b) * b: NaN when a / b overflows (special 1733)
    huge = torch.tensor([-8.988465674311579e307, 0.5], dtype=torch.float64)
    assert _watched(lambda t: torch.fmod(t, 1e-30), huge)
    assert not _watched(lambda t: torch.fmod(t, 3.0), huge)


def test_bool_of_gelus_cancelling_left_tail_is_ill_conditioned():
    # 1 + erf(x / sqrt 2) cancels for x < -5: gelu there is float32 noise, and bool() of it
    # is True or False by chance (known 2525 on torch 2.11)
    x = torch.tensor([-5.5, -0.5, 2.0], dtype=torch.float64)
    assert _watched(lambda t: torch.nn.functional.gelu(t).to(torch.bool), x)
    assert not _watched(lambda t: torch.nn.functional.gelu(t).to(torch.bool), x[1:])
    assert not _watched(lambda t: torch.nn.functional.gelu(t) * 2, x)


def test_root_of_a_sum_that_is_its_own_rounding_error_is_ill_conditioned():
    # pi/4 + pi/4 - 3pi/4 + pi/4 is 0 +- rounding (eager 6e-8, ember -1e-7 after a 1-ulp different
    # atan2): its square root is 2e-4 or NaN by chance (default 35543)
    q = torch.tensor([[0.7853981853, 0.7853981853, -2.3561944962, 0.7853981853]], dtype=torch.float64)
    assert _watched(lambda t: t.cumsum(1).sqrt(), q)
    assert _watched(lambda t: 1 / t.sum(1), q)
    assert not _watched(lambda t: t.cumsum(1) * 2, q)
    assert not _watched(lambda t: t.abs().cumsum(1).sqrt(), q)


def test_truth_of_a_normalized_rows_sum_is_ill_conditioned():
    # a layer_norm row sums to 0 +- rounding: logical_and of it is True or False by chance
    # (default 36491)
    x = torch.randn(64, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    norm = lambda t: torch.nn.functional.layer_norm(t, t.shape[-1:], eps=1e-3)
    assert _watched(lambda t: torch.logical_and(norm(t).nansum(), t), x)
    assert not _watched(lambda t: torch.logical_and(norm(t).abs().nansum(), t), x)


def test_gelu_of_inf_is_ill_defined():
    # eager: F.gelu(tensor([inf])) is inf, F.gelu(tensor([inf] * 3)) NaN (default 37283)
    assert _watched(torch.nn.functional.gelu, torch.tensor([1.0, float("inf")], dtype=torch.float64))
    assert not _watched(torch.nn.functional.gelu, torch.tensor([1.0, -float("inf")], dtype=torch.float64))
    assert not _watched(lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
                        torch.tensor([1.0, float("inf")], dtype=torch.float64))


def test_remainder_of_a_large_libm_result_is_ill_conditioned():
    # expm1(100) % (pi / 4): one ulp of expm1's result is ~1e27 (intmath 3144)
    x = torch.tensor([100.0, 1.0], dtype=torch.float64)
    q = torch.tensor([0.7853981853, 0.7853981853], dtype=torch.float64)
    assert _watched(lambda t, d: torch.expm1(t) % d, x, q)
    assert not _watched(lambda t, d: torch.expm1(t) % d, x[1:], q[1:])
    assert not _watched(lambda t, d: (t * 3) % d, x, q)  # not a libm result


def test_sums_that_cancel_each_other_are_ill_conditioned():
    # b's gradient through b / a and through atan2(., b): two reduced contributions that cancel
    # exactly (default 40936)
    a = torch.randn(2, 3, 31, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 3
    terms = torch.randn(2, 3, 31, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 50
    assert _watched(lambda t: t.sum(0) + (-t).sum(0), terms)
    assert not _watched(lambda t, u: t.sum(0) + u.sum(0), terms, a.abs())
    a = (torch.randn((2, 4, 3, 31), generator=torch.Generator().manual_seed(4093601)) * 3.0)[:, ::2].double()
    b = torch.randn((1, 2, 1, 1), generator=torch.Generator().manual_seed(4093602)).double().requires_grad_()
    assert _watched(lambda a: (torch.atan2(b / a, b) ** 2).sum().backward(), a)
    assert not _watched(lambda a: (torch.atan2(b / a, a) ** 2).sum().backward(), a)


def test_normalizing_a_row_whose_squared_deviations_near_float32s_limit_is_ill_conditioned():
    # 16 deviations of 4.6e18: their squares sum to 3.35e38, finite or inf by the order of the
    # additions (default 43535)
    x = torch.tensor([9.22e18] * 7 + [0.5] * 9, dtype=torch.float64)
    norm = lambda t: torch.nn.functional.layer_norm(t, t.shape)  # noqa: E731
    assert _watched(norm, x)
    assert not _watched(norm, x / 1e3)


def test_dividing_by_a_log_softmax_near_zero_is_ill_conditioned():
    # the max of a row whose other terms are tiny: y = -log(1 + 3e-5), an ulp of the sum is a
    # relative error of 0.4% (default 49189)
    x = torch.tensor([[10.0, 0.0, -0.4], [1.0, 2.0, 3.0]], dtype=torch.float64)
    assert _watched(lambda t: 1.0 / torch.log_softmax(t, dim=-1), x)
    assert not _watched(lambda t: 1.0 / torch.log_softmax(t, dim=-1), x[1:])
    assert not _watched(lambda t: torch.log_softmax(t, dim=-1) * 2, x)


def test_normalizing_one_element_whose_square_overflows_is_ill_conditioned():
    # autograd 4217: eager's layer_norm over (1,) of 9e307 is NaN (its E[x^2] overflows), the
    # two-pass statistics' x - mean is exactly 0
    one = torch.tensor([[float("nan")], [8.988465674311579e307], [-2.0]], dtype=torch.float64)
    assert _watched(lambda t: torch.nn.functional.layer_norm(t, (1,)), one)


def test_a_large_power_of_a_normalized_value_is_ill_conditioned():
    # default 51087: layer_norm rows far from 0 against their spread carry eps * max|x| / std of
    # noise; raising them to the 116th power turns 8 ulps into 4.5e-5
    rows = torch.tensor([[116.0, 70.0, 120.0, 30.0, 127.0, 90.0]], dtype=torch.float64)
    layer_norm = torch.nn.functional.layer_norm
    assert _watched(lambda t: torch.pow(layer_norm(t, (6,)), t), rows)
    assert not _watched(lambda t: torch.pow(layer_norm(t, (6,)), 2.0), rows)


def test_a_root_of_a_small_normalized_value_is_ill_conditioned():
    # reductions 4284: rsqrt of a layer_norm output of 0.0093 that carries 2e-6 of noise
    x = torch.tensor([[1.0, 2.0, 3.0, 2.0046]], dtype=torch.float64)
    w = torch.full((4,), 6.0, dtype=torch.float64)
    layer_norm = torch.nn.functional.layer_norm
    assert _watched(lambda t: torch.rsqrt(layer_norm(t, (4,), w)), x)
    assert not _watched(lambda t: torch.rsqrt(layer_norm(t, (4,), w) + 10), x)


def test_floor_of_a_normalized_element_equal_to_its_mean_is_ill_conditioned():
    # default 60988: 0 +- noise floors to 0 or -1
    rows = torch.tensor([[-4.0, -3.0, 6.0, 5.0, -1.0, 1.0, -3.0, 2.0, -6.0, -3.0, 0.0, 6.0]], dtype=torch.float64)
    assert float(rows.mean()) == 0.0
    assert _watched(lambda t: torch.nn.functional.layer_norm(t, (12,)).floor(), rows)
    other = rows.clone()
    other[0, 10] = 0.5   # no element equal to the mean
    assert not _watched(lambda t: torch.nn.functional.layer_norm(t, (12,)).floor(), other)


def test_a_mask_count_of_an_ill_conditioned_layer_norm_is_not_a_wrong_shape():
    """Fuzz default 7211: layer_norm of a row holding 1.7e38 (its square overflows float32: eager
    NaN), then v[v > 0]: how many elements pass is as ill-defined as their values, so a shape
    mismatch there is classified ill_conditioned, not wrong."""
    from .generator import generate
    from .harness import run_program

    (outcome,) = run_program(generate(7211, "default"), ("ember",))
    assert outcome.cls in ("ok", "ill_conditioned"), (outcome.cls, outcome.check, outcome.detail)


def test_a_product_holding_a_zero_whose_factors_overflow_is_ill_conditioned():
    """Fuzz ember_dynamic default 74038 (at grown sizes): prod of 180 factors of size about 5 and
    one zero is 0 in eager's vector lanes and inf * 0 = NaN in another order."""
    x = torch.tensor([5.0, 6.0, -4.0, 0.0] * 45)
    assert _watched(lambda t: t.prod(), x)
    assert not _watched(lambda t: t.prod(), torch.tensor([5.0, 6.0, -4.0, 0.0]))
    assert not _watched(lambda t: t.prod(0), torch.tensor([5.0, 6.0] * 40))


def test_many_half_precision_additions_into_one_element_are_ill_conditioned():
    """Fuzz ember_dynamic inplace 7009 (grown sizes): the gradient of x[i] with an index repeated
    12 times adds 12 bfloat16 terms into one element, rounding after each: eager 1.5, another
    order 1.59, exactly 1.502.  Two additions of one sign, or float32, are not flagged."""
    aten = torch.ops.aten
    terms = torch.tensor([12.0, -11.0, 3.5, -2.25, 9.0, -9.5, 1.0, 0.75, -3.0, 2.0, 4.0, -4.5], dtype=torch.bfloat16)
    index = torch.zeros(12, dtype=torch.int64)
    zeros = torch.zeros(2, dtype=torch.bfloat16)
    assert _watched(lambda: aten.index_put.default(zeros, [index], terms, True))
    same_sign = torch.tensor([1.0, 0.5], dtype=torch.bfloat16)
    assert not _watched(lambda: aten.index_put.default(zeros, [index[:2]], same_sign, True))
    assert not _watched(lambda: aten.index_put.default(zeros.float(), [index], terms.float(), True))


def test_argmax_over_means_of_normalized_rows_is_ill_conditioned():
    """Fuzz ember_dynamic reductions 8088 (grown sizes): the mean of a layer_norm's row is 0 +- its
    rounding noise, so which row's mean is largest is the rounding's choice (eager 13, another
    order 12, float64 26).  Means of raw values are not flagged."""
    layer_norm = torch.nn.functional.layer_norm
    x = torch.randn(3, 30, 8, generator=torch.Generator().manual_seed(0))
    assert _watched(lambda t: torch.var_mean(layer_norm(t, (8,)), 2)[1].max(-1), x)
    assert not _watched(lambda t: torch.var_mean(t, 2)[1].max(-1), x)


def test_max_of_opposite_zeros_is_ill_defined():
    """Fuzz default 9031: eager's maximum(0.0, -0.0) is -0.0 in float64 vector lanes and 0.0 in
    its scalar loop and in float32; c / that zero is then -inf or inf."""
    zeros = torch.zeros(8, dtype=torch.float64)
    assert _watched(lambda a, b: torch.maximum(a, b), zeros, torch.tensor([-0.0], dtype=torch.float64))
    assert not _watched(lambda a, b: torch.maximum(a, b), zeros, torch.tensor([0.0], dtype=torch.float64))


def test_a_batch_norm_weight_gradient_that_cancels_is_ill_conditioned():
    """Two training batch_norms in a row: the first one's weight gradient is 0 in exact arithmetic
    (the second removes every component along its normalized input), so whatever float32 leaves
    is rounding (conv 7934).  One batch_norm under a random loss is ordinary."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 5, 5, generator=g)
    w = torch.randn(3, generator=g).requires_grad_()
    upstream = torch.randn(4, 3, 5, 5, generator=g)

    def twice(x, w):
        y = torch.nn.functional.batch_norm(x, None, None, w, None, training=True)
        z = torch.nn.functional.batch_norm(y, None, None, None, None, training=True)
        (z * upstream).sum().backward()

    def once(x, w):
        y = torch.nn.functional.batch_norm(x, None, None, w, None, training=True)
        (y * upstream).sum().backward()

    assert _watched(twice, x, w)
    assert not _watched(once, x, w.detach().clone().requires_grad_())


def test_a_convolution_bias_gradient_before_a_batch_norm_is_its_rounding_noise():
    """A training batch_norm's input gradient sums to 0 over each channel, so the bias gradient of
    the convolution before it is rounding noise, beyond the tolerance when the gradients are large
    (conv 9853: a grouped convolution of weights ~100 after it; eager 0, ember 1.5e-5).  With
    small gradients the same program stays ordinary."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 1, 2, 6, generator=g)
    w = torch.randn(8, 1, 1, 1, generator=g)

    def program(scale):
        def run(x, w, b):
            y = torch.nn.functional.conv2d(x, w, b, stride=2)
            z = torch.nn.functional.batch_norm(y, None, None, None, None, training=True)
            (z * scale).sum().backward()
        return run

    upstream = torch.randn(6, 8, 1, 3, generator=g)
    assert _watched(program(upstream * 1000), x, w, torch.randn(8, generator=g).requires_grad_())
    assert not _watched(program(upstream), x, w, torch.randn(8, generator=g).requires_grad_())


def test_power_of_a_normalized_outputs_mean_is_ill_conditioned():
    """The mean of a layer_norm output over whole rows is 0 +- rounding noise: raised to
    non-integer powers it is NaN or a number by the noise's sign (lowp 11128: eager NaN, ember
    3.4e16).  With an integer exponent, or over part of a row, it is not."""
    layer_norm = torch.nn.functional.layer_norm
    x = torch.randn(3, 31, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert _watched(lambda t: layer_norm(t, (31,)).mean() ** layer_norm(t, (31,)), x)
    assert _watched(lambda t: torch.pow(layer_norm(t, (31,)).sum(-1), layer_norm(t, (31,))[:, 0]), x)
    assert not _watched(lambda t: layer_norm(t, (31,)).mean() ** torch.full((3,), 2.0, dtype=t.dtype), x)
    assert not _watched(lambda t: layer_norm(t, (31,))[:, :5].sum(-1) ** layer_norm(t, (31,))[:, 0], x)


def test_a_nonpositive_base_to_a_normalized_zero_is_ill_conditioned():
    """b ** e for b <= 0 and e a layer_norm element equal to its row's mean (0 +- noise): 1, or
    NaN by the noise's sign (autograd 708256: eager's CUDA kernel NaN, ember 1).  A positive base
    is continuous there."""
    layer_norm = torch.nn.functional.layer_norm
    b = torch.tensor([[4.0, -2.0, 0.0, 6.0, 0.0, -3.0, -5.0]], dtype=torch.float64)   # mean 0
    base = torch.tensor([[-0.3, 0.8, -1.1, 1.6, 1.8, 0.9, 0.4]], dtype=torch.float64)
    assert _watched(lambda t: torch.pow(base, layer_norm(t, (7,))), b)
    assert _watched(lambda t: torch.pow(0.0, layer_norm(t, (7,))), b)
    assert not _watched(lambda t: torch.pow(base.abs(), layer_norm(t, (7,))), b)
    assert not _watched(lambda t: torch.pow(base, layer_norm(t, (7,))), b + torch.tensor([[0.0, 0, 0.5, 0, 0.5, 0, 0]]))


def test_eagers_cpu_batch_norm_backward_misreading_a_transposed_input_is_flagged():
    """torch 2.13's CPU batch_norm backward (training) of an input [5, 100, 5, 1] with strides
    (500, 1, 100, 1) gives every channel's bias gradient one value (conv 11091); run again on
    contiguous copies it is the sums of the output gradient.  A contiguous input is not flagged."""
    a = torch.randn(5, 5, 100, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    bias = torch.randn(100, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).requires_grad_()
    grad = torch.randn(5, 100, 5, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for x, misread in ((a.transpose(2, -3), True), (a.transpose(2, -3).contiguous(), False)):
        out = torch.nn.functional.batch_norm(x, torch.zeros(100, dtype=x.dtype), torch.ones(100, dtype=x.dtype),
                                             None, bias, training=True)
        with ConditionWatch() as watch:
            (found,) = torch.autograd.grad(out, bias, grad)
        right = torch.allclose(found, grad.sum((0, 2, 3)))
        # (where a later torch fixes its kernel, eager is right and nothing is flagged)
        assert watch.ill_conditioned == (not right), (misread, right)
        if not misread:
            assert right


def test_remainder_by_a_noisy_normalized_divisor_with_a_large_quotient_is_ill_conditioned():
    """fmod(1, y) for a layer_norm output y of about 0.0156 moves by 64 times y's rounding noise
    (default 11412, on the resized call: eager 0.015574, ember_ca 0.0155894); divisors of 0.7 and
    more (quotients 0 or 1) do not."""
    layer_norm = torch.nn.functional.layer_norm
    one = torch.ones((), dtype=torch.float64)
    spread = torch.tensor([[1.0, 2.0, 4.0, 5.0]], dtype=torch.float64)
    near_mean = torch.tensor([[1.0, 2.0, 3.0275, 4.0, 5.0]], dtype=torch.float64)
    assert abs(float(layer_norm(near_mean, (5,))[0, 2]) - 0.0156) < 2e-3
    assert _watched(lambda t: torch.fmod(one, layer_norm(t, (5,))), near_mean)
    assert not _watched(lambda t: torch.fmod(one, layer_norm(t, (4,))), spread)


def test_quotients_of_a_batch_norms_column_sums_are_ill_conditioned():
    """A training batch norm without bias makes each channel's sum over the batch 0 +- rounding
    noise: v / v of it is 1 or NaN (0 / 0) by element in every implementation, the float64
    reference too (issue 32: select(1, -20), batch_norm, sum(0), div(.., rounding_mode='trunc')).
    With a bias, or summed over another dim, the sums are not noise."""
    batch_norm = torch.nn.functional.batch_norm
    x = torch.randn(5, 20, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def quotient(dim, bias=None, mode="trunc"):
        def fn(t):
            v = batch_norm(t.select(1, -20), None, None, bias=bias, training=True, eps=1e-5).sum(dim)
            return torch.div(v, v, rounding_mode=mode)
        return fn

    assert _watched(quotient(0), x)
    assert _watched(quotient(0, mode=None), x)
    assert _watched(lambda t: torch.floor_divide(batch_norm(t, None, None, training=True).sum([0, 2]), 0.5), x)
    assert not _watched(quotient(1), x)
    assert not _watched(quotient(0, bias=torch.ones(12, dtype=torch.float64)), x)


def test_variance_of_equal_values_is_ill_conditioned_only_where_their_mean_is_inexact():
    """var of a row of equal values is 0, and so is its gradient where the mean of the row comes
    out exact (eager's pairwise sum of 16 equal float64 values: issue 32, ember's gradient was
    1e-5): comparable, not excused.  Where eager's own mean rounds (3 equal values of 0.1) the
    gradient is noise, and a value mismatch is excused."""
    exact_row = torch.full((2, 16), 0.1, dtype=torch.float64)
    assert (exact_row.mean(-1) == 0.1).all()
    assert not _watched(lambda t: torch.var(t, -1), exact_row)
    assert not _watched(lambda t: torch.var(torch.var(t.expand(9, 16), 0), -1), torch.randn(9, 1, dtype=torch.float64))
    noisy_row = torch.full((2, 3), 0.1, dtype=torch.float64)
    assert (noisy_row.mean(-1) != 0.1).any()
    assert _watched(lambda t: torch.var(t, -1), noisy_row)
    assert _watched(lambda t: torch.nn.functional.layer_norm(t, (16,)), exact_row)  # (normalized: noise / noise)


def test_root_of_a_welford_mean_that_is_zero_up_to_its_rounding_is_ill_conditioned():
    """Reductions 703664: rsqrt of the var_mean mean of integers summing to 0: eager's CUDA
    Welford leaves -1e-8 (NaN), a sum gives exactly 0 (inf)."""
    values = torch.tensor([[3.0, -1.0, -2.0, 5.0, -5.0]], dtype=torch.float64)
    assert _watched(lambda t: torch.var_mean(t, 1)[1].rsqrt(), values)
    assert not _watched(lambda t: torch.var_mean(t, 1)[1].rsqrt(), values + 1)


def test_a_batch_norm_bias_gradient_that_is_not_the_sum_of_the_output_gradient_is_eagers_error():
    """Conv 703382: eager's CUDA eval backward gave the bias gradient 0 (its input [6, 1, 1, 1]
    channels-last by its size-1 dims, no weight); by definition it is the sum of dy."""
    from .conditioning import _eager_batch_norm_bias_gradient_wrong

    dy = torch.randn(6, 1, 1, 1, generator=torch.Generator().manual_seed(1))
    x = torch.randn(6, 1, 1, 1)
    args = (dy, x, None, torch.zeros(1), torch.ones(1), None, None, False, 1e-5, [True, False, True])
    assert _eager_batch_norm_bias_gradient_wrong(args, (dy, None, torch.zeros(1)))
    assert not _eager_batch_norm_bias_gradient_wrong(args, (dy, None, dy.sum([0, 2, 3])))


def test_a_convolution_weight_gradient_that_cancels_far_beyond_the_tolerance_is_ill_conditioned():
    """Conv 703949 (GPU): conv2d of values ~1e3 with weights ~1e3, then var over the batch: the
    weight gradient -2.7e8 is what is left of terms adding up to 1.7e11 in size, so a few ulps of
    difference in the output gradient move it by 4e-5 of itself."""
    generator = torch.Generator().manual_seed(70394901)
    a = torch.randn(4, 64, 1, 6, generator=generator, dtype=torch.float64) * 1000
    c = (torch.randn(1, 64, 3, 3, generator=generator, dtype=torch.float64) * 1000).requires_grad_()

    def step(a, c):
        torch.nn.functional.conv2d(a, c, padding=1).var(0).sum().backward()

    assert _watched(step, a, c)
    small = torch.randn(2, 3, 4, 4, generator=generator, dtype=torch.float64)
    weight = torch.randn(2, 3, 3, 3, generator=generator, dtype=torch.float64).requires_grad_()
    assert not _watched(lambda x, w: torch.nn.functional.conv2d(x, w).square().sum().backward(), small, weight)


def test_the_zero_extreme_of_both_signed_zeros_is_ill_defined():
    """Conv 12457: amin over 0.0 and -0.0 is either (eager -0.0, ember +0.0); 1 / it is -inf or inf."""
    both = torch.tensor([[0.0, -0.0], [1.0, 2.0]], dtype=torch.float64)
    assert _watched(lambda t: t.amin(0), both)
    assert not _watched(lambda t: t.amin(0), torch.tensor([[0.0, 3.0], [1.0, 2.0]], dtype=torch.float64))


def test_reciprocal_of_a_matrix_product_that_cancels_is_ill_conditioned():
    """Layout 12594: -2 / (v.T @ v) where a 7-term product cancels to -0.0046: another order of
    its additions moves the quotient by 2.5e-5 of itself."""
    a = torch.tensor([[1000.0, -1000.0, 0.5]], dtype=torch.float64)
    b = torch.ones(3, 1, dtype=torch.float64)
    assert _watched(lambda x, y: -2 / (x @ y), a, b)
    assert not _watched(lambda x, y: -2 / (x @ y), torch.tensor([[1.0, 2.0, 0.5]], dtype=torch.float64), b)


def test_a_batch_norm_of_values_far_from_their_spread_is_ill_conditioned_whichever_kernel_eager_takes():
    """On a GPU eager's batch_norm is cuDNN's op or the update op, not native_batch_norm: a
    channel of values near -64 spread by 0.02 (a convolution's bias with a small product) is
    normalized noise there too (conv 705710: eager itself 1e-3 off the float64 reference)."""
    from .conditioning import _batch_norm_training, _normalization_overflows

    aten = torch.ops.aten
    x = (torch.randn(33, 2, 2, 1, dtype=torch.float64) * 0.02 - 64.0)
    mean, var = torch.zeros(2, dtype=x.dtype), torch.ones(2, dtype=x.dtype)
    assert _watched(lambda t: aten._batch_norm_with_update.default(t, None, None, mean.clone(), var.clone(), 0.1,
                                                                   1e-5), x)
    assert not _watched(lambda t: aten._batch_norm_with_update.default(t, None, None, mean.clone(), var.clone(),
                                                                       0.1, 1e-5), x + 64.0)
    args = (x, None, None, mean, var, 0.1, 1e-5)
    assert _batch_norm_training(aten._batch_norm_with_update.default, args)
    assert _batch_norm_training(aten.cudnn_batch_norm.default, (x, None, None, mean, var, True, 0.1, 1e-5))
    assert not _batch_norm_training(aten._native_batch_norm_legit.no_stats, (x, None, None, False, 0.1, 1e-5))
    assert not _normalization_overflows(aten._batch_norm_with_update.default, args)
    constant = torch.full((4, 2, 2, 1), -1.7e38)  # (x * invstd beyond float32's range)
    assert _normalization_overflows(aten._batch_norm_with_update.default,
                                    (constant, None, None, mean.float(), var.float(), 0.1, 1e-5))


def test_a_layer_norm_output_that_is_its_own_noise_is_ill_conditioned():
    """Special 706390: an element equal to its row's mean (0 +- eps after normalizing) under a weight
    of 9e307 is the bias (eager's CPU kernel, 0.5) or 3e291 (its CUDA kernel)."""
    f = torch.nn.functional.layer_norm
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 5.0]], dtype=torch.float64)
    bias = torch.full((3,), 0.5, dtype=torch.float64)
    assert _watched(lambda t: f(t, (3,), torch.tensor([1.0, 9e307, 1.0], dtype=torch.float64), bias), x)
    assert not _watched(lambda t: f(t, (3,), torch.tensor([1.0, 2.0, 1.0], dtype=torch.float64), bias), x)


def test_relu_of_a_mean_that_is_zero_up_to_rounding_is_ill_conditioned():
    """Conv 706351: relu of a Welford mean of integers summing to 0 (eager's CUDA kernel 1e-17,
    relu's gradient 1; its CPU one 0, gradient 0)."""
    x = torch.tensor([[-2.0, 1.0, 1.0], [3.0, 1.0, 1.0]], dtype=torch.float64)
    assert _watched(lambda t: torch.relu(torch.var_mean(t, 1)[1]), x)
    assert not _watched(lambda t: torch.relu(torch.var_mean(t, 1)[1]), x[1:])


def test_a_quotient_of_the_logsumexp_of_log_probabilities_is_ill_conditioned():
    """Reductions 705951: logsumexp(log_softmax(a, 1), 1) is log(1 +- eps), 0 +- noise: v / v of
    it is NaN or 1 by the kernel's rounding."""
    x = torch.randn(4, 5, dtype=torch.float64)
    assert _watched(lambda t: (lambda v: v / v)(torch.log_softmax(t, 1).logsumexp(1)), x)
    assert not _watched(lambda t: (lambda v: v / v)(torch.log_softmax(t, 1).logsumexp(0)), x)
    assert not _watched(lambda t: (lambda v: v / v)(t.logsumexp(1)), x)


def test_a_convolution_over_a_nan_spreads_it_by_the_algorithm():
    """Conv 705295 (H200): the NaN positions of a convolution's gradients over a NaN weight follow
    cuDNN's algorithm (eager's NHWC kernels: 120 of 360, its NCHW ones: 30).  Conv 15795 (CPU):
    eager's own grouped conv2d over a NaN weight, padding 1, is NaN at 45 outputs from an NCHW
    input and at 24 from a channels-last one.  A finite convolution is not flagged."""
    import torch.nn.functional as F

    from .conditioning import _non_finite_convolution_operand

    w = torch.randn(6, 1, 2, 2)
    x = torch.rand(3, 3, 4, 2) + 0.1
    assert not _non_finite_convolution_operand([x, w, None])
    w.view(-1)[22] = float("nan")
    nans = [int(F.conv2d(x.contiguous(memory_format=layout), w, None, padding=1, groups=3).isnan().sum())
            for layout in (torch.contiguous_format, torch.channels_last)]
    assert nans[0] != nans[1]  # (eager's own answer follows the memory order)
    assert _non_finite_convolution_operand([x, w, None])
    assert not _non_finite_convolution_operand([x, w.nan_to_num(), None])


@pytest.mark.parametrize("mode,seed", [
    ("conv", 15795),      # a grouped conv2d over a NaN weight, channels-last: eager's NCHW NaN positions differ
    ("layout", 16454),    # max over an as_strided view of cos(c): cos(1) and cos(-1) tie in eager, not in ember
    # softmax backward of a variance over values near 1e12: the gradient is noise (since the
    # reference computes arange's floats in float64 it runs, and shows eager's noise: ok)
    ("autograd", 16399),
    ("special", 16832),   # a finite product whose partial products overflow float32 in another order
    ("special", 16643),   # the gradient of c / tanh(c) at small c: two terms of size 1 / c cancel
])
def test_fuzz_programs_that_are_ill_conditioned_not_wrong(mode, seed):
    """Programs of the CPU fuzz whose mismatch is rounding, classified as such through the harness."""
    from .generator import generate
    from .harness import run_program

    (outcome,) = run_program(generate(seed, mode), ("ember",))
    expected = ("ill_conditioned", "ok") if (mode, seed) == ("autograd", 16399) else ("ill_conditioned",)
    assert outcome.cls in expected, f"{outcome.cls} {outcome.check}: {outcome.detail}"


def test_a_product_that_overflows_in_some_order_is_ill_conditioned():
    """1.7e38 * 2.5 * 0.01 is finite, but its first partial product is not: whether a kernel's
    order overflows is its choice.  A product that overflows in every order, or in none, is not
    flagged."""
    from .conditioning import ConditionWatch

    def run(values) -> bool:
        with ConditionWatch() as watch:
            torch.tensor(values).prod()
        return watch.ill_conditioned

    assert run([1.7e38, 2.5, 0.01])
    assert not run([1.7e38, 2.5, 3.0])
    assert not run([3.0, 2.5, 0.01])


def test_an_addition_cancelling_libm_noise_beyond_the_tolerance_is_ill_conditioned():
    """The quotient rule's two terms of the gradient of c / tanh(c) at c ~ 0.01 are ~100 each and
    cancel to ~0.007: tanh's ulp, carried through the quotient, exceeds the tolerance of what is
    left.  Without the cancellation (c ~ 1), or without a libm value in it, nothing is flagged."""
    from .conditioning import ConditionWatch

    def run(fn, scale: float) -> bool:
        c = (torch.randn(16, generator=torch.Generator().manual_seed(0)) * scale).requires_grad_()
        with ConditionWatch() as watch:
            fn(c).sum().backward()
        return watch.ill_conditioned

    assert run(lambda c: c / torch.tanh(c), 0.01)
    assert not run(lambda c: c / torch.tanh(c), 1.0)
    assert not run(lambda c: c / (c + 3.0), 0.01)


def test_a_softmax_backward_cancelling_against_its_sum_is_ill_conditioned():
    """y * (g - sum(g * y)) where g's elements are nearly equal and large (-1.3e10 + 0.01 each):
    the result is float32 rounding of the common part.  Gradients of their own size are not."""
    from .conditioning import ConditionWatch

    def run(offset: float) -> bool:
        x = torch.randn(7, requires_grad=True)
        with ConditionWatch() as watch:
            y = torch.softmax(x, 0)
            y.backward(offset + torch.randn(7) * 0.01)
        return watch.ill_conditioned

    assert run(-1.3e10)
    assert not run(0.0)


def test_a_gpu_write_into_places_its_elements_share_races():
    """GPU layout 710111: index_put_(accumulate=True) into a.unfold(0, 46, 2) (windows sharing
    elements) came out different in each of 200 eager runs on an H200: its threads update one
    place for several elements at once.  Such a write on a GPU marks the run racy; one into
    distinct places, or on the CPU (one thread per place), does not."""
    from .conditioning import _races_on_a_gpu, _shares_places

    a = torch.randn(64)
    assert _shares_places(a.unfold(0, 46, 2)) and not _shares_places(a.unfold(0, 2, 2))
    assert _shares_places(torch.randn(3).expand(2, 3)) and not _shares_places(a[1::2])
    index, values = torch.tensor([0, 3]), torch.randn(2, 46)
    assert not _races_on_a_gpu(torch.ops.aten.index_put_.default, (a.unfold(0, 46, 2), [index], values, True), {})
    if torch.cuda.is_available():
        windows = a.cuda().unfold(0, 46, 2)
        args = (windows, [index.cuda()], values.cuda(), True)
        assert _races_on_a_gpu(torch.ops.aten.index_put_.default, args, {})
        assert not _races_on_a_gpu(torch.ops.aten.index_put_.default, (windows.contiguous(), *args[1:]), {})


def test_a_gradient_through_a_reciprocal_of_a_cancelling_convolution_is_ill_conditioned():
    """GPU conv 710199: 1 / v for v a 1x1 convolution plus its bias that cancels to about 1e-3 of
    its terms: v's rounding moved 1 / v within the tolerance, and its gradient -1 / v^2 by twice
    as much, beyond it (eager 148935, ember 148931).  The watch follows the convolution's noise
    into the reciprocal and checks the derivative where a gradient flows; without a gradient, or
    without the cancellation, it is not flagged."""
    from .conditioning import ConditionWatch

    def run(bias: float, requires_grad: bool) -> bool:
        x = torch.full((1, 1, 1, 1), 1.0, dtype=torch.float64)
        w = torch.full((1, 1, 1, 1), 1.0, dtype=torch.float64, requires_grad=requires_grad)
        with ConditionWatch() as watch:
            torch.nn.functional.conv2d(x, w, torch.tensor([bias], dtype=torch.float64)).reciprocal()
        return watch.ill_conditioned

    # v = 1 - 0.984 = 0.016, its noise eps * 1.984 = 2.4e-7: 1.5e-5 relative in 1 / v, 3e-5 in 1 / v^2
    assert run(-0.984, requires_grad=True)
    assert not run(-0.984, requires_grad=False)
    assert not run(1.0, requires_grad=True)


def test_log1p_of_a_sine_near_minus_one_is_ill_conditioned():
    """log1p(sin(x)) at sin(x) = -0.99989 has condition number 1e3: one ulp of the sine (eager's
    Sleef and ember's libmvec round it differently) moves it by 6e-5 relative, beyond float32's
    rtol (layout 13050: eager -9.13777, ember -9.13722).  Away from -1, or without the libm
    function before it (an input's value is exact), it is not flagged."""
    near = torch.tensor([-1.5854613780975342, 0.3])
    assert _watched(lambda t: torch.sin(t).split(1)[0].log1p(), near)
    assert _watched(lambda t: torch.sin(t.double()).log1p(), near)
    assert not _watched(lambda t: torch.sin(t).log1p(), torch.tensor([-1.2, 0.3]))
    assert not _watched(torch.log1p, torch.sin(near))


def test_a_quotient_exactly_on_its_jump_from_libm_values_is_ill_conditioned():
    """trunc(v / w) with v gathered from w's own log_softmax values is exactly 1 in eager (one
    value divided by itself); a compiler recomputing log_softmax in two kernels may round its log
    1 ulp apart in each (default 14324: ember 0).  Plain values exactly on the jump are not."""
    a = torch.tensor([0.3, -1.2, 0.7, 2.0])
    index = torch.zeros(5, 1, dtype=torch.long)

    def quotient(x):
        w = torch.log_softmax(x, -1)
        v = torch.cat([w.expand(3, 4)] * 2, 1).gather(0, index)
        return torch.div(v, w, rounding_mode="trunc")

    assert _watched(quotient, a)
    assert not _watched(lambda x: torch.div(x.expand(3, 4), x, rounding_mode="trunc"), a)


def test_a_remainder_by_a_mean_with_a_large_quotient_is_ill_conditioned():
    """fmod(x, mean(c)) with x ~ 3000 and the mean ~ 0.05: the quotient is 6e4, so one ulp of the
    mean (a sum's order of additions, eager's or a compiler's) moves the remainder by 2e-4, beyond
    the tolerance (GPU autograd 712619: eager -0.0501219, ember -0.050322).  A masked_fill between
    keeps the noise where it does not fill.  A small dividend, or an exact divisor, is not flagged."""
    gen = torch.Generator().manual_seed(0)
    c = torch.rand(8, 2, generator=gen) * 0.1
    big = torch.full((3, 2), 2999.7)

    def remainder(x, y):
        m = y.mean(0)
        return torch.fmod(x, m.masked_fill(m != m, -1.5))

    assert _watched(remainder, big, c)
    assert not _watched(remainder, torch.full((3, 2), 0.3), c)
    assert not _watched(torch.fmod, big, torch.full((2,), 0.0625))


def test_writing_one_place_from_two_index_entries_races_on_a_gpu():
    """GPU index 712532: index_put (not accumulating) with indices [3, 2, -1] into 4 rows writes
    row 3 twice (-1 is row 3); eager's GPU threads race, and it kept one value where ember's
    kernel kept the other.  Distinct places, one value for all, a mask, or accumulating writes
    are not such races; scatter and index_copy with a place named twice are."""
    from .conditioning import _writes_a_place_twice

    aten = torch.ops.aten
    a, values = torch.zeros(4, 5), torch.randn(3, 5)
    assert _writes_a_place_twice(aten.index_put.default, (a, [torch.tensor([3, 2, -1])], values, False), {})
    assert not _writes_a_place_twice(aten.index_put.default, (a, [torch.tensor([3, 1, -2])], values, False), {})
    assert not _writes_a_place_twice(aten.index_put.default, (a, [torch.tensor([3, 2, -1])], values, True), {})
    assert not _writes_a_place_twice(aten.index_put.default, (a, [torch.tensor([3, 3])], torch.tensor(1.0), False), {})
    assert not _writes_a_place_twice(aten.index_put.default, (a, [torch.tensor([True, False, True, False])],
                                                               torch.randn(2, 5), False), {})
    rows, cols = torch.tensor([[0], [1]]), torch.tensor([1, 1])
    assert _writes_a_place_twice(aten.index_put.default, (a, [rows, cols], torch.randn(2, 2), False), {})
    assert not _writes_a_place_twice(aten.index_put.default, (a, [rows, torch.tensor([1, 2])], torch.randn(2, 2), False), {})
    src = torch.randn(2, 3)
    assert _writes_a_place_twice(aten.scatter.src, (a, 1, torch.tensor([[0, 1, 0], [1, 2, 3]]), src), {})
    assert not _writes_a_place_twice(aten.scatter.src, (a, 1, torch.tensor([[0, 1, 2], [0, 1, 2]]), src), {})
    assert _writes_a_place_twice(aten.index_copy.default, (a, 0, torch.tensor([1, 1]), torch.randn(2, 5)), {})
    assert not _writes_a_place_twice(aten.index_copy.default, (a, 0, torch.tensor([1, 0]), torch.randn(2, 5)), {})


def test_floor_division_of_a_noise_zero_through_tanh_is_ill_conditioned():
    """GPU autograd 714661: mean(softmax(c)) is 0.2 +- noise per row, and a column of c that sums
    to 0 makes its product with them 0 +- noise (float64 -1e-16, eager's GPU float32 -3e-9, ember
    +3e-9); tanh keeps it 0 +- noise, and floor(it / a) is -1 or 0 by its sign.  The vector-matrix
    product ends with an in-place squeeze_, which the watch follows."""
    c = torch.tensor([[3.0, -4.0, -5.0], [-4.0, 4.0, 5.0]], dtype=torch.float64)
    a = torch.tensor([52.2, -127.8, 24.5], dtype=torch.float64)

    def program(c):
        v = torch.softmax(c, dim=1).mean(-1) @ c
        return torch.div(torch.tanh(v), a, rounding_mode="floor")

    assert _watched(program, c)
    lifted = c + torch.tensor([[0.0, 0.5, 0.25]], dtype=torch.float64)  # no column sums to 0
    assert not _watched(program, lifted)


def test_jumps_on_sums_of_libm_results_are_ill_conditioned_even_exactly_on_the_jump():
    """GPU autograd 715038: floor(cumsum(softmax(x).sum(-1)) ** 2): each row sum is 1 in exact
    arithmetic; here the float64 reference's is exactly 1.0 but float32's are 1 +- an ulp
    (eager 1.0000001, ember 0.99999994), so the floor is 1 or 0 by the kernel's rounding."""
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert (torch.softmax(x, 1).sum(1) == 1).all()   # (on the jump exactly)
    assert _watched(lambda t: torch.floor(torch.softmax(t, 1).sum(-1, keepdim=True).cumsum(0) ** 2), x)
    # sums of inputs, and the libm results themselves, on an integer exactly are exact everywhere
    halves = torch.full((3, 4), 0.5, dtype=torch.float64)
    assert not _watched(lambda t: torch.floor(t.sum(-1) ** 2), halves)
    assert not _watched(lambda t: torch.floor(torch.exp(t * 0) * 3), halves)


def test_cudas_batch_norm_backwards_are_watched_as_the_native_one():
    """On the GPU the float64 reference's batch norm backward is cudnn's (input first) or
    batch_norm_backward, not native_batch_norm_backward: a bias gradient before a batch_norm that
    is rounding noise (conv 716737, 717045 on an H200: eager 0, ember 1.5e-5) read as wrong.  Their
    arguments, put in the native order, give the native verdict and bounds."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from .conditioning import (_as_native_batch_norm_backward, _batch_norm_backward_cancels,
                               _batch_norm_input_gradient_bound)

    aten = torch.ops.aten
    calls = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is aten.native_batch_norm_backward.default:
                calls.append(args)
            return func(*args, **(kwargs or {}))

    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 8, 1, 3, generator=g, dtype=torch.float64)
    w = torch.randn(8, generator=g, dtype=torch.float64).requires_grad_()
    upstream = torch.randn(6, 8, 1, 3, generator=g, dtype=torch.float64) * 1000
    with Record():
        y = torch.nn.functional.batch_norm(x, None, None, w, None, training=True)
        z = torch.nn.functional.batch_norm(y, None, None, None, None, training=True)
        (z * upstream).sum().backward()
    native = calls[-1]
    assert _as_native_batch_norm_backward(aten.native_batch_norm_backward.default, native) is native
    assert _batch_norm_backward_cancels(native)
    grad, inp, weight, running_mean, running_var, save_mean, save_invstd = native[:7]
    weight = torch.ones(8, dtype=torch.float64) if weight is None else weight
    cudnn = (inp, grad, weight, running_mean, running_var, save_mean, save_invstd, 1e-5, torch.empty(0))
    new = (grad, inp, weight, running_mean, running_var, save_mean, save_invstd, True, 1e-5,
           [True, True, True], torch.empty(0))
    for func, args in ((aten.cudnn_batch_norm_backward.default, cudnn), (aten.batch_norm_backward.default, new)):
        mapped = _as_native_batch_norm_backward(func, args)
        assert _batch_norm_backward_cancels(mapped)
        assert torch.equal(_batch_norm_input_gradient_bound(mapped),
                           _batch_norm_input_gradient_bound((*native[:2], weight, *native[3:])))
    # (eval mode: no saved statistics, nothing to watch)
    assert not _batch_norm_backward_cancels(_as_native_batch_norm_backward(
        aten.batch_norm_backward.default, (*new[:5], torch.empty(0), torch.empty(0), *new[7:])))
    assert _as_native_batch_norm_backward(aten.convolution_backward.default, native) is None
