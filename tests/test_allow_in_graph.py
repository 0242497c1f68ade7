"""ember.allow_in_graph / disallow_in_graph / is_compiling, and torch.compiler's registrations."""
import pytest
import torch

import ember


def recording(graphs, inner="eager"):
    backend, _ = ember.backends.lookup_backend(inner)

    def record(gm, example_inputs):
        graphs.append(gm)
        return backend(gm, example_inputs)

    return record


calls_at_capture = []


def fused_gelu(x, alpha=1.702):
    calls_at_capture.append(type(x).__name__)
    return x * torch.sigmoid(alpha * x)


ember.allow_in_graph(fused_gelu)


def targets(gm):
    return [node.target for node in gm.graph.nodes if node.op == "call_function"]


def op_names(graphs):
    return [[getattr(node.target, "__name__", node.target) for node in gm.graph.nodes
             if node.op in ("call_function", "call_method")] for gm in graphs]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "ember"])
def test_allowed_function_is_one_opaque_node_and_gives_eager_results(backend):
    ember.reset()
    graphs = []

    def f(x):
        return fused_gelu(x + 1, alpha=2.0).sum(dim=0)

    compiled = ember.compile(f, backend=recording(graphs, backend))
    x = torch.randn(4, 3, requires_grad=True)
    calls_at_capture.clear()
    out = compiled(x)
    assert len(graphs) == 1
    assert fused_gelu in targets(graphs[0])  # the call itself, not its body's ops
    assert torch.sigmoid not in targets(graphs[0])
    assert "FakeTensor" in calls_at_capture  # run on fake tensors at capture time
    expected_x = x.detach().clone().requires_grad_(True)
    expected = f(expected_x)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(x.grad, expected_x.grad)


def test_allow_in_graph_returns_the_function_and_rejects_non_callables():
    def g(x):
        return x

    assert ember.allow_in_graph(g) is g
    assert ember.allow_in_graph([g]) == [g]
    with pytest.raises(TypeError, match="allow_in_graph expects a function"):
        ember.allow_in_graph(3)


def test_disallow_in_graph_breaks_the_graph_at_each_call():
    graphs = []

    def helper(x):
        return x * 2

    ember.disallow_in_graph(helper)

    @ember.compile(backend=recording(graphs))
    def f(x):
        return helper(x.sin()).cos()

    x = torch.randn(3)
    torch.testing.assert_close(f(x), (x.sin() * 2).cos())
    # a break before and after the call; helper's own frame is compiled on its own, as in torch
    assert op_names(graphs) == [["sin"], ["mul"], ["cos"]]


def test_disallow_in_graph_on_a_torch_function_breaks_there():
    graphs = []
    ember.disallow_in_graph(torch.sub)
    try:
        @ember.compile(backend=recording(graphs))
        def f(x):
            return torch.sub(x.sin(), 1).cos()

        x = torch.randn(3)
        torch.testing.assert_close(f(x), (x.sin() - 1).cos())
        assert op_names(graphs) == [["sin"], ["cos"]]
    finally:
        ember.in_graph._disallowed.pop(id(torch.sub))


def test_torch_compiler_allow_in_graph_is_honoured():
    import torch._dynamo  # noqa: F401  (a program using torch.compiler's registration has imported it)

    def body(x):
        return x.relu() * 3

    torch.compiler.allow_in_graph(body)
    graphs = []

    @ember.compile(backend=recording(graphs, "aot_eager"))
    def f(x):
        return body(x) + 1

    x = torch.randn(5)
    torch.testing.assert_close(f(x), x.relu() * 3 + 1)
    assert body in targets(graphs[0])


def test_torch_dynamo_disallow_in_graph_is_honoured():
    import torch._dynamo
    from torch._dynamo import trace_rules

    torch._dynamo.disallow_in_graph(torch.mul)  # (torch accepts only callables it puts in graphs)
    try:
        graphs = []

        @ember.compile(backend=recording(graphs))
        def f(x):
            return torch.mul(x.sin(), 5).cos()

        x = torch.randn(3)
        torch.testing.assert_close(f(x), (x.sin() * 5).cos())
        assert op_names(graphs) == [["sin"], ["cos"]]
    finally:
        trace_rules._disallowed_callable_ids.remove(id(torch.mul))


def test_is_compiling_is_true_in_captured_code_and_false_eagerly():
    assert ember.is_compiling() is False

    @ember.compile(backend="eager")
    def f(x):
        return x + 1 if ember.is_compiling() else x - 1

    x = torch.zeros(2)
    torch.testing.assert_close(f(x), x + 1)
    with ember.set_stance("force_eager"):
        torch.testing.assert_close(f(x), x - 1)


def test_torch_own_registrations_for_dynamo_do_not_change_how_torch_callables_are_captured():
    import torch._dynamo  # noqa: F401
    import torch.nn.attention.bias  # noqa: F401  (registers SDPAParams and can_use_* with Dynamo)
    from ember.in_graph import verdict

    assert verdict(torch.backends.cuda.SDPAParams) is None
    assert verdict(torch.backends.cuda.can_use_efficient_attention) is None
