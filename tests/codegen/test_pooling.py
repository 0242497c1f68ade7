"""Max pooling through ember's C++ kernels: values, indices and gradients equal eager's exactly."""
import pytest
import torch
import torch.nn.functional as F

from codegen_helpers import ember_compiled

CONFIGS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=1, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=2, stride=2, dilation=2),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_max_pool2d_forward_and_backward_match_eager(config):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 11)
    x[0, 0, 1, 1] = float("nan")
    x[1, 2, :3, :3] = float("-inf")
    x[1, 1, 4, 4:6] = 5.0  # ties pick the first position
    x.requires_grad_(True)

    def fn(x):
        values, indices = F.max_pool2d(x, return_indices=True, **config)
        return values * 2, indices

    function, graphs = ember_compiled(fn)
    values, indices = function(x)
    expected_values, expected_indices = fn(x)
    torch.testing.assert_close(values, expected_values, equal_nan=True)
    assert torch.equal(indices, expected_indices)
    grad = torch.randn_like(values)
    (ours,) = torch.autograd.grad(values, x, grad)
    (theirs,) = torch.autograd.grad(expected_values, x, grad)
    torch.testing.assert_close(ours, theirs, equal_nan=True)
    forward = graphs[0]
    assert "max_pool2d" not in "".join(forward.fallbacks), forward.fallbacks
    if config.get("dilation", 1) == 1:
        assert not any("max_pool2d" in name for graph in graphs for name in graph.fallbacks)
