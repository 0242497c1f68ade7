"""Each of ember's decompositions against the eager ATen kernel it replaces."""
import pytest
import torch

import ember

from ember.decomp import core_decompositions

aten = torch.ops.aten
torch.manual_seed(0)
x4 = torch.randn(3, 4)
nchw = torch.randn(2, 3, 4, 5)

CASES = {
    aten.addmm.default: [((torch.randn(5), torch.randn(3, 4), torch.randn(4, 5)), {}),
                         ((torch.randn(5), torch.randn(3, 4), torch.randn(4, 5)), {"beta": 0.5, "alpha": 2.0})],
    aten.gelu.default: [((x4,), {}), ((x4,), {"approximate": "tanh"})],
    aten.gelu_backward.default: [((torch.randn(3, 4), x4), {}), ((torch.randn(3, 4), x4), {"approximate": "tanh"})],
    aten.silu.default: [((x4,), {})],
    aten.silu_backward.default: [((torch.randn(3, 4), x4), {})],
    aten.tanh_backward.default: [((torch.randn(3, 4), torch.tanh(x4)), {}),
                                 ((torch.randn(3, 4, dtype=torch.float64), torch.tanh(x4).double()), {})],
    aten._softmax.default: [((x4, 1, False), {}), ((x4, 0, False), {})],
    aten._log_softmax.default: [((x4, 1, False), {})],
    aten._softmax_backward_data.default: [((torch.randn(3, 4), torch.softmax(x4, 1), 1, torch.float32), {})],
    aten._log_softmax_backward_data.default: [((torch.randn(3, 4), torch.log_softmax(x4, 1), 1, torch.float32), {})],
    aten.mse_loss.default: [((x4, torch.randn(3, 4), 1), {}), ((x4, torch.randn(3, 4), 2), {}),
                            ((x4, torch.randn(3, 4), 0), {})],
    aten.mse_loss_backward.default: [((torch.tensor(1.5), x4, torch.randn(3, 4), 1), {})],
    aten.nll_loss_forward.default: [((torch.log_softmax(x4, 1), torch.tensor([0, 3, -100]), None, 1, -100), {}),
                                    ((torch.log_softmax(x4, 1), torch.tensor([0, 3, 1]), None, 2, -100), {})],
    aten.nll_loss_backward.default: [
        ((torch.tensor(1.5), torch.log_softmax(x4, 1), torch.tensor([0, 3, -100]), None, 1, -100,
          torch.tensor(2.0)), {}),
        ((torch.tensor(1.5), torch.log_softmax(x4, 1), torch.tensor([0, 3, 1]), None, 2, -100, torch.tensor(3.0)), {}),
        ((torch.randn(3), torch.log_softmax(x4, 1), torch.tensor([2, -100, 1]), None, 0, -100, torch.tensor(2.0)), {}),
        ((torch.tensor(0.5), torch.log_softmax(torch.randn(4), 0), torch.tensor(2), None, 1, -100,
          torch.tensor(1.0)), {}),
    ],
    aten.native_layer_norm.default: [((x4, [4], torch.randn(4), torch.randn(4), 1e-5), {}),
                                     ((nchw, [4, 5], None, None, 1e-5), {})],
    aten.native_batch_norm.default: [
        ((nchw, torch.randn(3), torch.randn(3), torch.zeros(3), torch.ones(3), True, 0.1, 1e-5), {}),
        ((nchw, torch.randn(3), torch.randn(3), torch.rand(3), torch.rand(3) + 0.5, False, 0.1, 1e-5), {}),
    ],
    aten.native_batch_norm_backward.default: [
        ((torch.randn(2, 3, 4, 5), nchw, torch.randn(3), None, None, nchw.mean([0, 2, 3]),
          nchw.var([0, 2, 3], unbiased=False).add(1e-5).rsqrt(), True, 1e-5, [True, True, True]), {}),
        ((torch.randn(2, 3, 4, 5), nchw, torch.randn(3), torch.rand(3), torch.rand(3) + 0.5, None, None, False,
          1e-5, [True, True, True]), {}),
    ],
    aten.threshold_backward.default: [((torch.randn(3, 4), torch.tensor([[-1.0, 0.0, 0.5, 2.0]] * 3), 0.0), {})],
    aten.embedding_dense_backward.default: [((torch.randn(2, 3, 4), torch.tensor([[0, 2, 2], [1, 0, 5]]), 6, -1, False), {}),
                                            ((torch.randn(2, 3, 4), torch.tensor([[0, 2, 2], [1, 0, 5]]), 6, 2, False), {})],
    aten.native_dropout_backward.default: [((torch.randn(3, 4), torch.rand(3, 4) > 0.5, 2.0), {})],
}


