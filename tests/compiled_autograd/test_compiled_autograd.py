"""Compiled autograd (issue 11): the whole backward captured at run time as one graph, seed 002's
examples, hooks, accumulation, recompile reasons and fallbacks, against eager's gradients."""
import logging

import pytest
import torch

import ember
from ember.autograd.api import aot_backend

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # (on the GPU machine: Triton kernels)


@pytest.fixture(autouse=True)
def _fresh():
    ember.reset()
    yield
    ember.reset()


def _counting_backend(counts: dict):
    """aot_eager with the backward graphs it compiles counted."""
    def backward(gm, example_inputs):
        counts["backward"] = counts.get("backward", 0) + 1
        return gm.forward

    return aot_backend(lambda gm, example_inputs: gm.forward, backward)


def _counting_compiler(counts: dict, backend="aot_eager"):
    def compiler(gm):
        counts["captured"] = counts.get("captured", 0) + 1
        counts["graph"] = gm
        return ember.compile(gm, backend=backend)

    return compiler


def test_seed_graph_breaks_give_three_backward_graphs_and_one_with_compiled_autograd():
    counts = {}

    def fn(x):
        temp = x + 10
        ember.graph_break()
        temp = temp + 10
        ember.graph_break()
        return temp.sum()

    f = ember.compile(fn, backend=_counting_backend(counts))
    x = torch.randn(10, 10, requires_grad=True)
    loss = f(x)
    loss.backward(retain_graph=True)
    assert counts["backward"] == 3
    expected, x.grad = x.grad.clone(), None
    with ember.compiled_autograd.enable(_counting_compiler(counts)) as engine:
        loss.backward()
    assert counts["backward"] == 3  # (no region's own backward ran)
    assert counts["captured"] == 1 and engine.stats.captures == 1
    names = [node.name for node in counts["graph"].graph.nodes if node.op == "call_function"]
    assert any(name.startswith("aot") for name in names), names
    torch.testing.assert_close(x.grad, expected)


def test_seed_hook_is_in_the_captured_graph_and_in_grad():
    counts = {}
    f = ember.compile(lambda x: x.sum(), backend="aot_eager")
    x = torch.randn(10, 10, requires_grad=True)
    x.register_hook(lambda grad: grad + 10)
    loss = f(x)
    with ember.compiled_autograd.enable(_counting_compiler(counts)):
        loss.backward()
    assert any(node.op == "call_function" and "hook" in node.name for node in counts["graph"].graph.nodes)
    torch.testing.assert_close(x.grad, torch.full((10, 10), 11.0))


def test_seed_recompiles_for_new_nodes_and_changed_shapes_and_no_more(caplog):
    ember.logs.enable("compiled_autograd")
    caplog.set_level(logging.DEBUG, logger="ember.compiled_autograd")
    with ember.config.patch(compiled_autograd=True):
        x = torch.randn(10, requires_grad=True)
        for op in [torch.add, torch.sub, torch.mul, torch.div]:
            loss = op(x, x).sum()
            ember.compile(lambda: loss.backward(), backend="eager")()
        misses = [r.getMessage() for r in caplog.records if "Cache miss" in r.getMessage()]
        assert len(misses) == 4, misses  # as in the tutorial: one per op
        for name in ("SubBackward0", "MulBackward0", "DivBackward0"):
            assert any(f"new autograd node: {name}" in m for m in misses), misses
        reference = torch.ones(10) * 2 + 2 * x.detach()  # add: 2, sub: 0, mul: 2x, div: 0
        torch.testing.assert_close(x.grad, reference)
        caplog.clear()
        for size in [10, 100, 10]:
            x = torch.randn(size, size, requires_grad=True)
            loss = x.sum()
            ember.compile(lambda: loss.backward(), backend="eager")()
            torch.testing.assert_close(x.grad, torch.ones(size, size))
        misses = [r.getMessage() for r in caplog.records if "Cache miss" in r.getMessage()]
        assert len(misses) == 2 and "changed shapes" in misses[1], misses  # (10 again: a cache hit)
        # as torch marks them: the sizes that changed are symbols in the graph of the second miss
        assert "_saved_self_sym_sizes[0] of SumBackward0 (node 0)" in misses[1], misses
        assert "leaf.shape[0] of AccumulateGrad (node 1)" in misses[1] and "as dynamic" in misses[1], misses


