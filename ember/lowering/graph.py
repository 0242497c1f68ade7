"""GraphLowering: an ATen FX graph in, loop-level IR buffers and an output list out.

A node with a lowering (lowerings.py) becomes IR values inlined into their users until something
needs them in memory (a graph output, an extern call, several readers); a node without one
becomes an ATen fallback (an extern call), counted and logged with its reason.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import math
import operator
from typing import Any

import sympy
import torch
import torch.fx
from torch.utils import _pytree as pytree

from .. import config as ember_config
from .. import logs
from ..eager.check import eager_rejects_dtypes
from ..errors import GraphNotSupported
from ..graph_patterns import compared_with_its_extremum, subtracted_from_its_extremum
from . import ir
from .ir import Buffer, ComputedBuffer, ExternBuffer, ExternCall, InputBuffer, IRNode, Layout, Pointwise, \
    Reduction, ReinterpretView, View
from .symbolic import ShapesNotSupported, expr_of

aten = torch.ops.aten
log_fallbacks = logs.get("fallbacks")
SUPPORTED_DTYPES = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                    torch.int16, torch.int8, torch.uint8, torch.bool}


def _static_numel(sizes) -> int | None:
    sizes = [sympy.sympify(size) for size in sizes]
    return math.prod(int(size) for size in sizes) if all(size.is_Integer for size in sizes) else None


def _layout_of(value: torch.Tensor) -> Layout:
    """The fake's layout; symbolic sizes/strides (SymInts) become sympy expressions."""
    return Layout(value.device, value.dtype, [expr_of(s) for s in value.shape],
                  [expr_of(s) for s in value.stride()], expr_of(value.storage_offset()))


# Ops on sizes (SymInts): a node whose value is a SymInt lowers to its sympy expression.
_SIZE_OPS = {aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default, aten.sym_storage_offset.default,
             operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg, operator.pos,
             torch.sym_max, torch.sym_min, torch.sym_int}


