"""ember's ATen-level tracer: records every ATen op into an FX graph, functionalized as it goes.

`AtenTracer` is a TorchDispatchMode above FakeTensorMode: each ATen op is run on the fakes and
recorded as a `call_function` node of its OpOverload, after three things:

- decompositions: an op in the decomposition table is replaced by its Python body, traced in turn;
- functionalization: an in-place op is recorded as its functional form and its target takes the
  new value.  A write to a view travels up to the base with `*_scatter` ops, and other views of
  that base are re-derived from it at their next use: the graph has no mutations and no aliasing;
- provenance: each node carries the user's source line (from the captured graph).

An input whose value changed (BatchNorm's running stats) is reported with its final node.
"""
from __future__ import annotations

import contextlib
import dataclasses
import operator
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ..eager.check import eager_accepts, eager_overlap_error, elements_share_memory, storage_key
from ..eager.layout import with_eager_layout
from ..sizes import expr, symbolic_result
from .symbolic import SymbolicSizeError, SymbolNodes
from .. import logs
from .view_geometry import copy_in_order, inverse_permutation
from .view_geometry import dense_order as _dense_order, has_symbols as _has_symbols, reads_within as _reads_within

aten = torch.ops.aten

# Ops whose schema says the output aliases the input but whose input nobody else can see:
# `torch.tensor(0.0)` in a graph is a constant passed through lift_fresh, and a write to the
# result (Adam's `step_t += 1` on a freshly made step counter) is a write to a new tensor.
_FRESH_ALIASES = {aten.lift_fresh.default}

# Ops that only answer metadata questions: nothing to record.
_METADATA_OPS = {
    torch.ops.prim.device.default, aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default,
    aten.sym_storage_offset.default, aten.is_same_size.default, aten.is_contiguous.default,
    aten.is_contiguous.memory_format, aten.is_non_overlapping_and_dense.default,
}


class TracingError(RuntimeError):
    """An op or pattern the tracer cannot represent; names the op and the user's source line."""


@dataclasses.dataclass
class ViewInfo:
    parent: torch.Tensor
    func: Any
    args: tuple  # args after the parent tensor
    kwargs: dict
    index: int | None  # which output of a multi-output view (split/unbind)


# In-place ops whose functional form has another name (the rest are found by their arguments).
_FUNCTIONAL_OVERRIDES = {aten.normal_.default: aten.normal_functional.default}


def _functional_variant(func) -> Any:
    """aten.add_.Tensor -> aten.add.Tensor (the out-of-place op with the same overload)."""
    if func in _FUNCTIONAL_OVERRIDES:
        return _FUNCTIONAL_OVERRIDES[func]
    packet_name = _op_name(func)
    packet = getattr(aten, packet_name[:-1], None) if packet_name.endswith("_") else None
    if packet is None:
        return None
    wanted = _signature(func._schema)
    # Same overload name first, then any overload with the same arguments (pow_.Scalar is
    # pow.Tensor_Scalar, not pow.Scalar).
    candidates = [func._overloadname] + [name for name in packet.overloads() if name != func._overloadname]
    for name in candidates:
        if hasattr(packet, name):
            overload = getattr(packet, name)
            if _signature(overload._schema) == wanted and not overload._schema.is_mutable:
                return overload
    return None


# In-place ops whose CUDA kernel computes in the target's dtype (the bounds cast to it), where
# the CPU's computes in the common dtype and casts the result: they differ for integers that wrap.
_CUDA_OUTPUT_DTYPE_OPS = {aten.clamp_.Tensor, aten.clamp_min_.Tensor, aten.clamp_max_.Tensor}


def _cuda_computes_in_output_dtype(func, args, kwargs) -> bool:
    if func not in _CUDA_OUTPUT_DTYPE_OPS or not args or not isinstance(args[0], torch.Tensor):
        return False
    target = args[0]
    if target.device.type != "cuda" or target.is_floating_point() or target.is_complex():
        return False
    if func is aten.clamp_.Tensor:  # (one bound: eager's maximum/minimum kernel; both: its clamp kernel)
        bounds = [kwargs.get("min", args[1] if len(args) > 1 else None),
                  kwargs.get("max", args[2] if len(args) > 2 else None)]
        if sum(b is not None for b in bounds) != 1:
            return False
    else:
        bounds = [args[1] if len(args) > 1 else kwargs.get("min", kwargs.get("max"))]
    return any(isinstance(b, torch.Tensor) and b.dtype != target.dtype and not b.is_floating_point() for b in bounds)


