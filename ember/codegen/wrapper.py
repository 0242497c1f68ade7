"""The Python wrapper: allocates buffers, calls kernels and extern ops, frees buffers early.

    def call(arg0, arg1):
        buf0 = empty_strided((8192, 1024), (1024, 1), dtype=torch.float32, device='cpu')
        buf1 = empty_strided((8192, 1024), (1024, 1), dtype=torch.float32, device='cpu')
        kernel0(ptr(arg0), buf0.data_ptr(), buf1.data_ptr())  # from: sin = aten.sin(arg0), ...
        del arg0
        buf2 = buf0; del buf0  # reuse: buf0 died, same size, stride and dtype
        ...

Memory planning: a buffer that dies is kept for the next allocation with the same size, stride
and dtype (that allocation becomes a rename), and deleted at its death if nothing reuses it.
Only memory that nothing else can alias is reused: kernel outputs, and results of extern ops
whose schema says they return fresh tensors.
"""
from __future__ import annotations

import ctypes
import keyword
import math
from typing import Any

import sympy
import torch
from torch.utils import _pytree as pytree

from ..errors import InputShapeMismatch
from ..lowering.graph import GraphLowering
from ..lowering.indexing import python_size
from ..lowering.ir import Buffer, ComputedBuffer, ExternCall, InputBuffer, Layout, ReinterpretView, product
from ..lowering.symbolic import ShapesNotSupported, size_symbols
from ..lowering.printer import provenance, user_line
from ..runtime.autocast import AUTOCAST_KEYS, exclude_keys
from ..scheduling.scheduler import Kernel, buffer_names


class ExternDtypeMismatch(RuntimeError):
    """An extern call returned another dtype than the trace's: the kernels after it would read
    its memory as the traced dtype (past its end, for a narrower one)."""