class GraphLowering(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        # values stay in `env` after their last use: realize_as_traced walks back up view chains
        super().__init__(gm, garbage_collect_values=False)
        self.gm = gm
        self.buffers: list[Buffer] = []  # realized buffers in creation order
        self.inputs: list[InputBuffer] = []
        # every placeholder in order: an InputBuffer, or (name, expr) for a size passed as an int
        self.placeholders: list = []
        self.symbolic = False  # some size is a symbol (set by placeholder/call_function)
        self.traced_symbolic: set[str] = set()  # inputs whose fakes had SymInt sizes (checked at each call)
        self.shape_env = None  # the ShapeEnv of the inputs' symbols (its guards are checked at each call)
        self.constants: dict[str, torch.Tensor] = {}
        self._sizes_by_name: dict[str, int | None] = {}  # _size_of's memo
        self._sized_buffers = 0  # how many of self.buffers _size_of has looked at
        self.extern_calls: list[ExternCall] = []
        self.outputs: list[Any] = []
        # computed buffer -> the input it is stored into (scheduling/input_writes.py)
        self.input_writes: dict[str, str] = {}
        self.fallback_counts: collections.Counter = collections.Counter()
        self.current_node: torch.fx.Node | None = None
        self._names = collections.Counter()
        # values compared with their own max/min, or libm results less their own max: stored
        # once, read by both loops (graph_patterns)
        self._compared_with_extremum = compared_with_its_extremum(gm.graph) | subtracted_from_its_extremum(gm.graph)

    # -- naming and bookkeeping --------------------------------------------------------------------
    def new_name(self, prefix: str = "buf") -> str:
        count = self._names[prefix]
        self._names[prefix] += 1
        return f"{prefix}{count}"

    def origin(self) -> str:
        node = self.current_node
        if node is None:
            return ""
        target = node.target if node.op != "call_function" else str(node.target)
        return f"{node.name} = {target}"

    def stack_trace(self) -> str:
        node = self.current_node
        return node.meta.get("stack_trace", "") if node is not None else ""

    def site(self) -> str:
        """The current ATen op and the user's source line, for error messages of generated code."""
        from .printer import user_line

        node = self.current_node
        if node is None:
            return ""
        line = user_line(self.stack_trace())
        return f"{node.target}" + (f" ({line})" if line else "")

    # -- interpreter hooks ---------------------------------------------------------------------------
    def run_node(self, node: torch.fx.Node):
        self.current_node = node
        return super().run_node(node)

    def placeholder(self, target, args, kwargs):
        value = self.current_node.meta.get("val")
        if isinstance(value, torch.SymInt):
            self.shape_env = value.node.shape_env if self.shape_env is None else self.shape_env
            expr = expr_of(value)
            self.symbolic = True
            self.placeholders.append((self.new_name("size"), expr))
            return expr
        if isinstance(value, (torch.SymFloat, torch.SymBool)):
            # a float or bool computed from sizes (1 / s0, saved by a forward for its backward):
            # ember's kernels take integer sizes only
            raise ShapesNotSupported(f"graph input {target} is a {type(value).__name__} ({value})")
        if not isinstance(value, torch.Tensor):
            raise NotImplementedError(f"graph input {target} is a {type(value).__name__}, not a tensor")
        buffer = InputBuffer(self.new_name("arg"), _layout_of(value))
        sizes = [e for e in (*value.shape, *value.stride(), value.storage_offset()) if isinstance(e, torch.SymInt)]
        if sizes:
            # traced with symbolic sizes (even if the ShapeEnv has since fixed them to numbers):
            # the wrapper checks each call's sizes against the compiled ones
            self.shape_env = sizes[0].node.shape_env if self.shape_env is None else self.shape_env
            self.symbolic = True
            self.traced_symbolic.add(buffer.name)
        self.inputs.append(buffer)
        self.placeholders.append(buffer)
        return buffer

    def get_attr(self, target, args, kwargs):
        tensor = getattr(self.gm, target)
        buffer = InputBuffer(self.new_name("constant"), _layout_of(tensor))
        self.constants[buffer.name] = tensor
        return buffer

    def call_function(self, target, args, kwargs):
        from .lowerings import LOWERINGS, FallbackNeeded

        node = self.current_node
        value = node.meta.get("val")
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) or \
                (target in _SIZE_OPS and isinstance(value, int)):
            # arithmetic on sizes: its value is an expression over the size symbols
            if not isinstance(value, (torch.SymInt, int)):
                raise ShapesNotSupported(f"{target} makes a {type(value).__name__} ({value})")
            self.symbolic = True
            return expr_of(value)
        lowering = LOWERINGS.get(target)
        if lowering is not None and eager_rejects_dtypes(node):
            # Fake tensors do not check dtypes; the ATen call raises eager's error where eager would,
            # so it is kept (and run) even where nothing reads its result.
            result = self.fallback(target, args, kwargs, "eager's kernel rejects these dtypes")
            self.buffers.append(_SideEffectMarker(self.new_name("call"), self.extern_calls[-1]))
            return result
        if lowering is not None and _dtypes_supported(value, args):
            buffers_before = len(self.buffers)
            try:
                result = lowering(self, node, *args, **kwargs)
                _dry_run(result, self.buffers[buffers_before:])
                return self._maybe_store(node, result)
            except GraphNotSupported:
                raise
            except Exception as error:
                if isinstance(error, FallbackNeeded):
                    reason = str(error)
                elif isinstance(error, ShapesNotSupported):
                    # not expressible for every allowed size: an ATen call gets the sizes at run time
                    reason = f"symbolic sizes: {error}"
                elif ember_config.raise_lowering_errors:
                    raise
                else:  # a lowering bug must never cost correctness
                    reason = f"lowering failed: {type(error).__name__}: {error}"
                del self.buffers[buffers_before:]
                return self.fallback(target, args, kwargs, reason)
        reason = "no lowering" if lowering is None else "dtype not supported by ember's code generators"
        return self.fallback(target, args, kwargs, reason)

    def output(self, target, args, kwargs):
        results = []
        nodes = pytree.tree_leaves(self.current_node.args[0])
        for value, node in zip(pytree.tree_leaves(args[0]), nodes):
            if isinstance(value, IRNode):
                value = self.realize(value)
                expected = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
                if isinstance(value, (Buffer, ReinterpretView)) and isinstance(expected, torch.Tensor) and \
                        not _same_strides(value.layout, _layout_of(expected)):
                    # callers (the backward graph, compiled for these strides, or the user) get eager's
                    value = self.store(value, _fresh_layout(expected))
                elif isinstance(value, ReinterpretView) and isinstance(expected, torch.Tensor):
                    value = _with_unit_strides_of(value, expected)
            results.append(value)
        self.outputs = results
        return results

    # -- realization -----------------------------------------------------------------------------------
    # A value read by several nodes is stored once when recomputing it in each reader costs more
    # than this many operations (loads, constants and casts are free).
    RECOMPUTE_LIMIT = 3

    def _maybe_store(self, node: torch.fx.Node, result):
        from .analysis import op_count

        if isinstance(result, Pointwise) and result.realized is None:
            result.preferred_layout = result.preferred_layout or _channels_last_layout(node.meta.get("val"))
            # A graph output (or a value whose views are outputs) is stored anyway: now, in eager's
            # layout (the fake's, if dense), and its other readers load it.
            if _feeds_output(node):
                self.store(result, _dense_layout(node.meta.get("val")))
            elif len(node.users) > 1 and (node in self._compared_with_extremum or (
                    op_count(result) > self.RECOMPUTE_LIMIT and not self._reads_only_small(result))):
                self.store(result)
        return result

    # A value that reads only tensors this many times smaller than itself (a loss's one-hot gradient
    # from its targets) is recomputed in each reader up to this many operations: storing it would
    # write and re-read a tensor of its full size (GPT-2's nll_loss gradient: 1.6 GB in float32).
    SMALL_READ_RATIO = 8
    RECOMPUTE_LIMIT_SMALL_READS = 24

    def _reads_only_small(self, value: Pointwise) -> bool:
        from .analysis import op_count, record

        size = _static_numel(value.get_size())
        if size is None or size == 0 or op_count(value) > self.RECOMPUTE_LIMIT_SMALL_READS:
            return False
        for name, _ in record(value).loads:
            read = self._size_of(name)
            if not isinstance(read, int) or read * self.SMALL_READ_RATIO > size:
                return False
        return True

    def _size_of(self, name: str) -> int | None:
        """A buffer's, input's or constant's element count by name (None where symbolic), indexed
        from where the last look ended (all again for a name not found: a fallback drops some)."""
        known = self._sizes_by_name
        if name not in known:
            start = 0 if self._sized_buffers > len(self.buffers) else self._sized_buffers
            for rescan in (False, True):
                for buffer in [*self.inputs, *self.buffers[0 if rescan else start:]]:
                    layout = getattr(buffer, "layout", None)
                    if getattr(buffer, "name", None) is not None and layout is not None:
                        known.setdefault(buffer.name, _static_numel(layout.size))
                self._sized_buffers = len(self.buffers)
                if name in known or name in self.constants:
                    break
            if name in self.constants:
                known[name] = self.constants[name].numel()
        return known.get(name)

    def realize(self, value: IRNode) -> IRNode:
        """Make `value` live in memory: a Buffer, or a strided view of one (a view of a computed
        value stores the value and stays a view of it, as in eager, so extern calls see its layouts)."""
        if isinstance(value, Buffer):
            return value
        if isinstance(value, Pointwise) and value.realized is not None:
            return value.realized
        if isinstance(value, View):
            root = value
            while isinstance(root, View):
                root = root.base
            if isinstance(root, Pointwise) and root.realized is None:
                self.store(root)
            strided = ir.strided_view_of(value)
            if strided is not None:
                return ReinterpretView(strided[0], strided[1])
        if isinstance(value, ReinterpretView):
            return value
        return self.store(value)

    def realize_as_traced(self, node: torch.fx.Node) -> IRNode | None:
        """The node's value in memory with its fake's sizes, strides and offset (eager's layout),
        for readers of memory as laid out (a view op run by ATen, as_strided): stored in eager's
        layout where dense, else its base is (up the view chain); None where neither works."""
        value, fake = self.env.get(node), node.meta.get("val")
        if not isinstance(value, IRNode) or not isinstance(fake, torch.Tensor):
            return None
        realized = self.realize(value)
        wanted = _layout_of(fake)
        if same_layout(realized.layout, wanted):
            return realized
        dense = _dense_layout(fake)
        if dense is not None:
            return self.store(value, dense)
        base = node.args[0] if node.op == "call_function" and node.target in _VIEW_OPS and node.args else None
        if not isinstance(base, torch.fx.Node) or self.realize_as_traced(base) is None:
            return None
        realized = self.realize(value)
        return realized if same_layout(realized.layout, wanted) else None

    def store(self, value: IRNode, layout: Layout | None = None) -> ComputedBuffer:
        """Store `value` in a new buffer, contiguous unless `layout` says otherwise."""
        if isinstance(value, (Reduction, ir.Scatter)):
            loops, layout = value, Layout.contiguous(value.device, value.dtype, value.get_size())
        else:
            loops = value if isinstance(value, Pointwise) and (layout is None or value.realized is None) else \
                Pointwise(value.device, value.dtype, value.get_size(), value.make_loader(), self.origin())
            layout = layout or getattr(value, "preferred_layout", None) or \
                Layout.contiguous(loops.device, loops.dtype, loops.get_size())
        buffer = ComputedBuffer(self.new_name(), layout, loops)
        if layout.offset != 0:
            raise AssertionError(f"a buffer ember allocates must start at its storage's beginning: {layout}")
        buffer.origin = getattr(value, "origin", "") or self.origin()
        buffer.stack_trace = self.stack_trace()
        self.buffers.append(buffer)
        if isinstance(value, Pointwise):
            value.realized = buffer  # readers of the value now load the stored result
        return buffer

    # -- fallbacks -------------------------------------------------------------------------------------
    def fallback(self, target, args, kwargs, reason: str):
        """Run the op as one ATen call from the wrapper; its inputs must be in memory."""
        def realize_arg(value):
            return self.realize(value) if isinstance(value, IRNode) else value

        node = self.current_node
        # A view's result is planned with its fake's strides and offset, which derive from its
        # input's: the input must then be in memory as eager lays it out.  Where ember cannot
        # lay it out so, the result is planned as a fresh tensor (ensure_layout copies it).
        is_view = getattr(target, "is_view", False)
        base = node.args[0] if is_view and node.args and isinstance(args[0], IRNode) else None
        traced_base = self.realize_as_traced(base) if isinstance(base, torch.fx.Node) else None
        if traced_base is not None:
            args = (traced_base, *args[1:])
        elif base is not None and target in _READS_STORAGE:
            raise GraphNotSupported(f"{target} of a value ember cannot lay out in memory as eager does")
        # Other arguments in memory with their fakes' strides (where dense): some ATen kernels read
        # an input as contiguous without checking (CUDA's group_norm backward).
        args = _paired(node.args, args, self._in_traced_strides) if traced_base is None else args
        call_args = pytree.tree_map_only(IRNode, realize_arg, args)
        call_kwargs = pytree.tree_map_only(IRNode, realize_arg, kwargs)
        value = node.meta.get("val")
        name = str(target) if hasattr(target, "_schema") else getattr(target, "__name__", str(target))
        self.fallback_counts[name] += 1
        if log_fallbacks.isEnabledFor(logging.DEBUG):
            log_fallbacks.debug("ATen fallback %s (%s)%s", name, reason,
                                f" at {self.stack_trace().strip().splitlines()[-1]}" if self.stack_trace() else "")
        call = ExternCall(target, call_args, call_kwargs, [], self.origin(), reason=reason,
                          stack_trace=self.stack_trace())
        self.extern_calls.append(call)
        # A result the op makes (not a view of an argument) is planned at its storage's start: fakes
        # may carry an input's storage offset over, the real result has none (ensure_layout checks).
        own_layout = _layout_of if is_view and traced_base is not None else _fresh_layout

        def output(item):
            if not isinstance(item, torch.Tensor):
                return None
            buffer = ExternBuffer(self.new_name(), own_layout(item), call)
            self.buffers.append(buffer)
            return buffer

        if isinstance(value, torch.Tensor):
            call.outputs = [output(value)]
            return call.outputs[0]
        if isinstance(value, (tuple, list)):
            call.multi_output = True
            call.outputs = [output(item) for item in value]
            return [item if buffer is None else buffer for buffer, item in zip(call.outputs, value)]
        self.buffers.append(_SideEffectMarker(self.new_name("call"), call))
        return value

    def _in_traced_strides(self, arg, value):
        """`value` (the IR of graph node `arg`) realized with `arg`'s fake strides where it is dense."""
        fake = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
        if not isinstance(value, IRNode) or not isinstance(fake, torch.Tensor):
            return value
        realized = self.realize(value)
        wanted = dataclasses.replace(_layout_of(fake), offset=sympy.Integer(0))
        if same_layout(dataclasses.replace(realized.layout, offset=sympy.Integer(0)), wanted):
            return realized
        dense = _dense_layout(wanted)
        return self.store(value, dense) if dense is not None else realized


