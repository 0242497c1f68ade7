"""Seeded generation of random straight-line PyTorch programs.

`generate(seed, mode)` draws inputs, then statements one at a time: an op family is drawn, its
builder (ops_*.py) writes a statement over the values at hand, and the statement runs eagerly on
the real input values right away. A statement that raises, or whose result would be undefined
(a float outside an integer type's range converted to it), is dropped and another is drawn, so
every program is valid eager PyTorch. Rarely (per mode) a raising statement is kept as the last
one, to check that ember raises too.
"""
from __future__ import annotations

import io
import math
import random
import tokenize
import warnings

import torch
import torch.nn.functional as F

from . import modes as modes_module
from .inputs import INT_DTYPES, InputSpec, render_input
from .oppool import OPS_BY_FAMILY
from .program import Program, Statement

MAX_NUMEL = 50_000
MAX_ATTEMPTS_PER_OP = 25


# Ops whose integer kernels divide (a minimum divided by -1 traps).
INTEGER_DIVISIONS = {"div_floor", "div_trunc", "floor_divide", "remainder", "fmod", "div_"}


class Rejected(Exception):
    """A statement the builder does not want (undefined result, too big); another is drawn."""


class Builder:
    """What op builders see: the values so far (live tensors) and helpers to pick and emit."""

    def __init__(self, seed: int, mode: modes_module.Mode) -> None:
        self.seed = seed
        self.mode = mode
        self.rng = random.Random(f"fuzz-{mode.name}-{seed}")
        self.program = Program(seed=seed, mode=mode.name, inputs=[], statements=[], outputs=[])
        self.namespace: dict = {}
        self.values: list[str] = []        # every tensor name, in creation order
        self.use_counts: dict[str, int] = {}
        self.next_value = 0
        self.next_input_seed = 0
        self.intentional_error = False     # the current candidate was made to raise (bad index)
        self._fresh_namespace()

    # ---- state -----------------------------------------------------------------------------
    def _fresh_namespace(self) -> None:
        self.namespace = {"torch": torch, "F": F, "gen": lambda s: torch.Generator().manual_seed(s), "DEVICE": "cpu"}

    def rebuild(self) -> None:
        """Re-run inputs and statements from scratch (after a statement failed half-way)."""
        self._fresh_namespace()
        for spec in self.program.inputs:
            self._build_input(spec)
        for statement in self.program.statements:
            exec(statement.text, self.namespace)

    def _build_input(self, spec: InputSpec) -> None:
        lines, _ = render_input(spec)
        exec("\n".join(lines), self.namespace)

    def tensor(self, name: str) -> torch.Tensor:
        return self.namespace[name]

    # ---- drawing ---------------------------------------------------------------------------
    def chance(self, probability: float) -> bool:
        return self.rng.random() < probability

    def choice(self, options):
        return self.rng.choice(list(options))

    def weighted(self, table: dict):
        keys = list(table)
        return self.rng.choices(keys, weights=[table[key] for key in keys])[0]

    def pick(self, predicate=None, exclude=()) -> str | None:
        """A value name, favouring recent and not-yet-used values."""
        candidates = [name for name in self.values
                      if name not in exclude and (predicate is None or predicate(self.tensor(name)))]
        if not candidates:
            return None
        weights = []
        for position, name in enumerate(candidates):
            weight = 1.0 + 2.0 * position / max(len(candidates) - 1, 1)
            if self.use_counts.get(name, 0) == 0:
                weight *= 2.0
            weights.append(weight)
        return self.rng.choices(candidates, weights=weights)[0]

    def pick_broadcastable(self, shape, predicate=None, exclude=(), into=False) -> str | None:
        """A value whose shape broadcasts with `shape` (into=True: to exactly `shape`)."""
        def fits(tensor):
            try:
                result = torch.broadcast_shapes(tuple(tensor.shape), tuple(shape))
            except RuntimeError:
                return False
            if into and tuple(result) != tuple(shape):
                return False
            return predicate is None or predicate(tensor)
        return self.pick(fits, exclude=exclude)

    def dim(self, tensor: torch.Tensor, negative_ok: bool = True) -> int:
        rank = max(tensor.dim(), 1)
        dim = self.rng.randrange(rank)
        if negative_ok and self.chance(0.3):
            dim -= rank
        return dim

    def dims(self, tensor: torch.Tensor) -> list[int]:
        rank = tensor.dim()
        if rank == 0:
            return [0]
        count = self.rng.randint(1, rank)
        chosen = sorted(self.rng.sample(range(rank), count))
        return [dim - rank if self.chance(0.2) else dim for dim in chosen]

    def scalar(self, tensor: torch.Tensor | None = None, kind: str | None = None) -> str:
        """Python source for a scalar operand that suits `tensor`'s dtype (sometimes one that does not)."""
        dtype = tensor.dtype if tensor is not None else torch.float32
        special = self.chance(self.mode.special_scalar_prob)
        if kind is None:
            if dtype == torch.bool:
                kind = self.weighted({"bool": 6, "int": 3, "float": 2})
            elif dtype in INT_DTYPES:
                kind = self.weighted({"int": 8, "float": 2, "bool": 1})
            else:
                kind = self.weighted({"float": 8, "int": 3, "bool": 1})
        if kind == "bool":
            return self.choice(["True", "False"])
        if kind == "int":
            if special:
                return str(self.choice([200, 255, 127, 128, -129, 300, 32767, 65536, 2 ** 31, -1, 0, 7]))
            return str(self.choice([0, 1, 2, 3, -1, -2, 5, 7]))
        if special:
            return self.choice(["float('inf')", "float('-inf')", "float('nan')", "-0.0", "0.0", "1e30", "1e-30",
                                "65504.0", "1e-07"])
        return self.choice(["0.5", "2.0", "-1.5", "3.0", "0.1", "1e-3", "100.0", "-2.0", "1.0"])

    # ---- new inputs ------------------------------------------------------------------------
    def input_seed(self) -> int:
        self.next_input_seed += 1
        return self.seed * 100 + self.next_input_seed

    def input_name(self) -> str:
        data = [spec for spec in self.program.inputs if not spec.is_index]
        return "abcdefghjkmnpqrstuwxyz"[len(data)] if len(data) < 22 else f"t{len(data)}"

    def add_input(self, spec: InputSpec) -> str:
        self.program.inputs.append(spec)
        self._build_input(spec)
        self.values.append(spec.name)
        return spec.name

    def new_input(self, shape, dtype, *, grad_ok: bool = True, layout: str | None = None) -> str:
        """A fresh data input of this shape and dtype, drawn like the program's first inputs."""
        from .input_draw import draw_input_spec
        spec = draw_input_spec(self, tuple(shape), dtype, grad_ok=grad_ok, layout=layout)
        return self.add_input(spec)

    def index_input(self, shape, high: int, *, unique_dim: int | None = None, allow_oob: bool = True,
                    negative_ok: bool = False) -> str:
        """An int64 input with entries in [0, high) (distinct along unique_dim), rarely out of range."""
        names = [spec.name for spec in self.program.inputs if spec.is_index]
        spec = InputSpec(name=f"i{len(names)}", shape=tuple(shape), dtype=torch.int64, seed=self.input_seed(),
                         values="index", index_high=high, unique_dim=unique_dim)
        numel = math.prod(shape)
        if allow_oob and numel and self.chance(self.mode.oob_index_prob):
            bad = self.choice([high, high + 3, -1] + ([-high - 1] if negative_ok else []))
            spec.special = ((self.rng.randrange(numel), bad),)
            self.intentional_error = True
        elif negative_ok and numel and self.chance(0.2):
            spec.special = ((self.rng.randrange(numel), -1 if high > 0 else 0),)
        self.program.inputs.append(spec)
        self._build_input(spec)
        return spec.name

    # ---- statements ------------------------------------------------------------------------
    def new_name(self) -> str:
        name = f"v{self.next_value}"
        self.next_value += 1
        return name

    def uses_of(self, text: str) -> tuple[str, ...]:
        known = set(self.values) | {spec.name for spec in self.program.inputs}
        names = []
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NAME and token.string in known and token.string not in names:
                names.append(token.string)
        return tuple(names)

    def emit(self, expression: str, op: str, *, count: int = 1, rounds=True, jumps=False,
             view_of: str | None = None) -> Statement:
        """`v = expression` (count > 1: `v, w = expression`)."""
        defs = tuple(self.new_name() for _ in range(count))
        rounds = rounds if isinstance(rounds, tuple) else (rounds,) * count
        jumps = jumps if isinstance(jumps, tuple) else (jumps,) * count
        return Statement(text=f"{', '.join(defs)} = {expression}", op=op, defs=defs,
                         uses=self.uses_of(expression), view_of=view_of, rounds=rounds, jumps=jumps)

    def emit_inplace(self, text: str, op: str, target: str, *, rounds=True, jumps=False) -> Statement:
        """A statement that writes into `target`'s tensor (a method_, `t[...] = ...`, `t += ...`)."""
        return Statement(text=text, op=op, uses=self.uses_of(text), mutates=(target,),
                         rounds=(rounds,), jumps=(jumps,))

    def length_of(self, expression: str) -> int:
        """len() of a tuple-valued expression (split, unbind, chunk), evaluated eagerly now."""
        return len(eval(expression, self.namespace))

    def refuse_trapping_division(self, statement: Statement) -> None:
        """Integer MIN // -1 traps (SIGFPE) in eager's kernel and kills the process, so an integer
        division whose operands hold their dtype's minimum is not run (seed known 1386)."""
        if statement.op not in INTEGER_DIVISIONS:
            return
        for name in statement.uses:
            value = self.namespace.get(name)
            if (isinstance(value, torch.Tensor) and not value.is_floating_point() and value.dtype != torch.bool
                    and value.numel() and bool((value == torch.iinfo(value.dtype).min).any())):
                raise Rejected("integer minimum divided: -1 as the divisor traps")

    def try_statement(self, statement: Statement) -> Exception | None:
        """Run it eagerly; None when it is kept, the exception when it raised."""
        try:
            self.refuse_trapping_division(statement)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(statement.text, self.namespace)
            for name in statement.defs:
                value = self.namespace[name]
                if not isinstance(value, torch.Tensor):
                    raise Rejected(f"{name} is a {type(value).__name__}")
                if value.numel() > MAX_NUMEL:
                    raise Rejected("too big")
        except Exception as error:  # noqa: BLE001 - any eager failure rejects the statement
            for name in statement.defs:
                self.namespace.pop(name, None)
            if statement.mutates or isinstance(error, Rejected):
                self.rebuild()
            return error
        self.program.statements.append(statement)
        self.values.extend(statement.defs)
        for name in statement.uses:
            self.use_counts[name] = self.use_counts.get(name, 0) + 1
        return None