def _clone(value):
    return value.clone() if isinstance(value, torch.Tensor) else value


@pytest.mark.parametrize("op", sorted(CASES, key=str), ids=str)
def test_decomposition_matches_kernel(op):
    table = core_decompositions()
    assert op in table
    for args, kwargs in CASES[op]:
        expected = op(*[_clone(a) for a in args], **kwargs)
        got = table[op](*[_clone(a) for a in args], **kwargs)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_batch_norm_updates_running_stats_like_kernel():
    table = core_decompositions()
    args = (nchw, torch.randn(3), torch.randn(3))
    mean_a, var_a = torch.rand(3), torch.rand(3) + 0.5
    mean_b, var_b = mean_a.clone(), var_a.clone()
    aten.native_batch_norm.default(*args, mean_a, var_a, True, 0.1, 1e-5)
    table[aten.native_batch_norm.default](*args, mean_b, var_b, True, 0.1, 1e-5)
    torch.testing.assert_close(mean_b, mean_a)
    torch.testing.assert_close(var_b, var_a)


def test_batch_norm_statistics_of_huge_float32_values_on_the_cpu_are_summed_wide():
    # eager's CPU kernel sums a float32 input's statistics in double: squares of values near
    # 1e38 do not overflow there, and the output stays finite (fuzz conv 8206: ember gave NaN)
    table = core_decompositions()
    x = torch.randn(4, 3, 2, 2)
    x[0, 1] = -1.7e38
    x[1, 1] = 1.0e38
    expected = aten.native_batch_norm.default(x, None, None, None, None, True, 0.1, 1e-5)
    got = table[aten.native_batch_norm.default](x, None, None, None, None, True, 0.1, 1e-5)
    assert torch.isfinite(expected[0]).all()
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    ember_out = ember.compile(lambda t: torch.nn.functional.batch_norm(t, None, None, training=True),
                              backend="ember")(x)
    torch.testing.assert_close(ember_out, expected[0], rtol=1e-4, atol=1e-4)
    # another layout takes eager's generic kernel: invstd in double too, tiny rather than 0, so
    # that channel's output is not 0 there (fuzz conv 8344)
    y = torch.empty_strided(x.shape, (12, 1, 3, 6)).copy_(x)  # (neither contiguous nor channels-last)
    weight, bias = torch.randn(3), torch.randn(3)
    expected = aten.native_batch_norm.default(y, weight, bias, None, None, True, 0.1, 1e-5)
    got = table[aten.native_batch_norm.default](y, weight, bias, None, None, True, 0.1, 1e-5)
    assert expected[0][0, 1].abs().sum() > 0
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_layer_norm_backward_matches_autograd():
    table = core_decompositions()
    x = torch.randn(2, 3, 4)
    weight, bias = torch.randn(4), torch.randn(4)
    out, mean, rstd = aten.native_layer_norm.default(x, [4], weight, bias, 1e-5)
    grad = torch.randn_like(out)
    expected = aten.native_layer_norm_backward.default(grad, x, [4], mean, rstd, weight, bias, [True, True, True])
    got = table[aten.native_layer_norm_backward.default](grad, x, [4], mean, rstd, weight, bias, [True, True, True])
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("with_weight", [True, False])
def test_layer_norm_backward_over_one_element_is_zero(with_weight):
    """Over one element x_hat is 0 and so is the input's gradient. Computed as (dy * x) * w and
    (rstd * dy) * w against (dy * w) * mean and (dy * w) * rstd, the terms left a residue of one
    unit of rstd * dy * w, times rstd^3 through b (fuzz autograd 1557: 1.2e-4 at x = 809, where
    eager's FMA-contracted kernel gives 0; eager's own residues are rarer, not absent)."""
    table = core_decompositions()
    torch.manual_seed(0)
    x = torch.randn(200, 1) * 1000
    weight = torch.randn(1) * 3 if with_weight else None
    out, mean, rstd = aten.native_layer_norm.default(x, [1], weight, None, 1e-5)
    grad = torch.randn_like(out)
    got = table[aten.native_layer_norm_backward.default](grad, x, [1], mean, rstd, weight, None, [True, False, False])
    assert torch.equal(got[0], torch.zeros_like(x))


