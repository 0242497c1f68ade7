"""Why a guard failed, in the user's terms: `x.size(0) expected 4, got 5`.

A guard (guards.py) may carry a `Check`: an expression it read (`subject`), its value at capture
time (`expected`) and how they compare (`kind`).  On a cache miss the subject is evaluated again
and the explainer of its kind names the first fact that differs, with both values, on paths as
the user wrote them (`self.linear.weight`), not as the guard reads them.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch


@dataclasses.dataclass(frozen=True)
class Check:
    kind: str  # a key of EXPLAINERS
    subject: str  # expression evaluated in the guard function's namespace
    expected: Any
    what: Any  # the Source read, or a ready label (global state)


@dataclasses.dataclass(frozen=True)
class TensorFacts:
    """What a tensor guard checks, as it was at capture time."""

    type: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple
    stride: tuple
    requires_grad: bool

    @classmethod
    def of(cls, value: torch.Tensor) -> "TensorFacts":
        stride = tuple(value.stride()) if value.layout == torch.strided else ()
        return cls(type(value), value.dtype, value.device, tuple(value.shape), stride, value.requires_grad)


def user_path(source: Any) -> str:
    """A Source's path as the user wrote it (`Source.user_path`); a ready label as it is."""
    return source if isinstance(source, str) else source.user_path()


# -- explainers: (path, expected, actual) -> the first difference -----------------------------------
def _show(value: Any) -> str:
    if isinstance(value, type):
        return value.__qualname__
    if callable(value) and hasattr(value, "__qualname__"):
        return f"<{type(value).__name__} {value.__qualname__}>"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _difference(path: str, expected: Any, actual: Any) -> str:
    return f"{path} expected {_show(expected)}, got {_show(actual)}"


def _value(path: str, expected: Any, actual: Any) -> str:
    if type(expected) is not type(actual) and expected == actual:  # 2 vs 2.0 vs True
        return (f"{path} expected {_show(expected)} ({type(expected).__name__}), "
                f"got {_show(actual)} ({type(actual).__name__})")
    return _difference(path, expected, actual)


def _identity(path: str, expected: Any, actual: Any) -> str:
    if type(expected) is not type(actual):
        return _difference(f"type({path})", type(expected), type(actual))
    return f"{path} expected the object seen at compile time ({_show(expected)}), got another ({_show(actual)})"


def _tensor(path: str, expected: TensorFacts, actual: Any) -> str:
    if not isinstance(actual, torch.Tensor):
        return f"{path} expected a tensor, got {_show(type(actual))}"
    facts = [
        (f"type({path})", expected.type, type(actual)),
        (f"{path}.dtype", expected.dtype, actual.dtype),
        (f"{path}.device", expected.device, actual.device),
        (f"{path}.dim()", len(expected.shape), actual.dim()),
        *[(f"{path}.size({dim})", size, actual.size(dim)) for dim, size in enumerate(expected.shape)],
        (f"{path}.stride()", expected.stride, tuple(actual.stride())),
        (f"{path}.requires_grad", expected.requires_grad, actual.requires_grad),
    ]
    for label, want, got in facts:
        if want != got:
            return _difference(label, want, got)
    return f"{path} matches {expected} again (it changed while the guard ran)"


def _distinct(label: str, paths: tuple, actual: tuple) -> str:
    seen: dict[int, str] = {}
    for path, value in zip(paths, actual):
        if id(value) in seen:
            return f"{path} expected to be another object than {seen[id(value)]} (as at compile time), got the same"
        seen[id(value)] = path
    return f"{', '.join(paths)} are distinct again (they changed while the guard ran)"


def _hooks(label: str, expected: tuple, actual: tuple) -> str:
    for (name, ids), table in zip(expected, actual):
        if tuple(table) != ids:
            now = ", ".join(_show(hook) for hook in table.values()) or "none"
            return f"{name} expected {'hooks ' + str(ids) if ids else 'no hooks'}, got {now}"
    return "hooks are as at compile time again (they changed while the guard ran)"


EXPLAINERS: dict[str, Callable[[str, Any, Any], str]] = {
    "value": _value,
    "type": lambda path, expected, actual: _difference(f"type({path})", expected, type(actual)),
    "identity": _identity,
    "length": lambda path, expected, actual: _difference(f"len({path})", expected, len(actual)),
    "keys": lambda path, expected, actual: _difference(f"keys of {path}", expected, tuple(actual.keys())),
    "absent": lambda path, key, actual: f"{key} expected to be the builtin, got a global named {key!r} in {path}",
    "tensor": _tensor,
    "same": lambda label, paths, actual: (f"{paths[1]} expected to be the same object as {paths[0]} (as at "
                                          f"compile time), got another"),
    "distinct": _distinct,
    "hooks": _hooks,
}


def explain(check: Check, evaluate: Callable[[str], Any]) -> str:
    """The first difference between what `check` expected and what its subject is now."""
    actual = evaluate(check.subject)
    return EXPLAINERS[check.kind](user_path(check.what), check.expected, actual)
