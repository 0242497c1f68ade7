"""itertools, zip, map, enumerate and filter during capture: lazy, in Python's order.

Each is a `LazyIteratorVariable` whose items come from a Python generator written after CPython's
implementation (`tx = yield item`): it pulls from its arguments' iterators only when asked, and as far
as CPython does, so shared iterators (`zip(it, it)`), growing lists and infinite iterators behave as in
Python.  One that outlives a graph is rebuilt by the glue from its arguments if nothing was taken from it
yet (count, repeat and cycle also from their state); a partly consumed one makes the capture fall back.
"""
from __future__ import annotations

import itertools
import operator
import sys
from typing import Any, Callable, Generator

from ..errors import Unsupported, UserException
from .base import VariableTracker, constant, is_none, user_errors
from .builtins import register
from .containers import IteratorVariable, TupleVariable
from .operators import binary_op

Steps = Generator[VariableTracker, Any, None]


def iterator_of(tx, iterable: VariableTracker) -> VariableTracker:
    iterator = iterable.get_iter(tx)
    if getattr(iterator, "next_value", None) is None:
        raise Unsupported(f"stepping through {iterator}")
    return iterator


def _is_none(value: VariableTracker | None) -> bool:
    return value is None or is_none(value)


def _constant_int(value: VariableTracker, what: str) -> int:
    if not value.is_python_constant():
        raise Unsupported(f"{what} that is not a constant")
    return value.as_python_constant()


class LazyIteratorVariable(IteratorVariable):
    """An iterator made by `function(*args, **kwargs)` whose items `steps` makes on demand."""

    MAX_ITEMS = 100_000  # draining more than this: almost certainly an infinite iterator

    def __init__(self, function: Callable, args: list, kwargs: dict, steps: Steps, python_type: type) -> None:
        super().__init__()
        self.function = function
        self.args = list(args)
        self.kwargs = dict(kwargs)
        self.iterator_type = python_type
        self.steps = steps
        next(steps)  # run up to the first `yield`, where it waits for a translator
        self.started = False
        self.finished = False

    def python_type(self) -> type:
        return self.iterator_type

    def next_value(self, tx) -> VariableTracker | None:
        if self.finished:
            return None
        self.started = True
        try:
            return self.steps.send(tx)
        except StopIteration:
            self.finished = True
            return None

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        items = []
        while (item := self.next_value(tx)) is not None:
            items.append(item)
            if len(items) > self.MAX_ITEMS:
                raise Unsupported(f"{self.iterator_type.__name__} gave more than {self.MAX_ITEMS} items (infinite?)")
        return items

    def reconstruct_expr(self, cg) -> str:
        if self.started:
            raise Unsupported(f"rebuilding a partly consumed {self.iterator_type.__name__} after a graph break")
        args = [cg.reconstruct(arg) for arg in self.args]
        args += [f"{key}={cg.reconstruct(value)}" for key, value in self.kwargs.items()]
        return f"{cg.ref(self.function)}({', '.join(args)})"

    def contained_values(self) -> list[VariableTracker]:
        return [*self.args, *self.kwargs.values()]

    def __repr__(self) -> str:
        return f"LazyIteratorVariable({self.iterator_type.__name__})"


def lazy(function: Callable, python_type: type | None = None):
    """Register `make_steps(*args, **kwargs)` (a generator) as the handler of `function`."""
    def decorator(make_steps: Callable[..., Steps]) -> Callable:
        def handler(tx, *args, **kwargs):
            steps = make_steps(tx, *args, **kwargs)
            return LazyIteratorVariable(function, list(args), kwargs, steps, python_type or function)

        register(function)(handler)
        return make_steps

    return decorator


# -- infinite producers --------------------------------------------------------------------------
class CountIteratorVariable(IteratorVariable):
    def __init__(self, start: Any, step: Any) -> None:
        super().__init__()
        self.current = start
        self.step = step

    def python_type(self) -> type:
        return itertools.count

    def next_value(self, tx) -> VariableTracker:
        value = self.current
        self.current = self.current + self.step
        return constant(value)

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        raise Unsupported("itertools.count() never ends")

    def reconstruct_expr(self, cg) -> str:
        return f"{cg.ref(itertools.count)}({cg.literal(self.current)}, {cg.literal(self.step)})"

    def contained_values(self) -> list[VariableTracker]:
        return []


class RepeatIteratorVariable(IteratorVariable):
    def __init__(self, value: VariableTracker) -> None:
        super().__init__()
        self.value = value

    def python_type(self) -> type:
        return itertools.repeat

    def next_value(self, tx) -> VariableTracker:
        return self.value

    def unpack_sequence(self, tx) -> list[VariableTracker]:
        raise Unsupported("itertools.repeat() without a count never ends")

    def reconstruct_expr(self, cg) -> str:
        return f"{cg.ref(itertools.repeat)}({cg.reconstruct(self.value)})"

    def contained_values(self) -> list[VariableTracker]:
        return [self.value]


