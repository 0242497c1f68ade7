"""Wrong results the differential fuzzer and users found in the C++ code generator, one test each.

Every case runs through backend "ember" (capture, AOT autograd, C++ kernels) twice, so results
that depend on leftover memory show up, and is compared with eager PyTorch.
"""
import pytest
import torch
import torch.nn.functional as F

import ember

from codegen_helpers import run


def compiled_twice(fn, *args):
    compiled = ember.compile(fn, backend="ember")
    first = compiled(*[a.clone() for a in args])
    second = compiled(*[a.clone() for a in args])
    return first, second


def assert_identical(ours, theirs):
    """Same values, NaN in the same places, and the same sign on zeros (-0.0 == 0.0 otherwise)."""
    if not ours.is_floating_point():
        assert torch.equal(ours, theirs), (ours, theirs)
        return
    nan = theirs.isnan()
    assert torch.equal(ours.isnan(), nan), (ours, theirs)
    assert torch.equal(ours[~nan], theirs[~nan]), (ours, theirs)
    assert torch.equal(ours[~nan].signbit(), theirs[~nan].signbit()), (ours, theirs)


def assert_like_eager(fn, *args, exact=False, **tolerance):
    expected = fn(*[a.clone() for a in args])
    for got in compiled_twice(fn, *args):
        expected_list = expected if isinstance(expected, tuple) else (expected,)
        got_list = got if isinstance(got, tuple) else (got,)
        for ours, theirs in zip(got_list, expected_list):
            assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
            if exact:
                assert_identical(ours, theirs)
            else:
                torch.testing.assert_close(ours, theirs, equal_nan=True, **tolerance)


@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_over_a_leading_dim(dim):
    """Both reductions of softmax over dim 0 share the column-reduction loop: the sum read the
    amax buffer before it was written (NaN or leftover values)."""
    x = torch.randn(16, 31)
    assert_like_eager(lambda x: x.log_softmax(dim), x)
    assert_like_eager(lambda x: x.softmax(dim), x)
    assert_like_eager(lambda x: torch.softmax(x, dim=0) * 2, torch.randn(5, 40, 3))


def test_softmax_over_a_leading_dim_gradient():
    x = torch.randn(16, 31, requires_grad=True)
    expected = torch.autograd.grad(x.log_softmax(0).sin().sum(), x)[0]
    compiled = ember.compile(lambda x: x.log_softmax(0).sin().sum(), backend="ember")
    for _ in range(2):
        got = torch.autograd.grad(compiled(x), x)[0]
        torch.testing.assert_close(got, expected)


def test_narrow_integers_and_bools_wrap():
    assert_like_eager(lambda b: (b + True).float(), torch.tensor([True, False]), exact=True)
    assert_like_eager(lambda a: (a - 200).float(), torch.tensor([7, 250], dtype=torch.uint8), exact=True)
    assert_like_eager(lambda a: (a * 100).float() + 1, torch.tensor([7, -3, 127], dtype=torch.int8), exact=True)
    assert_like_eager(lambda a: (a * 3000).to(torch.int32) + 1, torch.tensor([20, -30], dtype=torch.int16), exact=True)
    assert_like_eager(lambda a: (-a).float(), torch.tensor([1, 200], dtype=torch.uint8), exact=True)
    assert_like_eager(lambda a: (a * 1_000_000_007) + 1, torch.tensor([2**40, -(2**41)]), exact=True)


def test_integer_power():
    """Negative exponents give 0 (or +-1 for bases +-1), large ones wrap, as ATen's integer pow."""
    base = torch.tensor([0, 1, 2, -1, 3, -1])
    exponent = torch.tensor([-1, -1, -2, -3, 3, -4])
    assert_like_eager(lambda a, b: a ** b, base, exponent, exact=True)
    assert_like_eager(lambda a: a ** 45 + 1, torch.tensor([3, 7, -5]), exact=True)
    assert_like_eager(lambda a: (a ** 3).float(), torch.tensor([5, -7], dtype=torch.int8), exact=True)