def _signature(schema) -> tuple:
    return tuple((a.name, str(a.type), a.kwarg_only) for a in schema.arguments)


def _op_name(func) -> str:
    """aten.add_.Tensor -> "add_"."""
    return func._schema.name.split("::")[1]


def _bound(func, args, kwargs) -> dict:
    """The op's arguments by schema name."""
    return {**dict(zip([a.name for a in func._schema.arguments], args)), **kwargs}


def _written(func) -> list[str]:
    """Names of the arguments the op writes."""
    return [a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write]


class AtenTracer(TorchDispatchMode):
    def __init__(self, graph: torch.fx.Graph, fake_mode: FakeTensorMode, decompositions: dict | None = None) -> None:
        super().__init__()
        self.graph = graph
        self.fake_mode = fake_mode
        self.decompositions = decompositions or {}
        self.nodes: dict[int, torch.fx.Node] = {}
        self.views: dict[int, ViewInfo] = {}
        self.version: dict[int, int] = {}  # id(root) -> number of writes so far
        self.seen_version: dict[int, int] = {}  # id(view) -> root version its node reflects
        self.created_version: dict[int, int] = {}  # id(view) -> root version when it was made
        # id(root) of tensors written while grad mode was on (a graph may switch it off first,
        # as an optimizer step does: its writes to parameters are then legal).
        self.written_with_grad: set[int] = set()
        self.inputs: list[tuple[torch.Tensor, torch.fx.Node]] = []
        self.keepalive: list[Any] = []
        self.current_meta: dict = {}
        self.fallback_ops: set[str] = set()
        self.recording = True  # off while making tangent placeholders
        self.sym_nodes: dict[int, torch.fx.Node] = {}  # data-dependent scalars -> the op that made them
        self.symbols = SymbolNodes(graph)  # symbolic input sizes -> nodes computing them

    @contextlib.contextmanager
    def paused(self):
        """Ops run on the fakes only, recorded nowhere."""
        recording, self.recording = self.recording, False
        try:
            yield
        finally:
            self.recording = recording

    # -- values ------------------------------------------------------------------------------------
    def add_input(self, name: str, tensor: torch.Tensor) -> torch.fx.Node:
        node = self.graph.placeholder(name)
        node.meta["val"] = tensor
        self._bind(tensor, node)
        self.inputs.append((tensor, node))
        self.symbols.add_input(node, tensor)
        return node

    def _bind(self, tensor: torch.Tensor, node: torch.fx.Node) -> None:
        self.nodes[id(tensor)] = node
        self.keepalive.append(tensor)
        self.seen_version[id(tensor)] = self._root_version(tensor)

    def _root_version(self, tensor: torch.Tensor) -> int:
        return self.version.get(id(self.root(tensor)), 0)

    def root(self, tensor: torch.Tensor) -> torch.Tensor:
        while id(tensor) in self.views:
            tensor = self.views[id(tensor)].parent
        return tensor

    def node_of(self, tensor: torch.Tensor) -> torch.fx.Node:
        if id(tensor) not in self.nodes:
            if isinstance(tensor, torch.Tensor) and not isinstance(tensor, torch._subclasses.FakeTensor):
                return self._constant(tensor)
            raise TracingError(f"a tensor that is neither an input nor made by a traced op "
                               f"({tuple(tensor.shape)}, {tensor.dtype}){self._where()}")
        if id(tensor) in self.views and self.seen_version.get(id(tensor)) != self._root_version(tensor):
            self._regenerate(tensor)
        return self.nodes[id(tensor)]

    def _constant(self, tensor: torch.Tensor) -> torch.fx.Node:
        """A real tensor that the traced code closed over: a constant of the graph module."""
        name = f"_tensor_constant{len([n for n in self.graph.nodes if n.op == 'get_attr'])}"
        owner = self.graph.owning_module
        if owner is None:
            raise TracingError(f"tensor constant {tuple(tensor.shape)} needs a graph module to live in")
        owner.register_buffer(name, tensor)
        node = self.graph.get_attr(name)
        node.meta["val"] = self.fake_mode.from_tensor(tensor)
        self._bind(tensor, node)
        return node

    def _regenerate(self, view: torch.Tensor) -> None:
        """Re-derive a view from its (rewritten) parent by replaying the view op."""
        info = self.views[id(view)]
        parent_node = self.node_of(info.parent)
        if info.index is None:
            args = info.args
            if info.func is aten.as_strided.default:
                args = self._as_strided_on_new_value(info, parent_node, scatter=False)
            node = self._record(info.func, (parent_node, *args), info.kwargs, view)
        else:  # one piece of a split or unbind: the slice or select that makes just that piece
            name = _op_name(info.func)
            if name not in ("split", "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes", "unbind"):
                raise TracingError(f"re-deriving a piece of {name} after a write")
            select, args = _piece(info, view)
            node = self._record(aten.select.int if select else aten.slice.Tensor, (parent_node, *args), {}, view)
        self.nodes[id(view)] = node
        self.seen_version[id(view)] = self._root_version(view)

    def _map_args(self, value: Any) -> Any:
        value = pytree.tree_map_only(torch.Tensor, self.node_of, value)
        return pytree.tree_map_only((torch.SymInt, torch.SymFloat, torch.SymBool), self.sym_node_of, value)

    def sym_node_of(self, value) -> torch.fx.Node:
        """A data-dependent scalar (e.g. from .item()) is only usable as the op output it came
        from; a symbolic size of the inputs is computed from them (`sym_size(primals_1, 0) * 2`)."""
        node = self.sym_nodes.get(_sym_key(value))
        if node is None and isinstance(value, (torch.SymInt, torch.SymFloat)) and self.symbols.knows(value):
            try:
                return self.symbols.node_of(value)
            except SymbolicSizeError as error:
                raise TracingError(f"{error}{self._where()}") from None
        if node is None:
            raise TracingError(f"Python arithmetic on a data-dependent value ({value}) is not traced{self._where()}")
        return node

    def _where(self) -> str:
        trace = self.current_meta.get("stack_trace")
        if not trace:
            return ""
        last = [line.strip() for line in trace.strip().splitlines() if line.strip()]
        return f" (from {last[-2]}: {last[-1]})" if len(last) >= 2 else f" (from {last[-1]})"

    def _record(self, func, node_args: tuple, node_kwargs: dict, result: Any) -> torch.fx.Node:
        # Raw symbolic sizes (a replayed view's args, an expand to a target's shape) become nodes.
        symbolic = (torch.SymInt, torch.SymFloat, torch.SymBool)
        node_args, node_kwargs = pytree.tree_map_only(symbolic, self.sym_node_of, (node_args, node_kwargs))
        node = self.graph.call_function(func, node_args, node_kwargs)
        node.meta["val"] = result
        for key in ("stack_trace", "source_fn", "ember_recompute"):
            if key in self.current_meta:
                node.meta[key] = self.current_meta[key]
        return node

    # -- dispatch ------------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _METADATA_OPS or not self.recording:
            return func(*args, **kwargs)
        schema = func._schema
        if schema.is_mutable and torch.Tag.inplace_view not in func.tags:
            self._check_overlap(func, args, kwargs)
        decomposition = self.decompositions.get(func)
        # An op eager refuses for these dtypes stays one call, which raises eager's error when
        # the graph runs (its decomposition would compute something instead).
        if decomposition is not None and eager_accepts(func, args, kwargs) and not _data_dependent_sizes(args):
            with self:
                result = decomposition(*args, **kwargs)
            if result is not NotImplemented:
                return self._as_eager_returns(func, args, kwargs, result)
        if schema.is_mutable:
            return self._mutation(func, args, kwargs)
        node_args = None
        if func is aten.as_strided.default:
            args, kwargs = self._as_strided_of_root(args, kwargs)
            node_args = self._as_strided_of_written(args, kwargs)
        result = symbolic_result(func, args, kwargs)
        result = with_eager_layout(func, args, kwargs, func(*args, **kwargs) if result is None else result)
        node = self._record(func, self._map_args(args if node_args is None else node_args),
                            self._map_args(kwargs if node_args is None else {}), result)
        self._bind_outputs(func, args, kwargs, result, node)
        return result

    def _as_strided_of_root(self, args, kwargs):
        """as_strided indexes storage, not elements: of a view, it is recorded as an as_strided
        of the view's root at the absolute offset (the view's node may hold a fresh value after a
        write through it, and the gradient must reach every element of the root it reads)."""
        bound = _bound(aten.as_strided.default, args, kwargs)
        view = bound["self"]
        if id(view) not in self.views:
            return args, kwargs
        root = self.root(view)
        offset = bound.get("storage_offset")
        at = view.storage_offset() if offset is None else offset
        differentiable = view.requires_grad and torch.is_grad_enabled()
        if differentiable and not _reads_within(view, bound["size"], bound["stride"], at):
            # Eager's gradient reaches the view's own elements, or every element read once the
            # base was written in place: which one is not known here.
            raise TracingError(f"as_strided of a view, reading memory outside the view, that requires grad"
                               f"{self._where()}")
        if differentiable and (elements_share_memory(root) or elements_share_memory(view)):
            # its gradient is split among the view's readers of a location in eager (test_as_strided_views.py)
            raise TracingError(f"as_strided of a view sharing memory, that requires grad{self._where()}")
        if any(root is tensor for tensor, _ in self.inputs):
            if offset is None and view.storage_offset() == root.storage_offset():
                return (root, bound["size"], bound["stride"]), {}  # relative to the input's offset at the call
            # (no guard checks an input's storage offset: an absolute offset may not be eager's)
            raise TracingError(f"as_strided of a view of an input at another storage offset{self._where()}")
        return (root, bound["size"], bound["stride"], at), {}

    def _as_strided_of_written(self, args, kwargs) -> tuple | None:
        """The graph's arguments for as_strided of a tensor written earlier in the graph (whose
        node is now its new value, memory of its own): the offset counted from that memory's
        start (see _as_strided_on_new_value).  None: not written, the arguments as they are."""
        bound = _bound(aten.as_strided.default, args, kwargs)
        base = bound["self"]
        if id(base) in self.views or self.version.get(id(base), 0) == 0:
            return None
        info = ViewInfo(base, aten.as_strided.default, (bound["size"], bound["stride"], bound.get("storage_offset")),
                        {}, None)
        return (base, *self._as_strided_on_new_value(info, self.node_of(base), scatter=False))

    def _as_eager_returns(self, func, args, kwargs, result):
        """A decomposition's result in eager's layout, in memory of its own (a later reshape
        views or copies as in eager)."""
        if func.is_view or torch.Tag.inplace_view in func.tags:
            return result
        try:
            # The op's own meta kernel (this mode is off in here), in eager's layout.
            expected = with_eager_layout(func, args, kwargs, func(*args, **kwargs))
        except Exception:  # noqa: BLE001 - no meta kernel: keep the decomposition's layout
            return result
        results, spec = pytree.tree_flatten(result)
        expecteds, _ = pytree.tree_flatten(expected)
        if len(results) != len(expecteds):
            return result
        inputs = {storage_key(a) for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)}
        fixed = [self._with_layout_of(value, want, inputs) for value, want in zip(results, expecteds)]
        if all(a is b for a, b in zip(fixed, results)):
            return result
        return pytree.tree_unflatten(fixed, spec)

    def _with_layout_of(self, value, want, inputs: set):
        if not isinstance(value, torch.Tensor) or not isinstance(want, torch.Tensor):
            return value
        # (sizes compared as expressions: comparing SymInts would guard them)
        if value.dtype != want.dtype or [expr(a) for a in value.shape] != [expr(b) for b in want.shape]:
            return value
        empty = not (_has_symbols(value) or _has_symbols(want)) and value.numel() == 0
        same = empty or all(expr(a) == expr(b) for a, b, n in zip(value.stride(), want.stride(), want.shape)
                            if expr(n) != 1)
        if same and storage_key(value) not in inputs:  # (eager's kernel returns memory of its own)
            return value
        order = _dense_order(want)
        if order is None:
            order = list(range(value.dim()))  # eager's layout is not dense: contiguous at least
        with self:
            return copy_in_order(value, order)

    def _bind_outputs(self, func, args, kwargs, result, node) -> None:
        if isinstance(result, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            self.sym_nodes[_sym_key(result)] = node
            self.keepalive.append(result)
            return
        is_view = func.is_view and func not in _FRESH_ALIASES
        parent = args[0] if is_view and args and isinstance(args[0], torch.Tensor) else None
        for tensor, tensor_node, index in self._pieces(result, node):
            self._bind(tensor, tensor_node)
            if parent is not None:
                self.views[id(tensor)] = ViewInfo(parent, func, tuple(args[1:]), dict(kwargs), index)
                self.seen_version[id(tensor)] = self._root_version(tensor)
                self.created_version[id(tensor)] = self.seen_version[id(tensor)]

    def _pieces(self, result, node: torch.fx.Node, skip=()) -> list:
        """(tensor, its node, index) for a tensor result, or for each tensor item of a tuple result
        (not in `skip`; a getitem node each)."""
        if isinstance(result, torch.Tensor):
            return [(result, node, None)]
        if not isinstance(result, (tuple, list)):
            return []
        return [(item, self._getitem(node, index, item), index) for index, item in enumerate(result)
                if isinstance(item, torch.Tensor) and not any(item is t for t in skip)]

    def _getitem(self, node: torch.fx.Node, index: int, value) -> torch.fx.Node:
        item = self.graph.call_function(operator.getitem, (node, index))
        item.meta["val"] = value
        return item

    # -- functionalization ------------------------------------------------------------------------
    def _mutation(self, func, args, kwargs):
        written = _written(func)
        if torch.Tag.inplace_view in func.tags:
            return self._metadata_mutation(func, args, kwargs)
        if _cuda_computes_in_output_dtype(func, args, kwargs):
            # eager's CUDA kernel casts the bounds to the target's (integer) dtype first, where
            # the CPU's compares in the common dtype: the same op again, on the cast bounds
            target = args[0]

            def cast(value):
                if isinstance(value, torch.Tensor) and value is not target and value.dtype != target.dtype:
                    return aten._to_copy.default(value, dtype=target.dtype)
                return value

            with self:
                return func(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})
        functional = _functional_variant(func)
        if functional is None or len(written) != 1 or written[0] != func._schema.arguments[0].name:
            return self._opaque_mutation(func, args, kwargs, written)
        target = args[0]
        empty = isinstance(target, torch.Tensor) and not isinstance(target.numel(), torch.SymInt) and \
            target.numel() == 0
        if empty and not (torch.is_grad_enabled() and any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in pytree.tree_leaves((args[1:], kwargs)))):
            # A write of no element changes nothing (eager checks no overlap for it): the op on
            # the fakes only, unless its value requires grad; the cast is still checked.
            self._check_cast(functional(*args, **kwargs), target)
            return func(*args, **kwargs)
        if not empty and isinstance(target, torch.Tensor) and elements_share_memory(target):
            # eager writes element by element, each write seen by later reads; a functional op
            # reads the old values
            raise TracingError(f"{func}: a write into a view whose elements share memory{self._where()}")
        args = _fill_defaults(func, args, kwargs)
        node_args, node_kwargs = self._map_args(args), self._map_args(kwargs)
        # Metadata of the new value: the functional op on the fakes (this mode is off in here).
        new_value = functional(*args, **kwargs)
        value_node = self._record(functional, node_args, node_kwargs, new_value)
        if func is aten.copy_.default and new_value.shape != target.shape:
            value_node = self._record(aten.expand.default, (value_node, list(target.shape)), {}, target)
        result = func(*args, **kwargs)  # the fake tensor itself follows the write
        if isinstance(target, (list, tuple)):
            # A foreach op writes every tensor of its list: each takes its item of the result.
            for index, tensor in enumerate(target):
                item_node = self._record(operator.getitem, (value_node, index), {}, new_value[index])
                self.write(tensor, self._keep_dtype(item_node, new_value[index], tensor))
            return result
        if id(target) not in self.views and new_value.dtype == target.dtype:
            # An in-place op keeps its target's strides; the functional op's fake may not (a
            # later flatten would view what eager copies).
            self._bind(new_value, value_node)
            laid_out = self._with_layout_of(new_value, target, set())
            if laid_out is not new_value:
                new_value, value_node = laid_out, self.node_of(laid_out)
        self.write(target, self._keep_dtype(value_node, new_value, target))
        return result

    def _check_overlap(self, func, args, kwargs) -> None:
        """Eager refuses some writes into memory the op also reads; the fakes do not check."""
        bound = _bound(func, args, kwargs)
        targets = [t for name in _written(func) for t in pytree.tree_leaves(bound.get(name))
                   if isinstance(t, torch.Tensor)]
        refused = eager_overlap_error(func, args, kwargs, targets)
        if refused is not None:
            raise TracingError(f"{func}: {refused}{self._where()}")

    def _check_cast(self, value: torch.Tensor, target: torch.Tensor) -> None:
        if not torch.can_cast(value.dtype, target.dtype):  # fakes do not check; eager raises
            raise TracingError(f"result type {value.dtype} can't be cast to the desired output type {target.dtype}"
                               f"{self._where()}")

    def _keep_dtype(self, value_node: torch.fx.Node, value: torch.Tensor, target: torch.Tensor) -> torch.fx.Node:
        """An in-place op keeps its target's dtype (a bfloat16 x.sub_(float32) stays bfloat16)."""
        if value.dtype == target.dtype:
            return value_node
        self._check_cast(value, target)
        return self._record(aten._to_copy.default, (value_node,), {"dtype": target.dtype}, value.to(target.dtype))

    def _opaque_mutation(self, func, args, kwargs, names: list[str]):
        """A mutating op with no functional form: one call on fresh copies of what it writes."""
        bound = _bound(func, args, kwargs)
        targets = [bound.get(name) for name in names]
        if any(t is not None and not isinstance(t, torch.Tensor) for t in targets):
            raise TracingError(f"{func} writes to a list of tensors{self._where()}")
        node_args, node_kwargs = self._map_args(args), self._map_args(kwargs)
        result = func(*args, **kwargs)  # the fakes follow the writes
        node = self._record(FunctionalizedOp(func, tuple(names)), node_args, node_kwargs, (result, *targets))
        if str(func) not in self.fallback_ops:
            logs.get("fallbacks").debug("%s has no functional form: one call on copies of %s%s",
                                        func, ", ".join(names), self._where())
        self.fallback_ops.add(str(func))
        result_node = self._getitem(node, 0, result)
        for index, target in enumerate(targets):
            if target is not None:
                self.write(target, self._getitem(node, index + 1, target))
        if isinstance(result, torch.Tensor) and any(result is t for t in targets):
            return result  # returns its (written) argument: already bound by write()
        for tensor, tensor_node, _ in self._pieces(result, result_node, skip=targets):
            self._bind(tensor, tensor_node)
        return result

    def _metadata_mutation(self, func, args, kwargs):
        target = args[0]
        if any(target is t for t, _ in self.inputs):
            raise TracingError(f"{func} changes the shape or strides of an input in place{self._where()}")
        functional = _functional_variant(func)
        if functional is None:
            raise TracingError(f"{func} has no functional form ember knows{self._where()}")
        node = self._record(functional, self._map_args(args), self._map_args(kwargs), None)
        # The fake itself changes shape below: every node whose value it is keeps a snapshot.
        snapshot = _like(target)
        for earlier in self.graph.nodes:
            if earlier.meta.get("val") is target:
                earlier.meta["val"] = snapshot
        result = func(*args, **kwargs)
        node.meta["val"] = _like(target)
        self.nodes[id(target)] = node
        return result

    def write(self, target: torch.Tensor, value_node: torch.fx.Node) -> None:
        """`target` now holds `value_node`; push the write up to its base."""
        tensor, node = target, value_node
        detached = False  # a write through x.detach() is invisible to autograd, as under no_grad
        while id(tensor) in self.views:
            info = self.views[id(tensor)]
            detached = detached or info.func is aten.detach.default
            self.nodes[id(tensor)] = node
            node = self._scatter_into_parent(info, node, tensor)
            tensor = info.parent
        self.nodes[id(tensor)] = node
        root_id = id(tensor)
        if torch.is_grad_enabled() and not detached:
            self.written_with_grad.add(root_id)
        self.version[root_id] = self.version.get(root_id, 0) + 1
        # target itself reflects the latest value
        self.seen_version[id(target)] = self.seen_version[root_id] = self.version[root_id]
        if target is not tensor:
            self.nodes[id(target)] = value_node

    def _scatter_into_parent(self, info: ViewInfo, value: torch.fx.Node, view: torch.Tensor) -> torch.fx.Node:
        parent, func, args = info.parent, info.func, info.args
        parent_node = self.node_of(parent)
        name = _op_name(func)

        def record(op, op_args):
            return self._record(op, op_args, {}, parent)

        if name == "slice":  # (dim, start, end, step), defaults filled in
            return record(aten.slice_scatter.default, (parent_node, value, *args, *(0, None, None, 1)[len(args):]))
        if name == "select":
            return record(aten.select_scatter.default, (parent_node, value, args[0], args[1]))
        if name == "diagonal":
            return record(aten.diagonal_scatter.default, (parent_node, value, *args))
        if name in ("view", "_unsafe_view", "reshape", "alias", "detach", "squeeze", "unsqueeze", "flatten",
                    "unflatten", "view_as", "_reshape_alias"):
            if name in ("alias", "detach") or tuple(view.shape) == tuple(parent.shape):
                return value
            return record(aten.view.default, (value, list(parent.shape)))
        if name in ("permute", "transpose", "t", "swapaxes", "movedim", "swapdims"):
            inverse = _inverse_permutation(parent, func, args)
            return record(aten.permute.default, (value, inverse))
        if name in ("split", "split_with_sizes", "chunk", "unbind", "narrow"):
            select, piece = _piece(info, view)
            return record(aten.select_scatter.default if select else aten.slice_scatter.default,
                          (parent_node, value, *piece))
        if name == "as_strided":
            if elements_share_memory(view):  # (as_strided_scatter would write an element twice)
                raise TracingError(f"writing through an as_strided view whose elements share memory "
                                   f"is not supported{self._where()}")
            _, _, offset = self._as_strided_on_new_value(info, parent_node, scatter=True)
            return record(aten.as_strided_scatter.default, (parent_node, value, args[0], args[1], offset))
        raise TracingError(f"writing through a {name} view is not supported{self._where()}")

    def _as_strided_on_new_value(self, info: ViewInfo, parent_node: torch.fx.Node, scatter: bool) -> tuple:
        """(size, stride, offset) of an as_strided view replayed on its parent's new value after
        a write.  The offset counts from the parent's storage, the new value is memory of its own
        at offset 0: the replay is the same view only when it reads the parent's own elements and
        the new value has the parent's strides (the offset then moves by the parent's); otherwise
        the graph is not traced."""
        parent = info.parent
        size, stride = info.args[0], info.args[1]
        offset = info.args[2] if len(info.args) > 2 and info.args[2] is not None else parent.storage_offset()
        if parent_node.op == "placeholder":  # the input itself: its storage, as eager's
            # as_strided_scatter writes a clone of the input at its offset: the input's storage
            # positions only for a dense input, and only where it writes the input's elements
            if scatter and (_has_symbols(parent) or not isinstance(offset, int) or _dense_order(parent) is None or
                            not _reads_within(parent, size, stride, offset)):
                raise TracingError(f"a write through an as_strided view of an input that reaches memory outside "
                                   f"the input, or of an input that is not dense{self._where()}")
            return size, stride, offset
        new_value = parent_node.meta.get("val")
        if not isinstance(new_value, torch.Tensor) or _has_symbols(parent) or _has_symbols(new_value) or \
                not isinstance(offset, int):
            raise TracingError(f"an as_strided view used after a write to its base, at symbolic geometry"
                               f"{self._where()}")
        # (a node's value is memory of its own at offset 0: a fake at another offset is the
        # target's, kept by a write that says nothing of the layout)
        same_layout = new_value.storage_offset() == 0 and \
            tuple(new_value.shape) == tuple(parent.shape) and all(
                a == b for a, b, n in zip(new_value.stride(), parent.stride(), parent.shape) if n != 1)
        if id(parent) in self.views or not same_layout or _dense_order(parent) is None or \
                not _reads_within(parent, size, stride, offset):
            raise TracingError(f"an as_strided view that reads memory outside its base, or of a base whose "
                               f"new value may have another layout, used after a write to that base{self._where()}")
        return size, stride, offset - parent.storage_offset()

    # -- results --------------------------------------------------------------------------------------
    def mutated_inputs(self) -> list[tuple[int, torch.fx.Node]]:
        """(input index, node of its final value) for each input written during tracing."""
        return [(int(node.name.rsplit("_", 1)[-1]) - 1 if node.name.startswith("primals_") else position,
                 self.node_of(tensor))
                for position, (tensor, node) in enumerate(self.inputs) if self.version.get(id(tensor), 0) > 0]