def _paired(nodes, values, function):
    """`function(node, value)` over a node's arguments and their values, alike in structure."""
    if isinstance(values, (list, tuple)) and isinstance(nodes, (list, tuple)) and len(nodes) == len(values):
        return type(values)(_paired(n, v, function) for n, v in zip(nodes, values))
    return function(nodes, values)


# views whose values depend on how their input is laid out in memory (not only on its values)
_READS_STORAGE = {aten.as_strided.default}


class _SideEffectMarker(Buffer):
    """An extern call whose result ember does not use (kept so the call still runs)."""

    def __init__(self, name: str, call: ExternCall) -> None:
        self.name = name
        self.kernel = call
        self.layout = None
        self.dtype = None
        self.device = None


_VIEW_OPS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default,
             aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
             aten.t.default, aten.transpose.int, aten.slice.Tensor, aten.select.int, aten.alias.default,
             aten.detach.default, aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int, operator.getitem}


def _feeds_output(node: torch.fx.Node) -> bool:
    """Is the node a graph output, itself or through views?"""
    return any(user.op == "output" for user in users_through(node, _VIEW_OPS))


def users_through(node: torch.fx.Node, views):
    """The node's users and, through the ops in `views`, its views' users (each once)."""
    pending, seen = [node], set()
    while pending:
        for user in pending.pop().users:
            if user in seen:
                continue
            seen.add(user)
            yield user
            if user.op == "call_function" and user.target in views:
                pending.append(user)


