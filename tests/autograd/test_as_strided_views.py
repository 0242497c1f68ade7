"""as_strided of views, and writes through views, in the joint trace (fuzz mode "layout")."""
import pytest
import torch

import ember
from ember.autograd.joint import trace_joint
from ember.decomp import core_decompositions


def _write_then_read(a):
    v0 = torch.cos(a)
    v1 = torch.as_strided(v0, (3,), (5,))
    v2 = torch.as_strided(v1, (5, 2), (1, 5))  # reads storage v1 does not hold
    v1[:3] *= 2
    return v2


def _values_and_grad(fn, requires_grad=True):
    a = torch.linspace(-1, 1, 11).reshape(1, 1, 11).requires_grad_(requires_grad)
    out = fn(a)
    if not requires_grad:
        return out, None
    (out * torch.arange(10.0).reshape(5, 2)).sum().backward()
    return out.detach(), a.grad


@pytest.mark.parametrize("backend", ["aot_eager", "ember"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_as_strided_of_a_view_written_through_matches_eager(backend, dynamic):
    """Fuzz layout 67: the second as_strided was replayed on the first view's node, which after
    the write held a fresh (3,) value: its gradient reached 3 of the 10 elements it reads (eager
    re-derives it from the base).  Such a read that requires grad now runs as eager does."""
    expected = _values_and_grad(_write_then_read)
    got = _values_and_grad(ember.compile(_write_then_read, backend=backend, dynamic=dynamic))
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("backend", ["aot_eager", "ember"])
def test_as_strided_of_a_view_without_grad_reads_the_written_storage(backend):
    """Without grad the trace keeps it: the as_strided is recorded on the view's root, after the
    write, so it reads the doubled elements."""
    expected, _ = _values_and_grad(_write_then_read, requires_grad=False)
    got, _ = _values_and_grad(ember.compile(_write_then_read, backend=backend), requires_grad=False)
    torch.testing.assert_close(got, expected)


def test_writing_a_slice_in_place_traces():
    """`v[:3] *= 2` ends in copy_(v[:3], product-in-v[:3]): a copy of a view into the very same
    view reads each element where it writes it (it was refused as order-dependent, and the whole
    graph ran eagerly)."""
    def fn(a):
        v = a.cos()
        v[:3] *= 2
        return v

    gm, _ = trace_joint(fn, [torch.randn(5, requires_grad=True)], core_decompositions())
    assert any("scatter" in str(node.target) for node in gm.graph.nodes)
    a = torch.randn(5, requires_grad=True)
    compiled = ember.compile(fn, backend="ember")
    torch.testing.assert_close(compiled(a), fn(a))


def test_missing_tangent_of_a_written_input_with_symbolic_sizes():
    """Fuzz layout 135: a backward given only some tangents makes zeros for the others; the
    Function carrying an input's in-place write had no call-time shapes for them and made zeros
    of symbolic sizes (RuntimeError: SymIntArrayRef expected to contain only concrete integers)."""
    def fn(a, b):
        a.clamp_min_(0.5)
        return b.clone(), a.unfold(1, 4, 2)

    results = []
    for f in (fn, ember.compile(fn, backend="ember", dynamic=True)):
        leaf = torch.linspace(0, 1, 4).reshape(1, 4, 1, 1).requires_grad_()
        b = torch.ones(1, 1, 2, 1, requires_grad=True)
        outs = f(leaf.clone(), b)
        sum(o.sum() for o in outs).backward()
        results.append((leaf.grad, b.grad))
    torch.testing.assert_close(results[1], results[0])


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_in_place_op_keeps_its_targets_strides(dynamic):
    """Fuzz ember_dynamic autograd 7033: scatter_ into a clone of a transposed tensor keeps the
    clone's strides in eager; the functional scatter's fake is contiguous, and the compiled graph
    returned it so: a later flatten then viewed memory eager copies (and a write through it
    tripped autograd's version check)."""
    def fn(a, index, src):
        v = a.detach().clone()
        v.scatter_(0, index, src)
        return v

    a = torch.randn(13, 5).t()
    index, src = torch.tensor([[0, 1, 2]]), torch.randn(1, 3)
    for backend in ("aot_eager", "ember"):
        out = ember.compile(fn, backend=backend, dynamic=dynamic)(a, index, src)
        expected = fn(a, index, src)
        assert out.stride() == expected.stride()
        torch.testing.assert_close(out, expected)


def _offset_input():
    """A (5,) view at storage offset 10 of 15 elements: as_strided's offsets count from 0."""
    return torch.arange(15.0)[10:]


def _own_elements_after_write(x):
    v = x.as_strided((2,), (2,), 10)  # x's own elements 0 and 2
    x.add_(1)
    return v * 1


def _other_elements_after_write(x):
    v = x.as_strided((3,), (1,), 5)  # elements 5..7 of the storage: not x's
    x.add_(1)
    return v * 1


def _as_strided_of_written_non_dense(c):
    c.abs_()
    return c.as_strided((5, 3), (3, 2), 17).erf()  # odd positions: memory c does not hold


def _write_through_offset_view(x):
    v = x.as_strided((2,), (2,), 11)
    v.mul_(10)
    return x + 0


@pytest.mark.parametrize("fn", [_own_elements_after_write, _other_elements_after_write, _write_through_offset_view])
@pytest.mark.parametrize("backend", ["aot_eager", "ember"])
def test_as_strided_of_an_offset_input_written_in_place_matches_eager(fn, backend):
    """Fuzz layout 702341/702137 (GPU, and the CPU too): a view as_strided(x, ..., offset) taken
    before x was written was replayed on x's new value, memory of its own at offset 0, with the
    absolute offset: it read past the new value's end (garbage, not x's elements).  The offset
    now moves by x's own; a view reading memory x does not hold runs eagerly."""
    expected_input, got_input = _offset_input(), _offset_input()
    expected = fn(expected_input)
    got = ember.compile(fn, backend=backend)(got_input)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got_input._base if got_input._base is not None else got_input,
                               expected_input._base if expected_input._base is not None else expected_input)


@pytest.mark.parametrize("backend", ["aot_eager", "ember"])
def test_as_strided_of_a_written_strided_input_reads_its_storage(backend):
    """Fuzz layout 703259: c[:, ::2] written in place, then as_strided(c, ..., absolute offset)
    over memory between c's elements: it was an as_strided of c's new (dense) value with the
    storage's offset, past its end (setStorage out of bounds)."""
    def make():
        return (torch.linspace(-2, 2, 60).reshape(5, 12))[:, ::2]
    expected = _as_strided_of_written_non_dense(make())
    got = ember.compile(_as_strided_of_written_non_dense, backend=backend)(make())
    torch.testing.assert_close(got, expected)


def _write_through_as_strided_of_gapped_input(b):
    v = b.permute(0, 1).as_strided((5,), (1,))  # storage positions 0..4: b's elements 0, 2, 4 and the gaps
    v.clamp_min_(7)
    return b * 1


@pytest.mark.parametrize("backend", ["aot_eager", "ember"])
def test_write_through_as_strided_of_a_strided_input_matches_eager(backend):
    """Fuzz layout 702137: b = x[:, ::2] written through as_strided(b, (5,), (1,)): eager writes
    storage positions 0..4 (b's elements and the gaps between them); as_strided_scatter writes
    a contiguous clone of b, where positions 0..4 are other elements of b."""
    def make():
        return torch.arange(-7.0, 8.0).reshape(3, 5)[:, ::2]
    expected_input, got_input = make(), make()
    expected = _write_through_as_strided_of_gapped_input(expected_input)
    got = ember.compile(_write_through_as_strided_of_gapped_input, backend=backend)(got_input)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got_input._base, expected_input._base)


def _as_strided_of_an_unfolded_expanded_input(b):
    return torch.as_strided(b.unfold(0, 2, 3), (1, 3), (1, 3))


@pytest.mark.parametrize("backend", ["aot_eager", "ember"])
def test_as_strided_of_a_view_of_an_expanded_input_shares_the_gradient_as_eager(backend):
    """Fuzz layout 15265: as_strided's gradient is shared among the elements reading each memory
    location.  Eager's are the view's (the unfold covers rows 0 and 1 of the expanded [3, 7]
    input: each gets half, row 2 nothing); recorded on the root, all 3 rows got a third.  Such a
    graph now runs as eager does."""
    grads = []
    for fn in (_as_strided_of_an_unfolded_expanded_input,
               ember.compile(_as_strided_of_an_unfolded_expanded_input, backend=backend)):
        b = torch.arange(7.0).view(1, 7).expand(3, 7).detach().requires_grad_()
        out = fn(b)
        out.backward(torch.tensor([[1.0, 2.0, 3.0]]))
        grads.append((out.detach(), b.grad))
    torch.testing.assert_close(grads[1], grads[0])
    assert not grads[0][1][2].any()
