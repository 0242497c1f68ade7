"""Kernels with symbolic sizes: graphs traced over symbolic fakes compile once, into kernels that
take the sizes as arguments, and give eager's results for every shape the symbols allow."""
import re

import pytest
import torch

from ember.codegen.compile import ShapesNotSupported, compile_graph, ember_compiler
from ember.codegen.wrapper import IndexOutOfBounds

from symbolic_graphs import trace

aten = torch.ops.aten


def compiled(fn, inputs, dynamic=True):
    gm, _env = trace(fn, inputs, dynamic)
    return compile_graph(gm, list(inputs)), gm


def check(fn, make_inputs, shapes, dynamic=True, rtol=1e-5, atol=1e-5):
    """Compile once for the first shape, then compare with eager on every shape."""
    graph, gm = compiled(fn, make_inputs(*shapes[0]), dynamic)
    for shape in shapes:
        inputs = make_inputs(*shape)
        got = graph(*inputs)
        want = fn(*inputs)
        want = want if isinstance(want, (tuple, list)) else (want,)
        assert len(got) == len(want)
        for ours, theirs in zip(got, want):
            assert ours.shape == theirs.shape, shape
            torch.testing.assert_close(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)
    import os
    if os.environ.get("SHOW_FALLBACKS"):
        print("FALLBACKS", fn.__qualname__, graph.fallbacks, len(graph.kernels))
    return graph


SHAPES_2D = [(4, 5), (2, 3), (7, 13), (16, 16), (3, 70), (61, 2), (33, 17), (5, 64), (128, 9), (2, 2)]


def test_sin_cos_toy_compiles_once_for_ten_shapes():
    def toy(x):
        y = x.sin()
        z = y.cos()
        return y, z

    gm, _ = trace(toy, [torch.randn(4, 5)])
    calls = []

    def counting_compile(gm, inputs):
        calls.append(1)
        return compile_graph(gm, inputs)

    graph = counting_compile(gm, [torch.randn(4, 5)])
    assert len(graph.kernels) == 1
    source = next(iter(graph.kernels.values()))
    symbols = sorted({str(d.node.expr) for d in gm.graph.find_nodes(op="placeholder")[0].meta["val"].shape})
    signature = re.search(r'extern "C" void \w+\(([^)]*)\)', source).group(1)
    for symbol in symbols:
        assert f"const int64_t {symbol}" in signature
        assert f"< {symbol};" in source  # loops over the symbolic range
    for shape in SHAPES_2D:
        x = torch.randn(*shape)
        y, z = graph(x)
        torch.testing.assert_close(y, x.sin())
        torch.testing.assert_close(z, x.sin().cos())
    assert len(calls) == 1
    assert "s" in graph.wrapper and ".size(0)" in graph.wrapper


def test_ember_compiler_compiles_symbolic_graphs():
    gm, _ = trace(lambda x: (x * 2 + 1,), [torch.randn(3, 4)])
    call = ember_compiler(gm, [torch.randn(3, 4)])
    assert hasattr(call, "kernels")  # a CompiledGraph, not the graph run as is
    x = torch.randn(9, 2)
    torch.testing.assert_close(call(x)[0], x * 2 + 1)


def test_broadcasting():
    def fn(x, row, column):
        return x + row, x * column, (x - row) / (column.abs() + 1)

    check(fn, lambda a, b: (torch.randn(a, b), torch.randn(b), torch.randn(a, 1)), SHAPES_2D,
          dynamic=[True, True, {0}])


def test_scalar_size_arithmetic_in_pointwise():
    def fn(x):
        return x * x.shape[0] + x.shape[1]

    check(fn, lambda a, b: (torch.randn(a, b),), SHAPES_2D)