@register(itertools.count)
def _count(tx, start=None, step=None):
    start = constant(0) if start is None else start
    step = constant(1) if step is None else step
    if not (start.is_python_constant() and step.is_python_constant()):
        raise Unsupported("itertools.count() of non-constants")
    with user_errors(TypeError):
        itertools.count(start.as_python_constant(), step.as_python_constant())  # Python's argument checks
    return CountIteratorVariable(start.as_python_constant(), step.as_python_constant())


@register(itertools.repeat)
def _repeat(tx, value, times=None):
    if times is None:
        return RepeatIteratorVariable(value)
    count = _constant_int(times, "itertools.repeat() count")

    def steps():
        tx = yield
        for _ in range(count):
            tx = yield value

    return LazyIteratorVariable(itertools.repeat, [value, times], {}, steps(), itertools.repeat)


@lazy(itertools.cycle)
def _cycle(tx, iterable):
    iterator = iterator_of(tx, iterable)
    saved = []
    tx = yield
    while (item := iterator.next_value(tx)) is not None:
        saved.append(item)
        tx = yield item
    while saved:
        for item in saved:
            tx = yield item


# -- combinators -----------------------------------------------------------------------------------
@lazy(itertools.chain)
def _chain(tx, *iterables):
    tx = yield
    for iterable in iterables:
        iterator = iterator_of(tx, iterable)
        while (item := iterator.next_value(tx)) is not None:
            tx = yield item


@lazy(itertools.chain.from_iterable, itertools.chain)
def _chain_from_iterable(tx, iterables):
    outer = iterator_of(tx, iterables)
    tx = yield
    while (iterable := outer.next_value(tx)) is not None:
        iterator = iterator_of(tx, iterable)
        while (item := iterator.next_value(tx)) is not None:
            tx = yield item


@lazy(zip)
def _zip(tx, *iterables, strict=None):
    iterators = [iterator_of(tx, iterable) for iterable in iterables]
    check = strict is not None and strict.truth(tx)
    tx = yield
    while iterators:
        row = []
        for position, iterator in enumerate(iterators):
            item = iterator.next_value(tx)
            if item is None:
                if check:
                    _check_same_length(tx, iterators, position)
                return
            row.append(item)
        tx = yield TupleVariable(row)


def _check_same_length(tx, iterators: list, exhausted: int) -> None:
    """zip(strict=True) once iterator `exhausted` ran out: the others must end there too."""
    def message(index: int, which: str) -> str:
        return f"zip() argument {index + 1} is {which} than argument{' ' if index == 1 else 's 1-'}{index}"

    if exhausted:
        raise UserException(ValueError(message(exhausted, "shorter")))
    for index in range(1, len(iterators)):
        if iterators[index].next_value(tx) is not None:
            raise UserException(ValueError(message(index, "longer")))


@lazy(map)
def _map(tx, function, *iterables):
    iterators = [iterator_of(tx, iterable) for iterable in iterables]
    tx = yield
    while True:
        row = []
        for iterator in iterators:
            item = iterator.next_value(tx)
            if item is None:
                return
            row.append(item)
        tx = yield function.call_function(tx, row, {})


@lazy(enumerate)
def _enumerate(tx, iterable, start=None):
    iterator = iterator_of(tx, iterable)
    index = 0 if start is None else _constant_int(start, "enumerate() start")
    tx = yield
    while (item := iterator.next_value(tx)) is not None:
        tx = yield TupleVariable([constant(index), item])
        index += 1


def _select(keep_when: bool):
    def make_steps(tx, predicate, iterable):
        iterator = iterator_of(tx, iterable)
        tx = yield
        while (item := iterator.next_value(tx)) is not None:
            verdict = item if _is_none(predicate) else predicate.call_function(tx, [item], {})
            if verdict.truth(tx) == keep_when:
                tx = yield item

    return make_steps


lazy(filter)(_select(True))
lazy(itertools.filterfalse)(_select(False))


@lazy(itertools.zip_longest)
def _zip_longest(tx, *iterables, fillvalue=None):
    fill = constant(None) if fillvalue is None else fillvalue
    iterators: list[VariableTracker | None] = [iterator_of(tx, iterable) for iterable in iterables]
    tx = yield
    while True:
        row = []
        for position, iterator in enumerate(iterators):
            item = iterator.next_value(tx) if iterator is not None else None
            if item is None:
                iterators[position] = None  # exhausted: never asked again, as CPython does
                item = fill
            row.append(item)
        if all(iterator is None for iterator in iterators):
            return
        tx = yield TupleVariable(row)


