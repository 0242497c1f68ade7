"""ember's AOT autograd on small programs: seed 004, mutation and aliasing, inference path."""
import logging
import os
import re
import shutil

import pytest
import torch
from torch import nn

import ember
from ember.autograd import aot_function, partition_default, partition_min_cut
from ember.autograd.draw import write_svg


class Seed004Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 5)
        self.fc2 = nn.Linear(5, 2)
        self.relu = nn.ReLU()
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(self.fc2(self.relu(self.fc1(x))))


def _recording_aot_backend(record):
    from ember.autograd.api import AotCompiled
    from ember.decomp import core_decompositions

    def fw(gm, example_inputs):
        record["forward"] = gm
        return gm.forward

    def bw(gm, example_inputs):
        record["backward"] = gm
        return gm.forward

    def backend(gm, example_inputs):
        return AotCompiled(gm, fw, bw, partition_min_cut, core_decompositions())

    return backend


def test_seed004_forward_and_backward_graphs_print_and_draw(tmp_path):
    torch.manual_seed(0)
    model = Seed004Model()
    reference = Seed004Model()
    reference.load_state_dict(model.state_dict())
    record = {}
    compiled = ember.compile(model, backend=_recording_aot_backend(record))
    x, target = torch.randn(1, 10), torch.randn(1, 2)
    loss = nn.functional.mse_loss(compiled(x), target)
    loss.backward()
    expected = nn.functional.mse_loss(reference(x), target)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    forward_code = record["forward"].print_readable(print_output=False)
    backward_code = record["backward"].print_readable(print_output=False)
    assert "primals_" in forward_code and "aten.mm" in forward_code
    assert "tangents_1" in backward_code and "aten.mm" in backward_code
    assert "mse_loss" not in forward_code  # the loss is outside the compiled module
    if shutil.which("dot") is None:
        pytest.skip("graphviz's dot is not installed")
    for kind in ("forward", "backward"):
        path = write_svg(record[kind], str(tmp_path / f"{kind}.svg"), kind)
        assert open(path).read().lstrip().startswith("<?xml")


def test_inference_path_has_no_backward():
    f = aot_function(lambda x, w: (x @ w).relu(), partition_fn=partition_default)
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    torch.testing.assert_close(f(x, w), (x @ w).relu())
    partition = f.aot.last_partition
    assert partition.backward is None


@pytest.mark.parametrize("partition", [partition_default, partition_min_cut])
def test_gradients_match_eager(partition):
    def fn(x, w, b):
        return torch.nn.functional.gelu(torch.nn.functional.layer_norm(x @ w + b, (5,))).sum(dim=0)

    f = aot_function(fn, partition_fn=partition)
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 5, requires_grad=True)
    b = torch.randn(5, requires_grad=True)
    out = f(x, w, b)
    grads = torch.autograd.grad(out.sum(), [x, w, b])
    expected = torch.autograd.grad(fn(x, w, b).sum(), [x, w, b])
    torch.testing.assert_close(out, fn(x, w, b))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


def test_batchnorm_training_updates_running_stats_like_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    reference = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    reference.load_state_dict(model.state_dict())
    compiled = ember.compile(model, backend="aot_eager")
    for _ in range(3):
        x = torch.randn(2, 3, 6, 6)
        out = compiled(x)
        expected = reference(x)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
        out.sum().backward()
        expected.sum().backward()
    torch.testing.assert_close(model[1].running_mean, reference[1].running_mean)
    torch.testing.assert_close(model[1].running_var, reference[1].running_var)
    assert model[1].num_batches_tracked.item() == reference[1].num_batches_tracked.item() == 3
    torch.testing.assert_close(model[0].weight.grad, reference[0].weight.grad, rtol=1e-4, atol=1e-5)


def test_inplace_op_on_input_and_slice_assignment():
    def fn(x, y):
        x.add_(1)
        x[:, 1] = y[:, 0]
        x[0] = 5
        return x.sum() + y.sum()

    f = aot_function(fn)
    x, y = torch.randn(4, 3), torch.randn(4, 2)
    x2, y2 = x.clone(), y.clone()
    torch.testing.assert_close(f(x, y), fn(x2, y2))
    torch.testing.assert_close(x, x2)


def test_foreach_inplace_ops_write_every_tensor_of_the_list():
    # An optimizer's foreach path (SGD momentum buffers, parameters): the write to each list
    # item was lost, so the compiled function returned the old values.
    def fn(a, b, c, d):
        torch._foreach_mul_([a, b], 0.5)
        torch._foreach_add_([a, b], [c, d], alpha=2.0)
        return a.sum() + b.sum()

    f = aot_function(fn)
    inputs = [torch.randn(3), torch.randn(2), torch.randn(3), torch.randn(2)]
    expected_inputs = [t.clone() for t in inputs]
    torch.testing.assert_close(f(*inputs), fn(*expected_inputs))
    for got, expected in zip(inputs, expected_inputs):
        torch.testing.assert_close(got, expected)


