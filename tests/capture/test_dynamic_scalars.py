"""Python ints and floats that change between calls become graph inputs (capture/scalars.py).

The first call guards each number's value; a recompile caused by a changed number makes it a
symbol, and later values reuse that capture.  Where the program branches on it, or uses it as a
size, the ShapeEnv's guards keep every entry correct.
"""
from __future__ import annotations

import logging

import pytest
import torch

import ember
from ember.capture.runtime import counters

BACKENDS = ["eager", "aot_eager", "ember"]


def _counting(backend: str = "eager"):
    from ember.backends import lookup_backend

    graphs = []
    inner, _ = lookup_backend(backend)

    def counting(gm, example_inputs):
        graphs.append(gm)
        return inner(gm, example_inputs)

    return graphs, counting


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    counters.clear()
    yield


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_float_argument_that_changes_recompiles_once(backend):
    graphs, counting = _counting(backend)

    @ember.compile(backend=counting)
    def f(x, scale):
        return x * scale + 1

    x = torch.randn(8)
    for scale in (0.5, 0.7, 0.9, 1.25, -3.0):
        torch.testing.assert_close(f(x, scale), x * scale + 1)
    assert len(graphs) == 2  # the first value, then a symbol
    assert counters["stats"]["recompiles"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_int_step_counter_in_arithmetic(backend):
    graphs, counting = _counting(backend)

    @ember.compile(backend=counting)
    def f(x, step):
        return x * (step + 1) - step // 3

    x = torch.randn(4, 4)
    for step in range(1, 8):
        torch.testing.assert_close(f(x, step), x * (step + 1) - step // 3)
    assert len(graphs) == 2


def test_a_number_computed_from_an_input_returns_exactly_eagers_value():
    """Numbers computed in Python from a dynamic input are computed again by the glue with the
    same operations: the same float, the same type."""
    def f(x, lr, step):
        scaled = lr * 0.1 / (1 - 0.9 ** step)
        return x * scaled, scaled, step + 1, min(1.0, (step + 1) / 5)

    compiled = ember.compile(f, backend="eager")
    x = torch.randn(3)
    for lr, step in ((0.01, 1), (0.02, 2), (0.03, 3), (0.004, 7)):
        got, expected = compiled(x, lr, step), f(x, lr, step)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:]
        assert [type(v) for v in got[1:]] == [type(v) for v in expected[1:]]
    assert counters["stats"]["captures"] == 2


def test_a_branch_on_a_dynamic_int_keeps_a_guard():
    """Correctness first: the branch taken is guarded (the ShapeEnv's `n > 3`), so a value on the
    other side takes another entry, never the wrong one."""
    graphs, counting = _counting()

    @ember.compile(backend=counting)
    def f(x, n):
        if n > 3:
            return x + n
        return x - n

    x = torch.randn(4)
    for n in (1, 2, 3, 4, 5, 6, 2, 7, 0):
        torch.testing.assert_close(f(x, n), x + n if n > 3 else x - n)
    assert counters["stats"]["captures"] <= 3


def test_a_dynamic_float_compared_in_python_keeps_a_guard():
    @ember.compile(backend="eager")
    def f(x, scale):
        if scale > 1.0:
            return x * scale
        return x / scale

    x = torch.randn(4)
    for scale in (0.5, 0.25, 2.0, 4.0, 0.125, 8.0):
        torch.testing.assert_close(f(x, scale), x * scale if scale > 1.0 else x / scale)
    assert counters["stats"]["captures"] <= 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_dynamic_int_used_as_a_size(backend):
    @ember.compile(backend=backend)
    def f(x, n):
        return x[:n] * 2, x.new_zeros(n) + n

    x = torch.randn(10)
    for n in (2, 3, 5, 7):
        got = f(x, n)
        torch.testing.assert_close(got[0], x[:n] * 2)
        torch.testing.assert_close(got[1], torch.zeros(n) + n)


def test_an_int_that_capture_needs_as_a_number_becomes_a_constant_again(caplog):
    """`range(n)` needs a number: n is guarded by value again for this code (and the results stay
    right), where the other changing number stays a symbol."""
    graphs, counting = _counting()

    @ember.compile(backend=counting)
    def f(x, n, scale):
        for _ in range(n):
            x = x * scale
        return x

    x = torch.randn(3)
    ember.logs.enable("recompiles")
    with caplog.at_level(logging.DEBUG, logger="ember.recompiles"):
        for n, scale in ((2, 0.5), (3, 0.7), (3, 0.9), (3, 1.1)):
            torch.testing.assert_close(f(x, n, scale), x * scale ** n)
    assert "n stay constants" in caplog.text
    assert counters["stats"]["captures"] == 2  # (n=3 with a symbolic scale serves the rest)


def test_bools_and_dynamic_false_stay_constants():
    graphs, counting = _counting()
    f = ember.compile(lambda x, flag, n: x + n if flag else x - n, backend=counting, dynamic=False)
    x = torch.randn(3)
    for flag, n in ((True, 1), (False, 1), (True, 2), (False, 3)):
        torch.testing.assert_close(f(x, flag, n), x + n if flag else x - n)
    assert len(graphs) == 4


def test_a_tuple_of_floats_changes_item_by_item():
    """An optimizer's `betas` (a scheduler cycling momentum rewrites it): its numbers become inputs."""
    @ember.compile(backend="eager")
    def f(x, betas):
        return x * (1 - betas[0]) + betas[1]

    x = torch.randn(3)
    for b in ((0.9, 0.999), (0.85, 0.995), (0.8, 0.99), (0.75, 0.995)):
        torch.testing.assert_close(f(x, b), x * (1 - b[0]) + b[1])
    assert counters["stats"]["captures"] == 2


def test_state_the_code_writes_back_is_dynamic_from_the_first_recompile():
    """`self.count += 1` each call, `self.rate` rewritten (here unchanged until the fourth call):
    both are marked dynamic at the first recompile, so the later change costs no capture."""
    class Counter:
        def __init__(self):
            self.count, self.rate = 0, 0.5

    state = Counter()

    @ember.compile(backend="eager")
    def f(x):
        state.count += 1
        state.rate = state.rate * (0.5 if state.count % 4 == 0 else 1.0)
        return x * state.rate + state.count

    reference = Counter()
    x = torch.randn(3)
    for _ in range(9):
        got = f(x)
        reference.count += 1
        reference.rate = reference.rate * (0.5 if reference.count % 4 == 0 else 1.0)
        torch.testing.assert_close(got, x * reference.rate + reference.count)
        assert (state.count, state.rate) == (reference.count, reference.rate)
    # the first call, then one entry per side of `count % 4 == 0`; the rate's change on the
    # fourth call recompiles nothing (it was a guarded constant before: a capture per change)
    assert counters["stats"]["captures"] == 3


def test_a_recompile_with_other_global_state_compiles_again():
    """Graphs captured alike are compiled once per code, but not across grad modes: a backend
    may compile the grad mode in."""
    graphs, counting = _counting()
    f = ember.compile(lambda x: (x * 2).sum(), backend=counting)
    x = torch.randn(4, requires_grad=True)
    f(x)
    with torch.no_grad():
        f(x)
    assert len(graphs) == 2


def test_dynamic_true_also_makes_changing_numbers_inputs():
    graphs, counting = _counting()
    f = ember.compile(lambda x, scale: x * scale, backend=counting, dynamic=True)
    for n, scale in ((3, 0.5), (4, 0.25), (5, 2.0), (6, 4.0)):
        x = torch.randn(n)
        torch.testing.assert_close(f(x, scale), x * scale)
    assert len(graphs) == 2


def test_containers_compare_a_dynamic_int_by_value():
    """`(key, n) in d.items()`, `ints.index(2)`: equality with a symbol is decided (and guarded)
    by the ShapeEnv, never taken for False."""
    @ember.compile(backend="eager")
    def f(x, d, ints):
        return x * ints.index(2), ("a", 1) in d.items(), 3 in ints, d["a"] == 1

    x = torch.randn(3)
    for a, ints in ((1, [2, 3]), (2, [5, 2]), (1, [3, 2, 7]), (7, [2, 9])):
        d = {"a": a, "b": 2}
        got, expected = f(x, d, ints), (x * ints.index(2), ("a", 1) in d.items(), 3 in ints, a == 1)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:]


