"""OutputGraph: the FX graph a capture builds, its inputs, fake tensors and guards.

Each tensor found at a source (argument, global, module parameter) becomes one placeholder named
after its source and guarded on its metadata (reached by two paths: one placeholder, and a guard
that the paths hold the same object).  Operations become nodes whose example values come from
running them on fake tensors.
"""
from __future__ import annotations

import dataclasses
import enum
import operator
import re
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)
from torch.utils import _pytree as pytree

from ..eager.layout import EagerLayoutMode
from .errors import Unsupported
from .guards import GuardSet
from .side_effects import SideEffects
from .shapes import ShapePlan, SpecializationWatch, StaticShapesNeeded, marked_dims, symbolic_fake
from .sources import ModuleDictSource, Source
from .variables.base import ConstantVariable, VariableTracker, constant, is_constant_value, static_of


@dataclasses.dataclass
class GraphInput:
    source: Source
    node: torch.fx.Node
    example: torch.Tensor  # the real tensor seen at capture time


# Functions that change state and must survive dead-code elimination.
SIDE_EFFECT_TARGETS = {
    operator.setitem,
    torch._C._set_grad_enabled,
    torch.manual_seed,
}
_INPLACE_OPERATORS = {
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.imatmul, operator.ilshift, operator.irshift,
    operator.iand, operator.ior, operator.ixor,
}


def is_impure(node: torch.fx.Node) -> bool:
    if node.op in ("placeholder", "output"):
        return True
    if node.op not in ("call_method", "call_function"):
        return False
    target = node.target
    name = target if node.op == "call_method" else getattr(target, "__name__", "")
    if name.endswith("_") and not name.endswith("__"):  # an in-place method or function
        return True
    if node.op == "call_method":
        return False
    return (name in ("enter_autocast", "exit_autocast") or target in SIDE_EFFECT_TARGETS or target in _INPLACE_OPERATORS
            # (torch.ops.aten.add_.Tensor(a, b), its result unused: a is still written)
            or isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable
            or "out" in node.kwargs)


