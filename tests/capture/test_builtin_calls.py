"""Builtins and operator-module functions called inside a compiled function, in one graph."""
import operator
from typing import NamedTuple

import torch

import ember
from capture_helpers import assert_matches_eager


def _identity_ops(x):
    return (operator.is_(-10, x), operator.is_not(-10, x), operator.is_(None, None),
            operator.truth(3), operator.truth([]), x + 1)


def test_operator_is_is_not_and_truth():
    assert_matches_eager(_identity_ops, torch.randn(3), graphs=1)


def _hasattr_of_dict(d):
    if hasattr(d, "to"):
        return d.to("cpu")
    if hasattr(d, "items") and not hasattr([], "shape") and hasattr((), "count"):
        return torch.cos(d["a"])
    return d


def test_hasattr_of_a_builtin_container_is_answered_by_its_type():
    assert_matches_eager(_hasattr_of_dict, {"a": torch.randn(3)}, graphs=1)


class _Pair(NamedTuple):
    first: torch.Tensor
    second: torch.Tensor

    def total(self):
        return self.first + self.second

    @staticmethod
    def one():
        return 1

    @classmethod
    def name(cls):
        return cls.__name__


def _named_tuple_methods(a, b):
    pair = _Pair(a, b)
    return pair.total(), pair.one(), pair.name()


def test_named_tuple_static_and_class_methods_through_an_instance():
    assert_matches_eager(_named_tuple_methods, torch.randn(3), torch.randn(3), graphs=1)


def _index_by_constant_tensor(a, b):
    items = [a, b, a + 1, b + 1]
    return items[torch.as_tensor(2)], (a, b)[torch.tensor([1])]


def test_a_list_indexed_by_a_tensor_made_from_a_constant():
    assert_matches_eager(_index_by_constant_tensor, torch.randn(3), torch.randn(3), graphs=1)


def _one_tensor_sets(x):
    y = x.add_(1)
    s = set({x})
    s.add(y)
    frozen = frozenset({x})
    again = frozenset(frozen)
    copied = set(frozenset({x, y * 2}))
    return len(s), len(again), again is frozen, len(copied), [t + 1 for t in s]


def test_sets_of_one_tensor_iterate_and_copies_keep_their_members():
    assert_matches_eager(_one_tensor_sets, torch.randn(4), graphs=1)


def _sum_of_generator(x):
    count = sum(size == -1 for size in x.size())
    largest = max(size for size in x.size())
    smallest = min((size for size in x.size()), default=0)
    return (x + 1 if count == 0 else x - 1), largest, smallest, sum((s for s in x.size()), 10)


def test_sum_min_max_of_a_generator_of_constants():
    assert_matches_eager(_sum_of_generator, torch.randn(3, 5), graphs=1)


class _WithClassAttribute:
    x = 4


def _in_class_dict(x):
    if "x" in _WithClassAttribute.__dict__ and "missing" not in type(_WithClassAttribute()).__dict__:
        return x + 1
    return x + 2


def test_in_on_a_class_dict_is_guarded_on_the_answer():
    import ember

    assert_matches_eager(_in_class_dict, torch.randn(3), graphs=1)
    ember.reset()
    compiled = ember.compile(_in_class_dict, backend="eager", fullgraph=True)
    x = torch.zeros(2)
    assert torch.equal(compiled(x), x + 1)
    del _WithClassAttribute.x
    try:
        assert torch.equal(compiled(x), x + 2)  # the class changed: captured again
    finally:
        _WithClassAttribute.x = 4
    assert torch.equal(compiled(x), x + 1)


def _clamp_by_min_max(a, b, n):
    c = a + b
    s, t = a.sum(), b.sum()
    s = min(max(s, 0), 1)
    t = max(0, min(1, t))
    both = max([s, t, 0.5])
    ints = max(n.sum(), 3), min(-2, n.sum())
    return max(s, t) - min(s, t) + c, both, ints


def test_min_max_of_zero_dim_tensors_and_numbers_in_one_graph():
    for a, b in [(torch.randn(3), torch.randn(3)), (torch.full((3,), 5.0), torch.full((3,), -5.0)),
                 (torch.tensor([0.25, 0.25, 0.0]), torch.full((3,), 0.1))]:
        assert_matches_eager(_clamp_by_min_max, a, b, torch.tensor([1, 4, -2]), graphs=1)


def _nan_order(x):
    nan = x.sum()  # NaN: Python keeps the first item when the comparison is False
    return max(nan, 0.0), max(0.0, nan) + 0, min(nan, 1), min(1, nan) + 0


def test_min_max_keep_pythons_choice_on_nan():
    out = ember.compile(_nan_order, backend="eager")(torch.tensor([float("nan")]))
    assert torch.isnan(out[0]) and out[1] == 0 and torch.isnan(out[2]) and out[3] == 1


def _arithmetic_on_the_winner(a, c, n):
    m = max(a.sum(), 0)
    shifted = m + 1 - min(0, a.sum()) * 2  # eager: an int where every winner was a number
    scaled = m * c  # with a float tensor: c's dtype either way
    return shifted, scaled, torch.mul(m, n) if isinstance(n, torch.Tensor) else m


def test_min_max_winners_keep_eagers_type_through_arithmetic():
    # m is the int 0 or a 0-d tensor depending on a's values: the glue rebuilds what eager has;
    # torch.mul(m, int tensor) would give another dtype for the int: a graph break there.
    for a in (torch.tensor([-1.0, -2.0]), torch.tensor([1.0, 2.5])):
        assert_matches_eager(_arithmetic_on_the_winner, a, torch.randn(3), torch.tensor([1, 2]), breaks=None)
        expected, got = _arithmetic_on_the_winner(a, torch.ones(3), 0), \
            ember.compile(_arithmetic_on_the_winner, backend="eager")(a, torch.ones(3), 0)
        assert type(got[0]) is type(expected[0]) and type(got[2]) is type(expected[2])
