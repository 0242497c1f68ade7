"""Acceptance examples from the seed documents (PyTorch 2 talk, compiled autograd tutorial)."""
import operator

import pytest
import torch

import ember


def _table(gm: torch.fx.GraphModule) -> list[tuple]:
    """(opcode, name, target, args) rows, as torch.fx's print_tabular shows them."""
    rows = []
    for node in gm.graph.nodes:
        args = tuple(a.name if isinstance(a, torch.fx.Node) else a for a in node.args)
        if node.op == "output":
            args = (tuple(x.name for x in node.args[0]),)
        rows.append((node.op, node.name, node.target if node.op != "output" else "output", args))
    return rows


def test_toy_example_three_graphs_from_the_talk():
    ember.reset()
    graphs = []

    def my_compiler(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    @ember.compile(backend=my_compiler)
    def toy_example(a, b):
        x = a / (torch.abs(a) + 1)
        if b.sum() < 0:
            b = b * -1
        return x * b

    torch.manual_seed(0)
    for _ in range(100):
        a, b = torch.randn(10), torch.randn(10)
        expected = a / (torch.abs(a) + 1) * (b * -1 if b.sum() < 0 else b)
        torch.testing.assert_close(toy_example(a, b), expected, rtol=0, atol=0)

    assert len(graphs) == 3
    # (inputs named as torch.compile names them: target L_a_ for the local a, node l_a_)
    first = _table(graphs[0])
    assert first == [
        ("placeholder", "l_a_", "L_a_", ()),
        ("placeholder", "l_b_", "L_b_", ()),
        ("call_function", "abs_1", torch.abs, ("l_a_",)),
        ("call_function", "add", operator.add, ("abs_1", 1)),
        ("call_function", "truediv", operator.truediv, ("l_a_", "add")),
        ("call_method", "sum_1", "sum", ("l_b_",)),
        ("call_function", "lt", operator.lt, ("sum_1", 0)),
        ("output", "output", "output", (("truediv", "lt"),)),
    ]
    negative_branch = [
        ("placeholder", "l_b_", "L_b_", ()),
        ("placeholder", "l_x_", "L_x_", ()),
        ("call_function", "mul", operator.mul, ("l_b_", -1)),
        ("call_function", "mul_1", operator.mul, ("l_x_", "mul")),
        ("output", "output", "output", (("mul_1",),)),
    ]
    positive_branch = [
        ("placeholder", "l_b_", "L_b_", ()),
        ("placeholder", "l_x_", "L_x_", ()),
        ("call_function", "mul", operator.mul, ("l_x_", "l_b_")),
        ("output", "output", "output", (("mul",),)),
    ]
    rest = [_table(graphs[1]), _table(graphs[2])]
    assert negative_branch in rest and positive_branch in rest


def test_graph_break_example_of_compiled_autograd_tutorial_gives_three_graphs():
    ember.reset()
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    @ember.compile(backend=counting)
    def fn(x):
        temp = x + 10
        ember.graph_break()
        temp = temp + 10
        ember.graph_break()
        return temp.sum()

    x = torch.randn(10, 10, requires_grad=True)
    loss = fn(x)
    loss.backward()
    assert len(graphs) == 3
    torch.testing.assert_close(loss, (x + 20).sum())
    torch.testing.assert_close(x.grad, torch.ones(10, 10))
    assert ember.counters["stats"]["unique_graphs"] == 3


def test_explain_reports_graphs_breaks_and_guards():
    ember.reset()

    def toy(a, b):
        x = a / (torch.abs(a) + 1)
        if b.sum() < 0:
            b = b * -1
        return x * b

    report = ember.explain(toy)(torch.randn(10), -torch.ones(10))
    assert report.graph_count == 2
    assert report.graph_break_count == 1
    reason = report.break_reasons[0]
    assert "data-dependent" in reason.reason
    assert reason.filename == __file__ and reason.lineno is not None
    assert any("a: Tensor float32[10]" in guard for guard in report.guards)
    assert "Graph count: 2" in str(report)


def test_fullgraph_turns_a_break_into_an_error_naming_file_and_line():
    ember.reset()

    @ember.compile(backend="eager", fullgraph=True)
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(ember.CaptureError, match=r"test_seeds\.py:\d+.*data-dependent"):
        f(torch.randn(3))
