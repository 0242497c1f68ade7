"""Guards: the facts a capture relied on, compiled into one Python function per cache entry.

Each guard is a boolean expression over sources (sources.py) with a description for logs and
`ember.explain`.  `GuardSet.compile()` joins them with `and` into one generated function

    def __ember_guard(__ember_closure, x, y):
        return (type(x) is __ember_ref_0 and x.dtype is __ember_ref_1 and ...)

with constants bound as globals of the function (no loops, no lookups).  On a miss, `failures()`
evaluates the guards one by one to say which fact changed (each guard's `Check`, explained in
guard_failures.py).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

import torch

from .guard_failures import Check, TensorFacts, explain, user_path
from .shapes import GUARD_NAMESPACE
from .source_text import comment
from .sources import CLOSURE, GLOBALS, Source


_STEP = re.compile(r"\[(?:'[^']*'|\"[^\"]*\"|-?\d+)\]|\.[A-Za-z_]\w*")  # a subscript or an attribute
_LAST_STEP = re.compile(f"(?:{_STEP.pattern})$")


@dataclasses.dataclass(frozen=True)
class Guard:
    expr: str
    description: str
    check: Check | None = None  # what it expected, for the recompile log


class GuardSet:
    def __init__(self) -> None:
        self.guards: list[Guard] = []
        self._seen: set = set()  # guard expressions, and ("constant", path) for constants
        self.refs: dict[str, Any] = {}  # name -> object the expressions refer to
        self._ref_names: dict[int, str] = {}
        self._paths: set[str] = set()  # attribute/item paths the guards read
        # Objects that were distinct at capture, by group: objects of different groups cannot be
        # the same object while the other guards hold (different tensor metadata, tensor vs list).
        self._distinct: dict[Any, list[Source]] = {}

    # -- helpers ---------------------------------------------------------------------------
    def ref(self, obj: Any) -> str:
        """A name under which `obj` is visible to the guard function (kept alive by it)."""
        key = id(obj)
        if key not in self._ref_names:
            name = f"__ember_ref_{len(self._ref_names)}"
            self._ref_names[key] = name
            self.refs[name] = obj
        return self._ref_names[key]

    def add(self, expr: str, description: str, check: Check | None = None) -> None:
        if expr in self._seen:
            return
        self._seen.add(expr)
        self.guards.append(Guard(expr, description, check))

    def _note(self, source: Source) -> None:
        """Remember the paths a guard reads through, for the shared-prefix locals in source_code."""
        while getattr(source, "base", None) is not None:
            self._paths.add(source.expr())
            source = source.base

    # -- kinds of guards ----------------------------------------------------------------------
    def _fact(self, source: Source, kind: str, expected: Any, expr: str, description: str) -> None:
        """A guard on the value at `source`, whose Check of `kind` expects `expected`."""
        self._note(source)
        self.add(expr, description, Check(kind, source.expr(), expected, source))

    def identity(self, source: Source, obj: Any) -> None:
        expr = source.expr()
        self._fact(source, "identity", obj, f"{expr} is {self.ref(obj)}", f"{expr} is the same object")

    def type_match(self, source: Source, obj: Any) -> None:
        expr, cls = source.expr(), type(obj)
        self._fact(source, "type", cls, f"type({expr}) is {self.ref(cls)}", f"type({expr}) is {cls.__qualname__}")

    def constant(self, source: Source, value: Any) -> None:
        """A Python constant: same type and equal value (so 1, 1.0 and True stay apart)."""
        expr = source.expr()
        if value is None or isinstance(value, bool) or value is Ellipsis or value is NotImplemented:
            self._fact(source, "value", value, f"{expr} is {self.ref(value)}", f"{expr} is {value!r}")
            return
        if isinstance(value, float) and value != value:  # NaN is not equal to itself
            self.type_match(source, value)
            self._fact(source, "value", value, f"{expr} != {expr}", f"{expr} is nan")
            return
        # The object seen at capture passes at once (a module's stride tuple, its eps); another
        # needs the same type and an equal value.  (Keyed by the path: the local's name differs.)
        self._note(source)
        if ("constant", expr) in self._seen:
            return
        self._seen.add(("constant", expr))
        cls, local = type(value), f"__ember_c{len(self.guards)}"
        self._fact(source, "value", value, f"({local} := {expr}) is {self.ref(value)} or (type({local}) is "
                   f"{self.ref(cls)} and {local} == {self.ref(value)})", f"{expr} == {value!r} ({cls.__qualname__})")

    def length(self, source: Source, obj: Any) -> None:
        self.type_match(source, obj)
        text = f"len({source.expr()}) == {len(obj)}"
        self._fact(source, "length", len(obj), text, text)

    def dict_keys(self, source: Source, obj: dict) -> None:
        self.type_match(source, obj)
        expr, keys = source.expr(), tuple(obj.keys())
        self._fact(source, "keys", keys, f"tuple({expr}.keys()) == {self.ref(keys)}", f"keys of {expr} are {keys!r}")

    def key_absent(self, source: Source, key: str) -> None:
        text = f"{key!r} not in {source.expr()}"
        self._fact(source, "absent", key, text, text)

    def tensor(self, source: Source, value: torch.Tensor, fake: torch.Tensor | None = None) -> None:
        """Metadata of a tensor input, and that it is another object than the other tensor inputs
        (each is one placeholder).  Sizes and strides that are symbols in `fake` are left to the
        ShapeEnv's guards."""
        self._note(source)
        expr = source.expr()
        facts = TensorFacts.of(value)
        # The path is read once (walrus) and its checks reuse the local.
        local = f"__ember_t{len(self.guards)}"
        strided = value.layout == torch.strided
        symbolic = fake is not None and strided and any(
            isinstance(s, torch.SymInt) for s in (*fake.shape, *fake.stride()))
        if symbolic:
            sizes = [f"{local}.dim() == {value.dim()}"]
            sizes += [f"{local}.size({d}) == {n}" for d, n in enumerate(fake.shape) if not isinstance(n, torch.SymInt)]
            sizes += [f"{local}.stride({d}) == {n}" for d, n in enumerate(fake.stride())
                      if not isinstance(n, torch.SymInt)]
        else:
            # With no size below 2, contiguous strides are the only ones is_contiguous() accepts
            # (it ignores the strides of size-1 dimensions), and it costs less than stride().
            exact = strided and value.is_contiguous() and all(n > 1 for n in value.shape)
            sizes = [
                f"{local}.shape == {tuple(value.shape)!r}",
                # Sparse tensors have no strides: their layout is checked instead.
                f"{local}.is_contiguous()" if exact else
                f"{local}.stride() == {tuple(value.stride())!r}" if strided else
                f"{local}.layout is {self.ref(value.layout)}",
            ]
        parts = [
            f"type({local} := {expr}) is {self.ref(type(value))}",
            f"{local}.dtype is {self.ref(value.dtype)}",
            self._device_check(local, value.device),
            *sizes,
            f"{local}.requires_grad is {value.requires_grad}",
        ]
        shown = fake if symbolic else value  # dynamic sizes show as their symbols: [s0, 3]
        sizes_text = "[" + ", ".join(str(n) for n in shown.shape) + "]"
        strides_text = "(" + ", ".join(str(n) for n in shown.stride()) + ("," if shown.dim() == 1 else "") + ")" \
            if strided else ""
        description = (
            f"{expr}: {type(value).__name__} {str(value.dtype).replace('torch.', '')}"
            f"{sizes_text} {f'stride={strides_text}' if strided else value.layout} {value.device}"
            f" requires_grad={value.requires_grad}"
        )
        self.add(" and ".join(parts), description, Check("tensor", expr, facts, source))
        self.distinct(source, facts)

    def _device_check(self, local: str, device: torch.device) -> str:
        """`t.device == d` makes a device object per call: a CPU tensor, or the only CUDA device's, needs one flag."""
        if device.type == "cpu":
            return f"{local}.is_cpu"
        if device.type == "cuda" and torch.cuda.is_available() and torch.cuda.device_count() == 1:
            return f"{local}.is_cuda"
        return f"{local}.device == {self.ref(device)}"

    def same_object(self, source: Source, other: Source) -> None:
        """`source` holds the object first seen at `other` (a tied weight, `f(x, x)`)."""
        self._note(source)
        self._note(other)
        self.add(f"{source.expr()} is {other.expr()}", f"{source.expr()} is {other.expr()}",
                 Check("same", f"({other.expr()}, {source.expr()})", (user_path(other), user_path(source)),
                       "same object"))

    def distinct(self, source: Source, group: Any) -> None:
        """The object at `source` differs from the others registered in `group` (mutable objects
        whose identity the capture relied on), checked by one guard per group (`all_guards`)."""
        self._note(source)
        self._distinct.setdefault(group, []).append(source)

    def all_guards(self) -> list[Guard]:
        """The guards, then one distinctness guard per group of two or more objects (objects of
        different guarded metadata cannot be one object: only look-alikes are compared)."""
        guards = list(self.guards)
        for sources in self._distinct.values():
            if len(sources) < 2:
                continue
            exprs = [source.expr() for source in sources]
            names = tuple(user_path(source) for source in sources)
            if len(exprs) <= 8:  # (pairwise `is not`: cheaper than a set of ids up to 28 pairs)
                expr = " and ".join(f"{a} is not {b}" for k, a in enumerate(exprs) for b in exprs[k + 1:])
            else:
                expr = f"len({{{', '.join(f'id({e})' for e in exprs)}}}) == {len(exprs)}"
            description = f"{', '.join(names)} are distinct objects"
            guards.append(Guard(expr, description, Check("distinct", f"({', '.join(exprs)},)", names, "distinct")))
        return guards

    def global_state(self) -> None:
        """Grad mode, autocast and the default dtype: every capture depends on them."""
        grad, query = torch.is_grad_enabled(), f"{self.ref(torch.is_grad_enabled)}()"
        self.add(f"{query} is {grad}", f"grad mode is {'enabled' if grad else 'disabled'}",
                 Check("value", query, grad, "torch.is_grad_enabled()"))
        dtype, query = torch.get_default_dtype(), f"{self.ref(torch.get_default_dtype)}()"
        self.add(f"{query} is {self.ref(dtype)}", f"default dtype is {dtype}",
                 Check("value", query, dtype, "torch.get_default_dtype()"))
        autocast = autocast_state()
        # (per device type: enabled, and the dtype only where enabled; two C calls per call
        # when autocast is off, the common case, instead of a Python function's four)
        terms = []
        for device_type, enabled, dtype in (("cpu", *autocast[:2]), ("cuda", *autocast[2:])):
            terms.append(f"{self.ref(torch.is_autocast_enabled)}({device_type!r}) is {enabled}")
            if enabled:
                terms.append(f"{self.ref(torch.get_autocast_dtype)}({device_type!r}) is {self.ref(dtype)}")
        self.add(" and ".join(terms), f"autocast state is {autocast!r}",
                 Check("value", f"{self.ref(autocast_state)}()", autocast,
                       "autocast state (cpu enabled, cpu dtype, cuda enabled, cuda dtype)"))

    # -- code generation ------------------------------------------------------------------
    def source_code(self, params: list[str]) -> str:
        signature = ", ".join([CLOSURE, *params])
        guards = self.all_guards()
        body = "\n        and ".join(f"({expr})" for expr in self._shared_paths(guards)) or "True"
        lines = [f"def __ember_guard({signature}):"]
        for guard in guards:
            lines.append(f"    # {comment(guard.description)}")
        lines.append(f"    return (\n        {body}\n    )")
        return "\n".join(lines)

    def _shared_paths(self, guards: list[Guard]) -> list[str]:
        """The guard expressions with each path read by several guards bound to a local where it
        is first read (walrus) and reused after (guards run in order, so it is always bound)."""
        exprs = [guard.expr for guard in guards]
        # A path is looked for only in the expressions holding its last step (else this is quadratic);
        # rewriting only removes text or repeats a path's, so the index stays a superset.
        holders: dict[str, list[int]] = {}
        for i, expr in enumerate(exprs):
            for step in set(_STEP.findall(expr)):
                holders.setdefault(step, []).append(i)
        shared = 0
        for path in sorted(self._paths, key=len, reverse=True):  # longest first: prefixes nest
            last = _LAST_STEP.search(path)
            candidates = holders.get(last.group(0), []) if last else range(len(exprs))
            users = [i for i in candidates if path in exprs[i] and _path_at(exprs[i], path) >= 0]
            if len(users) < 2:
                continue
            local = f"__ember_p{shared}"
            shared += 1
            first = users[0]
            exprs[first] = _replace_path(exprs[first], path, local, f"({local} := {path})")
            for i in users[1:]:
                exprs[i] = _replace_path(exprs[i], path, local)
        return exprs

    def compile(self, params: list[str], globals_dict: dict, source: str | None = None) -> Callable[..., bool]:
        """The guard function (`source`: this set's `source_code(params)`, where the caller has it)."""
        namespace = self._namespace(globals_dict)
        exec(compile(source or self.source_code(params), "<ember guard>", "exec"), namespace)
        return namespace["__ember_guard"]

    def _namespace(self, globals_dict: dict) -> dict:
        # (GUARD_NAMESPACE: what the ShapeEnv's guards on float symbols call: `not math.isnan(lr)`)
        return {**self.refs, GLOBALS: globals_dict, "__builtins__": __builtins__, **GUARD_NAMESPACE}

    def failures(self, params: list[str], globals_dict: dict, closure, args) -> list[str]:
        """The first guard that does not hold for these arguments (slow path, for logs).  Evaluation
        stops there, as the compiled `and` chain does: a later guard may need the earlier ones."""
        guard, evaluate, error = self._first_failure(params, globals_dict, closure, args)
        if guard is None:
            return []
        if error is not None:  # a missing attribute or key also means "changed"
            return [f"{guard.description} (raised {type(error).__name__}: {error})"]
        return [_explain(guard, evaluate)]

    def _first_failure(self, params: list[str], globals_dict: dict, closure, args):
        """(the first guard that fails or raises, an evaluator of expressions, the error)."""
        namespace = self._namespace(globals_dict)

        def evaluate(expr: str) -> Any:
            exec(f"def __check({', '.join([CLOSURE, *params])}):\n    return ({expr})", namespace)
            return namespace["__check"](closure, *args)

        for guard in self.all_guards():
            try:
                if not evaluate(guard.expr):
                    return guard, evaluate, None
            except Exception as error:  # noqa: BLE001
                return guard, evaluate, error
        return None, evaluate, None

    def _values_now(self, params: list[str], globals_dict: dict, closure, args, checks: list[Check]) -> list[tuple]:
        """(check, its subject's value now) for an entry that missed, skipping paths that are gone."""
        guard, evaluate, error = self._first_failure(params, globals_dict, closure, args)
        if guard is None:
            return []
        values = []
        for check in checks:
            try:
                values.append((check, evaluate(check.subject)))
            except Exception:  # noqa: BLE001 - its path no longer exists
                pass
        return values

    def changed_sizes(self, params: list[str], globals_dict: dict, closure, args) -> list[tuple]:
        """Tensor inputs whose sizes (only) changed, when a guard fails: (guard expression, the
        user's path, dim, old size, new size) per changed dim."""
        tensors = [guard.check for guard in self.guards if guard.check is not None and guard.check.kind == "tensor"]
        changed = []
        for check, value in self._values_now(params, globals_dict, closure, args, tensors):
            facts = check.expected
            if isinstance(value, torch.Tensor) and type(value) is facts.type and value.dtype is facts.dtype \
                    and value.device == facts.device and value.dim() == len(facts.shape) \
                    and value.requires_grad is facts.requires_grad and value.layout == torch.strided:
                changed += [(check.subject, user_path(check.what), d, old, new)
                            for d, (old, new) in enumerate(zip(facts.shape, value.shape)) if old != new]
        return changed

    def _value_checks(self) -> list[Check]:
        """The checks of guards on a value found at a source (not the global state's)."""
        return [guard.check for guard in self.guards if guard.check is not None and guard.check.kind == "value"
                and isinstance(guard.check.what, Source)]

    def number_constants(self) -> dict[str, str]:
        """The ints and floats guarded by value (in guarded tuples too): guard expression -> user's path."""
        return {expr: path for check in self._value_checks()
                for expr, path, _, _ in _numbers(check.what, check.expected)}

    def changed_scalars(self, params: list[str], globals_dict: dict, closure, args) -> list[tuple]:
        """Python ints and floats guarded by value that now hold another number of the same type
        (scalars.py), for an entry that missed: (guard expression, the user's path, old, new)."""
        checks = [check for check in self._value_checks() if _numbers(check.what, check.expected)]
        changed = []
        for check, value in self._values_now(params, globals_dict, closure, args, checks):
            if type(check.expected) is tuple and (type(value) is not tuple or len(value) != len(check.expected)):
                continue  # (a tuple of the same length: its numbers one by one)
            for expr, path, old, position in _numbers(check.what, check.expected):
                new = value if position is None else value[position]
                if type(new) is type(old) and new != old:
                    changed.append((expr, path, old, new))
        return changed