class OutputGraph:
    def __init__(self, tracer_config) -> None:
        self.graph = torch.fx.Graph()
        self.fake_mode = FakeTensorMode()
        scalars = getattr(tracer_config, "capture_scalar_outputs", False)
        output_shapes = getattr(tracer_config, "capture_dynamic_output_shape_ops", False)
        self.captures_data_dependent = bool(scalars or output_shapes)
        if scalars or output_shapes:
            # .item() becomes an unbacked symbol, nonzero's size another (torch.compile's two flags)
            self.fake_mode.shape_env = ShapeEnv(allow_scalar_outputs=scalars,
                                                allow_dynamic_output_shape_ops=output_shapes)
            self.fake_mode.static_shapes = False
        # Entered above fake_mode: pointwise results get the strides eager's kernels give them.
        self.eager_layout_mode = EagerLayoutMode()
        self.guards = GuardSet()
        self.side_effects = SideEffects()
        self.inputs: list[GraphInput] = []
        self._tensor_inputs: dict[int, "VariableTracker"] = {}
        # One variable per mutable Python object (identity), so aliases see mutations.
        self.objects: dict[int, VariableTracker] = {}
        self._keepalive: list[Any] = []
        self._last_placeholder: torch.fx.Node | None = None
        # Real context managers entered during capture (autocast), exited if capture stops.
        self.entered_contexts: list = []
        self.shape_plan: ShapePlan | None = None  # dynamic shapes (capture/shapes.py)
        self.symbolic_inputs: list[tuple[torch.Tensor, str]] = []  # (fake, source expr)
        self.specialization_watch: SpecializationWatch | None = None  # sizes the user marked dynamic
        self.recompute_region: int | None = None  # the checkpoint region being captured, if any

    # -- inputs --------------------------------------------------------------------------------
    def new_placeholder(self, source: Source) -> torch.fx.Node:
        """A graph input named for its source, after the inputs made so far (at the graph's start)."""
        if self._last_placeholder is None:
            first = next(iter(self.graph.nodes), None)
            context = self.graph.inserting_before(first) if first is not None else self.graph.inserting_after()
        else:
            context = self.graph.inserting_after(self._last_placeholder)
        with context:
            node = self.graph.placeholder(placeholder_name(source))
        self._last_placeholder = node
        return node

    def tensor_input(self, value: torch.Tensor, source: Source) -> VariableTracker:
        from .variables.tensor import TensorVariable

        known = self._tensor_inputs.get(id(value))
        if known is not None:
            if known.source != source:
                self.guards.same_object(source, known.source)
            return known
        # Eager can leave an integer or bool tensor requiring grad (a float that requires grad
        # copied into a bool slice); no gradient can flow through it, and fakes refuse it.
        real = value.detach() if value.requires_grad and not (value.is_floating_point() or value.is_complex()) \
            else value
        # Parameters and buffers keep their sizes (as torch.compile's force_parameter_static_shapes)
        module_state = isinstance(value, torch.nn.Parameter) or (
            isinstance(source, ModuleDictSource) and source.table in ("_parameters", "_buffers"))
        dims = self.shape_plan.dims(value, source.expr()) if self.shape_plan is not None and not module_state \
            else ()
        fake = symbolic_fake(self.fake_mode, real, source.expr(), dims) if dims else None
        self.guards.tensor(source, value, fake)
        node = self.new_placeholder(source)
        if fake is None:
            fake = self.fake_mode.from_tensor(real, static_shapes=True)
        if real.device.type != "cpu":
            # (no op without a meta kernel run for real on zero-filled device tensors: see joint.py)
            self.fake_mode.allow_fallback_kernels = False
        node.meta["example_value"] = fake
        node.meta["source"] = source.expr()
        if dims:
            self.symbolic_inputs.append((fake, source.expr()))
            marked = marked_dims(value, "_ember_dynamic_dims") | marked_dims(value, "_dynamo_dynamic_indices")
            if self.specialization_watch is None:
                self.specialization_watch = SpecializationWatch(self.fake_mode.shape_env)
            self.specialization_watch.mark(fake, source.expr(), marked)
            self.specialization_watch.mark(fake, source.expr(), dims, user=False)
        variable = TensorVariable(node, fake, source=source, class_type=type(value))
        variable.real_tensor = value
        self.side_effects.real_objects.watch(value, source.expr())
        self.inputs.append(GraphInput(source, node, value))
        self._tensor_inputs[id(value)] = variable
        self._keepalive.append(value)
        return variable

    # -- operations ----------------------------------------------------------------------------
    def call(self, tx, kind: str, target: Any, args: list, kwargs: dict) -> VariableTracker:
        """Add `target(*args, **kwargs)` to the graph and return the variable for its result."""
        if target == "type" and kind == "call_method" or target is torch.Tensor.type:
            args, kwargs = [_tensor_type_name(a) for a in args], {k: _tensor_type_name(v) for k, v in kwargs.items()}
        proxy_args, fake_args = _unwrap(tx, args)
        proxy_kwargs, fake_kwargs = _unwrap(tx, kwargs)
        try:
            with self.fake_mode, self.eager_layout_mode:
                if kind == "call_method":
                    result = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                else:
                    result = target(*fake_args, **fake_kwargs)
        except (DataDependentOutputException, DynamicOutputShapeException) as error:
            raise Unsupported(f"data-dependent operator {error} in {_target_name(kind, target)}") from None
        except Unsupported:
            raise
        except NotImplementedError as error:
            raise Unsupported(f"{_target_name(kind, target)} has no fake-tensor rule: {error}") from None
        except Exception as error:
            # Real inputs may raise the same error: running the op eagerly (graph break)
            # lets Python raise exactly what eager would.
            raise Unsupported(
                f"{_target_name(kind, target)} failed on fake tensors ({type(error).__name__}: {error})"
            ) from None
        if kind == "call_function":
            target = _printable_target(target)
        node = self.graph.create_node(kind, target, tuple(proxy_args), dict(proxy_kwargs))
        node.meta["stack_trace"] = tx.stack_trace()
        node.meta["ember_call"] = (kind, target, node.args, node.kwargs)  # (kept if DCE drops it: scalars.replay)
        if self.recompute_region is not None:  # inside torch.utils.checkpoint (variables/checkpoint.py)
            node.meta["ember_recompute"] = self.recompute_region
        return self._wrap_result(tx, node, result)

    def _wrap_result(self, tx, node: torch.fx.Node, result: Any) -> VariableTracker:
        from .variables.containers import ListVariable, NamedTupleVariable, TupleVariable
        from .variables.symbolic import SYMBOLIC_TYPES, SymNodeVariable
        from .variables.tensor import TensorVariable

        if isinstance(result, SYMBOLIC_TYPES):
            return SymNodeVariable(node, result)
        if isinstance(result, tuple) and any(isinstance(item, SYMBOLIC_TYPES) for item in result) and \
                all(isinstance(item, (int, *SYMBOLIC_TYPES)) for item in result):
            # torch.Size with symbols (x.size()): one getitem node per symbolic entry
            node.meta["example_value"] = result
            return TupleVariable([SymNodeVariable(self.graph.call_function(operator.getitem, (node, index)), item)
                                  if isinstance(item, SYMBOLIC_TYPES) else constant(item)
                                  for index, item in enumerate(result)])
        if any(isinstance(leaf, SYMBOLIC_TYPES) for leaf in pytree.tree_leaves(result)):
            raise StaticShapesNeeded(f"{node.target} returned symbolic sizes in a {type(result).__name__}")
        if isinstance(result, torch.Tensor):
            node.meta["example_value"] = result
            return TensorVariable(node, result)
        if isinstance(result, (tuple, list)) and any(isinstance(item, torch.Tensor) for item in result):
            node.meta["example_value"] = result
            items = []
            for index, item in enumerate(result):
                if isinstance(item, torch.Tensor):
                    item_node = self.graph.call_function(operator.getitem, (node, index))
                    item_node.meta["stack_trace"] = node.meta.get("stack_trace")
                    item_node.meta["example_value"] = item
                    items.append(TensorVariable(item_node, item))
                elif is_constant_value(item):
                    items.append(constant(item))
                else:
                    raise Unsupported(f"operator returned a {type(item).__name__} inside a sequence")
            if hasattr(type(result), "_fields") or type(result).__module__ == "torch.return_types":
                return NamedTupleVariable(items, type(result))
            return ListVariable(items) if isinstance(result, list) else TupleVariable(items)
        if result is None and is_impure(node):
            return constant(None)  # a state change such as setitem: keep the node
        # Non-tensor results (sizes, flags) are known statically: no node needed.
        if node.users:
            raise Unsupported("non-tensor operator result with users")
        self.graph.erase_node(node)
        if is_constant_value(result):
            return constant(result)
        raise Unsupported(f"operator returned a {type(result).__name__}")

    # -- finishing -----------------------------------------------------------------------------
    def remove_dead_code(self) -> None:
        for node in reversed(list(self.graph.nodes)):
            if not node.users and not is_impure(node):
                self.graph.erase_node(node)

    def prune_unused_inputs(self) -> None:
        for graph_input in self.inputs:
            if not graph_input.node.users:
                self.graph.erase_node(graph_input.node)
        self.inputs = [graph_input for graph_input in self.inputs if graph_input.node.users]

    def op_count(self) -> int:
        return sum(1 for node in self.graph.nodes if node.op not in ("placeholder", "output"))


