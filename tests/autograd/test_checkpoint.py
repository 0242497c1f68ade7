"""torch.utils.checkpoint under ember: captured without a graph break, gradients equal to eager's,
and the checkpointed region's activations recomputed in the backward rather than saved."""
import copy
import functools

import pytest
import torch
import torch.utils.checkpoint as checkpoint

import ember
import ember.autograd.api as aot_api


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(16, 64)
        self.down = torch.nn.Linear(64, 16)

    def forward(self, x, scale=1.0):
        return self.down(torch.nn.functional.gelu(self.up(x))) * scale + x


class Stack(torch.nn.Module):
    def __init__(self, wrap) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(2)])
        self.wrap = wrap

    def forward(self, x):
        for block in self.blocks:
            x = self.wrap(block, x)
        return x.pow(2).sum()


WRAPS = {
    "non_reentrant": lambda block, x: checkpoint.checkpoint(block, x, use_reentrant=False),
    "reentrant": lambda block, x: checkpoint.checkpoint(block, x, use_reentrant=True),
    "partial_as_transformers": functools.partial(checkpoint.checkpoint, use_reentrant=False),
    "keyword_arguments": lambda block, x: checkpoint.checkpoint(block, x, use_reentrant=False, scale=0.5),
}


@pytest.fixture
def partitions(monkeypatch):
    seen = []
    original = aot_api.partition_min_cut

    def record(joint, spec):
        seen.append(original(joint, spec))
        return seen[-1]

    monkeypatch.setattr(aot_api, "partition_min_cut", record)
    return seen


def _grads(model, x, compiled: bool):
    model = copy.deepcopy(model)
    x = x.detach().clone().requires_grad_()
    if compiled:
        ember.reset()
        with ember.config.patch(raise_capture_errors=True):
            loss = ember.compile(model, backend="ember", fullgraph=True)(x)
    else:
        loss = model(x)
    loss.backward()
    return loss.detach(), [x.grad, *(p.grad for p in model.parameters())]


@pytest.mark.parametrize("wrap", sorted(WRAPS))
def test_checkpointed_blocks_give_eagers_gradients_in_one_graph(wrap, partitions):
    torch.manual_seed(0)
    model, x = Stack(WRAPS[wrap]), torch.randn(8, 16)
    expected_loss, expected = _grads(model, x, compiled=False)
    loss, got = _grads(model, x, compiled=True)
    torch.testing.assert_close(loss, expected_loss)
    for left, right in zip(got, expected):
        torch.testing.assert_close(left, right, rtol=1e-4, atol=1e-5)
    assert len(partitions) == 1  # one graph, forward and backward


def test_checkpointed_activations_are_recomputed_in_the_backward(partitions):
    torch.manual_seed(0)
    x = torch.randn(8, 16)
    _grads(Stack(lambda block, x: block(x)), x, compiled=True)
    _grads(Stack(WRAPS["non_reentrant"]), x, compiled=True)
    plain, checkpointed = partitions

    def matmuls(graph):
        return sum(node.target is torch.ops.aten.mm.default for node in graph.graph.nodes)

    # Without checkpoint the up-projections' outputs are saved for gelu's backward; with it
    # only primals (inputs, weights) cross, and the forward's matmuls run again in the backward.
    assert any(not name.startswith("primals") for name in plain.saved)
    assert all(name.startswith("primals") for name in checkpointed.saved), checkpointed.saved
    assert checkpointed.saved_bytes < plain.saved_bytes
    assert matmuls(checkpointed.backward) > matmuls(plain.backward)


def test_reentrant_checkpoint_whose_inputs_need_no_gradient_gives_parameters_none():
    torch.manual_seed(0)
    model = Stack(WRAPS["reentrant"])
    x = torch.randn(8, 16)  # no input requires grad: eager's reentrant checkpoint cuts the graph
    with pytest.warns(UserWarning):
        expected = model(x)
    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        got = ember.compile(copy.deepcopy(model), backend="ember")(x)
    assert expected.requires_grad == got.requires_grad
    torch.testing.assert_close(got, expected)


def test_dropout_inside_a_checkpoint_keeps_its_mask_for_the_backward(partitions):
    class Dropped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(16, 32)

        def forward(self, x):
            def region(x):
                return torch.nn.functional.dropout(self.linear(x), 0.5, training=True)
            y = checkpoint.checkpoint(region, x, use_reentrant=False)
            return y.sin().sum(), y.detach()

    torch.manual_seed(0)
    model = Dropped()
    x = torch.randn(64, 16, requires_grad=True)
    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        loss, y = ember.compile(model, backend="ember", fullgraph=True)(x)
    loss.backward()
    # d loss / d bias = sum over rows of cos(y) * (2 where kept, 0 where dropped): only the
    # forward's own mask gives it (a mask drawn again in the backward would not).
    kept = (y != 0).to(y.dtype)
    torch.testing.assert_close(model.linear.bias.grad, (y.cos() * kept * 2).sum(0))
    assert 0.3 < kept.mean() < 0.7


def test_transformers_gradient_checkpointing_is_one_graph_with_eagers_gradients():
    """transformers' gradient_checkpointing_enable: a checkpoint per layer through a partial, and a
    forward hook calling requires_grad_() on the embedding's output (a no-op: it requires grad)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=16,
                                     bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(config).train()
    model.config.use_cache = False
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.enable_input_require_grads()
    twin = copy.deepcopy(model)
    ids = torch.randint(0, 100, (2, 16))
    expected = model(input_ids=ids, labels=ids).loss
    expected.backward()
    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        explanation = ember.explain(twin)(input_ids=ids, labels=ids)
        assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons
        ember.reset()
        loss = ember.compile(twin, backend="aot_eager", fullgraph=True)(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.testing.assert_close(loss, expected)
    for ours, theirs in zip(twin.parameters(), model.parameters()):
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-5)