def _like(tensor: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device=tensor.device)


def _piece(info: ViewInfo, view: torch.Tensor) -> tuple[bool, tuple]:
    """`view` as one piece of `info.parent` (of unbind, a split or narrow): (True, select's
    (dim, index)) or (False, slice's (dim, start, end, 1))."""
    if _op_name(info.func) == "unbind":
        return True, (info.args[0] if info.args else 0, info.index)
    parent = info.parent
    dim_position = 0 if _op_name(info.func) == "narrow" else 1
    dim = (info.args[dim_position] if len(info.args) > dim_position else 0) % parent.dim()
    start = (view.storage_offset() - parent.storage_offset()) // max(parent.stride(dim), 1)
    return False, (dim, start, start + view.shape[dim], 1)


def _data_dependent_sizes(args) -> bool:
    """Does some tensor argument have a size that depends on data (an unbacked symbol, even one
    the ShapeEnv has since fixed)?  Such ops run as ATen calls: a decomposition would drop the
    checks of eager's kernel."""
    return any(any(s.name.startswith(("u", "zuf"))
                   for s in getattr(getattr(size.node, "_expr", size.node.expr), "free_symbols", ()))
               for value in args if isinstance(value, torch.Tensor)
               for size in value.shape if isinstance(size, torch.SymInt))