def test_sizes_that_changed_are_symbols_and_new_sizes_compile_nothing():
    counts = {}
    with ember.compiled_autograd.enable(_counting_compiler(counts, backend="ember")) as engine:
        for size in [10, 100, 10, 50, 70, 50]:
            x = torch.randn(size, size, device=DEVICE, requires_grad=True)
            (x * 3).sum().backward()
            torch.testing.assert_close(x.grad, torch.full((size, size), 3.0, device=DEVICE))
    assert counts["captured"] == 2 and engine.stats.captures == 2  # 10, then 100 (made symbolic)
    assert engine.stats.dynamic_hits == 2  # 50 and 70: traced, checked, not compiled; 10 and 50 again: hits
    graph = counts["graph"]
    sizes = [node for node in graph.graph.nodes if node.op == "call_method" and node.target == "size"]
    assert len(sizes) == 1 and sizes[0].args[0].name == "sizes_0", graph.code  # one symbol: every size of x
    expand = next(node for node in graph.graph.nodes if "expand" in node.name)
    assert expand.args[1] == [sizes[0], sizes[0]], graph.code


def test_an_mlp_at_changing_batch_sizes_has_one_graph_over_symbolic_sizes():
    torch.manual_seed(0)
    model, reference = _mlp().to(DEVICE), _mlp().to(DEVICE)
    compiled = ember.compile(model, backend="ember")
    with ember.compiled_autograd.enable(ember.compile(backend="ember")) as engine:
        captured = []
        for batch in [8, 16, 24, 40, 16]:
            x = torch.randn(batch, 8, device=DEVICE)
            compiled(x).pow(2).mean().backward()
            captured.append(engine.stats.captures)
            for p in reference.parameters():
                p.grad = None
            reference(x).pow(2).mean().backward()  # (autograd's nodes, captured too)
            for p, q in zip(model.parameters(), reference.parameters()):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
                p.grad = None
    # ember's region is compiled again at 16 (its own automatic dynamic shapes: a symbolic forward
    # whose backward graph differs from the static one's), so its symbolic graph comes at 24; from
    # then on neither model's backward is captured again
    assert captured[2] == captured[4], "\n".join(engine.stats.reasons)
    assert any("as dynamic" in reason for reason in engine.stats.reasons)


class _SizeBranch(torch.autograd.Function):
    """A backward whose formula depends on a size beyond the two first traces'."""

    @staticmethod
    def forward(ctx, x):
        ctx.rows = x.shape[0]
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * (2.0 if ctx.rows < 50 else 3.0)


def test_a_size_the_symbolic_graph_does_not_cover_is_captured_on_its_own():
    with ember.compiled_autograd.enable(None) as engine:
        for rows, factor in [(10, 2.0), (20, 2.0), (30, 2.0), (60, 3.0), (30, 2.0)]:
            x = torch.randn(rows, 4, requires_grad=True)
            _SizeBranch.apply(x).sum().backward()
            torch.testing.assert_close(x.grad, torch.full((rows, 4), factor))
    # 10, 20 (symbolic), 60 (its trace multiplies by 3: on its own); 30: the symbolic graph
    assert engine.stats.captures == 3 and engine.stats.dynamic_hits == 1, engine.stats


