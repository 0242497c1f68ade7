"""Dynamic shapes at capture (issue 9, first floor): symbolic input sizes, the ShapeEnv's
guards, the automatic mode, mark_dynamic/mark_static.  Backends still compile per concrete shape."""
import logging

import pytest
import torch

import ember
from ember.capture.runtime import counters


def toy(x, y):
    a = torch.sin(x)
    b = torch.cos(y)
    return a + b


SHAPES = [(4, 3), (5, 7), (9, 2), (3, 3), (16, 31), (2, 2), (7, 64), (33, 5), (6, 6), (12, 8)]


def captures():
    return counters["stats"]["captures"]


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    counters.clear()
    yield
    ember.reset()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "ember"])
def test_dynamic_true_captures_the_toy_once_for_ten_shapes(backend):
    f = ember.compile(toy, backend=backend, dynamic=True)
    for n, m in SHAPES:
        x, y = torch.randn(n, m), torch.randn(n, m)
        torch.testing.assert_close(f(x, y), toy(x, y))
    assert captures() == 1
    assert counters["stats"].get("recompiles", 0) == 0
    assert counters["stats"].get("frames_run_eagerly", 0) == 0


def test_the_shape_envs_relations_are_guarded():
    f = ember.compile(toy, backend="eager", dynamic=True)
    f(torch.randn(4, 3), torch.randn(4, 3))
    f(torch.randn(5, 3), torch.randn(1, 3))  # broadcasting: the capture assumed equal sizes
    assert captures() == 2
    torch.testing.assert_close(f(torch.randn(5, 3), torch.randn(1, 3)).shape, torch.Size([5, 3]))


def test_sizes_0_and_1_are_specialized():
    f = ember.compile(toy, backend="eager", dynamic=True)
    f(torch.randn(4, 3), torch.randn(4, 3))
    out = f(torch.randn(1, 3), torch.randn(1, 3))
    assert captures() == 2 and out.shape == (1, 3)
    assert f(torch.randn(0, 3), torch.randn(0, 3)).shape == (0, 3)


def test_automatic_mode_makes_a_changed_size_dynamic(caplog):
    f = ember.compile(toy, backend="aot_eager")
    ember.logs.enable("recompiles")
    with caplog.at_level(logging.DEBUG, logger="ember.recompiles"):
        for n in (4, 5, 6, 7, 8):
            x, y = torch.randn(n, 3), torch.randn(n, 3)
            torch.testing.assert_close(f(x, y), toy(x, y))
    assert captures() == 2  # static, then x.size(0) dynamic
    assert "x.size(0) was 4, now 5; marking it dynamic" in caplog.text
    f(torch.randn(8, 5), torch.randn(8, 5))  # another dim changes: one more, then dynamic too
    f(torch.randn(8, 6), torch.randn(8, 6))
    assert captures() == 3


def test_dynamic_false_recompiles_for_every_shape():
    f = ember.compile(toy, backend="eager", dynamic=False)
    for n in (4, 5, 6):
        f(torch.randn(n, 3), torch.randn(n, 3))
    assert captures() == 3


def test_mark_dynamic_and_mark_static():
    f = ember.compile(toy, backend="eager", dynamic=False)
    for n in (4, 5, 6):
        x, y = torch.randn(n, 3), torch.randn(n, 3)
        ember.mark_dynamic(x, 0)
        ember.mark_dynamic(y, 0)
        f(x, y)
    assert captures() == 1
    g = ember.compile(toy, backend="eager", dynamic=True)
    for n in (4, 5):
        x, y = torch.randn(n, 3), torch.randn(n, 3)
        ember.mark_static(x, 0)
        g(x, y)
    assert captures() == 3
    with pytest.raises(IndexError, match="out of range"):
        ember.mark_dynamic(torch.randn(2, 3), 2)
    with pytest.raises(TypeError, match="expected a tensor"):
        ember.mark_static([1, 2], 0)


def test_size_arithmetic_stays_symbolic():
    """`x.shape[0] // 2`, `x.size(-1) * 2` and comparisons of sizes are graph nodes and guards."""
    def half(x):
        n = x.shape[0] // 2
        y = x[:n].reshape(n, -1) * 2
        if x.size(1) > 3:
            return y + x.size(1)
        return y - 1

    f = ember.compile(half, backend="aot_eager", dynamic=True)
    for n, m in ((4, 5), (6, 7), (9, 8), (10, 2), (12, 3)):
        x = torch.randn(n, m)
        torch.testing.assert_close(f(x), half(x))
    assert captures() == 2  # one per branch of `x.size(1) > 3`
    assert counters["stats"].get("frames_run_eagerly", 0) == 0