def _printable_target(target: Any) -> Any:
    """FX prints targets by qualified name; a callable whose name does not print gets a named wrapper."""
    try:
        name = torch.fx.node._get_qualified_name(target)
    except Exception:
        name = ""
    if name and all(part.isidentifier() for part in name.split(".")):
        return target

    def call(*args, **kwargs):
        return target(*args, **kwargs)

    call.__name__ = call.__qualname__ = "ember_call_" + re.sub(r"[^0-9a-zA-Z_]", "_", repr(target))[:40]
    return call


def _target_name(kind: str, target: Any) -> str:
    if kind == "call_method":
        return f"Tensor.{target}"
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)


def placeholder_name(source) -> str:
    """torch.compile's name for the input at `source`: its path with locals as `L[...]` and globals
    as `G[...]`, each run of other characters one `_` (`lambda0.keywords['y']` ->
    `L_lambda0_keywords_y_`), so printed graphs start `l_x_ = L_x_` as Dynamo's do."""
    from .sources import ClosureSource, GlobalSource, LocalSource

    root, expr = source.root(), source.expr()
    prefix = None
    if isinstance(root, LocalSource):
        prefix = f"L[{root.local!r}]"
    elif isinstance(root, ClosureSource):
        prefix = f"L[{root.var_name!r}]"
    elif isinstance(root, GlobalSource):
        prefix = f"G[{root.global_name!r}]"
    if prefix is not None and expr.startswith(root.expr()):
        expr = prefix + expr[len(root.expr()):]
    cleaned = re.sub(r"[^0-9a-zA-Z]+", "_", expr)
    if not cleaned or cleaned[0].isdigit() or cleaned[0] == "_":
        cleaned = "L" + cleaned if cleaned.startswith("_") else "L_" + cleaned
    return cleaned