def test_inplace_write_to_a_leaf_under_no_grad():
    # An optimizer step: parameters are leaves that require grad, written under no_grad.
    def fn(weight, grad):
        with torch.no_grad():
            weight.add_(grad, alpha=-0.1)
        return weight * 2

    weight, grad = nn.Parameter(torch.randn(3)), torch.randn(3)
    expected_weight = nn.Parameter(weight.detach().clone())
    torch.testing.assert_close(aot_function(fn)(weight, grad), fn(expected_weight, grad))
    torch.testing.assert_close(weight, expected_weight)


def test_inplace_write_to_a_fresh_constant_tensor():
    # torch.tensor(0.0) is traced as a constant through lift_fresh; writing the result is no
    # write through a view of that constant (Adam's step counter).
    def fn(x):
        step = torch.tensor(0.0)
        step += 1
        return x * step

    x = torch.randn(3)
    torch.testing.assert_close(aot_function(fn)(x), fn(x))


def test_write_through_a_view_of_an_intermediate():
    def fn(x):
        y = x * 2
        row = y[1]
        row.mul_(10)
        z = y.t()
        z[0, 0] = -1
        return y, row.sum()

    x = torch.randn(3, 4, requires_grad=True)
    f = aot_function(fn)
    got = f(x)
    want = fn(x)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])
    (g,) = torch.autograd.grad(got[0].sum() + got[1], [x])
    (h,) = torch.autograd.grad(want[0].sum() + want[1], [x])
    torch.testing.assert_close(g, h)


def test_outputs_that_are_views_of_inputs_alias_them():
    def fn(x):
        return x.view(-1), x[1:], x * 2

    f = aot_function(fn)
    x = torch.randn(3, 4)
    flat, tail, doubled = f(x)
    assert flat.data_ptr() == x.data_ptr() and flat._base is x or flat._is_view()
    x.add_(1)
    torch.testing.assert_close(flat, x.view(-1))
    torch.testing.assert_close(tail, x[1:])


def test_same_tensor_passed_twice():
    def fn(a, b):
        return a * b + a

    compiled = ember.compile(fn, backend="aot_eager")
    x = torch.randn(5, requires_grad=True)
    out = compiled(x, x)
    torch.testing.assert_close(out, x * x + x)
    (g,) = torch.autograd.grad(out.sum(), [x])
    torch.testing.assert_close(g, 2 * x + 1)


def test_dropout_masks_match_eager_with_the_same_seed():
    def fn(x):
        return torch.nn.functional.dropout(x, 0.5, training=True) * 3

    f = aot_function(fn)
    x = torch.randn(64, 64, requires_grad=True)
    torch.manual_seed(123)
    got = f(x)
    torch.manual_seed(123)
    want = fn(x)
    torch.testing.assert_close(got, want)


def test_double_backward_is_a_clear_error():
    f = aot_function(lambda x: (x * x).sum())
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(f(x), [x], create_graph=True)


def test_integer_and_non_differentiable_outputs():
    def fn(x):
        return x.sum(), x.argmax(), (x > 0)

    f = aot_function(fn)
    x = torch.randn(6, requires_grad=True)
    total, index, mask = f(x)
    assert index.dtype == torch.int64 and not index.requires_grad
    assert mask.dtype == torch.bool
    (g,) = torch.autograd.grad(total, [x])
    torch.testing.assert_close(g, torch.ones(6))


def test_aot_module_shares_parameters_and_matches_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))
    compiled = ember.aot_module(model)
    x = torch.randn(5, 4)
    out = compiled(x)
    torch.testing.assert_close(out, model(x))
    out.sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    model(x).sum().backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-5)


def test_unsupported_pattern_names_the_op_and_the_source_line(caplog):
    def f(x):
        y = x * 2
        x.t_()  # changes an input's shape in place
        return y

    # A captured graph the tracer cannot represent runs as it is (eager's result), and the
    # warning names the op and the user's line.
    compiled = ember.compile(f, backend="aot_eager")
    x = torch.randn(3, 4)
    with caplog.at_level(logging.WARNING, logger="ember"):
        result = compiled(x.clone())
    expected_input = x.clone()
    torch.testing.assert_close(result, f(expected_input))
    assert re.search(r"aten\.t_\.default.*test_aot_basics\.py.*line \d+.*x\.t_\(\)", caplog.text), caplog.text
    # aot_function (no captured graph to fall back to) raises it.
    with pytest.raises(ember.autograd.TracingError, match=r"aten\.t_\.default"):
        ember.aot_function(f)(torch.randn(3, 4))


def test_aten_graph_nodes_keep_the_user_source_line():
    record = {}
    compiled = ember.compile(lambda x: torch.relu(x) * 2, backend=_recording_aot_backend(record))
    x = torch.randn(4, requires_grad=True)
    compiled(x).sum().backward()
    code = record["forward"].print_readable(print_output=False)
    assert "test_aot_basics.py" in code and "torch.relu(x) * 2" in code


def test_aot_eager_works_as_a_torch_compile_backend():
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    compiled = torch.compile(model, backend=ember.backends.aot_eager)
    x = torch.randn(3, 4)
    out = compiled(x)
    torch.testing.assert_close(out, model(x))
    out.sum().backward()
    assert model[0].weight.grad is not None
