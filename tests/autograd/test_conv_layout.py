"""Convolutions in channels-last order (ember/autograd/conv_layout.py), tried on the CPU by
listing it among the devices: results, output strides, gradients (and their strides) and
running statistics as eager's; no transposing copy between one convolution and the next."""
import copy

import torch

import ember
from ember.autograd.api import aot_backend
from ember.codegen.compile import compile_graph


def _net():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 8, 1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 5))


def _compiled(model):
    graphs = []

    def compiler(gm, example_inputs):
        graph = compile_graph(gm, example_inputs)
        graphs.append(graph)
        return graph

    return ember.compile(model, backend=aot_backend(compiler)), graphs


def test_training_step_matches_eager_with_channels_last_convolutions():
    torch.manual_seed(0)
    model = _net()
    reference = copy.deepcopy(model)
    x = torch.randn(4, 3, 16, 16)
    with ember.config.patch(channels_last_convolutions="cpu"):
        compiled, graphs = _compiled(model)
        out = compiled(x)
        out.sum().backward()
    expected = reference(x)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    assert out.stride() == expected.stride()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
        assert p.grad.stride() == q.grad.stride(), name  # (the 1x1 weight's too)
    for b, c in zip(model.buffers(), reference.buffers()):
        torch.testing.assert_close(b, c)
    assert "(768, 1, 48, 3)" in graphs[0].wrapper  # the input, channels-last for the first convolution


def test_no_transpose_between_convolutions():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 4, 1)).eval()
    x = torch.randn(2, 3, 8, 8)
    with ember.config.patch(channels_last_convolutions="cpu"), torch.no_grad():
        compiled, graphs = _compiled(model)
        out = compiled(x)
        expected = model(x)
    torch.testing.assert_close(out, expected)
    assert out.stride() == expected.stride()
    wrapper = graphs[0].wrapper
    # conv -> bn+relu (one kernel, stored channels-last) -> conv: both convolutions' results are
    # planned channels-last, and nothing copies between them
    assert "ensure_layout(buf2, (2, 8, 8, 8), (512, 1, 64, 8), dtype=" in wrapper
    assert "buf3 = empty_strided((2, 8, 8, 8), (512, 1, 64, 8)" in wrapper
    assert "ensure_layout(buf4, (2, 4, 8, 8), (256, 1, 32, 4), dtype=" in wrapper
    # kernels: the input and the 3x3 weight to channels-last, bn+relu, the result back to eager's
    # strides (the 1x1 weight is channels-last already)
    assert len(graphs[0].kernels) == 4


def test_off_by_default_on_cpu():
    model = torch.nn.Conv2d(3, 4, 3).eval()
    with torch.no_grad():
        compiled, graphs = _compiled(model)
        compiled(torch.randn(1, 3, 6, 6))
    assert "channels" not in graphs[0].wrapper and "(108, 1, 18, 3)" not in graphs[0].wrapper


def test_programs_that_depend_on_memory_order_keep_it():
    """Fuzz conv 3: `.view(-1)` of a convolution's result works on eager's NCHW tensor and fails
    on a channels-last one; a reshape written through in place afterwards reaches the source only
    when it is a view.  Such graphs keep the program's memory order (the pass leaves them)."""
    torch.manual_seed(0)
    x, w = torch.randn(2, 3, 5, 5), torch.randn(4, 3, 3, 3)

    def flat(x, w):
        return torch.nn.functional.conv2d(x, w).relu().view(-1)

    def written(x, w):
        y = torch.nn.functional.conv2d(x, w)
        y.reshape(-1)[:3].add_(1.0)
        return y

    for fn in (flat, written):
        with ember.config.patch(channels_last_convolutions="cpu"):
            compiled, graphs = _compiled(fn)
            out = compiled(x, w)
        torch.testing.assert_close(out, fn(x, w))
        assert "channels" not in graphs[0].wrapper and "(75, 1, 15, 3)" not in graphs[0].wrapper


def test_outputs_that_share_a_convolutions_memory_keep_sharing_it():
    """Two outputs that are views of one convolution's result share its memory in eager; each
    leaving through its own copy to the program's strides gave them memory of their own (fuzz
    conv 713017: `v.squeeze()` twice; conv 712680: two results of one `unbind`).  Such graphs keep
    the program's memory order; one output alone still goes channels-last."""
    torch.manual_seed(0)
    x, w = torch.randn(3, 2, 6, 3, requires_grad=True), torch.randn(4, 2, 1, 1)

    def views(x, w):
        y = torch.nn.functional.conv2d(x, w)
        return y.squeeze(), y.squeeze(), y, y.unbind(0)[2]

    with ember.config.patch(channels_last_convolutions="cpu"):
        outs = ember.compile(views)(x, w)
        compiled, graphs = _compiled(lambda x, w: torch.nn.functional.conv2d(x, w).relu())
        compiled(x, w)
    assert "(36, 1, 6, 2)" in graphs[0].wrapper  # (x channels-last: the pass ran there)
    expected = views(x, w)
    storages = {o.untyped_storage().data_ptr() for o in outs}
    assert len(storages) == 1
    for ours, theirs in zip(outs, expected):
        torch.testing.assert_close(ours, theirs)
        assert ours.stride() == theirs.stride()