def _draw_family(builder: Builder) -> str:
    return builder.weighted(modes_module.family_weights(builder.mode))


def _choose_outputs(builder: Builder) -> None:
    program = builder.program
    defined = [name for statement in program.statements for name in statement.defs]
    used = {name for statement in program.statements for name in statement.uses}
    sinks = [name for name in defined if name not in used]
    outputs = []
    if defined:
        outputs.append(defined[-1])
    for name in reversed(sinks):
        if name not in outputs and len(outputs) < 4 and builder.chance(0.6):
            outputs.append(name)
    data_inputs = [spec.name for spec in program.inputs if not spec.is_index]
    if data_inputs and (not outputs or builder.chance(0.06)):
        outputs.append(builder.choice(data_inputs))       # returning an input itself
    if defined and builder.chance(0.03):
        outputs.append(builder.choice(defined))           # maybe the same value twice
    program.outputs = outputs
    program.single_output = len(outputs) == 1 and builder.chance(0.5)


AFTER_CONVERSIONS = (".float()", ".long()", ".to(torch.int16)", ".half()")


def _maybe_convert_after(builder: Builder, statement: Statement) -> None:
    """mode.convert_after_prob: follow a bool/integer result by a conversion of it."""
    if not statement.defs or not builder.mode.convert_after_prob:
        return
    name = statement.defs[0]
    if builder.tensor(name).dtype.is_floating_point or not builder.chance(builder.mode.convert_after_prob):
        return
    spelling = builder.choice(AFTER_CONVERSIONS)
    builder.try_statement(builder.emit(f"{name}{spelling}", "to_after", rounds=False))