def _unwrap(tx, value: Any) -> tuple[Any, Any]:
    """(FX argument, fake argument) for a variable or a container of variables."""
    from .variables.containers import BaseListVariable, DictVariable, NamedTupleVariable
    from .variables.symbolic import SymNodeVariable, SymSliceVariable
    from .variables.tensor import TensorVariable

    if isinstance(value, list):
        pairs = [_unwrap(tx, item) for item in value]
        return [p for p, _ in pairs], [f for _, f in pairs]
    if isinstance(value, dict):
        pairs = {key: _unwrap(tx, item) for key, item in value.items()}
        return {k: p for k, (p, _) in pairs.items()}, {k: f for k, (_, f) in pairs.items()}
    if isinstance(value, TensorVariable):
        return value.node, value.example
    if isinstance(value, ConstantVariable):
        if type(value.value).__module__ == "numpy":  # (np.float32(1.5): the number torch reads)
            from .variables.numpy_arrays import graph_scalar

            number = graph_scalar(value.value)
            return number, number
        return value.value, value.value
    if isinstance(value, SymNodeVariable):
        return value.node, value.value
    if isinstance(value, SymSliceVariable):
        pairs = [_unwrap(tx, part) for part in value.parts]
        return slice(*[p for p, _ in pairs]), slice(*[f for _, f in pairs])
    if isinstance(value, NamedTupleVariable):
        raise Unsupported("named tuple passed to a tensor operator")
    if isinstance(value, BaseListVariable):
        proxies, fakes = _unwrap(tx, value.items)
        if value.python_type() is tuple:
            return tuple(proxies), tuple(fakes)
        return proxies, fakes
    if isinstance(value, DictVariable):
        return _unwrap(tx, value.items)
    known = static_of(value)
    if isinstance(known, _PASSABLE_OBJECTS):
        return known, known
    raise Unsupported(f"{value} passed to a tensor operator")


# The real objects an operator may be handed at capture time (it runs for real, on fakes: an object
# it could write into or a function it could call would let capture change the user's objects).
_PASSABLE_OBJECTS = (enum.Enum, torch.finfo, torch.iinfo)
# torch.FloatTensor, torch.cuda.HalfTensor, ...: classes that name a dtype and device (Tensor.type).
_LEGACY_TENSOR_TYPES = frozenset(getattr(torch, "_tensor_classes", ()))


def _tensor_type_name(value: Any) -> Any:
    """Tensor.type's argument: a legacy tensor class becomes its name ("torch.HalfTensor"), which
    means the same to Tensor.type and is a literal in the graph's code."""
    known = static_of(value)
    if isinstance(known, type) and known in _LEGACY_TENSOR_TYPES:
        return ConstantVariable(f"{known.__module__}.{known.__name__}")
    return value
