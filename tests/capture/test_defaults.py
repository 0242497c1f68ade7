"""Argument defaults that change after compiling: recompiled and used, never the stale value."""
import pytest
import torch
from torch import nn

import ember
from capture_helpers import BACKENDS


class Shift(nn.Module):
    def forward(self, x, offset=torch.ones(3)):
        return x + offset


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Shift()

    def forward(self, x):
        return self.inner(x) * 2


def _scaled(x, scale=2.0, *, bias=torch.zeros(3)):
    return x * scale + bias


def _calls_scaled(x):
    return _scaled(x) + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_forward_default_change_is_seen(backend):
    ember.reset()
    original = Shift.forward.__defaults__
    try:
        for model in (Shift(), Outer()):  # the compiled frame itself, and an inlined forward
            compiled = ember.compile(model, backend=backend)
            x = torch.randn(3)
            with ember.config.patch(raise_capture_errors=True):
                torch.testing.assert_close(compiled(x), model(x))
                Shift.forward.__defaults__ = (torch.full((3,), 5.0),)
                torch.testing.assert_close(compiled(x), model(x))
                Shift.forward.__defaults__[0].fill_(7.0)  # changed in place: read at call time
                torch.testing.assert_close(compiled(x), model(x))
            Shift.forward.__defaults__ = original
    finally:
        Shift.forward.__defaults__ = original


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("target", [_scaled, _calls_scaled])
def test_function_defaults_and_kwdefaults_changes_are_seen(backend, target):
    ember.reset()
    defaults, kwdefaults = _scaled.__defaults__, dict(_scaled.__kwdefaults__)
    compiled = ember.compile(target, backend=backend)
    x = torch.randn(3)
    try:
        with ember.config.patch(raise_capture_errors=True):
            torch.testing.assert_close(compiled(x), target(x))
            _scaled.__defaults__ = (3.0,)
            torch.testing.assert_close(compiled(x), target(x))
            _scaled.__kwdefaults__["bias"] = torch.full((3,), 4.0)
            torch.testing.assert_close(compiled(x), target(x))
            _scaled.__kwdefaults__ = {"bias": torch.full((3,), -1.0)}
            torch.testing.assert_close(compiled(x), target(x))
    finally:
        _scaled.__defaults__, _scaled.__kwdefaults__ = defaults, kwdefaults


def test_removed_default_raises_like_python():
    def f(x, y=1):
        return x + y

    compiled = ember.compile(f, backend="eager")
    compiled(torch.randn(2))
    f.__defaults__ = None
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'y'"):
        compiled(torch.randn(2))