def test_dropout_decomposition_draws_eager_mask():
    table = core_decompositions()
    x = torch.randn(50, 50)
    torch.manual_seed(7)
    expected = torch.nn.functional.dropout(x, 0.3, training=True)
    torch.manual_seed(7)
    got, mask = table[aten.native_dropout.default](x, 0.3, True)
    torch.testing.assert_close(got, expected)


LOW_PRECISION_CASES = {
    "gelu": lambda x, g: (aten.gelu.default, (x,), {}),
    "gelu_tanh": lambda x, g: (aten.gelu.default, (x,), {"approximate": "tanh"}),
    "gelu_backward": lambda x, g: (aten.gelu_backward.default, (g, x), {}),
    "gelu_tanh_backward": lambda x, g: (aten.gelu_backward.default, (g, x), {"approximate": "tanh"}),
    "silu": lambda x, g: (aten.silu.default, (x,), {}),
    "silu_backward": lambda x, g: (aten.silu_backward.default, (g, x), {}),
    "tanh_backward": lambda x, g: (aten.tanh_backward.default, (g, torch.tanh(x)), {}),
    "softmax_backward": lambda x, g: (aten._softmax_backward_data.default,
                                      (g, torch.softmax(x.float(), 1).to(x.dtype), 1, x.dtype), {}),
}


def _ulps(got, expected):
    """Distance in units in the last place of the low-precision type (of values of magnitude at
    least 1/8: closer to zero these formulas cancel, and float32 rounding shows through)."""
    spacing = torch.finfo(expected.dtype).eps * expected.float().abs().clamp_min(0.125)
    return ((got.float() - expected.float()).abs() / spacing).max().item()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", sorted(LOW_PRECISION_CASES))
def test_low_precision_decompositions_round_once(case, dtype):
    """Eager computes these in float32 and rounds once; a decomposition that rounds after every
    step drifts by several units in the last place."""
    torch.manual_seed(0)
    x = (torch.randn(64, 256) * 3).to(dtype)
    grad = torch.randn(64, 256).to(dtype)
    op, args, kwargs = LOW_PRECISION_CASES[case](x, grad)
    expected = op(*args, **kwargs)
    got = core_decompositions()[op](*args, **kwargs)
    assert got.dtype == expected.dtype
    assert _ulps(got, expected) < 1.0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_low_precision_norm_backwards_round_once(dtype):
    torch.manual_seed(0)
    x = (torch.randn(32, 64) * 3).to(dtype)
    weight, bias = torch.randn(64).to(dtype), torch.randn(64).to(dtype)
    grad = torch.randn(32, 64).to(dtype)
    table = core_decompositions()
    out, mean, rstd = aten.native_layer_norm.default(x.float(), [64], weight.float(), bias.float(), 1e-5)
    reference = aten.native_layer_norm_backward.default(grad.float(), x.float(), [64], mean, rstd, weight.float(),
                                                        bias.float(), [True, True, True])
    got = table[aten.native_layer_norm_backward.default](grad, x, [64], mean, rstd, weight, bias, [True, True, True])
    for ours, exact in zip(got, reference):
        assert ours.dtype == dtype
        # float32 math rounded once: within one unit of the float32 result rounded to the dtype
        assert _ulps(ours, exact.to(dtype)) < 1.0
    x4d = (torch.randn(8, 3, 5, 5) * 300).to(dtype)
    out, mean, invstd = table[aten.native_batch_norm.default](x4d, None, None, None, None, True, 0.1, 1e-5)
    expected = aten.native_batch_norm.default(x4d, None, None, None, None, True, 0.1, 1e-5)
    assert [t.dtype for t in (out, mean, invstd)] == [t.dtype for t in expected]
    torch.testing.assert_close(out, expected[0], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype, param_dtype", [(torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16),
                                                (torch.float16, torch.float32), (torch.float32, torch.float32)],
                         ids=str)
