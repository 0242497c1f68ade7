"""itertools in loops, over Python values and over tensors and modules: one graph, no breaks."""
import itertools
import operator

import pytest
import torch
from torch import nn

from capture_helpers import assert_matches_eager


def _over_python_values(x):
    out = x
    for a in itertools.chain([1, 2], (3,), range(4, 6)):
        out = out + a
    for a in itertools.chain.from_iterable([[1], [2, 3]]):
        out = out * a
    for a, b in itertools.zip_longest([1, 2, 3], [4], fillvalue=0):
        out = out + a * b
    for a, b in itertools.product([1, 2], [3, 4]):
        out = out + a - b
    for a in itertools.accumulate([1, 2, 3]):
        out = out + a
    for a in itertools.accumulate([1, 2, 3], operator.mul, initial=2):
        out = out - a
    for a in itertools.islice(range(10), 2, 8, 3):
        out = out * a
    for i in itertools.count(3, 2):
        if i > 9:
            break
        out = out + i
    for a in itertools.repeat(2, 3):
        out = out + a
    for a, b in itertools.pairwise([1, 2, 3, 4]):
        out = out + a * b
    for a, b in itertools.combinations([1, 2, 3], 2):
        out = out + a + b
    for a, b in itertools.permutations([1, 2, 3], 2):
        out = out + a - b
    for a, b in itertools.combinations_with_replacement([1, 2], 2):
        out = out + a * b
    for value in itertools.starmap(pow, [(2, 3), (3, 2)]):
        out = out + value
    kept = list(itertools.takewhile(lambda v: v < 3, [1, 2, 5, 1]))
    dropped = list(itertools.dropwhile(lambda v: v < 3, [1, 2, 5, 1]))
    falsy = list(itertools.filterfalse(None, [0, 1, 0, 2]))
    chosen = list(itertools.compress("abcd", [1, 0, 1, 0]))
    cycled = list(itertools.islice(itertools.cycle("ab"), 5))
    counted = list(zip(itertools.count(10), "xyz"))
    return out, kept, dropped, falsy, chosen, cycled, counted


def test_itertools_over_python_values():
    assert_matches_eager(_over_python_values, torch.randn(3), graphs=1)


class _Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.second = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x, y):
        for layer in itertools.chain(self.first, self.second):
            x = torch.tanh(layer(x))
        parts = []
        for a, b in itertools.zip_longest([x, y], [y]):
            parts.append(a if b is None else a * b)
        for a, b in itertools.combinations([x, y, x + y], 2):
            parts.append(a - b)
        for a, b in itertools.pairwise(parts):
            parts.append(a + b)
            if len(parts) > 10:
                break
        for left, right in itertools.product([x, y], [y]):
            parts.append(left @ right.T)
        total = list(itertools.accumulate([x, y, x * y]))[-1]
        for index, layer in zip(itertools.count(), self.first):
            total = total + index * layer(y)
        for scale in itertools.islice(itertools.repeat(0.5), 2):
            total = total * scale
        return total, parts


def test_itertools_over_tensors_and_modules():
    torch.manual_seed(0)
    model = _Blocks()
    assert_matches_eager(model, torch.randn(3, 4), torch.randn(3, 4), graphs=1)


def _shared_iterators(x):
    it = iter([1, 2, 3, 4, 5])
    pairs = list(zip(it, it))
    rest = list(it)
    source = iter(range(10))
    head = list(itertools.islice(source, 2, 4))
    after = next(source)
    return x * len(pairs), pairs, rest, head, after, type(zip([], [])).__name__


def test_iterators_are_pulled_in_pythons_order():
    assert_matches_eager(_shared_iterators, torch.randn(2), graphs=1)


def _infinite_across_a_break(x):
    counter = itertools.count(5)
    first = next(counter)
    print("a graph break with a live counter")
    return x + first + next(counter), next(counter)


def test_infinite_iterator_survives_a_graph_break():
    # The glue rebuilds the counter from its state; steps taken after the break run for real.
    assert_matches_eager(_infinite_across_a_break, torch.randn(2), breaks=None)


def _list_grows_while_iterating(x):
    rows = [x, x * 2]
    for row in rows:
        if len(rows) < 5:
            rows.append(row + 1)
    pairs = [a - b for a, b in itertools.pairwise(rows)]
    return torch.stack(rows), torch.stack(pairs), len(rows)


def test_iterators_see_a_list_that_grows():
    assert_matches_eager(_list_grows_while_iterating, torch.randn(3), graphs=1)


@pytest.mark.parametrize("strict_case", [([1, 2], [3]), ([1], [2, 3]), ([1], [2], [3, 4])])
def test_zip_strict_messages(strict_case):
    def f(x, columns):
        try:
            rows = list(zip(*columns, strict=True))
        except ValueError as error:
            rows = str(error)
        return x + 1, rows

    assert_matches_eager(f, torch.randn(2), strict_case)
