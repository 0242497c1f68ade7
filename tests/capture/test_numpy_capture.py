"""numpy in captured frames: ndarrays are tensors in the graph, traced through torch._numpy and
checked against numpy; results equal eager numpy's (values, dtypes, scalars vs arrays, views)."""
import copy

import numpy as np
import pytest
import torch

import ember

BACKENDS = ("eager", "aot_eager")


def assert_same(expected, got, path="result"):
    assert type(expected) is type(got), f"{path}: {type(got).__name__}, eager gives {type(expected).__name__}"
    if isinstance(expected, (np.ndarray, np.generic)):
        assert expected.dtype == got.dtype and expected.shape == got.shape, \
            f"{path}: {got.dtype}{got.shape}, eager gives {expected.dtype}{expected.shape}"
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=path)
    elif isinstance(expected, torch.Tensor):
        assert expected.dtype == got.dtype, path
        torch.testing.assert_close(got, expected, msg=path)
    elif isinstance(expected, (list, tuple)):
        assert len(expected) == len(got), path
        for index, (left, right) in enumerate(zip(expected, got)):
            assert_same(left, right, f"{path}[{index}]")
    elif isinstance(expected, dict):
        assert list(expected) == list(got), path
        for key in expected:
            assert_same(expected[key], got[key], f"{path}[{key!r}]")
    else:
        assert expected == got, f"{path}: {got!r}, eager gives {expected!r}"


def compiled_result(fn, args, backend):
    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        return ember.compile(fn, backend=backend, fullgraph=True)(*args)


def assert_numpy_matches_eager(fn, *args, graphs=1):
    """fullgraph on every backend; results and the arguments after the call equal eager's."""
    for backend in BACKENDS:
        eager_args, compiled_args = copy.deepcopy(args), copy.deepcopy(args)
        expected = fn(*eager_args)
        got = compiled_result(fn, compiled_args, backend)
        assert_same(expected, got)
        assert_same(eager_args, compiled_args, "arguments")
    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        explanation = ember.explain(fn)(*copy.deepcopy(args))
    assert explanation.graph_break_count == 0, [str(b) for b in explanation.break_reasons]
    assert explanation.graph_count == graphs
    return explanation


def breaks_with(fn, *args) -> str:
    ember.reset()
    with ember.config.patch(raise_capture_errors=True), pytest.raises(ember.CaptureError) as info:
        ember.compile(fn, backend="eager", fullgraph=True)(*args)
    return str(info.value)


def test_tensor_numpy_functions_and_from_numpy_stay_in_one_graph():
    def f(x):
        mean = np.mean(x.numpy(), 1)
        return torch.from_numpy(np.asarray(np.sum(mean))) + 1

    explanation = assert_numpy_matches_eager(f, torch.randn(4, 3))
    assert "mean" in str(explanation.ops_per_graph) and "sum" in str(explanation.ops_per_graph)


def test_ndarray_returned_from_the_frame_is_a_numpy_array():
    def f(x):
        a = x.numpy()
        return a.T, a.real, a.copy(), a.reshape([1, a.size]), a + a, a - 1

    assert_numpy_matches_eager(f, torch.randn(3, 4))


def test_ndarray_attributes_are_constants():
    def f(x):
        a = x.numpy()
        return a.itemsize, a.strides, a.shape, a.ndim, a.size, a.dtype, torch.from_numpy(a.imag)

    assert_numpy_matches_eager(f, torch.randn(3, 4))


def test_numpy_reductions_give_numpy_scalars():
    def f(a):
        total = a.sum()
        return total, np.max(a), a.mean(axis=0), a.argmax(), a[1, 2], total * 2

    assert_numpy_matches_eager(f, np.arange(6.0, dtype=np.float32).reshape(2, 3))


def test_numpy_inputs_are_graph_inputs_guarded_on_dtype():
    def f(a):
        return a * 2 + 1

    ember.reset()
    calls = []
    compiled = ember.compile(f, backend=lambda gm, inputs: calls.append(1) or gm.forward)
    for array in (np.arange(6.0).reshape(2, 3), np.ones((2, 3)), np.arange(6, dtype=np.int32).reshape(2, 3)):
        assert_same(f(array), compiled(array))
    assert len(calls) == 2  # (float64, then int32)
    assert_numpy_matches_eager(f, np.arange(6.0).reshape(2, 3).T)  # (strided input)


def test_writes_into_numpy_inputs_reach_the_caller():
    def f(a, index, value):
        a[index] = value
        return a

    assert_numpy_matches_eager(f, np.zeros(4), Ellipsis, np.ones(4))
    assert_numpy_matches_eager(f, np.array([[1, 1], [2, 2]]), (Ellipsis, 0), np.array([3, 3]))

    def g(a):
        a += 1
        return a

    array = np.zeros(3)
    assert compiled_result(g, (array,), "eager") is array  # (an input leaves as itself)
    np.testing.assert_array_equal(array, np.ones(3))


def test_numpy_dtypes_finfo_and_iinfo_of_constants():
    def f(x):
        dtype = np.dtype("float")
        return np.full_like(x, 2.4, dtype=dtype), np.ones_like(x, dtype=np.float64)

    assert_numpy_matches_eager(f, torch.randn(2, 3))

    def g(x):
        return x + np.iinfo(np.int16).max, x + np.finfo(np.float32).min, np.finfo(np.float32).eps * 2

    assert_numpy_matches_eager(g, torch.randn(3))


