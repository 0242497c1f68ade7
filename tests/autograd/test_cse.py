"""Common-subexpression elimination on traced graphs (ember/autograd/cse.py)."""
import torch

from ember.autograd import aot_function
from ember.autograd.cse import eliminate_common_subexpressions


def _joint(fn, *args):
    graphs = []

    def compiler(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = aot_function(fn, compiler, compiler)
    return compiled, graphs


def _count(gm, name):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and name in str(n.target))


def test_repeated_conversions_of_one_input_are_computed_once():
    """Each 'layer' converts the same mask: one conversion remains; values and gradients as eager."""
    def layers(x, mask):
        for _ in range(4):
            x = torch.tanh(x + mask.to(torch.float32) * 2)
        return x

    x = torch.randn(3, 5, requires_grad=True)
    mask = torch.randn(3, 5, dtype=torch.float64)
    compiled, graphs = _joint(layers, x, mask)
    out = compiled(x, mask)
    out.sum().backward()
    expected_x = x.detach().clone().requires_grad_()
    layers(expected_x, mask).sum().backward()
    torch.testing.assert_close(out, layers(x.detach(), mask))
    torch.testing.assert_close(x.grad, expected_x.grad)
    assert _count(graphs[0], "_to_copy") == 1


def test_outputs_are_never_merged_and_scalar_types_are_kept_apart():
    """Two identical clones returned as outputs stay two tensors; `x + 1`, `x + 1.0`, `x * 0.0`
    and `x * -0.0` are different computations."""
    def fn(x):
        return x.clone(), x.clone(), x + 1, x + 1.0, x * 0.0, x * -0.0

    x = torch.tensor([1, -2, 3])
    compiled, _ = _joint(fn, x)
    a, b, c, d, e, f = compiled(x)
    a.add_(5)
    assert torch.equal(b, x) and a.data_ptr() != b.data_ptr()
    assert c.dtype == torch.int64 and d.dtype == torch.float32
    xf = torch.tensor([1.0, -2.0])
    _, _, _, _, e, f = _joint(fn, xf)[0](xf)
    assert torch.equal(torch.signbit(e), torch.tensor([False, True]))
    assert torch.equal(torch.signbit(f), torch.tensor([True, False]))


def test_copies_reshaped_into_two_outputs_stay_two_tensors():
    """Two reshapes of a transposed tensor each copy it in eager (clone + _unsafe_view after the
    decompositions): merged, the outputs shared memory (fuzz seed 20980)."""
    def fn(d):
        v = d.transpose(0, 1)
        return v.flatten(), v.flatten(1, 3)

    d = torch.randn(2, 14, 5, 3)
    a, b = _joint(fn, d)[0](d)
    assert a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
    a.zero_()
    torch.testing.assert_close(b, fn(d)[1])


def test_graphs_with_mutations_are_left_alone():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.ops.aten.add.Tensor, (x, x))
    b = g.call_function(torch.ops.aten.add.Tensor, (x, x))
    g.call_function(torch.ops.aten.add_.Tensor, (a, b))
    g.output((a,))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    assert eliminate_common_subexpressions(gm) == 0


def test_a_double_transpose_is_its_input_so_its_pads_merge():
    """pad(g) and pad(t(t(g))) (the padded LM-head products' gradient) are one pad; a double
    transpose that is an output stays a separate view."""
    def fn(g, w):
        first = torch.nn.functional.pad(g, (0, 3)) @ w
        second = torch.nn.functional.pad(g.t().t(), (0, 3)) * 2
        return first, second.sum(), g.t().t()

    g, w = torch.randn(4, 5), torch.randn(8, 2)
    compiled, graphs = _joint(fn, g, w)
    first, total, view = compiled(g, w)
    expected = fn(g, w)
    torch.testing.assert_close(first, expected[0])
    torch.testing.assert_close(total, expected[1])
    assert torch.equal(view, g) and view._base is g or view.data_ptr() == g.data_ptr()
    assert _count(graphs[0], "constant_pad_nd") == 1
