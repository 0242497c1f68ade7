"""A user nn.Module with no constructor of its own, made inside the compiled code and called
there: inlined into the graph.  A module that leaves the frame is a fresh one each call; one
whose attributes the frame writes breaks the graph and keeps eager's result."""
import functools

import torch

import ember
from capture_helpers import assert_matches_eager


class Concat(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(torch.cat((x, y), dim=1))


class Counting(torch.nn.Module):
    def forward(self, x):
        self.calls = getattr(self, "calls", 0) + 1
        return x * self.calls


class WithInit(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 3.0

    def forward(self, x):
        return x * self.scale


def _call_module(mod, x, y):
    return mod(x, y)


def test_module_made_and_called_in_the_frame():
    def f(x, y):
        by_keyword = functools.partial(_call_module, mod=Concat())
        return by_keyword(x=x, y=y), functools.partial(_call_module, mod=Concat().forward)(x=x, y=y), \
            Concat().training

    assert_matches_eager(f, torch.randn(2, 3), torch.randn(2, 3), graphs=1)


def test_module_returned_is_a_new_module_each_call():
    def f(x):
        return Concat(), x + 1

    ember.reset()
    compiled = ember.compile(f, backend="eager")
    first, second = compiled(torch.randn(2))[0], compiled(torch.randn(2))[0]
    assert type(first) is Concat and type(second) is Concat and first is not second


def test_module_writing_its_attributes_keeps_eager_results():
    def f(x):
        m = Counting()
        a = m(x)
        return a, m(x), m.calls

    assert_matches_eager(f, torch.randn(3), breaks=None)


def test_module_with_its_own_init_keeps_eager_results():
    def f(x):
        return WithInit()(x)

    assert_matches_eager(f, torch.randn(3), breaks=None)