def test_numpy_dtype_argument_guards_by_equality():
    def f(a, dtype):
        return a + np.finfo(dtype).max

    ember.reset()
    calls = []
    compiled = ember.compile(f, backend=lambda gm, inputs: calls.append(1) or gm.forward)
    a = torch.zeros(3, dtype=torch.float64)
    for dtype in (np.dtype(float), np.ones(1).dtype, np.dtype("float64")):
        torch.testing.assert_close(compiled(a, dtype), f(a, dtype))
    assert len(calls) == 1
    torch.testing.assert_close(compiled(a, np.dtype(np.float16)), f(a, np.dtype(np.float16)))
    assert len(calls) == 2


def test_linalg_fft_and_meshgrid():
    def f(x, y):
        a = x.numpy()
        r1, r2 = np.meshgrid(a, y.numpy())
        return np.linalg.norm(a, axis=0), np.fft.fftshift(a), r1, r2

    assert_numpy_matches_eager(f, torch.randn(3), torch.randn(4))


def test_integer_division_is_float64_as_in_numpy():
    def f(a):
        return a / 2, a / a, np.true_divide(a, 3)

    with np.errstate(all="ignore"):
        assert_numpy_matches_eager(f, np.arange(6, dtype=np.int32).reshape(2, 3))


def test_flatten_copies_where_numpy_copies_and_ravel_views():
    def f(a):
        flat, view = a.flatten(), a.ravel()
        flat[0] = 100.0
        view[1] = 200.0
        return a, flat, view

    assert_numpy_matches_eager(f, np.arange(6.0).reshape(2, 3))


def test_scalar_in_place_operator_makes_a_new_scalar():
    def f(a):
        s = a.sum()
        t = s
        s += 1
        return s, t

    assert_numpy_matches_eager(f, np.arange(6))


def test_what_torch_numpy_gets_wrong_breaks_the_graph():
    def small_int_sqrt(a):
        return np.sqrt(a)  # numpy: float16 for int8; torch._numpy: float64

    assert "gives float64[3] where numpy gives float16[3]" in breaks_with(small_int_sqrt, np.arange(3, dtype=np.int8))

    def ufunc_of_tensor(x):
        return np.add(x, 1)  # eager: a Tensor (torch's __array_wrap__)

    assert "where numpy gives Tensor" in breaks_with(ufunc_of_tensor, torch.randn(3))

    def random(x):
        return x + np.random.randn(3)

    assert "numpy's global generator" in breaks_with(random, np.zeros(3))

    def branch(a):
        return a if a.sum() > 0 else -a

    assert "depends on its values" in breaks_with(branch, np.ones(3))

    def grad_numpy(x):
        return x.numpy()

    assert "requires grad" in breaks_with(grad_numpy, torch.randn(2, requires_grad=True))


def test_numpy_results_after_a_graph_break_are_numpy():
    def f(a):
        b = a * 2
        ember.graph_break()
        return b + 1, a

    ember.reset()
    array = np.arange(3.0)
    got = ember.compile(f, backend="eager")(array)
    assert_same(f(np.arange(3.0)), got)
    assert got[1] is array
    ember.reset()
    explanation = ember.explain(f)(np.arange(3.0))
    assert explanation.graph_count == 2 and explanation.graph_break_count == 1


def test_writing_into_a_read_only_result_breaks():
    def f(x):
        a = x.numpy()
        a.imag[0] = 1.0  # numpy: the imaginary part of a real array is read-only (ValueError)
        return a

    assert "read-only" in breaks_with(f, torch.randn(3))


def test_strides_follow_the_tensor_layout_and_big_arrays_answer_metadata():
    def f(x):
        a = x.numpy()
        return a.strides, a.T.strides, (a + 1).strides, a.sum(0).strides, a.shape, a.nbytes

    for x in (torch.randn(3, 4), torch.randn(4, 3).T, torch.randn(2, 1, 3).expand(2, 5, 3)):
        assert_numpy_matches_eager(f, x)

    def g(x):
        a = x.numpy()
        return a.shape, a.size, a.dtype, a.ndim

    assert_numpy_matches_eager(g, torch.zeros(5000, 4000))  # (over the stand-ins' limit: no stand-in)


def test_ndarrays_in_containers_and_inlined_functions():
    def normalize(a):
        return (a - a.mean()) / a.std()

    def f(x):
        a = x.numpy()
        return {"z": normalize(a), "parts": [a[0], a[1:]]}

    assert_numpy_matches_eager(f, torch.randn(4, 3))


def test_linalg_results_in_numpy_layout_and_views_of_views():
    def f(a):
        inverse = np.linalg.inv(a)  # (LAPACK's column-major result, copied into numpy's row-major)
        return inverse, inverse.strides, np.linalg.solve(a, a[0]), np.linalg.det(a)

    assert_numpy_matches_eager(f, np.array([[2.0, 1.0], [1.0, 3.0]]))

    def g(a):
        view = np.transpose(a)
        view[0, 1] = 42.0  # (a view, as in numpy: the write reaches a)
        return a, np.add(a, a)

    assert_numpy_matches_eager(g, np.arange(6.0).reshape(2, 3))


def test_python_types_and_strings_as_dtypes():
    def f(a):
        return np.zeros(3, dtype=float), a.astype(int), np.ones(2, dtype=bool), a.astype("int16"), a.dtype.type(3)

    assert_numpy_matches_eager(f, np.arange(3.0))


def test_result_type_of_arrays_and_of_dtypes():
    def f(a, b):
        return np.result_type(a, b), np.result_type(a.dtype, np.float32), np.can_cast(a.dtype, np.float32)

    assert_numpy_matches_eager(f, np.arange(3.0, dtype=np.float32), np.arange(3), graphs=0)