def test_division_by_a_dynamic_int_that_is_zero_raises_as_eager():
    @ember.compile(backend="eager")
    def f(x, d):
        try:
            r = 1 / d
        except ZeroDivisionError as error:
            raise ValueError(f"bad divisor {d}") from error
        return x * r, 7 // d

    x = torch.randn(4)
    for d in (2, 0, 4, 1, 0, -5):
        if d == 0:
            with pytest.raises(ValueError, match="bad divisor 0"):
                f(x, d)
        else:
            got = f(x, d)
            torch.testing.assert_close(got[0], x * (1 / d))
            assert got[1] == 7 // d


@pytest.mark.parametrize("case", ["float", "int", "sqrt", "abs", "pow"])
def test_python_functions_of_a_dynamic_float_stay_symbolic(case):
    """float(), int(), math.sqrt, abs and ** of a symbol: no graph break, and ember's AOT builds
    their nodes from the symbol (before: one backend compile per value)."""
    import math

    functions = {
        "float": lambda x, s: x * float(s),
        "int": lambda x, s: x * int(s * 10),
        "sqrt": lambda x, s: x * math.sqrt(s),
        "abs": lambda x, s: x * abs(s - 1),
        "pow": lambda x, s: x * s ** 2,
    }
    fn = functions[case]
    compiled = ember.compile(fn, backend="aot_eager")
    for s in (0.5, 0.7, 0.9, 1.3):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x, s), fn(x, s))
    assert counters["stats"]["unique_graphs"] == 2
    assert counters["stats"]["backend_compiles"] == 2
    assert not counters["graph_break"]


def test_a_method_of_a_dynamic_number_makes_it_a_constant_again():
    """`m.is_integer()`, `n.bit_length()`: no symbolic form, so that number is guarded by value
    again (fullgraph=True holds: no graph break)."""
    @ember.compile(backend="eager", fullgraph=True)
    def f(x, m, n):
        return x + m.is_integer() + n.bit_length()

    x = torch.randn(3)
    for m, n in ((1.0, 3), (1.5, 4), (2.0, 9), (2.5, 9)):
        torch.testing.assert_close(f(x, m, n), x + m.is_integer() + n.bit_length())
