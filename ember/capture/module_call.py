"""Calling an nn.Module as `Module.__call__` does, forward hooks included, in code ember captures.

torch's `Module._call_impl` runs pre-hooks, `forward` and forward hooks in loops, next to
backward-hook plumbing.  For forward pre-hooks and forward hooks (global or per module)
`make_hooked_call` writes a straight-line function for the module's current hooks:

    def Linear_call_with_hooks(self, *args, **kwargs):
        result = __ember_hook_0(self, args)
        if result is not None:
            args = result if isinstance(result, tuple) else (result,)
        output = __ember_forward(self, *args, **kwargs)
        ...
        return output

ember captures it like any user function, so hooks and forward share a graph and a hook it cannot
capture is a graph break between straight-line calls (not in a loop, which makes a frame eager).
One function is made per set of hooks (`hook_key`), so changing the hooks captures again; a
submodule inlined in captured code guards its hook tables instead (`guard_hook_tables`).  Hooks
that need Module.__call__'s own machinery (`unsupported_hooks`) make the call run eagerly.  A
forward assigned on the instance (`module.forward = f`, as accelerate and peft do) replaces the
class's, as in torch (`instance_forward`).
"""
from __future__ import annotations

import linecache
import os
import types
from typing import Any, Callable

import torch
from torch.nn.modules import module as module_impl

from .guard_failures import Check


# The dicts whose hooks Module.__call__ runs, per module and global.  A hook's flags (with_kwargs,
# always_call) are fixed at registration, keyed by its handle id: the same ids mean the same hooks.
MODULE_HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
GLOBAL_HOOK_TABLES = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_pre_hooks",
                      "_global_backward_hooks")


def _global(name: str) -> dict:
    return getattr(module_impl, name, None) or {}


TORCH_DIR = os.path.dirname(torch.__file__)


def own_call(module: torch.nn.Module) -> Callable | None:
    """The `__call__` the module's class defines in place of nn.Module's, or None.  torch's own
    overrides (fx.GraphModule's) only wrap Module.__call__ for error messages: None too."""
    call = type(module).__call__
    if call is torch.nn.Module.__call__:
        return None
    code = getattr(call, "__code__", None)
    if code is not None and code.co_filename.startswith(TORCH_DIR):
        return None
    return call


def instance_forward(module: torch.nn.Module) -> Any:
    """The forward assigned on the instance, which Module.__call__ runs instead of the class's."""
    return module.__dict__.get("forward")


def guard_hook_tables(guards, tables: list[tuple[str, dict, str]], owner: str) -> None:
    """Guard hook dicts, given as (expression reading the dict, the dict now, name for messages):
    the empty ones together in one guard (`not (a or b)`, as Module.__call__ checks), each other
    one on its handle ids."""
    empty = [(expr, name) for expr, table, name in tables if not table]
    if empty:
        guards.add(f"not ({' or '.join(expr for expr, _ in empty)})",
                   f"{owner} has no {'hooks' if len(empty) == len(tables) else 'other hooks'}",
                   Check("hooks", f"({''.join(f'{expr}, ' for expr, _ in empty)})",
                         tuple((name, ()) for _, name in empty), "hooks"))
    for expr, table, name in tables:
        if table:
            ids = tuple(table)
            guards.add(f"tuple({expr}) == {ids!r}", f"{name} holds the hooks with handle ids {ids}",
                       Check("hooks", f"({expr},)", ((name, ids),), "hooks"))


def guard_global_hooks(guards) -> None:
    """Global module hooks fire for every module call that ember inlines."""
    tables = [(guards.ref(getattr(module_impl, name)), getattr(module_impl, name),
               f"torch.nn.modules.module.{name}") for name in GLOBAL_HOOK_TABLES if hasattr(module_impl, name)]
    guard_hook_tables(guards, tables, "torch.nn.modules.module (global module hooks)")


def has_hooks(module: torch.nn.Module) -> bool:
    """Anything that makes `module(...)` differ from `type(module).forward(module, ...)`."""
    return bool(
        module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
        or getattr(module, "_backward_pre_hooks", None)
        or module_impl._global_forward_hooks or module_impl._global_forward_pre_hooks
        or module_impl._global_backward_hooks or _global("_global_backward_pre_hooks")
    )