def _pools(tx, iterables) -> list[list[VariableTracker]]:
    """What product/combinations/permutations read at once when made."""
    return [iterator_of(tx, iterable).unpack_sequence(tx) for iterable in iterables]


@lazy(itertools.product)
def _product(tx, *iterables, repeat=None):
    count = 1 if repeat is None else _constant_int(repeat, "product() repeat")
    pools = _pools(tx, iterables) * count
    tx = yield
    for row in itertools.product(*[range(len(pool)) for pool in pools]):
        tx = yield TupleVariable([pools[i][j] for i, j in enumerate(row)])


def _choose(kind):
    def make_steps(tx, iterable, r=None):
        (pool,) = _pools(tx, [iterable])
        size = None if _is_none(r) else _constant_int(r, f"{kind.__name__}() length")
        if size is None and kind is not itertools.permutations:
            raise UserException(TypeError(f"{kind.__name__}() missing required argument 'r' (pos 2)"))
        with user_errors(ValueError):
            chosen = kind(range(len(pool)), size) if size is not None else kind(range(len(pool)))
        tx = yield
        for row in chosen:
            tx = yield TupleVariable([pool[i] for i in row])

    return make_steps


for _kind in (itertools.combinations, itertools.combinations_with_replacement, itertools.permutations):
    lazy(_kind)(_choose(_kind))


@lazy(itertools.pairwise)
def _pairwise(tx, iterable):
    iterator = iterator_of(tx, iterable)
    tx = yield
    previous = iterator.next_value(tx)
    while previous is not None and (item := iterator.next_value(tx)) is not None:
        tx = yield TupleVariable([previous, item])
        previous = item


@lazy(itertools.accumulate)
def _accumulate(tx, iterable, func=None, *, initial=None):
    iterator = iterator_of(tx, iterable)
    tx = yield
    total = None if _is_none(initial) else initial
    if total is not None:
        tx = yield total
    while (item := iterator.next_value(tx)) is not None:
        if total is None:
            total = item
        elif _is_none(func):
            total = binary_op(tx, operator.add, total, item)
        else:
            total = func.call_function(tx, [total, item], {})
        tx = yield total


@lazy(itertools.islice)
def _islice(tx, iterable, *bounds):
    if not 1 <= len(bounds) <= 3:
        raise UserException(TypeError(f"islice expected at most 4 arguments, got {len(bounds) + 1}"))
    values = [None if _is_none(bound) else _constant_int(bound, "islice() bound") for bound in bounds]
    start, stop, step = (None, values[0], None) if len(values) == 1 else (values + [None])[:3]
    start = 0 if start is None else start
    step = 1 if step is None else step
    if any(not isinstance(v, int) or not 0 <= v <= sys.maxsize for v in (start, stop) if v is not None):
        raise UserException(ValueError("Indices for islice() must be None or an integer: 0 <= x <= sys.maxsize."))
    if not isinstance(step, int) or step < 1:
        raise UserException(ValueError("Step for islice() must be a positive integer or None."))
    iterator = iterator_of(tx, iterable)
    tx = yield
    # CPython's islice, call after call: skip up to the next wanted index; stop at `stop`.
    count, wanted = 0, start
    while True:
        while count < wanted:
            if iterator.next_value(tx) is None:
                return
            count += 1
        if stop is not None and count >= stop:
            return
        item = iterator.next_value(tx)
        if item is None:
            return
        count += 1
        wanted += step
        if stop is not None and wanted > stop:
            wanted = stop
        tx = yield item


@lazy(itertools.starmap)
def _starmap(tx, function, iterable):
    iterator = iterator_of(tx, iterable)
    tx = yield
    while (row := iterator.next_value(tx)) is not None:
        tx = yield function.call_function(tx, iterator_of(tx, row).unpack_sequence(tx), {})


@lazy(itertools.takewhile)
def _takewhile(tx, predicate, iterable):
    iterator = iterator_of(tx, iterable)
    tx = yield
    while (item := iterator.next_value(tx)) is not None:
        if not predicate.call_function(tx, [item], {}).truth(tx):
            return
        tx = yield item


@lazy(itertools.dropwhile)
def _dropwhile(tx, predicate, iterable):
    iterator = iterator_of(tx, iterable)
    tx = yield
    dropping = True
    while (item := iterator.next_value(tx)) is not None:
        if dropping and predicate.call_function(tx, [item], {}).truth(tx):
            continue
        dropping = False
        tx = yield item


@lazy(itertools.compress)
def _compress(tx, data, selectors):
    data_iterator, selector_iterator = iterator_of(tx, data), iterator_of(tx, selectors)
    tx = yield
    while (item := data_iterator.next_value(tx)) is not None:
        selector = selector_iterator.next_value(tx)
        if selector is None:
            return
        if selector.truth(tx):
            tx = yield item