def test_sizes_0_and_1_stay_constants():
    with ember.compiled_autograd.enable(None) as engine:
        for size in [1, 5, 7]:
            x = torch.randn(size, requires_grad=True)
            (x * 2).sum().backward()
            torch.testing.assert_close(x.grad, torch.full((size,), 2.0))
    # 1, then 5 (1 stays a constant: no symbolic graph), then 7 with 5 (symbolic)
    assert engine.stats.captures == 3 and engine.stats.dynamic_hits == 0, engine.stats


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4))


def _hooked(model, calls):
    model[0].weight.register_hook(lambda g: g * 2)  # a leaf's tensor hook
    model[3].bias.register_post_accumulate_grad_hook(lambda p: calls.append(float(p.grad.sum())))
    return model


@pytest.mark.parametrize("backend", ["aot_eager", "ember"])
def test_mlp_with_hooks_accumulates_over_two_backwards_as_eager(backend):
    eager_calls, our_calls = [], []
    reference, ours = _hooked(_mlp().to(DEVICE), eager_calls), _hooked(_mlp().to(DEVICE), our_calls)
    compiled = ember.compile(ours, backend=backend)
    x = torch.randn(5, 8, device=DEVICE)
    engine = ember.compiled_autograd.CompiledAutograd(None)
    for _ in range(2):  # (no zero_grad: the second backward adds to .grad)
        reference(x).pow(2).sum().backward()
        out = compiled(x)
        hidden = out * 1  # a non-leaf tensor's hook, registered on the compiled output
        hidden.register_hook(lambda g: g * 3)
        with ember.compiled_autograd.enable(lambda gm: ember.compile(gm, backend=backend)) as engine:
            hidden.pow(2).sum().backward()
        assert engine.stats.captures == 1 and engine.stats.fallbacks == 0, engine.stats
    for (name, a), b in zip(reference.named_parameters(), ours.parameters()):
        torch.testing.assert_close(b.grad, a.grad * 3, rtol=1e-4, atol=1e-5, msg=name)
    assert len(our_calls) == 2 and our_calls == pytest.approx([c * 3 for c in eager_calls], rel=1e-4)


def test_a_user_autograd_function_is_traced_with_its_saved_tensors():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, grad):
            (a,) = ctx.saved_tensors
            return 2 * a * grad

    x = torch.randn(6, requires_grad=True)
    with ember.compiled_autograd.enable(None) as engine:
        for _ in range(2):
            Square.apply(x).sum().backward()
    assert engine.stats.fallbacks == 0 and engine.stats.hits == 0 and engine.stats.captures == 2
    torch.testing.assert_close(x.grad, 4 * x.detach())


def test_what_it_cannot_capture_runs_in_autograds_engine_with_a_reason(caplog):
    ember.logs.enable("compiled_autograd")
    caplog.set_level(logging.DEBUG, logger="ember.compiled_autograd")
    model, reference = _mlp(), _mlp()
    x = torch.randn(5, 8)
    reference[0](x).sum().backward()
    with ember.compiled_autograd.enable(None) as engine:
        y = model[0](x)
        y.retain_grad()
        y.sum().backward()
    assert engine.stats.fallbacks == 1 and y.grad is not None
    assert "retains its grad" in " ".join(r.getMessage() for r in caplog.records)
    torch.testing.assert_close(model[0].weight.grad, reference[0].weight.grad)


