"""A functools.partial's attributes that come from its class (__doc__, __module__, __class__) or
that it lacks (__name__, __qualname__, __annotations__) answer as in Python, and its __dict__ is
its own; a partial rebuilt after the graph is one object however often it is returned."""
import functools

import torch

import ember
from capture_helpers import assert_matches_eager

NAMES = ("__annotations__", "__dict__", "__doc__", "__module__", "__name__", "__qualname__", "__class__",
         "__get__", "__wrapped__")


def _add(x, y):
    return x + y


def _answers(p):
    return tuple(hasattr(p, name) for name in NAMES) + (
        p.__doc__, p.__module__, p.__class__ is functools.partial, p.__dict__, getattr(p, "__name__", "none"))


def test_partial_made_in_the_frame_answers_hasattr_as_python():
    def f(x):
        p = functools.partial(_add, y=x)
        return (p(x),) + _answers(p)

    assert_matches_eager(f, torch.randn(3), graphs=1)


def test_partial_passed_in_answers_hasattr_as_python_and_guards_its_instance_dict():
    def f(x, p):
        return (p(x),) + _answers(p)

    assert_matches_eager(f, torch.randn(3), functools.partial(_add, y=1.0), graphs=1)
    documented = functools.partial(_add, y=1.0)
    documented.__doc__ = "adds one"
    documented.__name__ = "add_one"
    ember.reset()
    compiled = ember.compile(f, backend="eager")
    x = torch.randn(3)
    plain = functools.partial(_add, y=1.0)
    assert compiled(x, plain)[1:] == f(x, plain)[1:]
    assert compiled(x, documented)[1:] == f(x, documented)[1:]  # its own __doc__ and __name__


def test_partial_returned_twice_is_one_object():
    def f(x):
        p = functools.partial(_add, y=x)
        return p, p, p.__dict__, x + 1

    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        first, second, instance_dict, _ = ember.compile(f, backend="eager")(torch.randn(2))
    assert first is second and first.__dict__ is instance_dict


def test_writing_a_new_partials_dict_breaks_and_the_partial_keeps_it():
    def f(x):
        p = functools.partial(_add, y=x)
        p.__dict__["tag"] = 3
        return p(x), p.tag, hasattr(p, "tag")

    assert_matches_eager(f, torch.randn(3), breaks=None)


def test_reading_a_partials_attributes_does_not_give_it_a_dict():
    def f(x, p):
        return p(x), hasattr(p, "__name__"), p.__doc__ is not None, hasattr(p, "tag")

    p = functools.partial(_add, y=1.0)
    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        compiled = ember.compile(f, backend="eager")
        compiled(torch.randn(2), p)
        compiled(torch.randn(2), p)  # (and its guards do not either)
    # (a partial whose __dict__ was never made is flattened into a new partial of it)
    assert functools.partial(p, 2.0).func is _add