def test_a_size_returned_to_python_is_captured_with_static_shapes():
    """A size leaving the graph would need the graph to return it: static shapes for now."""
    def size_too(x):
        return x * 2, x.shape[0]

    f = ember.compile(size_too, backend="eager", dynamic=True)
    for n in (4, 6, 9):
        x = torch.randn(n, 3)
        out, size = f(x)
        torch.testing.assert_close(out, x * 2)
        assert size == n
    assert captures() == 3


def test_dynamic_training_step_matches_eager():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    compiled = ember.compile(model, backend="ember", dynamic=True)
    for batch in (3, 5, 8):
        x = torch.randn(batch, 8)
        model.zero_grad()
        expected = model(x)
        expected.sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        got = compiled(x)
        got.sum().backward()
        torch.testing.assert_close(got, expected)
        for p, g in zip(model.parameters(), grads):
            torch.testing.assert_close(p.grad, g)
    assert captures() == 1


def test_parameters_and_buffers_keep_static_sizes():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16))
    seen = []

    def backend(gm, example_inputs):
        seen.extend(node.meta["example_value"] for node in gm.graph.nodes if node.op == "placeholder")
        return gm.forward

    compiled = ember.compile(model, backend=backend, dynamic=True)
    compiled(torch.randn(4, 8))
    symbolic = [any(isinstance(s, torch.SymInt) for s in value.shape) for value in seen]
    assert sum(symbolic) == 1  # the input only


def test_a_frame_that_needed_static_shapes_starts_static_later(caplog):
    def half(x):
        return x * 2, x.shape[0]

    f = ember.compile(half, backend="eager")
    ember.logs.enable("recompiles")
    with caplog.at_level(logging.DEBUG, logger="ember.recompiles"):
        for n in (4, 6, 8, 10):
            x = torch.randn(n)
            torch.testing.assert_close(f(x), half(x))
    assert captures() == 4  # static, then dynamic (restarted static), and static from then on
    assert caplog.text.count("capturing with static shapes") == 1


def test_shapes_built_from_dynamic_sizes():
    """GPT-2's `(-1,) + input_shape[1:] + (h.size(-1),)` and `view(batch, seq, heads, -1)`."""
    def reshape(x, h):
        batch, seq = x.size()
        shape = (-1,) + x.size()[1:] + (h.size(-1),)
        heads = h.view(batch, seq, 2, -1).transpose(1, 2)
        return heads.sum(-1), h.reshape(shape) * x.numel()

    f = ember.compile(reshape, backend="aot_eager", dynamic=True)
    for batch, seq in ((2, 5), (3, 7), (4, 16)):
        x, h = torch.randn(batch, seq), torch.randn(batch, seq, 8)
        for got, expected in zip(f(x, h), reshape(x, h)):
            torch.testing.assert_close(got, expected)
    assert captures() == 1
    assert counters["stats"].get("frames_run_eagerly", 0) == 0


def test_a_size_the_program_specialized_is_guarded():
    # `if x.shape[0] == 4` makes the ShapeEnv replace the symbol by 4; its produce_guards does
    # not say so, and without ember's own check a size of 5 reused the graph of 4.
    @ember.compile(dynamic=True, backend="eager")
    def f(x):
        if x.shape[0] == 4:
            return x + 1
        return x - 1

    for n in [4, 5, 4, 6]:
        x = torch.zeros(n, 3)
        torch.testing.assert_close(f(x), x + 1 if n == 4 else x - 1)


def test_mark_dynamic_on_a_size_the_program_specializes_names_the_line():
    def f(x):
        y = x * 2
        if x.shape[0] == 4:
            return y + 1
        return y - 1

    x = torch.zeros(4, 3)
    ember.mark_dynamic(x, 0)
    with pytest.raises(ember.DynamicShapeError, match=r"x\.size\(0\) was marked dynamic.*constant 4 at .*"
                       r"test_dynamic_shapes\.py:\d+ \(`if x\.shape\[0\] == 4:`\)"):
        ember.compile(f, backend="eager")(x)
    # unmarked, the same program compiles (static first)
    torch.testing.assert_close(ember.compile(f, backend="eager")(torch.zeros(4, 3)), torch.ones(4, 3))
