"""Shared checks for capture tests: a compiled function behaves exactly like eager Python."""
from __future__ import annotations

import copy

import torch

import ember

BACKENDS = ("eager", "aot_eager")


def assert_same_value(expected, got, path="result"):
    assert type(expected) is type(got), f"{path}: {type(got).__name__}, eager gives {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        assert expected.shape == got.shape and expected.dtype == got.dtype, path
        torch.testing.assert_close(got, expected, msg=path)
    elif isinstance(expected, (list, tuple)):
        assert len(expected) == len(got), f"{path}: length {len(got)}, eager gives {len(expected)}"
        for index, (left, right) in enumerate(zip(expected, got)):
            assert_same_value(left, right, f"{path}[{index}]")
    elif isinstance(expected, dict):
        assert list(expected) == list(got), f"{path}: keys {list(got)}, eager gives {list(expected)}"
        for key in expected:
            assert_same_value(expected[key], got[key], f"{path}[{key!r}]")
    else:
        assert expected == got, f"{path}: {got!r}, eager gives {expected!r}"


def run_both(fn, *args, backend="eager"):
    """(eager result, compiled result) on separate deep copies of the arguments."""
    ember.reset()
    eager_args = copy.deepcopy(args)
    compiled_args = copy.deepcopy(args)
    expected = fn(*eager_args)
    with ember.config.patch(raise_capture_errors=True):
        got = ember.compile(fn, backend=backend)(*compiled_args)
    return expected, got


def assert_matches_eager(fn, *args, graphs=None, breaks=0, backends=BACKENDS):
    """The compiled result equals eager's on every backend; `breaks` graph breaks (None: any),
    `graphs` graphs (None: any), and no frame falls back to eager."""
    for backend in backends:
        expected, got = run_both(fn, *args, backend=backend)
        assert_same_value(expected, got)
    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        explanation = ember.explain(fn)(*copy.deepcopy(args))
    assert not explanation.frames_run_eagerly, explanation.frames_run_eagerly
    if breaks is not None:
        assert explanation.graph_break_count == breaks, [str(b) for b in explanation.break_reasons]
    if graphs is not None:
        assert explanation.graph_count == graphs, explanation
    return explanation