def test_layer_norm_statistics_have_eager_dtype(dtype, param_dtype):
    """Eager keeps mean and rstd in the input's dtype (rounded), or in float32 for float16/bfloat16
    input with float32 parameters; the decomposition returned float32 statistics always."""
    torch.manual_seed(0)
    x = torch.randn(4, 6).to(dtype)
    weight, bias = torch.randn(6).to(param_dtype), torch.randn(6).to(param_dtype)
    expected = aten.native_layer_norm.default(x, [6], weight, bias, 1e-5)
    got = core_decompositions()[aten.native_layer_norm.default](x, [6], weight, bias, 1e-5)
    assert [t.dtype for t in got] == [t.dtype for t in expected]
    for ours, eager in zip(got, expected):
        torch.testing.assert_close(ours, eager, rtol=1e-2, atol=1e-2)


def test_layer_norm_backward_puts_nans_where_eager_does():
    """A weight of -inf: eager's kernel makes every input gradient of the row NaN (its b term is
    inf - inf); the x_hat-based formula gave +-inf at some elements."""
    x = torch.tensor([[0.37, 0.32, 1.82, -0.08, -1.77, -1.16, -0.12, -1.16]])
    weight = torch.tensor([0.07, 0.47, 1.29, -0.52, 0.99, float("-inf"), -0.75, 0.02])
    bias = torch.randn(8)
    grad = torch.arange(8.0).reshape(1, 8) - 3
    out, mean, rstd = aten.native_layer_norm.default(x, [8], weight, bias, 1e-5)
    expected = aten.native_layer_norm_backward.default(grad, x, [8], mean, rstd, weight, bias, [True, True, True])
    got = core_decompositions()[aten.native_layer_norm_backward.default](grad, x, [8], mean, rstd, weight, bias,
                                                                         [True, True, True])
    for ours, eager in zip(got, expected):
        torch.testing.assert_close(ours, eager, equal_nan=True)


@pytest.mark.parametrize("backend", ["decomposition", "aot_eager", "ember"])
def test_norms_without_bias_give_eager_sign_of_zero(backend):
    """A row equal to its mean is 0 after centering; times a negative weight that is -0, but eager's
    kernels add a bias of +0 when there is none, so 1 / out is inf, not -inf (fuzz seed 17862)."""
    import ember

    x = torch.full((2, 4, 5), 7.0)
    x[1, :, 0] = 0.0
    x[1, :, 1:] = 0.0
    weight = torch.tensor([2.5, -1.0, 3.0, -0.5, 1.0])
    channel_weight = torch.tensor([1.0, -1.0, 2.0, -2.0])

    def program(x, weight, channel_weight):
        layer = torch.nn.functional.layer_norm(x, (5,), weight)
        batch = torch.nn.functional.batch_norm(x * 0.0, None, None, channel_weight, training=True)
        return layer.reciprocal(), batch.reciprocal()

    expected = program(x, weight, channel_weight)
    if backend == "decomposition":
        table = core_decompositions()
        out = table[aten.native_layer_norm.default](x, [5], weight, None, 1e-5)[0]
        batch = table[aten.native_batch_norm.default](x * 0.0, channel_weight, None, None, None,
                                                      True, 0.1, 1e-5)[0]
        got = (out.reciprocal(), batch.reciprocal())
    else:
        got = ember.compile(program, backend=backend)(x, weight, channel_weight)
    for ours, eager in zip(got, expected):
        torch.testing.assert_close(ours, eager)


def test_tanh_backward_rounds_one_minus_square_once_like_eager():
    """Eager's kernel computes 1 - y*y as one fused multiply-add: the float32 decomposition gives
    the same bits."""
    torch.manual_seed(0)
    grad, out = torch.randn(4096), torch.tanh(torch.randn(4096) * 2)
    got = core_decompositions()[aten.tanh_backward.default](grad, out)
    expected = aten.tanh_backward.default(grad, out)
    if not torch.equal(expected, grad * (1 - out.double() ** 2).float()):
        pytest.skip("eager's kernel on this CPU rounds y*y before subtracting (no FMA path)")
    assert torch.equal(got, expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA's batch-norm kernel")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_batch_norm_statistics_dtype_on_cuda(dtype):
    """OpInfo native_batch_norm bfloat16 on CUDA: eager's kernel saves the mean and inverse
    standard deviation in float32 for a half-precision input (its CPU kernel in the input's or
    the parameters' dtype)."""
    decomposition = core_decompositions()[torch.ops.aten.native_batch_norm.default]
    x = torch.randn(4, 3, 5, device="cuda", dtype=dtype)
    weight, bias = torch.ones(3, device="cuda", dtype=dtype), torch.zeros(3, device="cuda", dtype=dtype)
    expected = torch.ops.aten.native_batch_norm.default(x, weight, bias, None, None, True, 0.1, 1e-5)
    got = decomposition(x, weight, bias, None, None, True, 0.1, 1e-5)
    assert [t.dtype for t in got] == [t.dtype for t in expected]
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)


