"""AOT tracing with symbolic sizes: one joint graph for every size its guards allow."""
import logging

import pytest
import torch

import ember
from ember.autograd.api import AotCompiled, aot_eager_backend
from ember.autograd.joint import trace_joint
from ember.autograd.partition import partition_min_cut
from ember.capture.runtime import counters
from ember.decomp import core_decompositions


def _aot(fn, dynamic_dims):
    return AotCompiled(fn, lambda gm, inputs: gm.forward, None, partition_min_cut, core_decompositions(),
                       dynamic_dims=dynamic_dims)


def test_seed_toy_traces_once_for_every_shape():
    @ember.compile(dynamic=True, backend="aot_eager")
    def toy(x):
        y = x.sin()
        return y, y.cos()

    counters.clear()
    for shape in [(4, 5), (6, 7), (3, 9), (10, 2), (5, 5), (2, 300)]:
        x = torch.randn(shape)
        y, z = toy(x)
        torch.testing.assert_close(y, x.sin())
        torch.testing.assert_close(z, x.sin().cos())
    assert counters["stats"]["backend_compiles"] == 1


@pytest.mark.parametrize("backend", ["aot_eager", "ember"])
def test_training_step_with_symbolic_sizes_matches_eager(backend):
    def f(x, w):
        h = x.view(x.shape[0], -1) @ w
        return torch.nn.functional.layer_norm(h, (w.shape[1],)).softmax(-1).sum()

    compiled = ember.compile(f, dynamic=True, backend=backend)
    counters.clear()
    for n in [4, 6, 9, 13]:
        x = torch.randn(n, 3, 4, requires_grad=True)
        w = torch.randn(12, n + 1, requires_grad=True)
        out = compiled(x, w)
        out.backward()
        x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
        ref = f(x2, w2)
        ref.backward()
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(x.grad, x2.grad)
        torch.testing.assert_close(w.grad, w2.grad)
    assert counters["stats"]["backend_compiles"] == 1


def test_the_joint_graph_computes_sizes_from_its_inputs():
    x = torch.randn(4, 6, requires_grad=True)
    joint, spec = trace_joint(lambda x: x.view(x.shape[0] * 2, -1).sum(0), [x], core_decompositions(),
                              dynamic_dims={0: (0, 1)})
    code = joint.code
    assert "sym_size" in code and "mul" in code
    assert not any(str(s).isdigit() for s in spec.input_fakes[0].shape)


def test_a_size_the_trace_specialized_is_guarded():
    # y has static sizes: x + y makes x's symbolic size equal to y's 4, which the guard checks.
    compiled = _aot(lambda x, y: x + y, {0: (0, 1)})
    counters.clear()
    for n in [4, 6, 4, 6, 8]:
        x, y = torch.randn(n, 5), torch.randn(n, 5)
        torch.testing.assert_close(compiled(x, y), x + y)
    key = next(iter(compiled.symbolic_entries))
    assert len(compiled.symbolic_entries[key]) == 2   # n == 4, then n == 6 ...
    assert key in compiled.specialized                 # ... then one by one
    assert counters["stats"]["backend_compiles"] == 3


def test_inputs_written_in_place_with_symbolic_sizes():
    def f(x, y):
        x.mul_(2)
        return (x + y).sum(1)

    compiled = ember.compile(f, dynamic=True, backend="aot_eager")
    counters.clear()
    for n in [3, 5, 8]:
        x, y = torch.randn(n, 7), torch.randn(n, 7)
        x_ref = x.clone()
        torch.testing.assert_close(compiled(x, y), f(x_ref, y))
        torch.testing.assert_close(x, x_ref)
    assert counters["stats"]["backend_compiles"] == 1


def test_an_output_viewing_an_input_stays_a_view():
    # the view is replayed on the real input (its chain has no sizes in it), once for every size
    def f(x):
        return x.view(-1), x.sum()

    compiled = ember.compile(f, dynamic=True, backend="aot_eager")
    counters.clear()
    for n in [3, 5, 7]:
        x = torch.randn(n, 4)
        view, total = compiled(x)
        view.add_(1)   # eager's output is a view of x
        torch.testing.assert_close(view.view(n, 4), x)
        assert view.data_ptr() == x.data_ptr()
    assert counters["stats"]["backend_compiles"] == 1