def test_float_floor_division_and_remainder():
    special = [float("inf"), float("-inf"), 1.0, -7.5, 0.0, -0.0, 1e30, 5.0, float("nan"), 0.3, -0.3]
    a = torch.tensor(special * len(special))
    # (No divisor so small that a / b overflows: eager's own remainder then depends on whether its
    # loop ran vectorized.)
    b = torch.tensor([value for value in [0.5, 0.0, -0.0, 2.0, -3.0, 7.0, 0.1, float("inf"), -1.0, 1e-3, -0.1]
                      for _ in special])
    assert_like_eager(lambda a, b: a // b, a, b, exact=True)
    assert_like_eager(lambda a, b: torch.div(a, b, rounding_mode="floor"), a, b, exact=True)
    assert_like_eager(lambda a, b: torch.remainder(a, b), a, b, exact=True)


def test_sign_of_nan_is_zero():
    assert_like_eager(lambda a: torch.sign(a) + 0, torch.tensor([float("nan"), 1.0, -2.0, -0.0]), exact=True)


def test_var_mean_over_an_empty_dim_is_nan():
    x = torch.randn(3, 0)
    assert_like_eager(lambda a: torch.var_mean(a, dim=1), x)
    assert_like_eager(lambda a: (torch.var_mean(a, dim=1)[1] + 1, a.mean(1) * 2), x)


def test_float_to_integer_to_float_round_trip_keeps_positive_zero():
    """g++ folds float(int64(x)) into trunc(x), which keeps the sign of -0.0 and -0.5."""
    assert_like_eager(lambda a: 1 / a.long(), torch.tensor([-0.0, -0.5, 2.0, 0.7]), exact=True)
    assert_like_eager(lambda a: 1 / a.to(torch.int32).double(), torch.tensor([-0.0, -0.9], dtype=torch.float64),
                      exact=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_low_precision_variance_accumulates_in_float32(dtype):
    """m2 (sum of squared deviations) was stored in float16 and overflowed: batch_norm gave zeros."""
    x = (torch.randn(64, 4) * 300).to(dtype)
    tolerance = dict(rtol=2e-2, atol=2e-2)
    assert_like_eager(lambda a: F.batch_norm(a, None, None, training=True), x, **tolerance)
    assert_like_eager(lambda a: (a.var(0), a.std(0)), x, rtol=1e-2, atol=1e-1)
    assert_like_eager(lambda a: torch.var_mean(a, 0), x, rtol=1e-2, atol=1e-1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_low_precision_values_compile(dtype):
    """g++ rejected `+=` on bfloat16, sqrt of _Float16 (ambiguous) and max of mixed types."""
    x = torch.rand(5, 3).to(dtype)
    tolerance = dict(rtol=2e-2, atol=2e-2)
    assert_like_eager(lambda a, i, v: a.index_put((i,), v, accumulate=True),
                      x, torch.tensor([0, 2, 2]), torch.randn(3, 3).to(dtype), **tolerance)
    assert_like_eager(lambda a: a ** 0.5 + a.abs().clamp(max=0.5), x, **tolerance)
    assert_like_eager(lambda a: torch.maximum(a, a.flip(0)).sqrt() + a.amax(0), x, **tolerance)
    assert_like_eager(lambda a: a.scatter_add(0, torch.tensor([[1, 0, 4]]), a[:1]), x, **tolerance)


def test_int64_minimum_literal():
    assert_like_eager(lambda a: a + (-2**63), torch.tensor([0, 1]), exact=True)


def test_output_with_a_storage_offset_is_allocated_in_full():
    """A graph output whose eager layout has a storage offset was allocated without it, and the
    kernel wrote past the end of the buffer."""
    x = torch.randn(6, 5)
    assert_like_eager(lambda a: (a * 2).t()[1:], x)
    assert_like_eager(lambda a: ((a + 1)[2:], (a * 3)[:, 1:].t()), x)


@pytest.mark.parametrize("case", ["embedding", "embedding_negative", "gather", "gather_negative", "index",
                                  "index_put", "scatter_add"])
def test_out_of_range_index_raises(case):
    """Generated kernels check data-dependent indices: eager raises, so does ember (naming the op
    and the user's line) instead of reading or writing outside the buffer."""
    weight, x = torch.randn(10, 3), torch.randn(4, 5)
    cases = {
        "embedding": (lambda w, i: F.embedding(i, w) * 2, weight, torch.tensor([1, 50])),
        "embedding_negative": (lambda w, i: F.embedding(i, w) * 2, weight, torch.tensor([1, -1])),
        "gather": (lambda x, i: x.gather(1, i) + 1, x, torch.tensor([[0], [5], [1], [2]])),
        "gather_negative": (lambda x, i: x.gather(1, i) + 1, x, torch.tensor([[0], [-1], [1], [2]])),
        "index": (lambda x, i: x[i] + 1, x, torch.tensor([0, 4])),
        "index_put": (lambda x, i, v: x.index_put((i,), v, accumulate=True), x, torch.tensor([0, -5]), torch.ones(2, 5)),
        "scatter_add": (lambda x, i, v: x.scatter_add(0, i, v), x, torch.tensor([[0, 9, 1, 1, 1]]), torch.ones(1, 5)),
    }
    fn, *args = cases[case]
    with pytest.raises((IndexError, RuntimeError)) as eager_error:
        fn(*args)
    compiled = ember.compile(fn, backend="ember")
    # eager's exception type (RuntimeError for gather, IndexError for indexing) catches ember's
    with pytest.raises(eager_error.type, match=r"index out of bounds in aten\.\w+.*test_regressions\.py:\d+"):
        compiled(*args)
    # The same compiled function still works on good indices (the error flag was cleared).
    good = [a.clamp(0, 0) if a.dtype == torch.int64 else a for a in args]
    torch.testing.assert_close(compiled(*good), fn(*good))


def test_negative_indices_that_eager_accepts_still_work():
    x = torch.randn(4, 5)
    assert_like_eager(lambda x, i: x[i] + 1, x, torch.tensor([0, -4, -1]))
    assert_like_eager(lambda x, i, v: x.index_put((i,), v), x, torch.tensor([0, -2]), torch.randn(2, 5))


def test_out_of_range_index_in_backward_raises():
    """Embedding's backward scatters with the same indices: checked too (here through a graph
    that only runs the backward kernel with a bad index)."""
    grad = torch.randn(2, 3)
    fn = lambda g, i: torch.zeros(10, 3).index_put((i,), g, accumulate=True)  # noqa: E731
    (result, graphs) = run(fn, grad, torch.tensor([1, 2]))
    torch.testing.assert_close(result, fn(grad, torch.tensor([1, 2])))
    with pytest.raises(IndexError, match="index_put"):
        graphs[0](grad, torch.tensor([1, 12]))


def test_rounding_an_integer_tensor_is_the_identity():
    """floor/ceil/round/trunc of an integer tensor were C++ double results: g++ rejected
    minimum(int, double), and large values converted to uint8 came out 0 instead of wrapping."""
    a = torch.tensor([[[3]]], dtype=torch.uint8)
    assert_like_eager(lambda a, b: torch.minimum(b, a.floor()), a, a.clone(), exact=True)
    big = torch.tensor([2**40 + 167, -(2**41) + 3, 5])
    for op in (torch.floor, torch.ceil, torch.round, torch.trunc):
        assert_like_eager(lambda x: op(x).to(torch.uint8), big, exact=True)


def test_argmin_of_bool_raises_as_eager():
    fn = lambda x: x.argmin(-1) + 1  # noqa: E731
    with pytest.raises(RuntimeError, match="bool"):
        fn(torch.ones(3, dtype=torch.bool))
    with pytest.raises(RuntimeError, match="bool"):
        ember.compile(fn, backend="ember")(torch.ones(3, dtype=torch.bool))


def test_quantile_lowers_without_crashing():
    """quantile squeezes a gathered value in place; the tracer left the gather node's fake value
    squeezed too (0-d), and the gather lowering crashed on it (hidden as an ATen fallback)."""
    x = torch.randn(7)
    assert_like_eager(lambda x: torch.quantile(x, 0.3), x)
    assert_like_eager(lambda x: torch.nanquantile(x, torch.tensor([0.2, 0.7])), x)
    assert_like_eager(lambda x: x.gather(0, torch.tensor(2)) * 2, x)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_outputs_that_are_views_of_one_value_share_memory(requires_grad):
    """v5.reshape(800) and v5.mT are views of one tensor in eager; the reshape's index did not
    simplify (floor of a floor), so ember stored a copy and the outputs no longer aliased."""
    a = torch.randn(5, 100, requires_grad=requires_grad)
    index = torch.randint(0, 5, (2, 4))

    def fn(a, index):
        v5 = a[index] * 0.5
        return v5.reshape(800), v5.mT

    flat, transposed = ember.compile(fn, backend="ember")(a, index)
    expected = fn(a, index)
    torch.testing.assert_close(flat, expected[0])
    torch.testing.assert_close(transposed, expected[1])
    assert flat.untyped_storage().data_ptr() == transposed.untyped_storage().data_ptr()


def test_nested_floor_divisions_merge():
    import sympy

    from ember.lowering.indexing import simplify_index, unflatten

    q = sympy.Symbol("q0", integer=True, nonnegative=True)
    parts = unflatten(q, [sympy.Integer(2), sympy.Integer(4), sympy.Integer(100)])
    assert simplify_index(sympy.expand(400 * parts[0] + 100 * parts[1] + parts[2])) == q


@pytest.mark.parametrize("case", ["xor_float", "abs_bool", "floor_bool", "remainder_bool", "relu_bool"])
def test_dtypes_eager_rejects_raise_eagers_error(case):
    """Fake tensors do not check dtypes: a bitwise op on floats became C++ that g++ rejected
    (KernelCompileError), others computed a value where eager raises."""
    flag = torch.tensor([True, False])
    fn, args = {
        "xor_float": (lambda a, b: a.short() ^ (b / 2), (torch.randn(3), torch.randn(3))),
        "abs_bool": (lambda b: b.abs() * 2, (flag,)),
        "floor_bool": (lambda b: b.floor().float(), (flag,)),
        "remainder_bool": (lambda b: (b % b).float(), (flag,)),
        "relu_bool": (lambda b: b.relu().float(), (flag,)),
    }[case]
    with pytest.raises((RuntimeError, NotImplementedError)) as eager_error:
        fn(*args)
    with pytest.raises(type(eager_error.value)):
        ember.compile(fn, backend="ember")(*args)


@pytest.mark.parametrize("op", ["amax", "sum", "argmax", "log_softmax", "logsumexp", "cumsum_then_amin",
                                "var_mean", "mean"])
def test_reductions_of_0d_tensors_over_dim_0(op):
    """dim 0 and -1 name a 0-d tensor's one element (the fuzzer's amin(...) then log_softmax(dim=0)
    indexed an empty size list)."""
    fn = {
        "amax": lambda a: a.amin((0, 1, 2)).amax(0) + a.sum().amax(-1, keepdim=True),
        "sum": lambda a: a.sum().sum(0) * 2,
        "argmax": lambda a: a.sum().argmax(0),
        "log_softmax": lambda a: F.log_softmax(a.amin((0, 1, 2)), dim=0),
        "logsumexp": lambda a: torch.logsumexp(a.mean(), dim=-1),
        "cumsum_then_amin": lambda a: a.sum().cumsum(0).amin(0),
        "var_mean": lambda a: torch.var_mean(a.prod(), 0) + torch.std_mean(a.sum(), -1, correction=0),
        "mean": lambda a: a.sum().mean(0) + a.mean((0, -1)),
    }[op]
    assert_like_eager(fn, torch.randn(5, 2, 7))


def test_views_of_empty_tensors_written_in_place():
    """Index math over a size-0 dim divided by zero (sympy's Mod by zero): a tensor with no
    elements needs no index."""
    def fn(a, b):
        a[0, 11:] += 100.0
        a.view(-1).sigmoid_()
        a[:, 5:] += b
        return a * 2, b.reshape(-1, 2)

    assert_like_eager(fn, torch.randn(2, 31, 0, 1), torch.randn(2, 26, 0, 1))


def test_aten_fallback_result_planned_at_its_storage_start():
    """Fake tensors gave select_scatter of an input with a storage offset that offset too; the
    wrapper then viewed the real (offset 0) result at the wrong place (setStorage out of bounds)."""
    def fn(a, index, source):
        a.fill_(1.0)
        _, v1, _, v3 = torch.unbind(a, 1)
        v1[:] += 100.0
        v3.index_add_(0, index, source, alpha=-1)
        return source * 2, a + 1

    base = torch.randn(5, 4)
    expected_a, got_a = base.clone()[1:], base.clone()[1:]
    index, source = torch.tensor([0, 1, 3, 2, 0, 1]), torch.randn(6)
    expected = fn(expected_a, index, source)
    got = ember.compile(fn, backend="ember")(got_a, index, source)
    for ours, theirs in zip(got + (got_a,), expected + (expected_a,)):
        assert_identical(ours, theirs)


def test_min_of_0d_tensor_with_gradient():
    """min(0) of a 0-d tensor: its backward scatters into a 0-d tensor (indexed an empty size list)."""
    def fn(a):
        values, indices = a.min(0)
        return values * 3, indices, torch.gather(a, 0, indices) + 1

    a = torch.tensor(2.5, requires_grad=True)
    b = a.detach().clone().requires_grad_()
    got, expected = ember.compile(fn, backend="ember")(a), fn(b)
    for ours, theirs in zip(got, expected):
        assert_identical(ours.detach(), theirs.detach())
    (got[0] + got[2]).backward()
    (expected[0] + expected[2]).backward()
    assert_identical(a.grad, b.grad)


def test_variance_that_overflows_is_inf_not_nan():
    """Combining Welford partials into an empty accumulator multiplied an overflowing delta**2 by 0."""
    a = torch.tensor([[1.19, -0.236, 1.03, 1.7014117331926443e+38]])
    # (std is not compared: ATen's CPU kernel accumulates float32 in double, and its std of these
    # values is finite; ember's float32 statistics overflow to inf.)
    assert_like_eager(lambda a: (a.var((0, 1)), torch.var_mean(a, 1)[0]), a)


def test_tensor_operand_rounded_to_low_precision_common_dtype():
    """bf16 - int64 tensor: eager rounds the int64 operand to bfloat16 before the math; ember
    converted it to float32 only (remainder(x, b) of a bf16 x equal to bf16(b) gave -4e10, not 0)."""
    a = torch.tensor([[0.796875]], dtype=torch.bfloat16)
    b = torch.tensor([[-918253277099, 123456789]], dtype=torch.int64)
    c = torch.tensor([[1.0001, 3.14159]], dtype=torch.float32)
    assert_like_eager(lambda a, b, c: (torch.remainder(torch.minimum(b, a), b), a.half() - c.half() + b),
                      a, b, c)


def test_fmod_scalar_rounded_to_half():
    """fmod/remainder of a half tensor by 1e-30: eager rounds the scalar to half (0): NaN."""
    a = torch.tensor([[-62.0, -93.0, 7.5]], dtype=torch.half)
    assert_like_eager(lambda a: (torch.fmod(a, 1e-30), torch.remainder(a, 1e-30), torch.fmod(a, 0.1)), a)


def test_infinite_float_constant_into_an_integer_tensor():
    """copy_(-inf) into int32: the literal crashed the code generator (int(-inf)); ATen's conversion
    decides the value."""
    def fn(a, b):
        a.copy_(float("-inf"))
        return b == 3.0, a + 1

    a, b = torch.tensor([5, 6], dtype=torch.int32), torch.tensor([False, True])
    expected_a, got_a = a.clone(), a.clone()
    expected, got = fn(expected_a, b), ember.compile(fn, backend="ember")(got_a, b)
    for ours, theirs in zip(got + (got_a,), expected + (expected_a,)):
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize("case", ["where", "fill", "full", "masked_fill", "full_like", "new_full"])
def test_scalar_the_dtype_cannot_hold_raises(case):
    """where(c, int16, 2**31) raises in eager ('value cannot be converted'); ember computed a value."""
    fn = {
        "where": lambda a: torch.where(a <= 0, a, 2147483648),
        "fill": lambda a: a.clone().fill_(2147483648),
        "full": lambda a: torch.full((2, 3), 2147483648, dtype=torch.int16) + a,
        "masked_fill": lambda a: a.masked_fill(a > 0, 2147483648),
        "full_like": lambda a: torch.full_like(a - 1, -2147483649),  # (fuzz intmath 2842: int8, -129)
        "new_full": lambda a: a.new_full((2,), 2147483648) + a,
    }[case]
    a = torch.tensor([[6, -1, 2]], dtype=torch.int16)
    with pytest.raises(RuntimeError) as eager_error:
        fn(a)
    with pytest.raises(RuntimeError, match="cannot be converted"):
        ember.compile(fn, backend="ember")(a)
    assert "cannot be converted" in str(eager_error.value)


def test_half_square_is_rounded_before_use():
    """x ** 2 of a float16 x was kept unrounded inside the kernel; compared with its own (rounded)
    mean it was unequal, and var's backward of one element gave -inf where eager gives NaN."""
    def fn(a):
        v0 = a.sum(0, keepdim=True)
        v0.pow_(2)
        return torch.var_mean(v0, 0)[0], (a ** 2 == (a ** 2).mean())

    a = torch.tensor(-0.572265625, dtype=torch.float16, requires_grad=True)
    b = a.detach().clone().requires_grad_()
    got, expected = ember.compile(fn, backend="ember")(a), fn(b)
    assert torch.equal(got[1], expected[1])
    got[0].backward(torch.tensor(0.3, dtype=torch.float16))
    expected[0].backward(torch.tensor(0.3, dtype=torch.float16))
    assert_identical(a.grad, b.grad)


def test_call_kept_for_its_error_even_when_unread():
    """bool - 1 raises in eager; its only reader (zeros_like) ignores its value, and the scheduler
    dropped the ATen call that exists to raise."""
    fn = lambda b, x: torch.zeros_like(b - 1) + x  # noqa: E731
    b, x = torch.tensor([True, False]), torch.randn(2)
    with pytest.raises(RuntimeError) as eager_error:
        fn(b, x)
    with pytest.raises(RuntimeError, match="Subtraction"):
        ember.compile(fn, backend="ember")(b, x)
    assert "Subtraction" in str(eager_error.value)


@pytest.mark.parametrize("backend", ["ember", "aot_eager"])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_pointwise_result_has_eager_strides_with_mixed_layouts(backend, requires_grad):
    """Fake tensors give floor division of a row-major and a transposed input strides (1, 8),
    eager's kernel (31, 1): the graph returned the fakes' layout, and `.view(-1)` after it (fuzz
    seeds 19033, 12537) raised where eager's result views fine."""
    def fn(d, a):
        v = torch.div(d, a, rounding_mode="floor").relu()
        ember.graph_break()
        return v.view(-1) * 2, torch.div(d, a, rounding_mode="floor")

    d = torch.randn(16, 31)[::2]
    a = (torch.rand(31, 8) + 0.1).t()
    d.requires_grad_(requires_grad)
    expected = fn(d, a)
    compiled = ember.compile(fn, backend=backend)
    for _ in range(2):
        got = compiled(d, a)
        for ours, theirs in zip(got, expected):
            assert ours.stride() == theirs.stride()
            torch.testing.assert_close(ours, theirs)


def test_capture_keeps_the_view_of_a_pointwise_result_in_the_graph():
    """With eager's strides on the fake, `.view(-1)` of the floor division is captured (the
    fake's transposed layout made it a graph break)."""
    def fn(d, a):
        return torch.div(d, a, rounding_mode="floor").view(-1).abs()

    d = torch.randn(16, 31)[::2]
    a = (torch.rand(31, 8) + 0.1).t()
    explanation = ember.explain(fn)(d, a)
    assert explanation.graph_break_count == 0, explanation
    torch.testing.assert_close(ember.compile(fn, backend="ember")(d, a), fn(d, a))


def test_view_output_of_a_value_eager_lays_out_transposed():
    """`(x + y)` of two transposed inputs is transposed in eager, its `.t()` contiguous; ember
    stored the sum contiguous (it is not itself an output), so the returned view was transposed."""
    x, y = torch.randn(8, 31).t(), torch.randn(8, 31).t()
    expected = (x + y).t()
    got = ember.compile(lambda x, y: (x + y).t(), backend="ember")(x, y)
    assert got.stride() == expected.stride()
    torch.testing.assert_close(got, expected)


def test_var_mean_returns_the_mean_eager_returns():
    """var_mean's mean is sum / n: exact for integer-valued floats, where Welford's running mean
    was 1 ulp off and a trunc after it jumped (fuzz default 24459)."""
    b = torch.randint(-6, 7, (16,), generator=torch.Generator().manual_seed(2445902)).to(torch.float32)

    def fn(b):
        var, mean = torch.var_mean(65504.0 * b, keepdim=True)
        return var, torch.div(mean, -1, rounding_mode="trunc")

    assert_like_eager(fn, b, exact=True)


def test_saved_view_of_an_intermediate_with_other_strides():
    """atan2's backward saves `other`, a select of a permuted sum: the fake says offset 1, stride 15
    (the sum keeps the input's permuted layout); ember's forward stored the sum contiguous (offset
    5, stride 1). The backward, compiled for the fake's layout, read the wrong elements (fuzz
    seed 31092)."""
    torch.manual_seed(0)
    a = torch.randint(-6, 7, (5, 15)).float()
    b = torch.randn(31, 5)
    grad = torch.randn(31, 5)

    def program(a, b):
        other = (a.movedim(1, 0) + 1.5).select(-2, -14)
        return torch.atan2(b, other)

    grads = []
    for fn in (program, ember.compile(program, backend="ember"), ember.compile(program, backend="ember")):
        leaf = b.clone().requires_grad_()
        fn(a, leaf).backward(grad)
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1], grads[0])
    torch.testing.assert_close(grads[2], grads[0])


def test_inputs_at_another_storage_offset_than_at_capture():
    """Guards check no storage offsets: `f(x[3:8])` after `f(x[0:5])` ran the same kernels, which
    indexed the storage from the offset of the first call and read x[0:5] again. Kernels now
    index from where each input sits; an explicit as_strided offset stays absolute (ATen)."""
    torch.manual_seed(0)
    base = torch.randn(40, 6)
    weight = torch.randn(6, 3)

    def program(x, weight):
        return (x[1:3] * 2, (x @ weight).relu(), x.t()[2], torch.sin(x.select(1, 4)),
                x.as_strided((2, 2), (1, 2), 7) + 1)

    compiled = ember.compile(program, backend="ember")
    for start in (0, 5, 11):
        x = base[start:start + 8]
        for ours, eager in zip(compiled(x, weight), program(x, weight)):
            torch.testing.assert_close(ours, eager)
    leaf = torch.randn(50, 4, requires_grad=True)
    compiled = ember.compile(lambda x: (x[2:5].exp() * x[1:4]).sum(), backend="ember")
    for start in (0, 7):
        grads = []
        for fn in (lambda x: (x[2:5].exp() * x[1:4]).sum(), compiled):
            leaf.grad = None
            fn(leaf[start:start + 10]).backward()
            grads.append(leaf.grad)
        torch.testing.assert_close(grads[1], grads[0])


def test_saved_split_piece_keeps_eager_strides():
    """maximum of a transposed input has eager's strides (1, 5); the first piece of its split,
    saved for the backward, came back from the forward kernel contiguous, and the backward
    (compiled for strides (1, 5)) read it as if transposed (fuzz autograd 1690)."""
    def fn(a, b):
        v1, _ = torch.maximum(b, a).split(3, 0)
        v2 = torch.minimum(v1, v1 / 1)
        return v2.t() @ v2

    a = torch.tensor([[-0.03]])
    base = torch.randn(2, 5)
    b = base.t().requires_grad_()
    expected = torch.autograd.grad(fn(a, b).sum(), b)[0]
    compiled = ember.compile(fn, backend="ember")
    for _ in range(2):
        got = torch.autograd.grad(compiled(a, b).sum(), b)[0]
        torch.testing.assert_close(got, expected)


def test_graph_output_view_of_a_stored_value_has_eager_strides():
    """A graph output that is a view (a split piece, a slice) of a computed value gets the
    strides eager's view has (a caller compiled for them reads it so)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    from ember.codegen.compile import compile_graph

    aten = torch.ops.aten

    def graph(a, b):
        pieces = aten.split.Tensor(aten.maximum.default(b, a), 3)
        return (pieces[0], pieces[1], aten.slice.Tensor(aten.mul.Tensor(b, 2), 0, 1, 4))

    gm = torch.fx.symbolic_trace(graph)
    a, b = torch.tensor([[-0.03]]), torch.randn(2, 5).t()
    FakeTensorProp(gm, FakeTensorMode()).propagate(a, b)
    expected = gm(a, b)
    for got, want in zip(compile_graph(gm, [a, b])(a, b), expected):
        assert torch.equal(got, want)
        assert (got.stride(), got.storage_offset()) == (want.stride(), want.storage_offset())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_mean_divides_before_rounding(dtype):
    """ATen's CPU mean of float16/bfloat16 sums and divides in float32, then rounds; ember rounded
    the sum first, and three values of 32752 overflowed float16 (mean inf, x - mean -inf, and the
    std backward's 0 * (x - mean) NaN: fuzz known 1257)."""
    rows = [[0.5] * 3, [32752.0] * 3, [0.54296875, -2.21875, 0.259765625]]  # (the last: bfloat16's double rounding)
    a = torch.tensor(rows, dtype=dtype).reshape(3, 1, 3).expand(3, 2, 3).contiguous()
    assert_like_eager(lambda a: (a.mean(2, keepdim=True), a - a.mean(2, keepdim=True), a.mean()), a, exact=True)

    def std(a):
        return a.std(2)

    leaf = a.detach().clone().requires_grad_()
    expected = torch.autograd.grad(std(leaf).sum(), leaf)[0]
    got = torch.autograd.grad(ember.compile(std, backend="ember")(leaf).sum(), leaf)[0]
    assert_identical(got, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("where", [0, 5, -1])
def test_var_mean_of_a_row_with_inf_gives_eagers_nan_or_inf(dtype, where):
    """Over every dim the mean is sum / n, but a sum that is not finite gives way to Welford's
    running mean, as eager's: [inf, 1, ...] has mean NaN there, [..., 1, inf] inf (fuzz default
    27061, 30803, 1854: ember gave inf where eager gives NaN)."""
    x = (torch.rand(7, 2, generator=torch.Generator().manual_seed(2706101)) * 1000).to(dtype)
    x.view(-1)[where] = float("inf")
    assert_like_eager(lambda t: torch.var_mean(t, (0, 1), correction=0), x, exact=True)
    big = torch.full((6,), 3e38)  # the sum overflows, the mean does not
    assert_like_eager(lambda t: torch.var_mean(t, correction=0)[1], big, exact=True)


@pytest.mark.parametrize("reduce", [lambda c: c.min(), lambda c: c.amax(0), lambda c: c.argmax(),
                                    lambda c: c.max(0), lambda c: c.sum() + c.amin()])
def test_max_min_over_an_empty_dim_raises_as_eager(reduce):
    """max/min/argmax have no value over nothing: eager raises, and so does ember, on every call
    (fuzz default 26701: `c.min()` of an empty tensor returned normally)."""
    c = torch.ones(0, 3)
    with pytest.raises((RuntimeError, IndexError)) as eager_error:
        reduce(c)
    compiled = ember.compile(reduce, backend="ember")
    for _ in range(2):
        with pytest.raises(eager_error.type) as ours:
            compiled(c)
        assert str(ours.value).split(":")[0] == str(eager_error.value).split(":")[0]


def test_min_max_of_equal_values_keep_the_first_as_eager():
    """min(0.0, -0.0): eager keeps the first of equal values, and the sign of a zero shows through
    atan2 (fuzz default 30666: atan2(amin(0), b) gave -pi for pi)."""
    zeros = torch.tensor([[0.0, 0.0, -0.0], [-0.0, 0.0, 0.0]])
    b = torch.tensor([[-0.5], [-0.25]])

    def fn(z, b):
        return (torch.atan2(z.amin(0), b), torch.atan2(z.amax(1, keepdim=True), b),
                torch.atan2(torch.minimum(z[0], z[1]), b), torch.atan2(torch.maximum(z[1], z[0]), b))

    assert_like_eager(fn, zeros, b, exact=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_compared_with_a_scalar_rounds_the_scalar(dtype):
    """Eager compares a half tensor with a Python scalar rounded to half: x <= 1e30 is True for
    x = inf (1e30 is inf in float16).  ember compared in float32 with 1e30 itself (fuzz default
    35042)."""
    x = torch.tensor([float("inf"), -float("inf"), 1.0, 65504.0]).to(dtype)
    big = 1e30 if dtype == torch.float16 else 1e39
    assert_like_eager(lambda x: (x <= big, x < big, x == big, x != big, x >= -big, x > -big), x, exact=True)
    assert_like_eager(lambda x: (x * 1 == 1.0001, x * 1 != 1.0001), x, exact=True)


def test_embedding_with_an_empty_result_still_checks_its_indices():
    """Rows of width 0: no element to compute, so no kernel and no bounds check, but eager checks
    every index (fuzz index 3370)."""
    fn = lambda w, i: F.embedding(i, w * 2)  # noqa: E731
    w, bad = torch.zeros(3, 0), torch.tensor([[0, 6]])
    with pytest.raises(RuntimeError) as eager_error:
        fn(w, bad)
    with pytest.raises(eager_error.type):
        ember.compile(fn, backend="ember")(w, bad)
    assert_like_eager(fn, w, torch.tensor([[0, 2]]))


def test_log_softmax_of_a_libm_result_is_zero_at_its_maximum():
    """atan2 recomputed by the max loop and by the subtraction's loop (libmvec lanes, libm scalar
    code) rounded differently: log_softmax of one element was -3e-8, its sqrt NaN (fuzz default
    39710).  The libm value is stored once."""
    def fn(a, b):
        return torch.log_softmax(torch.atan2(a, b), 0).sqrt(), torch.softmax(torch.sin(a * b), -1)

    for n in (1, 7, 33):
        a = torch.arange(1, n + 1, dtype=torch.int32) * 2
        assert_like_eager(fn, a, torch.full((n,), 5, dtype=torch.int32), exact=False)

    def minimized(a, b, c):
        v0 = a.view(-1)
        a.fill_(2)
        return torch.log_softmax(torch.atan2(v0, b.masked_fill(c, 5)), 0).sqrt()

    args = (torch.tensor(2, dtype=torch.int32), torch.tensor([2], dtype=torch.int32), torch.tensor([True]))
    assert_identical(ember.compile(minimized, backend="ember")(*args), minimized(*[a.clone() for a in args]))


def test_softmax_of_plain_arithmetic_is_not_stored_twice():
    from ember.graph_patterns import subtracted_from_its_extremum

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    scaled = graph.call_function(torch.ops.aten.mul.Tensor, (x, 0.5))
    peak = graph.call_function(torch.ops.aten.amax.default, (scaled, [-1], True))
    graph.call_function(torch.ops.aten.sub.Tensor, (scaled, peak))
    assert subtracted_from_its_extremum(graph) == set()
    exp = graph.call_function(torch.ops.aten.exp.default, (scaled,))
    peak2 = graph.call_function(torch.ops.aten.amax.default, (exp, [-1], True))
    graph.call_function(torch.ops.aten.sub.Tensor, (exp, peak2))
    assert subtracted_from_its_extremum(graph) == {exp}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_scatter_add_sums_in_float32(dtype):
    """Eager's scatter_add of half/bfloat16 rounds once at the end: 0.00506 + 4 - 4 stays 0.00506,
    where index_add and index_put (accumulate) round after every addition (fuzz default 44990)."""
    base = torch.full((2, 5), 0.00506, dtype=dtype)
    index = torch.tensor([[4, 4, 0]])
    source = torch.tensor([[4.0, -4.0, 1.0]], dtype=dtype)
    assert_like_eager(lambda b, i, s: (b * 1).scatter_add(1, i, s), base, index, source, exact=True)
    assert_like_eager(lambda b, i, s: (b * 1).scatter_add(0, i.t().expand(3, 2).contiguous(),
                                                            s.t().expand(3, 2).contiguous()),
                      base.t().contiguous(), index, source, exact=True)
    flat = base[0].contiguous()
    assert_like_eager(lambda b, i, s: ((b * 1).index_add(0, i, s), (b * 1).index_put((i,), s, accumulate=True)),
                      flat, index[0], source[0], exact=True)


def test_half_kernels_build_where_the_assembler_rejects_avx512fp16_masking():
    """g++ 12 -march=native on an AVX512-FP16 CPU emits masked vmovsh that binutils 2.40 rejects:
    the build retries without AVX512-FP16 (fuzz default 48507: cat, log, clamp of half, backward)."""
    from ember.codegen.cpp.build import _assembler_rejected

    assert _assembler_rejected("/tmp/ccxqaUAu.s:163: Error: unsupported masking for `vmovsh'")
    assert not _assembler_rejected("k.cpp:3:5: error: 'x' was not declared in this scope")

    def fn(a, b, d):
        v1 = torch.log(torch.cat((d, a), dim=-1))
        v3 = a.transpose(0, -1)
        return (v1 + v3).clamp(max=v3), torch.div(b, 2.0, rounding_mode="floor")

    def args():
        g = torch.Generator().manual_seed(4850701)
        a = torch.randn((3, 8), generator=g).half()[2:].requires_grad_()
        b = (torch.randn((16, 1), generator=g) * 3).half().requires_grad_()
        d = (torch.randn((8, 1), generator=g) * 3).half().t()
        return a, b, d

    for f in (fn, ember.compile(fn, backend="ember")):
        a, b, d = args()
        out = f(a, b, d)
        sum((o.double() * (k + 1)).sum() for k, o in enumerate(out)).backward()
        if f is fn:
            expected = [o.detach() for o in out] + [a.grad, b.grad]
        else:
            for got, want in zip([o.detach() for o in out] + [a.grad, b.grad], expected):
                torch.testing.assert_close(got, want, equal_nan=True)


def _maximum_in_eager_order(c, d):
    """torch.maximum(c, d) with d permuted: eager lays the result out in d's order, ember (left
    alone) stores an intermediate contiguously."""
    return torch.maximum(c, d)


def _assert_matches_on_a_permuted_intermediate(fn, dynamic):
    """fn(c, d) (reading _maximum_in_eager_order(c, d)) compiled, called twice, against eager."""
    c = torch.randn(4, 2)
    d = torch.randn(2, 4, 7, 5).permute(2, 3, 1, 0)
    expected = fn(c, d)
    compiled = ember.compile(fn, backend="ember", dynamic=dynamic)
    for _ in range(2):
        for ours, theirs in zip(compiled(c, d), expected):
            torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("dynamic", [False, True])
def test_views_run_by_aten_see_eager_layout(dynamic):
    """A view op run as an ATen call (diagonal with an offset, unfold) of a value ember stored:
    its result was planned with the fake's strides and offset, which derive from eager's layout
    of the input, while ember had stored the input contiguously; the kernel reading the view
    indexed the wrong elements (fuzz ember_dynamic default 62275: a slice run by ATen)."""
    def fn(c, d):
        v = _maximum_in_eager_order(c, d)
        return torch.diagonal(v, 1, 0, 1).exp(), v.unfold(1, 2, 1)[:, 1:].sum(-1) + 1

    _assert_matches_on_a_permuted_intermediate(fn, dynamic)


@pytest.mark.parametrize("dynamic", [False, True])
def test_as_strided_of_an_intermediate_reads_eager_layout(dynamic):
    """as_strided indexes its input's storage: the intermediate must be in memory as eager lays
    it out (it was stored contiguously; as_strided of a slice read a copy of the slice)."""
    def fn(c, d):
        v = _maximum_in_eager_order(c, d)
        return v.as_strided((3, 2), (1, 3), 1) * 2, v[1:].as_strided((4,), (2,)) + 1

    _assert_matches_on_a_permuted_intermediate(fn, dynamic)


def test_ensure_layout_copies_a_view_with_other_strides():
    """The wrapper's check of an ATen view's strides (the safety net under the lowering's layout
    planning): a view at any offset with the planned strides passes, other strides copy."""
    from ember.codegen.wrapper import ensure_layout

    base = torch.arange(24.0).reshape(4, 6)
    view = base[1:, 2:]
    assert ensure_layout(view, (3, 4), (6, 1), view=True) is view
    moved = ensure_layout(view, (3, 4), (1, 3), view=True)
    assert moved.stride() == (1, 3) and torch.equal(moved, view)


def test_ensure_layout_makes_a_planned_layout_whose_elements_share_memory():
    """An ATen view planned with elements sharing memory (fuzz layout 9537: unfold of a stride-0
    tensor, strides (0, 0)) and computed by ATen from a contiguous copy: the result takes the
    planned strides (copy_ refuses such a destination), with eager's values; the program as
    eager's."""
    from ember.codegen.wrapper import _overlapping, ensure_layout

    result = ensure_layout(torch.tensor([[5, 5]], dtype=torch.int32), (1, 2), (0, 0))
    assert result.stride() == (0, 0) and result.tolist() == [[5, 5]]
    assert _overlapping((2, 3), (1, 1)) and not _overlapping((2, 3), (3, 1)) and not _overlapping((1, 4), (0, 1))

    def program(a):
        v = torch.as_strided(a.int(), (3,), (0,)).unfold(-1, 2, 3)
        return torch.diagonal(v, 1, 1, -2), v + 1

    a = torch.arange(4, dtype=torch.int8)
    for ours, theirs in zip(ember.compile(program, backend="ember")(a), program(a)):
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize("dynamic", [False, True])
def test_writes_through_slices_compile_without_aten_calls(dynamic, caplog):
    """`v[:3] *= 2`, `v[-1] += 1`, `v[1:, 2] = 7`: slice_scatter/select_scatter (and, in the
    backward, slice_backward/select_backward as scatters of zeros, fill.Tensor of a lifted
    constant) lower to kernels; they were ATen calls, and at symbolic sizes slice_backward was
    refused by eager_accepts (its size arguments reached a real call as SymInts)."""
    import logging

    def fn(a):
        v = a.cos()
        v[:3] *= 2
        v[-1] += 1
        v[1:, 2] = 7
        return v

    compiled = ember.compile(fn, backend="ember", dynamic=dynamic)
    with caplog.at_level(logging.DEBUG, logger="ember.fallbacks"):
        for shape in [(5, 4), (7, 6)]:
            a = torch.randn(shape, requires_grad=True)
            weights = torch.randn(shape)
            ours, theirs = compiled(a), fn(a)
            torch.testing.assert_close(ours, theirs)
            torch.testing.assert_close(torch.autograd.grad((ours * weights).sum(), a)[0],
                                       torch.autograd.grad((theirs * weights).sum(), a)[0])
    assert "ATen fallback" not in caplog.text and "running the captured graph eagerly" not in caplog.text


@pytest.mark.parametrize("op", [torch.logical_and, torch.logical_or, torch.logical_xor])
def test_logical_ops_compare_operands_in_their_common_dtype(op):
    """Fuzz intmath 7240: a 0-d int64 minimum with a uint8 tensor meet as uint8 (the 0-d operand
    does not promote), where the minimum is 0: eager's logical_and is False; ember tested the
    int64 value itself against zero.  Likewise 256 as uint8, 1e-8 as float16."""
    cases = [(torch.tensor(-2**63), torch.tensor([[7]], dtype=torch.uint8)),
             (torch.tensor(256, dtype=torch.int32), torch.tensor([1, 0], dtype=torch.uint8)),
             (torch.tensor([1e-8, 1.0]), torch.tensor([1.0, 2.0], dtype=torch.float16)),
             (torch.tensor([0.5, 0.0, float("nan")]), torch.tensor([1, 0, 1], dtype=torch.uint8))]
    for a, b in cases:
        assert_like_eager(lambda a, b: op(a, b), a, b, exact=True)


def test_var_mean_over_every_dim_sums_in_double_as_eager():
    """Fuzz known 7706: ATen's CPU Welford accumulates float32 in double, so var_mean's mean of
    [2147483646, 1, -2147483647, 0, ...] is 1/n exactly (float32 rounds the big values to +-2^31);
    ember's float32 sum lost the 1 under 2^31 and gave 0 (and, in the fuzz program, -0.027)."""
    x = torch.tensor([2147483646.0, 1.0, -2147483647.0] + [0.0] * 97)
    assert_like_eager(lambda x: torch.var_mean(x, unbiased=False)[1], x)
    assert_like_eager(lambda x: torch.var_mean(x.reshape(4, 25), (0, 1))[1] * 2, x)


def test_views_reindex_by_runs_of_dims_with_equal_products():
    """A view of fixed sizes reindexes each run of dims on its own: splitting [768] into [12, 64]
    is 64*i + j with no floor or Mod, and every element maps where reshape puts it (checked
    against numpy for many shape pairs, size-1 dims anywhere)."""
    import itertools
    import random

    import numpy as np
    import sympy

    from ember.lowering.indexing import _view_groups, view_reindex

    i, j, k = sympy.symbols("i j k", integer=True, nonnegative=True)
    assert view_reindex([2, 768], [2, 12, 64])([i, j, k]) == [i, 64 * j + k]
    assert _view_groups([2, 64, 12, 64], [128, 768]) == [([0, 1], [0]), ([2, 3], [1])]
    assert _view_groups([6, 4], [4, 6]) == [([0, 1], [0, 1])]
    assert _view_groups([sympy.Symbol("s0", integer=True, positive=True), 4], [4, 2, 2]) is None

    random.seed(0)

    def shapes(n):
        found = []
        for _ in range(16):
            dims, left = [], n
            while left > 1:
                d = random.choice([x for x in range(1, left + 1) if left % x == 0])
                dims.append(d)
                left //= d
            if random.random() < 0.3:
                dims.insert(random.randrange(len(dims) + 1), 1)
            found.append(dims or [1])
        return found

    for n in (24, 36):
        candidates = shapes(n)
        for old, new in itertools.product(candidates[:6], candidates[6:12]):
            reindex = view_reindex(old, new)
            source = np.arange(n).reshape(old)
            target = source.reshape(new)
            for index in itertools.product(*[range(d) for d in new]):
                mapped = tuple(int(e) for e in reindex([sympy.Integer(v) for v in index]))
                assert source[mapped] == target[index], (old, new, index)


@pytest.mark.parametrize("backend", ["ember", "aot_eager"])
def test_aten_calls_run_as_traced_under_the_callers_autocast(backend):
    """GPT-2's training step under CPU autocast crashed the process: attention with dropout runs
    its math path below autocast (bmm in float32), the wrapper's bmm ran under the caller's
    autocast and returned bfloat16, and the next kernel read it as float32, past its end.  The
    wrapper's ATen calls now run with autocast excluded (its casts are in the graph already); so
    do graphs run op by op (aot_eager: the bmm was bfloat16 there too, 0.03 off eager)."""
    def attention(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.5)

    q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
    mask = torch.ones(16, 16, dtype=torch.bool).tril()
    compiled = ember.compile(attention, backend=backend)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        compiled(q, k, v, mask)
        torch.manual_seed(0)
        ours = compiled(q, k, v, mask)
        torch.manual_seed(0)
        theirs = attention(q, k, v, mask)
    assert ours.dtype == theirs.dtype == torch.bfloat16
    torch.testing.assert_close(ours, theirs)
    ours.sum().backward()


def test_an_extern_result_of_another_dtype_raises_instead_of_being_misread():
    """The wrapper checks each ATen call's result dtype against the trace (with its strides):
    a bfloat16 result read as float32 by the next kernel read past its end (the autocast crash
    above); any other way to get there now raises, naming the call."""
    from ember.codegen.wrapper import ExternDtypeMismatch, ensure_layout

    with pytest.raises(ExternDtypeMismatch, match="aten.mm.default returned torch.float64"):
        ensure_layout(torch.zeros(2, 2, dtype=torch.float64), (2, 2), (2, 1), dtype=torch.float32,
                      origin="aten.mm.default")
    x = torch.zeros(2, 2)
    assert ensure_layout(x, (2, 2), (2, 1), dtype=torch.float32) is x
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    out, (graph,) = run(lambda a, b: torch.mm(a, b).relu() + 1, a, b)
    torch.testing.assert_close(out, torch.mm(a, b).relu() + 1)
    assert "buf0.dtype is not dtype_float32" in graph.wrapper


def test_a_compiled_function_under_a_dispatch_mode_runs_as_written():
    """A TorchDispatchMode is to see every ATen op (and may change them): under one, the compiled
    function runs its own code, as torch.compile leaves it; outside it, the compiled code again."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class AddIsMul(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.add.Tensor:
                func = torch.ops.aten.mul.Tensor
            return func(*args, **(kwargs or {}))

    compiled = ember.compile(lambda a, b: (a + b).relu(), backend="ember")
    a, b = torch.randn(8), torch.randn(8)
    torch.testing.assert_close(compiled(a, b), (a + b).relu())
    with AddIsMul():
        torch.testing.assert_close(compiled(a, b), (a * b).relu())
    torch.testing.assert_close(compiled(a, b), (a + b).relu())


@pytest.mark.parametrize("op", ["floor_divide", "batch_norm"])
def test_untagged_elementwise_results_have_eagers_layout(op):
    """Ops laid out by their kernels without the pointwise tag: floor_divide of a permuted tensor
    (eager's result (4, 1, 20), its fake contiguous: a traced reshape became a view, which raised
    where the graph ran as ATen calls; fuzz layout 10705) and batch norm of one (the CPU kernel's
    result contiguous, the meta function's permuted: `.view(-1)` after a graph break raised; fuzz
    conv 10874).  The compiled results have eager's strides, and what follows works as in eager."""
    from ember.eager.layout import with_eager_layout
    from torch._subclasses.fake_tensor import FakeTensorMode

    c = torch.rand(16, 5, 4).permute(1, 2, 0) + 0.5
    if op == "floor_divide":
        d = torch.randint(1, 9, (5, 4, 1), dtype=torch.int32).expand(5, 4, 16)
        func, args = torch.ops.aten.floor_divide.default, (c, d)

        def fn(c, d):
            return torch.floor_divide(c, d).reshape(320) * 2
    else:
        d = torch.rand(4) + 0.5
        func = torch.ops.aten._native_batch_norm_legit_no_training.default
        args = (c, d, d, torch.zeros(4), torch.ones(4), 0.1, 1e-5)

        def fn(c, d):
            v = F.batch_norm(c, torch.zeros(4), torch.ones(4), d, d, training=False)
            ember.graph_break()
            return v.view(-1) + 1, v
    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        result = with_eager_layout(func, tuple(fakes), {}, func(*fakes))
    first = result[0] if isinstance(result, tuple) else result
    assert first.stride() == (func(*args)[0] if isinstance(result, tuple) else func(*args)).stride()
    expected = fn(c, d)
    got = ember.compile(fn)(c, d)
    for a, b in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)):
        assert a.stride() == b.stride()
        torch.testing.assert_close(a, b)