def ensure_layout(tensor: torch.Tensor, size: tuple, stride: tuple, view: bool = False,
                  dtype: torch.dtype | None = None, origin: str = "") -> torch.Tensor:
    """An extern op's result with the strides the graph planned, at its storage's start (a `view`,
    planned at an offset into its input's storage, may sit anywhere: kernels find it through
    `ptr`).  A result of another dtype than `dtype` raises: nothing after it could read it."""
    if tensor is None:  # an output the op's meta function makes and its CUDA kernel leaves out
        return None     # (cudnn attention's statistics without a backward)
    if dtype is not None and tensor.dtype is not dtype:
        raise ExternDtypeMismatch(
            f"ember: {origin or 'an ATen call'} returned {tensor.dtype} where the traced graph has {dtype} "
            f"(a dispatch mode or autocast around the call that the trace did not see?); run the function "
            f"under the same modes it was compiled under, or compile it again inside them")
    strides = tensor.stride()
    if strides == stride and (view or tensor.storage_offset() == 0):  # (the common case, at C speed)
        return tensor
    same_strides = all(a == b for a, b, n in zip(strides, stride, size) if n != 1)
    if (view or tensor.storage_offset() == 0) and (same_strides or tensor.numel() <= 1):
        return tensor
    result = torch.empty_strided(size, stride, dtype=tensor.dtype, device=tensor.device)
    if _overlapping(size, stride):
        # (elements sharing memory, as an unfold of a stride-0 tensor: copy_ refuses such a destination,
        # and any of the source's values lands in each place, as in eager: pinned by
        # test_ensure_layout_makes_a_planned_layout_whose_elements_share_memory)
        places = sum(torch.arange(n, device=tensor.device).view([-1 if d == k else 1 for d in range(len(size))]) * st
                     for k, (n, st) in enumerate(zip(size, stride)))
        flat = result.as_strided((result.untyped_storage().nbytes() // result.element_size(),), (1,), 0)
        flat[torch.broadcast_to(places, tuple(size)).reshape(-1)] = tensor.reshape(-1)
        return result
    result.copy_(tensor)
    return result


def _overlapping(size: tuple, stride: tuple) -> bool:
    """Do two elements of this layout share memory?"""
    reach = 1
    for n, st in sorted(((n, abs(st)) for n, st in zip(size, stride) if n != 1), key=lambda pair: pair[1]):
        if n == 0:
            return False
        if st < reach:
            return True
        reach = st * (n - 1) + reach
    return False


def _sizes(values) -> str:
    """A tuple of size expressions as Python source."""
    items = [python_size(v) for v in values]
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


class IndexOutOfBounds(IndexError, RuntimeError):
    """An index tensor held a value outside its dimension.  Eager raises IndexError for some ops
    and RuntimeError for others (gather, scatter, embedding): this is both."""


class IndexFlag:
    """Where a graph's C++ kernels' bounds checks report (bit k: check k of the kernel failed),
    cleared when it fires."""

    def __init__(self) -> None:
        self.cell = ctypes.c_int64(0)
        self.address = ctypes.addressof(self.cell)

    def raise_error(self, kernel: str, sites: tuple[str, ...]) -> None:
        bits = self.cell.value
        self.cell.value = 0
        violated = [site for k, site in enumerate(sites) if bits & (1 << min(k, 62))] or list(sites)
        raise IndexOutOfBounds(f"ember: index out of bounds in {'; '.join(violated)}: an index tensor holds a value "
                         f"outside [-size, size) of the dimension it indexes (generated {kernel})")


def pointer(tensor: torch.Tensor, planned_offset: int = 0) -> int:
    """Where a kernel indexes from: the data less the storage offset the graph planned (which the
    kernel adds), as a call's tensor can sit elsewhere in its storage (guards check no offsets)."""
    return tensor.data_ptr() - planned_offset * tensor.element_size()


class WrapperCodegen:
    def __init__(self, graph: GraphLowering, steps: list, last_uses: dict[int, list[str]], kernels: dict,
                 backend) -> None:
        self.graph = graph
        self.backend = backend  # writes the lines that call one kernel (codegen/devices.py)
        self.steps = steps
        self.last_uses = last_uses
        self.kernels = kernels  # kernel name -> the backend's source object (arguments, index checks)
        self.namespace: dict[str, Any] = {"torch": torch, "empty_strided": torch.empty_strided,
                                          "ptr": pointer, "ensure_layout": ensure_layout}
        self.lines: list[str] = []
        self.direct_inputs: set[str] = set()  # (backends that check inputs once per call)
        self.direct_streams: set = set()
        self.workspaces: dict = {}  # (backends' per-call scratch tensors: key -> (name, numel))
        self._offsets: dict[str, int] | None = None

    def ref(self, value: Any, hint: str) -> str:
        name = f"{hint}_{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def expr(self, value: Any) -> str:
        if isinstance(value, ReinterpretView):
            layout = value.layout
            size, stride = _sizes(layout.size), _sizes(layout.stride)
            name = value.buffer.name
            if isinstance(value.buffer, ComputedBuffer):   # ember's memory: at its storage's start
                return f"torch.as_strided({name}, {size}, {stride}, {python_size(layout.offset)})"
            # A view of an input (or of an extern result that may view one): where that sits in
            # its storage is known at the call only.
            shift = sympy.expand(layout.offset - self.planned_offsets().get(name, 0))
            if shift.is_number:
                return f"torch.as_strided({name}, {size}, {stride}, {name}.storage_offset(){int(shift):+d})"
            return f"torch.as_strided({name}, {size}, {stride}, {name}.storage_offset() + ({python_size(shift)}))"
        if isinstance(value, sympy.Basic):  # a size (a SymInt argument): its value at this call
            return python_size(value)
        if isinstance(value, Buffer):
            return value.name
        if isinstance(value, (list, tuple)):
            inner = ", ".join(self.expr(item) for item in value)
            return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in value.items()) + "}"
        if value is None or isinstance(value, (bool, int, str)) or isinstance(value, float) and math.isfinite(value):
            return repr(value)
        return self.ref(value, "const")

    def planned_offsets(self) -> dict[str, int]:
        """Storage offsets the graph planned for memory ember did not allocate (inputs, constants,
        extern results), by buffer name; kernels index relative to them."""
        if self._offsets is None:
            buffers = [*self.graph.inputs, *self.graph.buffers]
            self._offsets = {buffer.name: _number(buffer.layout.offset) for buffer in buffers
                             if isinstance(getattr(buffer, "layout", None), Layout)}
        return self._offsets

    def allocate(self, buffer: ComputedBuffer, layout: Layout | None = None) -> None:
        """`layout`: the view the graph returns it as, where that is the same memory."""
        layout = layout or buffer.layout
        self.lines.append(f"{buffer.name} = empty_strided({_sizes(layout.size)}, {_sizes(layout.stride)}, "
                          f"dtype={layout.dtype}, device={self.device(layout.device)})")

    def device(self, device: torch.device) -> str:
        """A name bound to `device` (a string argument is parsed again at every call)."""
        name = f"device_{device.type}{'' if device.index is None else device.index}"
        self.namespace[name] = device
        return name

    def generate(self, kernel_functions: dict[str, Any]) -> str:
        graph = self.graph
        params = [_param_name(item) for item in graph.placeholders]
        self.namespace.update(graph.constants)
        if graph.symbolic:
            self._define_sizes()
        elided = self.elided
        shaped = self._shaped_as_returned()
        reuse = self._plan_reuse(anew=shaped)
        reused_sources = set(reuse.values())
        own = {buffer.name for step in self.steps if isinstance(step, Kernel) for buffer in step.nodes}
        start = len(self.lines)
        for position, step in enumerate(self.steps):
            if isinstance(step, Kernel):
                for node in step.nodes:
                    if node.name in elided:
                        continue
                    if node.name in graph.input_writes:  # (stored into the input: its memory)
                        self.lines.append(f"{node.name} = {graph.input_writes[node.name]}  # written in place")
                    elif node.name in reuse:
                        old = reuse[node.name]
                        self.lines.append(f"{node.name} = {old}; del {old}  # reuse")
                    else:
                        self.allocate(node, shaped.get(node.name))
                kernel = self.kernels[step.name]
                self.lines.extend(f"# {node.name}: {provenance(node)}" for node in step.nodes)
                self.lines.extend(self.backend.call_lines(self, step, kernel, kernel_functions[step.name], own))
            else:
                self._extern(step.call)
            dead = [name for name in sorted(self.last_uses.get(position, []))
                    if name not in graph.constants and name not in reused_sources  # constants are globals
                    and name not in elided]
            if dead:
                self.lines.append(f"del {', '.join(dead)}")
        self.lines[start:start] = self.backend.initial_lines(self)  # (knows what the kernels read)
        self.lines.extend(self.backend.final_lines(self))
        results = ", ".join(value.buffer.name if isinstance(value, ReinterpretView) and value.buffer.name in shaped
                            else self.expr(value) for value in graph.outputs)
        self.lines.append(f"return ({results}{',' if len(graph.outputs) == 1 else ''})")
        if graph.extern_calls:
            # ATen calls run as traced, below autocast (runtime/autocast.py says why)
            self.namespace["exclude_keys"] = exclude_keys
            self.namespace["autocast_keys"] = AUTOCAST_KEYS
            self.lines = ["with exclude_keys(autocast_keys):", *("    " + line for line in self.lines)]
        body = "\n".join("    " + line for line in self.lines)
        return f"def call({', '.join(params)}):\n{body}\n"

    def index_flag(self) -> str:
        if "index_flag" not in self.namespace:
            self.namespace["index_flag"] = IndexFlag()
        return "index_flag"

    @property
    def elided(self) -> set[str]:
        """Buffers the kernels keep in registers (never allocated)."""
        return {name for step in self.steps if isinstance(step, Kernel)
                for name in self.kernels[step.name].elided}

    def _shaped_as_returned(self) -> dict[str, Layout]:
        """Kernel outputs the graph returns only as one view of all their memory in order (batch
        norm's statistics [C] saved as (1, C, 1, 1)): allocated in that view's layout and returned
        as they are (a `torch.as_strided` is ~2 us of host time), unless an ATen call reads them."""
        graph = self.graph
        views: dict[str, list] = {}
        for value in graph.outputs:
            if isinstance(value, ReinterpretView):
                views.setdefault(value.buffer.name, []).append(value.layout)
            elif isinstance(value, Buffer):
                views.setdefault(value.name, []).append(None)
        read_by_calls = set()
        for step in self.steps:
            if not isinstance(step, Kernel):
                read_by_calls |= buffer_names((step.call.args, step.call.kwargs))
        shaped = {}
        for node in self._given_memory():
            layouts = views.get(node.name)
            if not layouts or len(layouts) != 1 or layouts[0] is None or node.name in read_by_calls:
                continue
            view, own = layouts[0], node.layout
            if view.dtype == own.dtype and sympy.sympify(view.offset) == 0 and view.is_contiguous() and \
                    own.is_contiguous() and sympy.expand(product(view.size) - product(own.size)) == 0:
                shaped[node.name] = view
        return shaped

    def _given_memory(self) -> list:
        """The kernels' outputs that get memory of their own: not kept in registers, not stored into an input."""
        elided, placed = self.elided, self.graph.input_writes
        return [node for step in self.steps if isinstance(step, Kernel) for node in step.nodes
                if node.name not in elided and node.name not in placed]

    def _plan_reuse(self, anew=()) -> dict[str, str]:
        """new buffer -> the dead buffer whose memory it takes over (`anew`: buffers allocated
        anew all the same)."""
        buffers = {node.name: node for node in self._given_memory()}
        aliased = set()  # read by an extern op that may return a view of its input
        elided = self.elided
        placed = self.graph.input_writes  # (an input's memory: never handed to another buffer)
        for call in [step.call for step in self.steps if not isinstance(step, Kernel)]:
            fresh = _returns_fresh(call.target)
            for output in call.outputs:
                if output is not None and fresh and output.layout.offset == 0:
                    buffers[output.name] = output
            if not fresh:
                aliased |= buffer_names((call.args, call.kwargs))
        pool: dict[tuple, list[str]] = {}
        reuse: dict[str, str] = {}
        for position, step in enumerate(self.steps):
            if isinstance(step, Kernel):
                for node in step.nodes:
                    if node.name in elided or node.name in placed or node.name in anew:
                        continue
                    free = pool.get(_key(node))
                    if free:
                        reuse[node.name] = free.pop()
            for name in sorted(self.last_uses.get(position, [])):
                buffer = buffers.get(name)
                if buffer is not None and name not in aliased:
                    pool.setdefault(_key(buffer), []).append(name)
        return reuse

    def _extern(self, call: ExternCall) -> None:
        target = self.ref(_binding(call.target, call.kwargs), _target_hint(call.target))
        args = ", ".join(self.expr(a) for a in call.args)
        kwargs = "".join(f", {k}={self.expr(v)}" for k, v in call.kwargs.items())
        arguments = args + kwargs if args else kwargs.lstrip(", ")
        line = user_line(call.stack_trace)
        comment = f"  # {call.origin}" + (f" ({call.reason})" if call.reason else "") + (f"  ({line})" if line else "")
        outputs = call.outputs
        if not call.multi_output:
            if outputs:
                self.lines.append(f"{outputs[0].name} = {target}({arguments}){comment}")
                self._check_layout(outputs[0], call.origin, inline=True)
            else:
                self.lines.append(f"{target}({arguments}){comment}")
            return
        self.lines.append(f"__result = {target}({arguments}){comment}")
        for index, buffer in enumerate(outputs):
            if buffer is not None:
                self.lines.append(f"{buffer.name} = __result[{index}]")
                self._check_layout(buffer, call.origin)

    def _check_layout(self, buffer, origin: str, inline: bool = False) -> None:
        """The extern result's dtype and strides as planned (a dtype check: ~40 ns a call)."""
        layout = buffer.layout
        dtype = f"dtype_{str(layout.dtype).replace('torch.', '')}"
        self.namespace[dtype] = layout.dtype
        # a view into another buffer (planned at an offset): its strides derive from that buffer's
        # layout, which the lowering made eager's; checked all the same, as the kernels rely on it
        view = ", view=True" if layout.offset != 0 else ""
        fix = (f"{buffer.name} = ensure_layout({buffer.name}, {_sizes(layout.size)}, {_sizes(layout.stride)}{view}, "
               f"dtype={dtype}, origin={origin.split(' ')[-1]!r})")
        if not inline:
            self.lines.append(fix)
            return
        # (the common case, planned strides at the storage's start, without a Python call)
        offset = "" if view else f" or {buffer.name}.storage_offset()"
        self.lines.append(f"if {buffer.name}.dtype is not {dtype} or {buffer.name}.stride() != "
                          f"{_sizes(layout.stride)}{offset}: {fix}")

    # -- symbolic sizes ---------------------------------------------------------------------------
    def _define_sizes(self) -> None:
        """First lines of `call`: each size symbol's value, read from the first input size (or
        stride, or int argument) that is exactly that symbol; then checks that the inputs' sizes
        and strides are the ones the kernels were compiled for."""
        graph = self.graph
        exprs = [item[1] for item in graph.placeholders if not isinstance(item, InputBuffer)]
        exprs += [expr for buffer in [*graph.placeholders, *graph.buffers]
                  if isinstance(getattr(buffer, "layout", None), Layout)
                  for expr in (*buffer.layout.size, *buffer.layout.stride, buffer.layout.offset)]
        exprs += [leaf for call in graph.extern_calls for leaf in pytree.tree_leaves((call.args, call.kwargs))
                  if isinstance(leaf, sympy.Basic)]
        needed = set().union(*map(size_symbols, exprs))
        needed |= {sympy.Symbol(name, integer=True, positive=True) for source in self.kernels.values()
                   for name in source.size_args}
        taken = {*self.namespace, *(buffer.name for buffer in graph.buffers), *map(_param_name, graph.placeholders)}
        definitions: dict = {}
        for item in graph.placeholders:
            if isinstance(item, InputBuffer):
                sources = [(expr, f"{item.name}.size({d})") for d, expr in enumerate(item.layout.size)] + \
                    [(expr, f"{item.name}.stride({d})") for d, expr in enumerate(item.layout.stride)]
            else:
                sources = [(item[1], item[0])]
            for expr, text in sources:
                if isinstance(expr, sympy.Symbol) and expr in needed and expr not in definitions:
                    definitions[expr] = text
        for symbol in sorted(needed, key=lambda s: s.name):
            if symbol not in definitions:
                raise ShapesNotSupported(f"size {symbol} is no input's size, stride or int argument by itself")
            if not symbol.name.isidentifier() or keyword.iskeyword(symbol.name) or symbol.name in taken:
                raise ShapesNotSupported(f"size symbol {symbol.name} clashes with a name in the wrapper")
            self.lines.append(f"{symbol.name} = {definitions[symbol]}")
        self.namespace["InputShapeMismatch"] = InputShapeMismatch
        self._check_guards(definitions)
        for item in graph.placeholders:
            if isinstance(item, InputBuffer):
                self._check_input(item)
            elif item[1] not in definitions or definitions[item[1]] != item[0]:
                self.lines.append(f"if {item[0]} != {python_size(item[1])}: raise InputShapeMismatch("
                                  f"'ember: {item[0]} is %d, expected {item[1]} = %d' % ({item[0]}, "
                                  f"{python_size(item[1])}))")

    def _check_guards(self, definitions: dict) -> None:
        """The sizes the kernels were compiled for, checked in one condition per call: each symbol
        at least its ShapeEnv lower bound, and the ShapeEnv's guards over these symbols (s0 - 2 > 0,
        Eq(Mod(s0*s1, 2), 0)); other guards are left to the caller."""
        from ..lowering.symbolic import lower_bound

        conditions = [f"{symbol.name} >= {lower_bound(symbol)}" for symbol in sorted(definitions, key=lambda s: s.name)]
        shape_env = self.graph.shape_env
        for guard in getattr(shape_env, "guards", ()) if shape_env is not None else ():
            try:
                text = _relation(to_sympy_relation(guard.expr, shape_env), set(definitions))
            except (ShapesNotSupported, TypeError, ValueError, AttributeError):
                continue
            if text is not None and text not in conditions:
                conditions.append(text)
        if conditions:
            message = f"ember: sizes outside those compiled for ({' and '.join(conditions)})"
            self.lines.append(f"if not ({' and '.join(conditions)}): raise InputShapeMismatch({message!r})")

    def _check_input(self, buffer: InputBuffer) -> None:
        layout = buffer.layout
        if buffer.name not in self.graph.traced_symbolic:
            return
        name = buffer.name
        dims = [d for d, size in enumerate(layout.size) if size != 1]
        expected = f"{_sizes(layout.size)}, {_sizes([layout.stride[d] for d in dims])}"
        actual = f"tuple({name}.shape), ({''.join(f'{name}.stride({d}), ' for d in dims)})"
        self.lines.append(f"if ({actual}) != ({expected}): raise InputShapeMismatch("
                          f"'ember: input {name} has sizes, strides %s, compiled for %s' % (({actual}), ({expected})))")


_RELATIONS = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<", "LessThan": "<=",
              "StrictGreaterThan": ">", "GreaterThan": ">="}


