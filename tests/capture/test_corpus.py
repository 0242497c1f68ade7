"""Differential test corpus for ember's bytecode-capture frontend.

Every program registered in ``tests/capture/corpus`` is run eagerly and through
``ember.compile(fn, backend="eager")`` for several calls with changing inputs; the compiled
callable must behave exactly like eager PyTorch:

* return values match recursively: same Python types, tensors bitwise equal (unless the
  program registers a tolerance) with equal dtype/shape/device/requires_grad (and .grad for
  leaves), returned input tensors are the very same input objects;
* arguments the program mutates (tensors, lists, dicts, user objects, modules) end up equal;
* module-level state the program touches (globals, shared objects/nn.Modules) ends up
  equal; it is reset before each run through the program's ``reset(step)`` hook;
* grad mode after the call is the same;
* if eager raises, the compiled callable raises the same exception type with the same message.

Each run gets its own deep copy of the inputs, and torch's RNG is seeded identically before
both runs.  Printed output is captured; it is compared only with
``EMBER_CORPUS_STRICT_STDOUT=1``.

``EMBER_CORPUS_SELFTEST=1`` checks the corpus and harness without ember: the "compiled"
callable is the program itself, so every program must pass and be deterministic.
"""
from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import enum
import io
import math
import os
import sys
import types
import zlib

import pytest
import torch
from torch import nn

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from corpus.registry import load_all  # noqa: E402

PROGRAMS = load_all()
SELFTEST = os.environ.get("EMBER_CORPUS_SELFTEST", "") not in ("", "0")
STRICT_STDOUT = os.environ.get("EMBER_CORPUS_STRICT_STDOUT", "") not in ("", "0")
MIN_PROGRAMS = 160


def _seed(name: str, step: int, salt: str) -> int:
    return zlib.crc32(f"{name}:{step}:{salt}".encode()) & 0x7FFFFFFF


def _compile(fn):
    if SELFTEST:
        return fn
    import ember

    ember.reset()
    return ember.compile(fn, backend="eager")


# ---------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    value: object = None
    exc: BaseException | None = None
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    input_leaves: list = dataclasses.field(default_factory=list)
    state: object = None
    grad_enabled: bool = True
    stdout: str = ""


def _run(prog, callee, inputs, step) -> Outcome:
    a, kw = copy.deepcopy(inputs)
    out = Outcome(args=a, kwargs=kw)
    _tensor_leaves((a, kw), "", out.input_leaves)  # before the call: mutation may drop them
    if prog.reset is not None:
        prog.reset(step)
    torch.manual_seed(_seed(prog.name, step, "run"))
    torch.set_grad_enabled(True)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            out.value = callee(*a, **kw)
    except Exception as e:  # noqa: BLE001 - compared against the other run
        out.exc = e
    finally:
        out.grad_enabled = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
    out.stdout = buf.getvalue()
    if prog.state is not None:
        out.state = _snapshot(prog.state())
    return out


