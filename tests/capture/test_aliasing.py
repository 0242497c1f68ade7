"""Input aliasing: a graph captured with two inputs apart (or as one object) is not reused when
they become one object (or two).  Each call's result is compared with eager on its own copies."""
import copy

import pytest
import torch
from torch import nn

import ember

BACKENDS = ("eager", "aot_eager")


def _calls_match_eager(fn, calls, backend):
    """Run `fn` compiled and eager over the same sequence of calls; `calls` are argument tuples
    whose objects may repeat (aliasing), copied with one memo per call so aliasing is kept."""
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    with ember.config.patch(raise_capture_errors=True):
        for args in calls:
            eager_args = copy.deepcopy(args)
            compiled_args = copy.deepcopy(args)
            expected = fn(*eager_args)
            got = compiled(*compiled_args)
            if isinstance(expected, torch.Tensor):
                torch.testing.assert_close(got, expected)
            else:
                assert got == expected
            for eager_arg, compiled_arg in zip(eager_args, compiled_args):
                if isinstance(eager_arg, torch.Tensor):
                    torch.testing.assert_close(compiled_arg, eager_arg)
                elif isinstance(eager_arg, list):
                    assert compiled_arg == eager_arg


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", ["distinct_first", "same_first"])
def test_identity_of_two_tensor_inputs(backend, order):
    a, b = torch.zeros(3), torch.zeros(3)
    calls = [(a, b), (a, a)] if order == "distinct_first" else [(a, a), (a, b)]
    _calls_match_eager(lambda x, y: x is y, calls, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", ["distinct_first", "same_first"])
def test_write_through_one_input_read_through_another(backend, order):
    def f(x, y):
        x.add_(1)
        return y * 2

    a, b = torch.zeros(3), torch.zeros(3)
    calls = [(a, b), (a, a), (a, b)] if order == "distinct_first" else [(a, a), (a, b), (a, a)]
    _calls_match_eager(f, calls, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_aliasing_among_three_look_alike_inputs(backend):
    def f(x, y, z):
        y.mul_(2)
        return x + z

    a, b, c = torch.ones(3), torch.ones(3), torch.ones(3)
    _calls_match_eager(f, [(a, b, c), (a, b, a), (a, b, b)], backend)


def test_inputs_of_different_metadata_need_no_identity_check():
    f = ember.compile(lambda x, y, z: x + y.sum() + z.sum(), backend="eager")
    ember.reset()
    f(torch.randn(3), torch.randn(4), torch.randn(4, dtype=torch.float64))
    guards = f._ember_runner.cache_entries[0].guard_source
    assert "distinct objects" not in guards  # no two inputs could be one tensor
    f(torch.randn(3), torch.randn(4), torch.randn(4))
    guards = f._ember_runner.cache_entries[1].guard_source
    assert "y, z are distinct objects" in guards


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_lists_reached_twice(backend):
    def f(x, first, second):
        first.append(1)
        return x * len(second)

    x = torch.ones(2)
    shared, other = [0], [0]
    _calls_match_eager(f, [(x, shared, shared), (x, shared, other), (x, shared, shared)], backend)


class _TiedModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4, bias=False)
        self.decoder = nn.Linear(4, 4, bias=False)

    def forward(self, x):
        self.encoder.weight.add_(1)  # a write through one weight, read through the other
        if self.decoder.weight is self.encoder.weight:  # code that asks whether they are tied
            return self.decoder(x) + 1
        return self.decoder(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tied_and_untied_weights(backend):
    """Parameters are distinct objects at capture; tying them after compiling (or untying tied
    ones) must not reuse the graph made for the other layout."""
    torch.manual_seed(0)
    x = torch.randn(2, 4)

    def run(model, compiled):
        with torch.no_grad():
            return compiled(x)

    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        for tie_first in (False, True):
            torch.manual_seed(0)
            model = _TiedModel()
            reference = copy.deepcopy(model)
            compiled = ember.compile(model, backend=backend)
            for tie in (tie_first, not tie_first, tie_first):
                for m in (model, reference):
                    m.decoder.weight = m.encoder.weight if tie else nn.Parameter(m.encoder.weight.detach().clone())
                expected = run(reference, reference)
                torch.testing.assert_close(run(model, compiled), expected)


def test_recompile_log_names_the_aliased_inputs(caplog):
    ember.reset()
    ember.logs.enable("recompiles")
    a, b = torch.randn(3), torch.randn(3)
    with caplog.at_level("DEBUG", logger="ember.recompiles"):
        f = ember.compile(lambda x, y: x * y, backend="eager")
        f(a, b)
        f(a, a)
        g = ember.compile(lambda x, y: x - y, backend="eager")
        g(a, a)
        g(a, b)
    messages = "\n".join(record.getMessage() for record in caplog.records if record.name == "ember.recompiles")
    assert "y expected to be another object than x (as at compile time), got the same" in messages
    assert "y expected to be the same object as x (as at compile time), got another" in messages


class _Holder:
    def __init__(self, first, second):
        self.first = first
        self.second = second


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensors_inside_containers_and_objects(backend):
    def f(tensors, holder):
        if tensors[0] is tensors[1]:
            return tensors[0] * 2 + holder.first
        return tensors[1] + (holder.second if holder.first is holder.second else 0)

    a, b, c, d = torch.ones(3), torch.ones(3) * 2, torch.ones(3) * 3, torch.ones(3) * 4
    ember.reset()
    compiled = ember.compile(f, backend=backend)
    with ember.config.patch(raise_capture_errors=True):
        for tensors, holder in [([a, b], _Holder(c, d)), ([a, a], _Holder(c, d)), ([a, b], _Holder(c, c)),
                                ([a, b], _Holder(c, d)), ([b, b], _Holder(d, d))]:
            torch.testing.assert_close(compiled(tensors, holder), f(tensors, holder))
