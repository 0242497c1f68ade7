"""Live argument defaults for dispatchers.

A dispatcher has its user function's signature; copying the function's defaults would freeze
them (`f.__defaults__ = (...)` after compiling would not be seen).  Instead its defaults are a
sentinel, and its first lines read each default not passed from the function, at call time:

    def forward(self, x, mask=<unset>):
        if mask is __ember_unset: mask = __ember_default(__ember_function, -1, 'mask')
        return __ember_runner(__ember_closure, self, x, mask)

A changed default is then just a different argument value, which the guards see.
"""
from __future__ import annotations

import types
from typing import Any


class _Unset:
    def __repr__(self) -> str:
        return "<argument not passed>"


UNSET = _Unset()


def positional_default(function: types.FunctionType, offset: int, name: str) -> Any:
    """The default of the positional parameter `offset` places from the end (as CPython aligns them)."""
    defaults = function.__defaults__ or ()
    if -offset > len(defaults):
        raise TypeError(f"{function.__qualname__}() missing 1 required positional argument: '{name}'")
    return defaults[offset]


def keyword_default(function: types.FunctionType, name: str) -> Any:
    kwdefaults = function.__kwdefaults__ or {}
    if name not in kwdefaults:
        raise TypeError(f"{function.__qualname__}() missing 1 required keyword-only argument: '{name}'")
    return kwdefaults[name]


def sentinel_defaults(function: types.FunctionType) -> tuple[tuple | None, dict | None, list[str]]:
    """(dispatcher __defaults__, dispatcher __kwdefaults__, prologue lines) for `function`."""
    code = function.__code__
    names = code.co_varnames
    defaults = function.__defaults__ or ()
    kwdefaults = function.__kwdefaults__ or {}
    lines = []
    first = code.co_argcount - len(defaults)
    for position in range(max(first, 0), code.co_argcount):
        name = names[position]
        lines.append(f"if {name} is __ember_unset: "
                     f"{name} = __ember_default(__ember_function, {position - code.co_argcount}, {name!r})")
    for name in kwdefaults:
        lines.append(f"if {name} is __ember_unset: {name} = __ember_kwdefault(__ember_function, {name!r})")
    return ((UNSET,) * len(defaults) if defaults else None,
            {name: UNSET for name in kwdefaults} if kwdefaults else None, lines)


def namespace(function: types.FunctionType) -> dict[str, Any]:
    return {"__ember_unset": UNSET, "__ember_default": positional_default, "__ember_kwdefault": keyword_default,
            "__ember_function": function}