def to_sympy_relation(expr, shape_env):
    """A guard (a relation of ShapeEnv sizes, or and/or/not of them) over ember's size symbols."""
    from ..lowering.symbolic import to_sympy

    name = type(expr).__name__
    if name in _RELATIONS:
        return (name, to_sympy(expr.lhs, shape_env), to_sympy(expr.rhs, shape_env))
    if name in ("And", "Or", "Not"):
        return (name, *[to_sympy_relation(arg, shape_env) for arg in expr.args])
    raise ShapesNotSupported(f"guard {expr}")


def _relation(tree, defined: set) -> str | None:
    """Python source for a converted guard, or None if it reads a symbol the wrapper does not define."""
    name = tree[0]
    if name in _RELATIONS:
        _, lhs, rhs = tree
        if (size_symbols(lhs) | size_symbols(rhs)) - defined:
            return None
        return f"({python_size(lhs)} {_RELATIONS[name]} {python_size(rhs)})"
    parts = [_relation(part, defined) for part in tree[1:]]
    if any(part is None for part in parts):
        return None
    if name == "Not":
        return f"(not {parts[0]})"
    return "(" + f" {name.lower()} ".join(parts) + ")"


def _param_name(item) -> str:
    """A placeholder's name in `call`'s signature: an input buffer, or a (name, size) argument."""
    return item.name if isinstance(item, InputBuffer) else item[0]


