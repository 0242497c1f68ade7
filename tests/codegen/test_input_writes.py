"""Inputs written in place by the kernel that computes their new value (scheduling/input_writes.py):
batch norm's running statistics and counter, where nothing can see the old value after the store;
everywhere else the runtime copies the new value back, as before."""
import os

import pytest
import torch

import ember
from ember.autograd.api import aot_function
from ember.codegen.compile import ember_compiler
from ember.decomp import core_decompositions


def _wrappers(fn, *args, **options):
    """(the result, the wrapper source of each compiled graph) of one call through backend ember."""
    sources = []

    def compiler(gm, example_inputs):
        compiled = ember_compiler(gm, example_inputs)
        sources.append(getattr(compiled, "wrapper", ""))
        return compiled

    result = aot_function(fn, fw_compiler=compiler, bw_compiler=compiler, decompositions=core_decompositions(),
                          **options)(*args)
    return result, sources


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 6, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(6)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


@pytest.mark.parametrize("kernels", ["cpp", "triton"])
def test_batch_norm_statistics_are_written_in_place(kernels):
    """A training step's forward stores the running mean, variance and batch count into the
    module's buffers (no buffers of their own, no copy after the call); values, versions and
    gradients as eager's.  Triton kernels: on the GPU where there is one, else in Triton's
    interpreter (chosen before triton is imported: tests/conftest.py)."""
    device = "cpu"
    if kernels == "triton":
        pytest.importorskip("triton")
        if torch.cuda.is_available():
            device = "cuda"
        elif os.environ.get("TRITON_INTERPRET") != "1":
            pytest.skip("Triton kernels for CPU tensors run under Triton's interpreter only")
    torch.manual_seed(0)
    model, reference = _Block().to(device), _Block().to(device)
    reference.load_state_dict(model.state_dict())
    buffers = [model.bn.running_mean, model.bn.running_var, model.bn.num_batches_tracked]
    addresses = [b.data_ptr() for b in buffers]
    with ember.config.patch(cpu_kernels=kernels):
        compiled = ember.compile(model, backend="ember")
        for _ in range(3):
            x = torch.randn(2, 4, 5, 5, device=device)
            versions = [b._version for b in buffers]
            compiled(x).sum().backward()
            reference(x).sum().backward()
            assert [b._version - v for b, v in zip(buffers, versions)] == [1, 1, 1]
    assert [b.data_ptr() for b in buffers] == addresses
    # (on a GPU, cuDNN's float32 convolutions may round through TF32, channels-last in ember's graph)
    tolerance = {"rtol": 1e-2, "atol": 1e-2} if device == "cuda" else {"rtol": 1e-4, "atol": 1e-4}
    torch.testing.assert_close(model.bn.running_mean, reference.bn.running_mean, **tolerance)
    torch.testing.assert_close(model.bn.running_var, reference.bn.running_var, **tolerance)
    assert model.bn.num_batches_tracked.item() == 3
    torch.testing.assert_close(model.conv.weight.grad, reference.conv.weight.grad, **tolerance)
    # (the forward's wrapper, through aot_function: three inputs written in place)
    x = torch.randn(2, 6, 5, 5, device=device, requires_grad=True)
    mean, var, count = (b.clone() for b in buffers)
    weight, bias = model.bn.weight.detach().clone().requires_grad_(), model.bn.bias.detach().clone().requires_grad_()

    def norm(x, weight, bias, mean, var, count):
        count.add_(1)
        return torch.nn.functional.batch_norm(x, mean, var, weight, bias, training=True)

    with ember.config.patch(cpu_kernels=kernels):
        _, (forward, *_) = _wrappers(norm, x, weight, bias, mean, var, count)
    assert forward.count("# written in place") == 3, forward
    # its statistics are saved as (1, C, 1, 1) tensors allocated so: no as_strided per call
    assert "as_strided" not in forward, forward


def test_an_old_value_read_elsewhere_keeps_the_copy():
    """An input whose old value another element's program reads (a flip), or another statement
    reads, is not written in place: the new value gets a buffer and the runtime copies it."""
    def flip(buf):
        buf.copy_(buf.flip(0) + 1)
        return buf.sum()

    def read_before(x, buf):
        y = x * buf
        buf.add_(1)
        return y

    for fn, args in ((flip, (torch.arange(6.0),)), (read_before, (torch.randn(6), torch.randn(6)))):
        ours, theirs = [a.clone() for a in args], [a.clone() for a in args]
        result, (wrapper,) = _wrappers(fn, *ours)
        torch.testing.assert_close(result, fn(*theirs))
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b)
        assert "written in place" not in wrapper, wrapper


def test_an_input_written_in_place_and_returned():
    """`buf.add_(x)` returned as an output (eager returns the input itself, which the runtime
    makes as a view of the input): written in place, read again by `buf * 2`, returned once."""
    def fn(x, buf):
        buf.add_(x)
        return buf, buf * 2

    x, buf = torch.randn(5), torch.randn(5)
    mine = buf.clone()
    version = mine._version
    (out, doubled), (wrapper,) = _wrappers(fn, x, mine)
    expected = buf + x
    torch.testing.assert_close(mine, expected)
    torch.testing.assert_close(doubled, expected * 2)
    assert out.data_ptr() == mine.data_ptr() and mine._version == version + 1
    assert wrapper.count("# written in place") == 1, wrapper


def test_a_counter_written_in_place_under_no_grad():
    """An inference graph (no gradients) writes its counter and statistics in place too."""
    def fn(x, count, total):
        count.add_(1)
        total.add_(x.sum(0))
        return x * 2

    x, count, total = torch.randn(4, 3), torch.zeros((), dtype=torch.int64), torch.zeros(3)
    with torch.no_grad():
        for _ in range(2):
            _, (wrapper,) = _wrappers(fn, x, count, total)
    assert count.item() == 2
    torch.testing.assert_close(total, x.sum(0) * 2)
    assert wrapper.count("# written in place") == 2, wrapper
