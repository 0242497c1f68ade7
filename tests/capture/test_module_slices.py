"""Slices of nn.ModuleList and nn.Sequential are captured, and a Llama-style decoder that runs
`for layer in self.layers[:self.n]` is one graph with no breaks."""
import pytest
import torch
from torch import nn

import ember
from capture_helpers import BACKENDS, assert_matches_eager
from llama_model import Llama


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(5)])
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh())
        self.n = 3

    def forward(self, x):
        outs = []
        for layer in self.layers[:self.n]:
            x = layer(x)
        for layer in self.layers[1:]:
            outs.append(layer(x))
        for layer in self.layers[::-2]:
            outs.append(layer(x))
        for layer in self.layers[-2:0:-1]:
            outs.append(layer(x))
        tail = self.seq[2:]
        head = self.seq[:2]
        return (x, tail(head(x)), self.seq[1:](x), outs, len(self.layers[1:4]), self.layers[1:][0](x),
                isinstance(tail, nn.Sequential), isinstance(self.layers[:2], nn.ModuleList))


def test_slices_of_module_containers_are_captured():
    torch.manual_seed(0)
    assert_matches_eager(Stack(), torch.randn(2, 4), graphs=1)


def test_a_module_added_later_recompiles():
    torch.manual_seed(0)
    model = Stack()
    model.n = 10
    ember.reset()
    compiled = ember.compile(model, backend="eager")
    x = torch.randn(2, 4)
    with ember.config.patch(raise_capture_errors=True):
        torch.testing.assert_close(compiled(x)[0], model(x)[0])
        model.layers.append(nn.Linear(4, 4))
        torch.testing.assert_close(compiled(x)[0], model(x)[0])


def _slice_across_a_break(model, x):
    layers = model.layers[1:3]
    print("a graph break with a live slice")
    for layer in layers:
        x = layer(x)
    return x


def test_slice_kept_across_a_graph_break():
    torch.manual_seed(0)
    assert_matches_eager(_slice_across_a_break, Stack(), torch.randn(2, 4), graphs=1, breaks=1)
    ember.reset()
    model, compiled = Stack(), ember.compile(_slice_across_a_break, backend="eager")
    for _ in range(3):
        compiled(model, torch.randn(2, 4))
    assert ember.counters["stats"]["recompiles"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_llama_decoder_is_one_graph(backend):
    torch.manual_seed(0)
    model = Llama()
    ids = torch.randint(0, 50, (2, 7))
    explanation = assert_matches_eager(model, ids, graphs=1, breaks=0, backends=(backend,))
    assert sum(op == "linear" for op in explanation.ops_per_graph[0]) == 7 * model.n + 1
    # training: the same graph, gradients equal to eager's
    ember.reset()
    compiled = ember.compile(model, backend=backend)
    with ember.config.patch(raise_capture_errors=True):
        compiled(ids).sum().backward()
    compiled_grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad()
    model(ids).sum().backward()
    eager_grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert len(compiled_grads) == len(eager_grads) > 0
    for got, expected in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(got, expected)