def _number(value):
    """An int where the expression is a number (static layouts print as before), else the expression."""
    return int(value) if sympy.sympify(value).is_number else value


def _key(buffer) -> tuple:
    """Buffers with equal keys have the same sizes, strides and dtype for every allowed size
    (symbolic sizes: the same expressions)."""
    layout = buffer.layout
    return (tuple(_number(sympy.expand(s)) for s in layout.size), tuple(_number(sympy.expand(s)) for s in layout.stride),
            layout.dtype, str(layout.device))


def _returns_fresh(target: Any) -> bool:
    """Does this op return new memory (its schema marks no result as an alias of an input)?"""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return False
    return all(ret.alias_info is None for ret in schema.returns)


def _binding(target: Any, kwargs: dict) -> Any:
    """torch's Python binding of an ATen overload where it can only mean that overload (a bf16
    convolution's host time: 27-32 us through torch.ops, 20 us through torch.convolution): every
    other overload of the name is an out= form or needs an argument more, and only keyword-only
    arguments come by name (a binding calls `self` `input`)."""
    packet = getattr(target, "overloadpacket", None)
    schema = getattr(target, "_schema", None)
    if packet is None or schema is None or target.namespace != "aten" or schema.is_mutable:
        return target
    binding = getattr(torch._C._VariableFunctions, packet.__name__, None)
    keyword = {argument.name for argument in schema.arguments if argument.kwarg_only}
    if binding is None or not set(kwargs) <= keyword:
        return target
    positional = len(schema.arguments) - len(keyword)
    for name in packet.overloads():
        other = getattr(packet, name)._schema
        if other is schema or name == target._overloadname:
            continue
        required = [a for a in other.arguments if a.default_value is None and not a.kwarg_only
                    and not a.type.kind() == "OptionalType"]
        if other.is_mutable or len(required) > positional:
            continue  # (out=, or an argument this schema lacks)
        return target
    return binding


def _target_hint(target: Any) -> str:
    name = str(target) if hasattr(target, "_schema") else getattr(target, "__name__", str(target)).replace(".", "_").replace("::", "_")
    cleaned = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    return cleaned[:40] or "extern"