def _fresh_layout(value: torch.Tensor) -> Layout:
    """The value's sizes and strides, in memory of its own (no storage offset: ember allocates it)."""
    return dataclasses.replace(_layout_of(value), offset=sympy.Integer(0))


def _with_unit_strides_of(view: ReinterpretView, expected: torch.Tensor) -> ReinterpretView:
    """The view with eager's strides in its dimensions of size 1 too: they address nothing, but
    autograd's gradient layout contract reads them (AccumulateGrad clones a gradient laid out
    otherwise), and a saved value laid out otherwise than traced costs its backward a recompile."""
    layout = view.layout
    if len(layout.size) != expected.dim() or any(isinstance(s, torch.SymInt) for s in expected.stride()):
        return view
    stride = [sympy.Integer(int(want)) if size == 1 else have
              for have, want, size in zip(layout.stride, expected.stride(), layout.size)]
    if stride == list(layout.stride):
        return view
    return ReinterpretView(view.buffer, dataclasses.replace(layout, stride=stride))


def _same_strides(a: Layout, b: Layout) -> bool:
    """Same memory order (strides of size-1 dimensions do not matter)."""
    return [st for st, n in zip(a.stride, a.size) if n != 1] == [st for st, n in zip(b.stride, b.size) if n != 1]


def same_layout(a: Layout, b: Layout) -> bool:
    """Same sizes, offset and strides (of dimensions longer than 1), for every allowed size."""
    def equal(x, y):
        return sympy.expand(sympy.sympify(x) - sympy.sympify(y)) == 0

    return len(a.size) == len(b.size) and all(equal(x, y) for x, y in zip(a.size, b.size)) \
        and equal(a.offset, b.offset) \
        and all(equal(x, y) for x, y, n in zip(a.stride, b.stride, a.size) if n != 1)