def generate(seed: int, mode: str = "default") -> Program:
    from .input_draw import draw_program_inputs
    from .ops_common import BuildSkipped
    builder = Builder(seed, modes_module.get_mode(mode))
    draw_program_inputs(builder)
    initial_inputs = len(builder.program.inputs)
    target = builder.rng.randint(*builder.mode.n_ops)
    attempts = 0
    while len(builder.program.statements) < target and attempts < target * MAX_ATTEMPTS_PER_OP:
        attempts += 1
        family = _draw_family(builder)
        ops = OPS_BY_FAMILY.get(family)
        if not ops:
            continue
        build = builder.weighted(ops)
        builder.intentional_error = False
        try:
            statement = build(builder)
        except BuildSkipped:
            continue
        if statement is None:
            continue
        error = builder.try_statement(statement)
        if error is None:
            _maybe_convert_after(builder, statement)
            continue
        if isinstance(error, Rejected):
            continue
        keep = builder.mode.keep_error_prob + (0.5 if builder.intentional_error else 0.0)
        if builder.chance(keep):
            builder.program.statements.append(statement)
            builder.program.expects_error = True
            break
    if builder.program.expects_error:
        # The raising statement's result is returned: a compiler may drop dead code, errors and all.
        last = builder.program.statements[-1]
        builder.program.outputs = (list(last.defs[:1]) or list(last.mutates[:1]) or
                                   [name for name in builder.values[-1:]] or [builder.program.inputs[0].name])
        builder.program.single_output = True
    else:
        _choose_outputs(builder)
    return builder.program.tidy(keep_inputs=initial_inputs)
