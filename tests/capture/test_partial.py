"""functools.partial during capture: attributes, hasattr, nesting, and guards on its contents."""
import functools

import torch

import ember
from capture_helpers import assert_matches_eager


def _scale(x, factor, *, shift=0.0):
    return x * factor + shift


def _inspect_partial(x, made_outside):
    made_inside = functools.partial(_scale, factor=3.0)
    nested = functools.partial(functools.partial(_scale, x), 2.0, shift=1.0)
    return (
        made_outside(x), made_inside(x), nested(),
        hasattr(made_outside, "func"), hasattr(made_outside, "args"), hasattr(made_outside, "keywords"),
        hasattr(made_outside, "missing"), hasattr(made_inside, "missing"), hasattr(made_inside, "__call__"),
        made_outside.func is _scale, made_outside.args, made_outside.keywords,
        nested.func is _scale, len(nested.args), nested.keywords, getattr(made_outside, "tag", "none"),
    )


def test_partial_attributes_and_hasattr():
    tagged = functools.partial(_scale, 2.0)
    tagged.tag = "a tag"
    assert_matches_eager(_inspect_partial, torch.randn(3), functools.partial(_scale, factor=2.0, shift=0.5))
    assert_matches_eager(_inspect_partial, torch.randn(3), tagged)


def _call(x, p):
    return p(x)


def test_a_different_partial_recompiles():
    ember.reset()
    compiled = ember.compile(_call, backend="eager")
    x = torch.randn(3)
    with ember.config.patch(raise_capture_errors=True):
        for p in (functools.partial(_scale, factor=2.0), functools.partial(_scale, factor=2.0, shift=1.0),
                  functools.partial(_scale, factor=5.0), functools.partial(_scale, 0.5)):
            torch.testing.assert_close(compiled(x, p), p(x))


def _mul3(x, y, z):
    return x * y * z


SHIFT = torch.ones(2, 2)


def _partials_of_an_argument(udf, x):
    first = functools.partial(udf, x, 4, z=x)
    return first() + SHIFT


def test_graph_inputs_are_named_as_torch_compile_names_them():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    ember.reset()
    ember.compile(_partials_of_an_argument, backend=backend, fullgraph=True)(_mul3, torch.randn(2, 2))
    inputs = [(node.name, node.target) for node in graphs[0].graph.nodes if node.op == "placeholder"]
    assert inputs == [("l_x_", "L_x_"), ("g_shift_", "G_SHIFT_")]
    code = graphs[0].print_readable(print_output=False)
    assert 'def forward(self, L_x_: "f32[2, 2]", G_SHIFT_: "f32[2, 2]")' in code and "l_x_ = L_x_" in code