def has_own_hooks(module: torch.nn.Module) -> bool:
    """Hooks registered on this module (not the global ones)."""
    return any(module.__dict__.get(name) for name in MODULE_HOOK_TABLES)


def unsupported_hooks(module: torch.nn.Module) -> str | None:
    """Why `module`'s hooks cannot run in captured code, or None when they can."""
    if (module._backward_hooks or getattr(module, "_backward_pre_hooks", None)
            or module_impl._global_backward_hooks or _global("_global_backward_pre_hooks")):
        return (f"module {type(module).__name__} has backward hooks, which need Module.__call__'s "
                f"BackwardHook machinery: the call runs eagerly")
    if getattr(module, "_forward_hooks_always_called", None) or _global("_global_forward_hooks_always_called"):
        return (f"module {type(module).__name__} has forward hooks registered with always_call=True "
                f"(run even when forward raises): the call runs eagerly")
    return None


def _hooks(module: torch.nn.Module, kind: str) -> list[tuple[Any, bool]]:
    """(hook, takes kwargs) of `kind` ("pre_hooks" or "hooks") in the order Module.__call__ runs
    them: global hooks first (torch has no global pre-hooks with kwargs: that table is empty)."""
    with_kwargs = {**_global(f"_global_forward_{kind}_with_kwargs"),
                   **getattr(module, f"_forward_{kind}_with_kwargs", {})}
    hooks = [*getattr(module_impl, f"_global_forward_{kind}").items(), *getattr(module, f"_forward_{kind}").items()]
    return [(hook, hook_id in with_kwargs) for hook_id, hook in hooks]


def hook_key(module: torch.nn.Module) -> tuple:
    """Identifies the module's current hooks (the cached function holds them, so ids stay unique)."""
    return (tuple((id(hook), kwargs) for hook, kwargs in _hooks(module, "pre_hooks")),
            tuple((id(hook), kwargs) for hook, kwargs in _hooks(module, "hooks")))


_PRE_HOOK = """\
    result = {hook}(self, args)
    if result is not None:
        args = result if isinstance(result, tuple) else (result,)
"""
_PRE_HOOK_WITH_KWARGS = """\
    result = {hook}(self, args, kwargs)
    if result is not None:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                               f"but got {{result}}.")
        args, kwargs = result
"""
_FORWARD_HOOK = """\
    result = {hook}(self, args, {kwargs}output)
    if result is not None:
        output = result
"""


def make_hooked_call(module: torch.nn.Module, forward: Callable | None) -> types.FunctionType:
    """A plain function `(self, *args, **kwargs)` that runs the module's current hooks around
    `forward(self, ...)`, written out hook by hook; with `forward=None` around `self.forward(...)`,
    the forward assigned on the instance."""
    name = f"{type(module).__name__}_call_with_hooks"
    if not name.isidentifier():
        name = "module_call_with_hooks"
    namespace: dict[str, Any] = {"__ember_forward": forward, "__builtins__": __builtins__}

    def call(hook, template: str, kwargs: str = "") -> str:
        label = f"__ember_hook_{len(namespace) - 2}"
        namespace[label] = hook
        return template.format(hook=label, kwargs=kwargs)

    lines = [f"def {name}(self, *args, **kwargs):\n"]
    lines += [call(hook, _PRE_HOOK_WITH_KWARGS if kw else _PRE_HOOK) for hook, kw in _hooks(module, "pre_hooks")]
    lines.append("    output = self.forward(*args, **kwargs)\n" if forward is None else
                 "    output = __ember_forward(self, *args, **kwargs)\n")
    lines += [call(hook, _FORWARD_HOOK, "kwargs, " if kw else "") for hook, kw in _hooks(module, "hooks")]
    lines.append("    return output\n")
    source = "".join(lines)
    filename = f"<ember: {type(module).__qualname__}.__call__ with hooks {id(namespace):x}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # for tracebacks
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]