def test_batch_norm_eval_gradient_with_a_strided_weight_is_the_formulas():
    """Fuzz conv 8549: eager's CPU batch_norm backward in eval mode (torch 2.13) reads a strided
    weight as contiguous when grad_output is contiguous; ember's gradient is weight * invstd,
    what eager gives for the same weight made contiguous."""
    import torch.nn.functional as F

    storage = torch.randn(8, dtype=torch.float64)
    weight = storage[::2]
    x0 = torch.rand(1, 4, 1, 1, dtype=torch.float64)

    def program(x, w):
        return F.batch_norm(x, torch.zeros(4, dtype=x.dtype), torch.ones(4, dtype=x.dtype), w, None, training=False)

    grads = []
    for fn, w in ((ember.compile(program, backend="ember"), weight), (program, weight.contiguous())):
        x = x0.clone().requires_grad_()
        out = fn(x, w)
        out.backward(torch.ones_like(out))
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1])


def test_cuda_layer_norm_input_gradient_is_eager_cuda_formula():
    """Eager's CUDA layer_norm backward computes the input gradient from x_hat (its CPU kernel
    from x): with a weight of -inf the two put NaN and -inf in different places (fuzz autograd
    703579, default 701136 on an H200: eager -inf, ember's CPU formula NaN).  The CUDA form,
    checked here on the CPU against eager's CPU kernel where every value is finite."""
    from ember.decomp.norms import _cuda_layer_norm_grad_input

    x, dy = torch.randn(4, 5, 6, dtype=torch.float64), torch.randn(4, 5, 6, dtype=torch.float64)
    for weight in (torch.randn(6, dtype=torch.float64), None):
        _, mean, rstd = aten.native_layer_norm.default(x, [6], weight, None, 1e-5)
        expected = aten.native_layer_norm_backward.default(dy, x, [6], mean, rstd, weight, None,
                                                           [True, False, False])[0]
        torch.testing.assert_close(_cuda_layer_norm_grad_input(dy, x, mean, rstd, weight, [2], 6), expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="eager's CUDA layer_norm backward")
def test_layer_norm_gradient_with_an_infinite_weight_matches_eager_on_cuda():
    """Fuzz autograd 703579: a float64 layer_norm with weight [tiny, -inf, w]: eager's CUDA
    gradient of the input is -inf where the CPU formula gives inf - inf = NaN."""
    import ember

    def program(a, w, b):
        return torch.nn.functional.layer_norm(a, (3,), w, b)

    weight = torch.tensor([2.2250738585072014e-308, float("-inf"), 0.7], dtype=torch.float64, device="cuda")
    bias = torch.tensor([8.9e307, -0.0, 0.0], dtype=torch.float64, device="cuda")
    x0 = torch.randn(33, 7, 3, dtype=torch.float64, device="cuda")
    dy = torch.randn(33, 7, 3, dtype=torch.float64, device="cuda")
    grads = []
    for fn in (program, ember.compile(program, backend="ember")):
        x = x0.clone().requires_grad_()
        fn(x, weight, bias).backward(dy)
        grads.append(x.grad)
    torch.testing.assert_close(grads[1], grads[0], equal_nan=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="eager's CUDA clamp kernel")
def test_integer_clamp_in_place_with_wider_bounds_matches_eager_on_cuda():
    """Fuzz known 702451: int8 c.clamp_(min=int64 b): eager's CUDA kernel casts b to int8 first
    (-42347425741 becomes 51, which wins), its CPU kernel compares in int64 (4 wins)."""
    import ember

    def program(c, b):
        c.view(-1).clamp_(min=b)
        return c * 1

    b = torch.tensor([-42347425741, 535493716083, -358813168334, 490147980519, 1088715567858], device="cuda")
    c = torch.tensor([4, 8, 5, 8, 3], dtype=torch.int8, device="cuda")
    expected, got = program(c.clone(), b), ember.compile(program, backend="ember")(c.clone(), b)
    assert torch.equal(got, expected)