@pytest.mark.parametrize("compiler", ["none", "eager", "ember"])
def test_module_full_backward_hooks_and_pre_hooks_are_captured(compiler):
    def make(seen):
        model = _mlp()
        model[0].register_full_backward_hook(lambda module, grad_in, grad_out: seen.append(grad_out[0].shape))
        model[3].register_full_backward_hook(lambda module, grad_in, grad_out: (grad_in[0] * 2,))
        model[3].register_full_backward_pre_hook(lambda module, grad_out: (grad_out[0] * 3,))
        return model

    eager_seen, our_seen = [], []
    reference, ours = make(eager_seen), make(our_seen)
    x = torch.randn(5, 8, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    reference(x).pow(2).sum().backward()
    compiler_fn = None if compiler == "none" else (lambda gm: ember.compile(gm, backend=compiler))
    for _ in range(2):  # (the second call: a cache hit, with the new forward's BackwardHooks)
        for p in ours.parameters():
            p.grad = None
        x2.grad = None
        with ember.compiled_autograd.enable(compiler_fn) as engine:
            ours(x2).pow(2).sum().backward()
        assert engine.stats.fallbacks == 0, engine.stats
    assert engine.stats.hits == 1
    for (name, a), b in zip(reference.named_parameters(), ours.parameters()):
        torch.testing.assert_close(b.grad, a.grad, msg=name)
    torch.testing.assert_close(x2.grad, x.grad)
    assert our_seen == eager_seen * 2


def test_capture_leaves_the_users_tensors_as_they_were_when_it_falls_back():
    """Tracing runs each node's backward for real; a fallback midway leaves no .grad written."""
    class Opaque(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.extra = a.detach() * 0 + 1  # (a tensor on ctx: not captured)
            return a.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.extra

    x = torch.randn(4, requires_grad=True)
    x.grad = torch.ones(4)
    with ember.compiled_autograd.enable(None) as engine:
        (Opaque.apply(x * 2)).sum().backward()
    assert engine.stats.fallbacks == 1
    torch.testing.assert_close(x.grad, torch.full((4,), 3.0))


def test_config_switch_names_unknown_settings():
    with pytest.raises(AttributeError, match="no setting 'compiled_autgrad'"):
        ember.config.compiled_autgrad = True
    ember.config.compiled_autograd = True
    try:
        assert ember.config.get("compiled_autograd") is True
    finally:
        ember.config.compiled_autograd = False


def test_small_bert_with_hooks_under_the_ember_backend_matches_eager():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)

    def make(calls):
        torch.manual_seed(0)
        model = transformers.BertForMaskedLM(config)
        model.bert.embeddings.word_embeddings.weight.register_hook(lambda g: g * 0.5)
        model.cls.predictions.transform.dense.bias.register_post_accumulate_grad_hook(
            lambda p: calls.append(float(p.grad.norm())))
        model.bert.encoder.layer[1].output.register_full_backward_hook(lambda module, grad_in, grad_out: (
            grad_in[0] * 1.5, *grad_in[1:]))
        return model

    eager_calls, our_calls = [], []
    reference, ours = make(eager_calls).to(DEVICE), make(our_calls).to(DEVICE)
    compiled = ember.compile(ours, backend="ember")
    ids, labels = torch.randint(0, 100, (2, 16), device=DEVICE), torch.randint(0, 100, (2, 16), device=DEVICE)
    for _ in range(2):  # (the second adds to .grad)
        reference(input_ids=ids, labels=labels).loss.backward()
        loss = compiled(input_ids=ids, labels=labels).loss
        scaled = loss * 1
        scaled.register_hook(lambda g: g * 2)  # (a non-leaf hook: every gradient doubles)
        with ember.compiled_autograd.enable(lambda gm: ember.compile(gm, backend="ember")) as engine:
            scaled.backward()
        assert engine.stats.captures == 1 and engine.stats.fallbacks == 0, engine.stats
    for (name, a), b in zip(reference.named_parameters(), ours.parameters()):
        if a.grad is not None:
            torch.testing.assert_close(b.grad, a.grad * 2, rtol=1e-4, atol=1e-5, msg=name)
    assert our_calls == pytest.approx([2 * c for c in eager_calls], rel=1e-4)


def test_the_walk_orders_nodes_the_same_way_every_call():
    """AccumulateGrad nodes share one sequence number: ties go by the structure, not by where
    the node objects happen to live (which made bert-base recapture at random on the GPU)."""
    from ember.compiled_autograd.walk import nodes_in_order

    model = _mlp()
    orders = []
    for _ in range(5):
        loss = model(torch.randn(3, 8)).sum()
        parameters = {id(p): name for name, p in model.named_parameters()}
        orders.append([parameters.get(id(getattr(node, "variable", None)), type(node).__name__)
                       for node in nodes_in_order([loss.grad_fn])])
        garbage = [torch.randn(4) for _ in range(50)]  # (moves where the next nodes are allocated)
        del garbage
    assert all(order == orders[0] for order in orders), orders


def test_autograd_grad_is_captured_without_touching_grad():
    model = _mlp()
    x = torch.randn(5, 8, requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(1) or g * 2)
    expected = torch.autograd.grad(model(x).pow(2).sum(), [x, model[0].weight, model[3].bias])
    compiled = ember.compile(model, backend="aot_eager")
    with ember.compiled_autograd.enable(None) as engine:
        for _ in range(2):
            got = torch.autograd.grad(compiled(x).pow(2).sum(), [x, model[0].weight, model[3].bias])
            for a, b in zip(got, expected):
                torch.testing.assert_close(a, b)
        hidden = model[0](x)
        (partial,) = torch.autograd.grad(model[3](model[2](model[1](hidden))).sum(), hidden)
    assert engine.stats.captures == 2 and engine.stats.hits == 1 and engine.stats.fallbacks == 0, engine.stats
    torch.testing.assert_close(partial, torch.autograd.grad(model[3](model[2](model[1](hidden))).sum(), hidden)[0])
    assert all(p.grad is None for p in model.parameters()) and x.grad is None
    assert len(calls) == 3  # (x's hook: eager's call and the two captured ones)
    with ember.compiled_autograd.enable(None):  # (an input the outputs do not reach: autograd's own error)
        with pytest.raises(RuntimeError, match="appears to not have been used"):
            torch.autograd.grad(model(x).sum(), [x, torch.randn(2, requires_grad=True)])


def test_backward_with_inputs_accumulates_only_into_those_leaves():
    reference, ours = _mlp(), _mlp()
    x = torch.randn(5, 8)
    for model in (reference, ours):
        model[3].bias.grad = torch.ones(4)
    reference(x).pow(2).sum().backward(inputs=[reference[0].weight, reference[3].bias])
    with ember.compiled_autograd.enable(None) as engine:
        ours(x).pow(2).sum().backward(inputs=[ours[0].weight, ours[3].bias])
    assert engine.stats.fallbacks == 0 and engine.stats.captures == 1
    for (name, a), b in zip(reference.named_parameters(), ours.parameters()):
        if a.grad is None:
            assert b.grad is None, name
        else:
            torch.testing.assert_close(b.grad, a.grad, msg=name)


def test_autograd_grad_with_unused_inputs_and_roots_that_reach_no_input():
    """allow_unused: an unused input between used ones gets None, the others their own gradient;
    a root that reaches none of the inputs is left out of the walk."""
    a, b, c = (torch.randn(3, requires_grad=True) for _ in range(3))
    unused = torch.randn(3, requires_grad=True)
    outputs = lambda: ((a * b).sum(), (c * 2).sum())  # noqa: E731
    expected = torch.autograd.grad(outputs(), [a, unused, b], allow_unused=True)
    with ember.compiled_autograd.enable(None) as engine:
        for _ in range(2):  # (the second: a cache hit)
            got = torch.autograd.grad(outputs(), [a, unused, b], allow_unused=True)
            assert got[1] is None
            torch.testing.assert_close(got[0], expected[0])
            torch.testing.assert_close(got[2], expected[2])
        got = torch.autograd.grad(outputs(), [b, a], allow_unused=True)  # (other inputs: another key)
    torch.testing.assert_close(got[0], expected[2])
    assert engine.stats.fallbacks == 0 and engine.stats.captures == 2 and engine.stats.hits == 1, engine.stats


def test_two_leaves_given_one_gradient_tensor_get_grads_of_their_own():
    # AddBackward0 passes its gradient through to both inputs: the graph returns one tensor
    # twice, and eager's AccumulateGrad gives each leaf its own (a shared .grad would let an
    # in-place update of one change the other)
    a = torch.randn(4, device=DEVICE, requires_grad=True)
    b = torch.randn(4, device=DEVICE, requires_grad=True)
    with ember.compiled_autograd.enable(None):
        ((a + b) * 2).sum().backward()
    assert a.grad.untyped_storage().data_ptr() != b.grad.untyped_storage().data_ptr()
    a.grad.add_(1)
    torch.testing.assert_close(b.grad, torch.full((4,), 2.0, device=DEVICE))
    torch.testing.assert_close(a.grad, torch.full((4,), 3.0, device=DEVICE))


def test_a_gradient_that_views_its_whole_buffer_becomes_grad_without_a_copy():
    w = torch.randn(3, 4, device=DEVICE, requires_grad=True)
    x = torch.randn(12, device=DEVICE)

    returned = []

    def compiler(gm):  # (the graph ends in a view of a buffer of its own)
        def run(*args):
            returned.extend(gm(*args))
            return returned

        return run

    with ember.compiled_autograd.enable(compiler):
        (w.reshape(12) * x).sum().backward()
    torch.testing.assert_close(w.grad, x.reshape(3, 4))
    assert returned[0]._base is not None
    assert w.grad._base is None and w.grad.stride() == w.stride()
    assert w.grad.data_ptr() == returned[0].data_ptr()


def test_many_symbols_whose_product_overflows_int64():
    # (fuzz autograd 107: the symbols' values were the sizes of one tensor, whose element count
    # overflowed; each symbol has a tensor of its own now)
    with ember.compiled_autograd.enable(None) as engine:
        for base in (1000, 2000, 3000):
            leaves = [torch.randn(base + k, requires_grad=True) for k in range(8)]
            sum((leaf * 2).sum() for leaf in leaves).backward()
            for leaf in leaves:
                torch.testing.assert_close(leaf.grad, torch.full_like(leaf, 2.0))
    assert engine.stats.captures == 2 and engine.stats.dynamic_hits == 1, engine.stats


def test_a_hook_on_an_autograd_node_makes_autograd_run_the_backward():
    # (grad_fn.register_hook: which node holds it cannot be seen from Python, so no backward is
    # captured while it is alive; dropped silently, its changes to the gradients would be lost)
    x = torch.randn(4, requires_grad=True)
    loss = (x * 2).sum()
    handle = loss.grad_fn.next_functions[0][0].register_hook(
        lambda grad_inputs, grad_outputs: (grad_inputs[0] * 10, *grad_inputs[1:]))
    with ember.compiled_autograd.enable(None) as engine:
        loss.backward()
    assert engine.stats.fallbacks == 1 and engine.stats.captures == 0
    torch.testing.assert_close(x.grad, torch.full((4,), 20.0))
    handle.remove()
    x.grad = None
    with ember.compiled_autograd.enable(None) as engine:
        (x * 2).sum().backward()  # (removed: captured again)
    assert engine.stats.captures == 1
    torch.testing.assert_close(x.grad, torch.full((4,), 2.0))


def test_a_second_backward_through_freed_saved_tensors_raises_as_eager():
    x = torch.randn(4, requires_grad=True)
    with ember.compiled_autograd.enable(None):
        loss = (x * x).sum()  # (MulBackward0 saves x)
        loss.backward(retain_graph=True)
        loss.backward()  # (retained: runs)
        torch.testing.assert_close(x.grad, 4 * x.detach())
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            torch.autograd.grad(loss, x)
        plain = (x + 1).sum()  # (no saved tensors: eager runs it again too)
        plain.backward()
        plain.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        eager_loss = (x * x).sum()
        eager_loss.backward()
        eager_loss.backward()
