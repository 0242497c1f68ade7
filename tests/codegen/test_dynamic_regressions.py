"""Regressions of symbolic-size code generation found by the differential fuzzer (backend
"ember_dynamic" = ember.compile(..., backend="ember", dynamic=True))."""
import pytest
import torch

import ember
from ember.codegen.compile import ShapesNotSupported, compile_graph, ember_compiler

aten = torch.ops.aten


def _scaled_by_a_symfloat_input():
    """A backward-like graph: x * scale, where `scale` is a placeholder whose value is a SymFloat
    computed from sizes (2.0 / (s0 - 1.0), as var's backward saves it)."""
    from symbolic_graphs import Tracer

    tracer = Tracer()
    x = tracer.input(torch.randn(4, 5))
    value = 2.0 / (torch.sym_float(x.shape[0]) - 1.0)
    assert isinstance(value, torch.SymFloat)
    scale = tracer.graph.placeholder("truediv")
    scale.meta["val"] = value
    x_node = tracer.graph.find_nodes(op="placeholder")[0]
    product = tracer.graph.call_function(aten.mul.Scalar, (x_node, scale))
    with tracer.mode:
        product.meta["val"] = torch.ops.aten.mul.Scalar(x, value)
    tracer.graph.output((product,))
    return torch.fx.GraphModule(torch.nn.Module(), tracer.graph)


def test_symfloat_placeholder_raises_shapes_not_supported_in_the_lowering():
    """Fuzz default 55634: was NotImplementedError ('graph input truediv is a SymFloat')."""
    gm = _scaled_by_a_symfloat_input()
    with pytest.raises(ShapesNotSupported, match="SymFloat"):
        compile_graph(gm, [torch.randn(4, 5), 2.0 / 3.0])


def test_symfloat_placeholder_graph_runs_as_is_under_ember_compiler():
    """A backward is compiled when it first runs, where nothing could compile it another way:
    ember_compiler runs a graph with a SymFloat input as ATen calls (reading the value per call)."""
    gm = _scaled_by_a_symfloat_input()
    call = ember_compiler(gm, [torch.randn(4, 5), 2.0 / 3.0])
    for shape in [(4, 5), (7, 3), (2, 9)]:
        x = torch.randn(*shape)
        scale = 2.0 / (shape[0] - 1.0)
        torch.testing.assert_close(call(x, scale)[0], x * scale)


def test_var_backward_after_a_forward_with_data_dependent_sizes():
    """Fuzz default 55634 end to end: the forward has a data-dependent size (a boolean mask), so
    it runs as is; the backward takes var's 2 / (N - 1) as a SymFloat saved by the forward."""
    def program(a, c):
        v0, v1 = torch.var_mean(a, (0, 1, 2), keepdim=True)
        v6 = c[c > 0]
        return v0 * 3.0 + v1, v6

    compiled = ember.compile(program, backend="ember", dynamic=True)
    try:
        for shape, n in [((3, 4, 5), 16), ((5, 2, 7), 9), ((4, 4, 3), 11)]:
            a = torch.randn(shape, requires_grad=True)
            c = torch.randn(n)
            a_eager = a.detach().clone().requires_grad_()
            got = compiled(a, c)
            want = program(a_eager, c)
            for ours, theirs in zip(got, want):
                torch.testing.assert_close(ours, theirs)
            got[0].sum().backward()
            want[0].sum().backward()
            torch.testing.assert_close(a.grad, a_eager.grad)
    finally:
        ember.reset()


def test_guards_over_a_strided_input_name_every_symbol_before_using_it():
    """Fuzz default 54400: an input a[:, ::2] has strides (s1*s2, s2); the AOT guard printed
    `a[0].stride()[0] == a[0].size()[1]*s2` before naming s2, and the second call raised
    NameError: name 's2' is not defined (the capture guard failed the same way: a recompile)."""
    from symbolic_graphs import Tracer

    from ember.autograd.symbolic import input_guards

    tracer = Tracer()
    real = torch.randn(3, 32)[:, ::2]
    fake = tracer.input(real)
    assert all(isinstance(s, torch.SymInt) for s in fake.stride())
    guard, _ = input_guards(tracer.env, [fake], [0])
    assert guard([real])
    assert guard([torch.randn(5, 21)[:, ::3]])
    assert not guard([torch.randn(5, 16)])


def test_a_size_the_guards_make_1_broadcasts():
    # fuzz inplace 4897: a.view(1, -1, 16)[0, ::2] has ((s0 // 16) + 1) // 2 rows, which the
    # guards make 1; minimum() broadcast it against b's s1 rows, and the kernel indexed it by
    # the row of b (reading past it: garbage) because the size was not structurally 1
    def f(a, b):
        v1 = a.view(1, -1, 16)[0, ::2]
        return torch.transpose(torch.minimum(v1, b), 1, 2)

    compiled = ember.compile(f, dynamic=True)
    try:
        for rows in [2, 3, 5]:
            a = torch.arange(16, dtype=torch.int32)
            b = torch.full((1, rows, 1), 5, dtype=torch.int32)
            torch.testing.assert_close(compiled(a, b), f(a, b))
    finally:
        ember.reset()


def test_a_data_dependent_size_fixed_by_the_trace_still_raises_like_eager():
    """Fuzz ember_dynamic default 73631: `c[c > 0].reshape(1, 3)` makes the ShapeEnv replace the
    mask's count u0 by 3; the graph then looked static and compiled into a kernel reading 3 of
    however many elements passed, where eager raises.  It now runs as ATen calls."""
    def fn(c):
        return c[c > 0].reshape(1, 3) * 2

    compiled = ember.compile(fn, backend="ember", dynamic=True)
    c = torch.tensor([1.0, -1.0, 2.0, 3.0, -2.0])
    torch.testing.assert_close(compiled(c), fn(c))
    more = torch.tensor([1.0, -1.0, 2.0, 3.0, -2.0, 4.0, 5.0])
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        fn(more)
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        compiled(more)


def test_index_put_values_of_another_size_raise_like_eager():
    """Fuzz ember_dynamic default 73850: index_put's fake kernel does not check that the values
    broadcast to the indexed shape, so no guard tied their sizes; the kernel read the values over
    the other size's range (past their memory when smaller).  A loader now refuses to read a size
    over a range the guards do not make equal: the op runs as ATen, which raises as eager."""
    def fn(x, i, values):
        return x.expand(3, 5).index_put((i,), values)

    compiled = ember.compile(fn, backend="ember", dynamic=True)
    x, i = torch.ones(1), torch.tensor([1])
    torch.testing.assert_close(compiled(x, i, torch.arange(5.0).reshape(1, 5)), fn(x, i, torch.arange(5.0).reshape(1, 5)))
    for width in (3, 8):
        values = torch.arange(float(width)).reshape(1, width)
        with pytest.raises(RuntimeError):
            fn(x, i, values)
        with pytest.raises(RuntimeError):
            compiled(x, i, values)