@pytest.mark.parametrize("reduction", ["sum", "amax", "amin", "mean", "softmax", "log_softmax", "var", "std",
                                       "var_mean", "argmax", "prod"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_reductions_over_dynamic_dims(reduction, dim):
    def fn(x):
        if reduction in ("softmax", "log_softmax"):
            return getattr(torch, reduction)(x, dim if dim is not None else -1)
        if reduction == "var_mean":
            return torch.var_mean(x, dim) if dim is not None else torch.var_mean(x)
        if reduction in ("amax", "amin") and dim is None:
            return getattr(torch, reduction)(x, (0, 1))
        if dim is None:
            return getattr(torch, reduction)(x)
        result = getattr(torch, reduction)(x, dim)
        return result[0] if isinstance(result, tuple) else result

    scale = 0.3 if reduction == "prod" else 1.0
    check(fn, lambda a, b: (torch.randn(a, b) * scale,), SHAPES_2D, rtol=1e-4, atol=1e-4)


def test_reduction_with_keepdim_and_epilogue():
    def fn(x):
        centered = x - x.mean(1, keepdim=True)
        return centered / (centered.pow(2).sum(1, keepdim=True) + 1).sqrt()

    check(fn, lambda a, b: (torch.randn(a, b),), SHAPES_2D, rtol=1e-4, atol=1e-4)


def test_views_of_symbolic_sizes():
    def fn(x):
        n, m = x.shape
        flat = x.reshape(n * m)
        back = flat.view(n, m)
        return (flat * 2, back.t() + 1, x.permute(1, 0).contiguous(), x.transpose(0, 1) * x.t(),
                x.unsqueeze(1).expand(n, 3, m) + 0, x[:, None, :].sum(1))

    check(fn, lambda a, b: (torch.randn(a, b),), SHAPES_2D)


def test_view_through_sym_size_nodes():
    def fn(x):
        n, m = x.shape
        return (x.view(n * m, 1) * 3,)

    gm, _ = trace(fn, [torch.randn(4, 6)])
    targets = [node.target for node in gm.graph.nodes if node.op == "call_function"]
    assert aten.sym_size.int in targets and aten.view.default in targets
    graph = compile_graph(gm, [torch.randn(4, 6)])
    for shape in SHAPES_2D:
        x = torch.randn(*shape)
        torch.testing.assert_close(graph(x)[0], fn(x)[0])


def test_slices_with_static_and_symbolic_bounds():
    def fn(x):
        n = x.shape[0]
        return x[1:], x[:, 1:] * 2, x[:-1] + x[1:], x[n // 2:], x[:, ::2] + 1, x[1] * 2, x[-1] + 1

    # the trace guarded that sliced sizes are not 1 (s0 - 1 != 1, ...): sizes of 3 and more
    graph = check(fn, lambda a, b: (torch.randn(a, b),), [s for s in SHAPES_2D if min(s) >= 3])
    with pytest.raises(RuntimeError, match="outside those compiled for"):
        graph(torch.randn(2, 5))


def test_expand_and_3d_views():
    def fn(x, y):
        b, n, m = x.shape
        return (x + y.expand(b, n, m), x.reshape(b, n * m).sum(1), x.permute(2, 0, 1) * 2,
                x.view(b * n, m)[1:] + 1)

    check(fn, lambda a, b: (torch.randn(3, a, b), torch.randn(1, a, b)),
          [(4, 5), (2, 3), (7, 11), (9, 2)], dynamic=[{1, 2}, {1, 2}])


def test_cat_along_a_dynamic_dim():
    def fn(x, y):
        return torch.cat([x, y], 0) * 2, torch.cat([x, x.sin()], 1), torch.cat([y, x, y], 0).sum(0)

    check(fn, lambda a, b: (torch.randn(a, b), torch.randn(a + 1, b)),
          [(4, 5), (2, 3), (7, 13), (10, 2)])


def test_matmul_extern_with_symbolic_sizes():
    def fn(x, w, b):
        return torch.addmm(b, x, w).relu(), (x @ w) * 2

    check(fn, lambda a, c: (torch.randn(a, c), torch.randn(c, 6), torch.randn(6)),
          [(4, 5), (2, 3), (7, 13), (33, 8)], dynamic=[True, {0}, False], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.bool])
def test_integer_and_bool_dtypes(dtype):
    def fn(x, y):
        if dtype == torch.bool:
            return x & y, (x | y).sum(1), x.logical_not()
        return x + y, (x * y).sum(0), x.amax(1), x > y

    def make(a, b):
        if dtype == torch.bool:
            return torch.rand(a, b) > 0.5, torch.rand(a, b) > 0.5
        return torch.randint(-50, 50, (a, b), dtype=dtype), torch.randint(-50, 50, (a, b), dtype=dtype)

    check(fn, make, SHAPES_2D)


def test_non_contiguous_inputs():
    def fn(x):
        return x.sin() + 1, x.sum(1)

    # traced with a transposed input: symbolic strides [1, s0]
    graph = check(fn, lambda a, b: (torch.randn(b, a).t(),), SHAPES_2D)
    with pytest.raises(RuntimeError, match="compiled for"):
        graph(torch.randn(4, 5))  # contiguous: not the strides the kernel reads




def test_vector_width_tails_every_size_2_to_70():
    def fn(x, y):
        return (x * y + 1).exp(), (x - y).pow(2).sum(0), torch.var(x, 0), torch.softmax(x, 0)

    graph, _ = compiled(fn, [torch.randn(5), torch.randn(5)])
    for n in range(2, 71):
        x, y = torch.randn(n), torch.randn(n)
        for ours, theirs in zip(graph(x, y), fn(x, y)):
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)


def test_out_of_range_gather_and_index_raise():
    def fn(x, index):
        return torch.gather(x, 1, index), x[index[:, 0]]

    graph, _ = compiled(fn, [torch.randn(4, 5), torch.randint(0, 4, (4, 3))], dynamic=[True, {0}])
    for a, b in [(4, 5), (6, 7), (3, 9)]:
        x, index = torch.randn(a, b), torch.randint(0, min(a, b), (a, 3))
        for ours, theirs in zip(graph(x, index), fn(x, index)):
            torch.testing.assert_close(ours, theirs)
        bad = index.clone()
        bad[-1, 0] = b + a  # outside both dims
        with pytest.raises(IndexError):
            graph(x, bad)


def test_int_argument_placeholder():
    from symbolic_graphs import Tracer

    tracer = Tracer()
    x = tracer.input(torch.randn(4, 5))
    n = tracer.input(3, name="n")
    from symbolic_graphs import _Recorder

    with tracer.mode, _Recorder(tracer):
        out = x * n + x.shape[0]
    gm = tracer.finish([out])
    graph = compile_graph(gm, [torch.randn(4, 5), 3])
    for shape, value in [((4, 5), 3), ((7, 2), 11), ((2, 9), 2)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(graph(x, value)[0], x * value + shape[0])


def test_a_float_of_sizes_raises_shapes_not_supported():
    """x * (n / 2): a SymFloat is no size; compile_graph raises (the AOT layer compiles per shape)."""
    import operator

    from symbolic_graphs import Tracer

    tracer = Tracer()
    x = tracer.input(torch.randn(4, 5))
    graph = tracer.graph
    placeholder = graph.find_nodes(op="placeholder")[0]
    size = tracer.size_node(x.shape[0])
    half = graph.call_function(operator.truediv, (size, 2))
    half.meta["val"] = x.shape[0] / 2
    product = graph.call_function(aten.mul.Tensor, (placeholder, half))
    with tracer.mode:
        product.meta["val"] = x * half.meta["val"]
    graph.output((product,))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    with pytest.raises(ShapesNotSupported, match="SymFloat"):
        compile_graph(gm, [torch.randn(4, 5)])
    with pytest.raises(ShapesNotSupported):
        ember_compiler(gm, [torch.randn(4, 5)])  # not swallowed


def test_data_dependent_sizes_run_as_is():
    def fn(x):
        return (torch.nonzero(x > 0).float().sum(0),)

    from symbolic_graphs import Tracer, _Recorder

    tracer = Tracer()
    x = tracer.input(torch.randn(4, 5))
    with tracer.mode, _Recorder(tracer):
        out = fn(x)
    gm = tracer.finish(out)
    call = ember_compiler(gm, [torch.randn(4, 5)])
    assert not hasattr(call, "kernels")  # the graph as is
    y = torch.randn(6, 3)
    torch.testing.assert_close(call(y)[0], fn(y)[0])


def test_unbacked_and_fractional_sizes_raise_shapes_not_supported():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    import sympy

    from ember.lowering.symbolic import expr_of

    env = ShapeEnv()
    symbol = env.create_unbacked_symint()
    with pytest.raises(ShapesNotSupported, match="data-dependent"):
        expr_of(symbol)
    # a size the wrapper cannot read off any input (only 2*s appears)
    tracer_fn = lambda x: (x.repeat(2, 1) + 1,)  # noqa: E731
    gm, _ = trace(tracer_fn, [torch.randn(3, 4)])
    graph = compile_graph(gm, [torch.randn(3, 4)])
    x = torch.randn(5, 2)
    torch.testing.assert_close(graph(x)[0], tracer_fn(x)[0])
    # a SymFloat in the graph: not a size
    with pytest.raises(ShapesNotSupported):
        from ember.lowering.symbolic import to_sympy
        to_sympy(sympy.Symbol("s0", positive=True, integer=True) / 2 + sympy.Rational(1, 3))


def test_factories_pads_and_gathers_of_symbolic_sizes():
    import torch.nn.functional as F

    def fn(x, table, index):
        n, m = x.shape
        positions = torch.arange(n) * 2
        # (F.pad is left out: its fake implementation fixes the sizes to numbers)
        return (positions, torch.zeros(n, m) + x, torch.ones_like(x) * 3, torch.where(x > 0, x, torch.zeros(m)),
                F.embedding(index, table) * 2, torch.index_select(x, 0, index[:, 0].clamp(max=1)))

    check(fn, lambda a, b: (torch.randn(a, b), torch.randn(7, b), torch.randint(0, 7, (a, 2))),
          [(4, 5), (2, 3), (7, 13), (12, 2)], dynamic=[True, {1}, {0}])


def test_norms_and_activations_of_symbolic_sizes():
    import torch.nn.functional as F

    def fn(x, weight, bias):
        return (F.layer_norm(x, (x.shape[-1],), weight, bias), F.gelu(x), F.silu(x).mean(0),
                torch.logsumexp(x, 1), x.neg())

    check(fn, lambda a, b: (torch.randn(a, b), torch.randn(b), torch.randn(b)),
          [(4, 5), (2, 3), (7, 13), (12, 2)], dynamic=[True, True, True], rtol=1e-4, atol=1e-4)


def test_memory_reuse_only_for_provably_equal_sizes():
    def fn(x, y):
        a = (x + 1).exp().sum(1)   # [s0]
        b = (y * 2).exp().sum(1)   # [s2]: another size; its buffer must not take a's memory
        return a.sin(), b.cos(), (x * 3).amax(1) + a

    graph = check(fn, lambda a, b: (torch.randn(a, b), torch.randn(a + 3, b)), [(4, 5), (2, 3), (9, 13)],
                  dynamic=[True, True], rtol=1e-4, atol=1e-4)
    assert "reuse" not in graph.wrapper or "s" in graph.wrapper


def test_sizes_the_shape_env_specialized_are_checked_at_each_call():
    def fn(x):
        return x.split(1, 0)[0] + 1, x.unbind(1)[1] * 2  # as many outputs as rows: s0 == 4, s1 == 5

    graph, _ = compiled(fn, [torch.randn(4, 5)])
    x = torch.randn(4, 5)
    for ours, theirs in zip(graph(x), fn(x)):
        torch.testing.assert_close(ours, theirs)
    with pytest.raises(RuntimeError, match="compiled for"):
        graph(torch.randn(2, 3))


def test_scatters_of_symbolic_sizes():
    def fn(x, index, values):
        return (torch.index_put(x, (index,), values, accumulate=True),
                torch.scatter_add(x, 0, index[:, None].expand(-1, x.shape[1]), values), x.index_add(0, index, values))

    def make(a, b):
        return torch.randn(a + 2, b), torch.randint(0, a + 2, (a,)), torch.randn(a, b)

    check(fn, make, [(4, 5), (2, 3), (7, 13), (12, 2)], dynamic=[True, True, True], rtol=1e-4, atol=1e-4)


def test_max_pool_with_symbolic_sizes_runs_as_an_aten_call():
    import torch.nn.functional as F

    def fn(x):
        return (F.max_pool2d(x, 2) + 1,)

    graph = check(fn, lambda a, b: (torch.randn(2, 3, 2 * a, 2 * b),), [(2, 3), (4, 5), (3, 3)],
                  dynamic=[{2, 3}])
    assert any("max_pool2d" in name for name in graph.fallbacks)


def test_sizes_that_may_be_zero_keep_eager_errors():
    """x[2:] has s0 - 2 rows: none when s0 == 2.  max over it, and indexing into it, are ATen calls
    (eager's error on an empty input), not kernels that would return -inf or read row 0."""
    def fn(x, index):
        rest = x[2:]
        return rest.amax(0), rest.sum(0), torch.gather(rest, 0, index)

    graph, _ = compiled(fn, [torch.randn(5, 4), torch.zeros(1, 4, dtype=torch.int64)], dynamic=[True, False])
    # (the ShapeEnv guarded s0 - 2 > 0 while tracing the reduction: the wrapper checks it at each call)
    x, index = torch.randn(6, 3 + 1), torch.zeros(1, 4, dtype=torch.int64)
    for ours, theirs in zip(graph(x, index), fn(x, index)):
        torch.testing.assert_close(ours, theirs)
    empty = torch.randn(2, 4)
    with pytest.raises((RuntimeError, IndexError)):
        fn(empty, index)
    with pytest.raises((RuntimeError, IndexError)):
        graph(empty, index)
