"""Grad mode and autocast blocks: captured in the graph, and state restored as in eager."""
import torch

import ember


def _compile_counting(fn):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return ember.compile(fn, backend=backend), graphs


def test_no_grad_block_is_one_graph_and_matches_eager():
    def f(x):
        y = x * 2
        with torch.no_grad():
            z = y + 1
        return y * z, z.requires_grad, torch.is_grad_enabled()

    compiled, graphs = _compile_counting(f)
    x = torch.randn(3, requires_grad=True)
    expected, got = f(x), compiled(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:]
    assert got[0].requires_grad and len(graphs) == 1
    got[0].sum().backward()


def test_set_grad_enabled_and_decorated_functions():
    @torch.no_grad()
    def helper(t):
        return t * 3

    def f(x):
        with torch.set_grad_enabled(False):
            a = x + 1
        b = helper(x)
        with torch.enable_grad():
            c = x * x
        return a.requires_grad, b.requires_grad, c.requires_grad, a + b + c

    compiled, graphs = _compile_counting(f)
    x = torch.randn(3, requires_grad=True)
    assert compiled(x)[:3] == f(x)[:3]
    with torch.no_grad():
        assert compiled(x)[:3] == f(x)[:3]
    assert len(graphs) == 2  # grad mode is guarded: one graph per mode
    assert torch.is_grad_enabled()


def test_autocast_block_changes_dtypes_like_eager():
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = (x @ w).relu()
        return y, (x @ w).dtype

    compiled, graphs = _compile_counting(f)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    expected, got = f(x, w), compiled(x, w)
    assert got[0].dtype == torch.bfloat16 and got[1] == torch.float32
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=0)
    assert not torch.is_autocast_enabled("cpu")
    assert len(graphs) == 1


def test_graph_break_inside_no_grad_block_keeps_state_and_results():
    def f(x):
        y = x * 2
        with torch.no_grad():
            z = y + 1
            ember.graph_break()
            w = z * 3
        return w, y * w, torch.is_grad_enabled()

    compiled, graphs = _compile_counting(f)
    x = torch.randn(3, requires_grad=True)
    expected, got = f(x), compiled(x)
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[1], expected[1])
    assert got[2] is True and torch.is_grad_enabled()
    assert got[1].requires_grad == expected[1].requires_grad
    assert len(graphs) >= 1


def test_exception_inside_with_block_restores_grad_mode():
    def f(x, fail):
        with torch.no_grad():
            y = x + 1
            if fail:
                raise ValueError("inside no_grad")
        return y

    compiled, _ = _compile_counting(f)
    x = torch.randn(2)
    torch.testing.assert_close(compiled(x, False), x + 1)
    try:
        compiled(x, True)
    except ValueError as error:
        assert "inside no_grad" in str(error)
    else:
        raise AssertionError("expected ValueError")
    assert torch.is_grad_enabled()