def test_an_output_viewing_an_input_with_sizes_in_its_chain_compiles_per_shape(caplog):
    def f(x):
        return x.view(x.shape[0] * 2, -1), x.sum()

    compiled = ember.compile(f, dynamic=True, backend="aot_eager")
    with caplog.at_level(logging.WARNING, logger="ember"):
        for n in [3, 5]:
            x = torch.randn(n, 4)
            view, total = compiled(x)
            assert view.data_ptr() == x.data_ptr()
            torch.testing.assert_close(view, x.view(n * 2, -1))
    assert any("symbolic sizes" in record.getMessage() for record in caplog.records)


def test_a_loss_that_uses_some_outputs_with_symbolic_sizes():
    # GPT-2's (loss, logits): the logits get no gradient; their zeros take the call's sizes.
    def f(x, w):
        logits = torch.tanh(x @ w)
        return torch.nn.functional.pad(logits, (0, 1)).exp().mean(), logits

    for backend in ("aot_eager", "ember"):
        compiled = ember.compile(f, dynamic=True, backend=backend)
        counters.clear()
        for n in [3, 5, 9]:
            x, w = torch.randn(n, 4, requires_grad=True), torch.randn(4, 6, requires_grad=True)
            loss, _ = compiled(x, w)
            loss.backward()
            x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
            f(x2, w2)[0].backward()
            torch.testing.assert_close(x.grad, x2.grad)
            torch.testing.assert_close(w.grad, w2.grad)
        assert counters["stats"]["backend_compiles"] == 1, backend


def test_pad_keeps_sizes_symbolic():
    # F.pad's fake kernel reads sizes as numbers; ember's rule keeps them symbolic
    @ember.compile(dynamic=True, backend="aot_eager")
    def f(labels):
        return torch.nn.functional.pad(labels, (0, 1), value=-100)[..., 1:]

    counters.clear()
    for n in [5, 8, 13]:
        labels = torch.arange(2 * n).view(2, n)
        torch.testing.assert_close(f(labels), torch.nn.functional.pad(labels, (0, 1), value=-100)[..., 1:])
    assert counters["stats"]["captures"] == 1 and counters["stats"]["backend_compiles"] == 1


def test_a_backward_gets_the_sizes_its_saved_values_only_hold_as_products(caplog):
    # e's gradient reads x.flatten() (size s0*s1): the backward needs s0 and s1 themselves,
    # which the partitioner saves as ints (before, the code generator refused it: fuzz 54179)
    def f(x, e):
        flat = x.flatten()
        return (flat @ e) * (flat @ e)

    compiled = ember.compile(f, dynamic=True)
    counters.clear()
    with caplog.at_level(logging.WARNING, logger="ember"):
        for n in [3, 5, 8]:
            x, e = torch.randn(n, 4), torch.randn(n * 4, requires_grad=True)
            compiled(x, e).backward()
            e2 = e.detach().requires_grad_()
            f(x, e2).backward()
            torch.testing.assert_close(e.grad, e2.grad)
    assert counters["stats"]["backend_compiles"] == 1
    assert not any("ATen calls" in record.getMessage() for record in caplog.records)


def test_an_output_whose_size_depends_on_data_keeps_requiring_grad():
    # fuzz 54625: a[mask] of an a that requires grad; its tangent's size is known only at run
    # time, so the graph runs as captured (before: the output came back without requires_grad)
    compiled = ember.compile(lambda a, b: a[b] * 2, dynamic=True)
    for n in [4, 6]:
        a = torch.randn(n, 3, requires_grad=True)
        b = torch.rand(n, 3) > 0.5
        out = compiled(a, b)
        assert out.requires_grad
        out.sum().backward()
        torch.testing.assert_close(a.grad, b.float() * 2)


def test_a_decomposed_op_keeps_eagers_layout_with_symbolic_sizes():
    # fuzz all 4461: softmax of a transposed input is contiguous in eager; the decomposition's
    # result was laid out like the input, so a reshape of it copied where eager's views
    def f(d):
        v1 = torch.softmax(d, 1)
        return v1.reshape(-1), v1

    compiled = ember.compile(f, dynamic=True, backend="aot_eager")
    for n in [3, 4, 6]:
        d = torch.randn(n, 5).t()
        flat, v1 = compiled(d)
        assert v1.stride() == torch.softmax(d, 1).stride()
        assert flat.data_ptr() == v1.data_ptr()
        torch.testing.assert_close(v1, torch.softmax(d, 1))