def _sym_key(value) -> Any:
    """Symbolic scalars are fresh Python objects each time: key them by their expression."""
    return str(value.node.expr)


class FunctionalizedOp:
    """Calls a mutating ATen op on copies of the tensors it writes; returns (result, *new values):
    to the graph a pure function, so no pass ever sees a mutation."""

    def __init__(self, op, written: tuple[str, ...]) -> None:
        self.op = op
        self.written = written
        self.__name__ = f"functionalized_{str(op).replace('.', '_')}"
        self.__qualname__ = self.__name__

    def __call__(self, *args, **kwargs):
        names = [a.name for a in self.op._schema.arguments]
        args = list(args)
        copies = []
        for name in self.written:
            if name in kwargs:
                kwargs[name] = kwargs[name].clone() if kwargs[name] is not None else None
                copies.append(kwargs[name])
            else:
                position = names.index(name)
                if position < len(args) and args[position] is not None:
                    args[position] = args[position].clone()
                copies.append(args[position] if position < len(args) else None)
        return (self.op(*args, **kwargs), *copies)

    def __repr__(self) -> str:
        return self.__name__


def _fill_defaults(func, args: tuple, kwargs: dict) -> tuple:
    """Positional arguments with the schema's defaults filled in (functional forms may lack them)."""
    filled = list(args)
    for argument in func._schema.arguments[len(args):]:
        if argument.kwarg_only or argument.name in kwargs or not argument.has_default_value():
            break
        filled.append(argument.default_value)
    return tuple(filled)


def _inverse_permutation(parent, func, args) -> list[int]:
    name = _op_name(func)
    rank = parent.dim()
    order = list(range(rank))
    if name == "permute":
        order = [d % rank for d in args[0]]
    elif name in ("transpose", "swapaxes", "swapdims"):
        a, b = args[0] % rank, args[1] % rank
        order[a], order[b] = order[b], order[a]
    elif name == "t":
        order.reverse()  # (rank 2; below it, the identity)
    else:
        raise TracingError(f"writing through {name}")
    return inverse_permutation(order)