def _snapshot(obj):
    """Copy module-level state so a later reset/run cannot change it."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().clone()
        if obj.requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(obj, dict):
        return {k: _snapshot(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_snapshot(v) for v in obj]
    if isinstance(obj, tuple):
        items = [_snapshot(v) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    if isinstance(obj, (set, frozenset)):
        return type(obj)(obj)
    try:
        return copy.deepcopy(obj)
    except Exception:  # noqa: BLE001
        return obj


def _tensor_leaves(obj, path, out):
    if isinstance(obj, torch.Tensor):
        out.append((path, obj))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _tensor_leaves(v, f"{path}[{i}]", out)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _tensor_leaves(v, f"{path}[{k!r}]", out)
    return out


# ---------------------------------------------------------------------------------------
# comparing
# ---------------------------------------------------------------------------------------

_ATOMS = (str, bytes, int, bool, complex, type(None), torch.dtype, torch.device, range, slice,
          torch.layout, torch.memory_format)
_IDENTITY = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
             types.ModuleType, enum.Enum)


def assert_same(e, c, path="out", rtol=0.0, atol=0.0, _memo=None):
    """Assert compiled value ``c`` matches eager value ``e`` (recursively)."""
    _memo = set() if _memo is None else _memo
    if type(e) is not type(c):
        raise AssertionError(f"{path}: type {type(c).__name__}, eager gives {type(e).__name__}"
                             f" ({_short(c)} vs {_short(e)})")
    key = (id(e), id(c))
    if key in _memo:
        return
    if isinstance(e, torch.Tensor):
        _assert_tensor_same(e, c, path, rtol, atol)
    elif isinstance(e, float):
        if not ((math.isnan(e) and math.isnan(c)) or e == c):
            raise AssertionError(f"{path}: {c!r}, eager gives {e!r}")
    elif isinstance(e, _ATOMS):
        if e != c:
            raise AssertionError(f"{path}: {c!r}, eager gives {e!r}")
    elif isinstance(e, _IDENTITY) or callable(e) and not hasattr(e, "__dict__"):
        if e is not c:
            raise AssertionError(f"{path}: {c!r} is not eager's {e!r}")
    elif isinstance(e, nn.Module):
        _memo.add(key)
        if e.training != c.training:
            raise AssertionError(f"{path}.training: {c.training}, eager gives {e.training}")
        assert_same(dict(e.state_dict()), dict(c.state_dict()), f"{path}.state_dict()", rtol,
                    atol, _memo)
        pub_e = {k: v for k, v in vars(e).items() if not k.startswith("_")}
        pub_c = {k: v for k, v in vars(c).items() if not k.startswith("_")}
        assert_same(pub_e, pub_c, f"{path}.__dict__", rtol, atol, _memo)
    elif isinstance(e, (list, tuple, collections.deque)):
        _memo.add(key)
        if len(e) != len(c):
            raise AssertionError(f"{path}: length {len(c)}, eager gives {len(e)}")
        for i, (ve, vc) in enumerate(zip(e, c)):
            assert_same(ve, vc, f"{path}[{i}]", rtol, atol, _memo)
    elif isinstance(e, dict):
        _memo.add(key)
        if list(e.keys()) != list(c.keys()):
            raise AssertionError(f"{path}: keys {list(c.keys())}, eager gives {list(e.keys())}")
        for k in e:
            assert_same(e[k], c[k], f"{path}[{k!r}]", rtol, atol, _memo)
    elif isinstance(e, (set, frozenset)):
        if e != c:
            raise AssertionError(f"{path}: {c!r}, eager gives {e!r}")
    elif hasattr(e, "__dict__") or hasattr(type(e), "__slots__"):
        _memo.add(key)
        assert_same(_attrs(e), _attrs(c), f"{path}.<attrs>", rtol, atol, _memo)
    else:
        if e != c:
            raise AssertionError(f"{path}: {c!r}, eager gives {e!r}")


def _attrs(obj):
    out = dict(sorted(vars(obj).items())) if hasattr(obj, "__dict__") else {}
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                out[slot] = getattr(obj, slot)
    return out


def _assert_tensor_same(e, c, path, rtol, atol):
    for attr in ("dtype", "shape", "device", "layout", "requires_grad"):
        if getattr(e, attr) != getattr(c, attr):
            raise AssertionError(f"{path}.{attr}: {getattr(c, attr)}, eager gives {getattr(e, attr)}")
    torch.testing.assert_close(
        c.detach(), e.detach(), rtol=rtol, atol=atol, equal_nan=True, check_stride=False,
        msg=lambda m: f"{path}: values differ from eager\n{m}",
    )
    if e.is_leaf and c.is_leaf and (e.grad is not None or c.grad is not None):
        if (e.grad is None) != (c.grad is None):
            raise AssertionError(f"{path}.grad: {c.grad}, eager gives {e.grad}")
        _assert_tensor_same(e.grad, c.grad, f"{path}.grad", rtol, atol)


def _short(v, n=120):
    r = repr(v)
    return r if len(r) <= n else r[: n - 3] + "..."


def _compare(prog, eager: Outcome, comp: Outcome):
    tol = dict(rtol=prog.rtol, atol=prog.atol)
    if eager.exc is not None:
        if comp.exc is None:
            raise AssertionError(
                f"eager raised {type(eager.exc).__name__}({eager.exc}) but compiled returned "
                f"{_short(comp.value)}"
            ) from eager.exc
        if type(comp.exc) is not type(eager.exc) or str(comp.exc) != str(eager.exc):
            raise AssertionError(
                f"compiled raised {type(comp.exc).__name__}({comp.exc}), eager raised "
                f"{type(eager.exc).__name__}({eager.exc})"
            ) from comp.exc
    elif comp.exc is not None:
        raise AssertionError(
            f"compiled raised {type(comp.exc).__name__}: {comp.exc}"
        ) from comp.exc
    else:
        assert_same(eager.value, comp.value, "return", **tol)
        out_e = _tensor_leaves(eager.value, "return", [])
        out_c = _tensor_leaves(comp.value, "return", [])
        ids_e = {id(t): p for p, t in eager.input_leaves}
        ids_c = {id(t): p for p, t in comp.input_leaves}
        for (p, te), (_, tc) in zip(out_e, out_c):
            src_e, src_c = ids_e.get(id(te)), ids_c.get(id(tc))
            if src_e != src_c:
                raise AssertionError(
                    f"{p}: eager returns {'input ' + src_e if src_e else 'a new tensor'}, "
                    f"compiled returns {'input ' + src_c if src_c else 'a new tensor'}"
                )
    assert_same(eager.args, comp.args, "args (after call)", **tol)
    assert_same(eager.kwargs, comp.kwargs, "kwargs (after call)", **tol)
    if prog.state is not None:
        assert_same(eager.state, comp.state, "module-level state", **tol)
    if eager.grad_enabled != comp.grad_enabled:
        raise AssertionError(
            f"grad mode after call: {comp.grad_enabled}, eager leaves {eager.grad_enabled}"
        )
    if STRICT_STDOUT and eager.stdout != comp.stdout:
        raise AssertionError(f"stdout: {comp.stdout!r}, eager prints {eager.stdout!r}")


# ---------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------


def _inputs(prog, step):
    torch.manual_seed(_seed(prog.name, step, "inputs"))
    return prog.make_inputs(step)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(name):
    prog = PROGRAMS[name]
    compiled = _compile(prog.fn)
    try:
        for step in range(prog.steps):
            inputs = _inputs(prog, step)
            eager = _run(prog, prog.fn, inputs, step)
            comp = _run(prog, compiled, inputs, step)
            try:
                _compare(prog, eager, comp)
            except AssertionError as err:
                raise AssertionError(f"{name}, call {step}: {err}") from err.__cause__
    finally:
        if prog.reset is not None:
            prog.reset(0)
        torch.set_grad_enabled(True)


def test_corpus_size():
    assert len(PROGRAMS) >= MIN_PROGRAMS, f"only {len(PROGRAMS)} corpus programs"
    themes = collections.Counter(p.theme for p in PROGRAMS.values())
    assert all(n >= 10 for n in themes.values()), themes


def test_inputs_reproducible_and_changing():
    """make_inputs is deterministic for a seed, and inputs differ between calls."""
    for name, prog in sorted(PROGRAMS.items()):
        first = _inputs(prog, 0)
        assert_same(first, _inputs(prog, 0), f"{name} inputs")
        for step in range(1, prog.steps):
            try:
                assert_same(first, _inputs(prog, step), f"{name} inputs")
            except AssertionError:
                break
        else:
            raise AssertionError(f"{name}: make_inputs gives the same inputs on every call")
