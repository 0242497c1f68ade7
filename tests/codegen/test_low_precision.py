"""float16 and bfloat16 through ember's C++ kernels: stored in their own dtype, computed in float32.

Fused kernels round once at the end where eager rounds after every op, so results agree within a
couple of units in the last place of the low-precision type (as with torch.compile).
"""
import pytest
import torch
import torch.nn.functional as F

from codegen_helpers import ember_compiled

DTYPES = [torch.float16, torch.bfloat16]
TOLERANCE = {torch.float16: dict(rtol=2e-3, atol=2e-3), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def check(fn, *args, dtype):
    function, graphs = ember_compiled(fn)
    expected = fn(*args)
    got = function(*args)
    for ours, theirs in zip(got if isinstance(got, tuple) else (got,),
                            expected if isinstance(expected, tuple) else (expected,)):
        assert ours.dtype == theirs.dtype
        torch.testing.assert_close(ours, theirs, equal_nan=True, **TOLERANCE[dtype])
    assert graphs and all(graph.kernels for graph in graphs), "expected C++ kernels, not fallbacks"
    for graph in graphs:
        lowered = [op for op in graph.fallbacks if "mm" not in op]
        assert not lowered, graph.fallbacks
    return graphs


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pointwise_chain_and_casts(dtype):
    x = torch.randn(33, 17).to(dtype)
    y = torch.randn(17).to(dtype)
    graphs = check(lambda x, y: ((x * y + 1).sigmoid() - x.abs().sqrt(), (x > y).float(), x.float().tanh().to(dtype)),
                   x, y, dtype=dtype)
    source = "".join(graphs[0].kernels.values())
    assert "ember_half" in source or "ember_bf16" in source


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reductions_softmax_layer_norm(dtype):
    x = torch.randn(8, 64).to(dtype)
    w, b = torch.randn(64).to(dtype), torch.randn(64).to(dtype)
    check(lambda x: (x.sum(1), x.amax(0), x.mean(), x.argmax(1)), x, dtype=dtype)
    check(lambda x: torch.softmax(x, -1), x, dtype=dtype)
    check(lambda x, w, b: F.layer_norm(x, (64,), w, b), x, w, b, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_special_values_round_trip(dtype):
    x = torch.tensor([0.0, -0.0, 1.0, -2.5, 65504.0 if dtype == torch.float16 else 3e38, float("inf"),
                      float("-inf"), float("nan"), 1e-7, 1.0 + 2 ** -9]).to(dtype)
    check(lambda x: (x.clone(), x.float() * 1, x * 1), x, dtype=dtype)
    wide = torch.randn(1000) * 1000
    check(lambda w: w.to(dtype), wide, dtype=dtype)  # float32 -> low precision rounds to nearest even


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mlp_forward_and_backward(dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(dtype)
    x = torch.randn(8, 16).to(dtype)
    params = dict(model.named_parameters())

    def loss(x, *weights):
        out = torch.func.functional_call(model, dict(zip(params, weights)), (x,))
        return out.float().pow(2).mean()

    function, _ = ember_compiled(loss)
    weights = [p.detach().clone().requires_grad_(True) for p in params.values()]
    ours = function(x, *weights)
    ours.backward()
    reference = [p.detach().clone().requires_grad_(True) for p in params.values()]
    theirs = loss(x, *reference)
    theirs.backward()
    torch.testing.assert_close(ours, theirs, **TOLERANCE[dtype])
    for mine, expected in zip(weights, reference):
        torch.testing.assert_close(mine.grad, expected.grad, rtol=5e-2, atol=5e-2)