def _channels_last_layout(value) -> Layout | None:
    """The fake value's layout if it is channels-last (and not also contiguous), else None: eager's
    kernels keep that order, and each convolution after one would transpose its input back."""
    if not isinstance(value, torch.Tensor) or value.dim() not in (4, 5) or value.is_contiguous() or \
            any(isinstance(e, torch.SymInt) for e in (*value.shape, *value.stride())):
        return None
    memory_format = torch.channels_last if value.dim() == 4 else torch.channels_last_3d
    if not value.is_contiguous(memory_format=memory_format):
        return None
    return _dense_layout(value)


def _dense_layout(value) -> Layout | None:
    """The fake value's layout (or a Layout) if it is dense for every allowed size (some order of
    its dims makes the strides contiguous ones, structurally, after expansion), else None.  The
    order is found by walking up from stride 1."""
    if not isinstance(value, (torch.Tensor, Layout)):
        return None
    layout = _layout_of(value) if isinstance(value, torch.Tensor) else value
    if any(s == 0 for s in layout.stride) or layout.offset != 0:
        return None
    remaining = [(size, stride) for size, stride in zip(layout.size, layout.stride) if size != 1]
    expected = sympy.Integer(1)
    while remaining:
        for position, (size, stride) in enumerate(remaining):
            if sympy.expand(stride - expected) == 0:
                expected = sympy.expand(expected * size)
                del remaining[position]
                break
        else:
            return None
    return layout


def _dtypes_supported(value, args) -> bool:
    return all((dtype := getattr(leaf, "dtype", None)) is None or dtype in SUPPORTED_DTYPES
               for leaf in pytree.tree_leaves((value, list(args))))


def _dry_run(result, new_buffers) -> None:
    """Run the new loop bodies once with a recording handler, so a broken rule fails here."""
    from .analysis import record

    for value in pytree.tree_leaves(result):
        if isinstance(value, IRNode) and not isinstance(value, (Buffer, ReinterpretView)):
            body = value if isinstance(value, (Pointwise, Reduction)) else Pointwise(
                value.device, value.dtype, value.get_size(), value.make_loader())
            record(body)
    for buffer in new_buffers:
        if isinstance(buffer, ComputedBuffer):
            record(buffer.data)
