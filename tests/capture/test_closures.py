"""A graph break in a function that defines closures over its locals: it breaks and resumes
like any other break (the resume function shares the frame's cells with those closures)."""
import torch

import ember
from capture_helpers import assert_matches_eager


def _closure_then_print(x):
    k = 2
    def scale(v):
        return v * k
    y = scale(x)
    print("graph break")
    return scale(y) + k


def _closure_then_data_dependent_branch(x):
    offset = x.mean()
    def shift(v):
        return v - offset
    y = shift(x)
    if y.sum().item() > 0:
        return shift(y) * 2
    return shift(y) / 2


def _nonlocal_writes_across_the_break(x):
    count = 0
    def bump(v):
        nonlocal count
        count += 1
        return v + count
    y = bump(x)
    print("graph break")
    count += 10
    y = bump(y)
    return y, count


def _recursive_and_late_closures(x, n):
    def power(v, times):
        return v if times == 0 else power(v, times - 1) * v
    y = power(x, 2)
    print("graph break")
    late = y + 1
    def use_late(v):
        return v * late
    return use_late(power(y, n))


def _make_compiled_closure(scale):
    def outer(x):
        shift = x.sum()
        def inner(v):
            return v * scale + shift
        y = inner(x)
        print("graph break")
        return inner(y)
    return outer


def test_closure_over_a_local_then_a_print():
    explanation = assert_matches_eager(_closure_then_print, torch.randn(3), graphs=2, breaks=1)
    assert [ops for ops in explanation.ops_per_graph] == [["mul"], ["mul", "add"]]


def test_closure_then_data_dependent_branch():
    for sign in (1.0, -1.0):
        x = torch.rand(4) * sign + sign
        assert_matches_eager(_closure_then_data_dependent_branch, x, graphs=2, breaks=1)


def test_closure_writes_are_shared_with_the_resumed_frame():
    assert_matches_eager(_nonlocal_writes_across_the_break, torch.randn(3), graphs=2, breaks=1)


def test_recursive_and_later_closures():
    assert_matches_eager(_recursive_and_late_closures, torch.randn(3), 2, graphs=2, breaks=1)


def test_compiled_function_that_is_itself_a_closure():
    outer = _make_compiled_closure(3.0)
    assert_matches_eager(outer, torch.randn(3), graphs=2, breaks=1)


def test_new_closures_on_each_call_do_not_recompile():
    ember.reset()
    compiled = ember.compile(_closure_then_print, backend="eager")
    for _ in range(4):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), _closure_then_print(x))
    assert ember.counters["stats"]["recompiles"] == 0
    assert ember.counters["stats"]["unique_graphs"] == 2