def _numbers(source: Source, value: Any) -> list[tuple[str, str, Any, int | None]]:
    """(expression, user's path, value, position in the tuple or None) of the int or float `value`
    at `source`, or of each one in the tuple `value` (an optimizer's `betas`)."""
    from .scalars import is_dynamic_candidate
    from .sources import ItemSource

    if is_dynamic_candidate(value):
        return [(source.expr(), user_path(source), value, None)]
    if type(value) is tuple:
        return [(ItemSource(source, index).expr(), user_path(ItemSource(source, index)), item, index)
                for index, item in enumerate(value) if is_dynamic_candidate(item)]
    return []


def _path_at(expr: str, path: str, start: int = 0) -> int:
    """Where `path` occurs in `expr` from `start` as a whole path (not part of a longer name, not in
    a string), or -1.  A longer path it heads (`path.weight`) counts: paths are replaced longest first."""
    size = len(path)
    while True:
        at = expr.find(path, start)
        if at < 0:
            return -1
        before = expr[at - 1] if at else " "
        after = expr[at + size] if at + size < len(expr) else " "
        if not (before.isalnum() or before in "_.'\"") and not (after.isalnum() or after in "_'\""):
            return at
        start = at + 1


def _replace_path(expr: str, path: str, local: str, first: str | None = None) -> str:
    """`expr` with each whole occurrence of `path` replaced by `local` (the first by `first`, if given)."""
    pieces, start = [], 0
    while (at := _path_at(expr, path, start)) >= 0:
        pieces += [expr[start:at], first if first is not None and not pieces else local]
        start = at + len(path)
    return "".join(pieces) + expr[start:]


def _explain(guard: Guard, evaluate: Callable[[str], Any]) -> str:
    """`x.size(0) expected 4, got 5` where the guard knows what it checked, else its description."""
    if guard.check is None:
        return f"{guard.description} no longer holds"
    try:
        return explain(guard.check, evaluate)
    except Exception as error:  # the subject cannot be read any more: say so
        return f"{guard.description} no longer holds ({type(error).__name__}: {error})"


def autocast_state() -> tuple:
    """(cpu enabled, cpu dtype, cuda enabled, cuda dtype)."""
    return tuple(query(device) for device in ("cpu", "cuda")
                 for query in (torch.is_autocast_enabled, torch.get_autocast_dtype))
