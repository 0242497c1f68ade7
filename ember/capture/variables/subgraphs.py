"""A user function speculated into a subgraph: torch.cond's branches, the function of
torch.vmap / torch.func.grad.

The function is inlined as usual; the nodes it adds to the frame's graph (after a mark) are then cut
out into a GraphModule.  Its inputs are the region's own input nodes (`region_input` markers for the
function's arguments), then every outside value the nodes read ("lifted": closed-over tensors,
parameters, sizes); its output is the function's result, tensors in (nested) tuples/lists.  What would
make the cut wrong breaks the graph: Python state changes (anything the side-effect log records), a
region value used outside it, and in-place writes other than those a caller allows (vmap's batched arguments).
"""
from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.fx
from torch.utils._python_dispatch import TorchDispatchMode

from ... import logs
from ..errors import Unsupported
from .base import VariableTracker
from .containers import BaseListVariable, ListVariable, NamedTupleVariable, TupleVariable
from .symbolic import SymNodeVariable
from .tensor import TensorVariable

_numbers = itertools.count(1)


def region_input(value):
    """The marker a region's argument node calls (never run: it becomes a placeholder)."""
    raise RuntimeError("ember: a subgraph's input marker ran")  # pragma: no cover


def _side_effect_state(effects) -> tuple:
    writes = (effects.attr_writes, effects.global_writes, effects.cell_writes)
    return (*(tuple((key, id(value)) for key, value in log.items()) for log in writes),
            tuple(effects.mutated_containers), len(effects.calls), tuple(effects.deleted_attrs))


class Region:
    """The nodes one speculated call added, between `start()` and `finish(result)`."""

    def __init__(self, tx, what: str) -> None:
        self.tx = tx
        self.what = what
        self.graph = tx.graph
        self._mark = self.graph.graph._root.prev  # (the last node before the region)
        self._state = _side_effect_state(self.graph.side_effects)
        self.inputs: list[torch.fx.Node] = []
        self.nodes: list[torch.fx.Node] = []
        self.lifted: list[torch.fx.Node] = []
        self.result = None
        self.writes: list[torch.fx.Node] = []  # in-place nodes (what they write: their first argument)

    def argument(self, example: torch.Tensor) -> VariableTracker:
        """A TensorVariable for one of the function's arguments, with this fake as its value."""
        node = self.graph.graph.create_node("call_function", region_input, (), {})
        node.meta["example_value"] = example
        self.inputs.append(node)
        return TensorVariable(node, example)

    def finish(self, result: VariableTracker) -> None:
        """Take the nodes made since the mark; check the function's result and effects."""
        from ..graph import is_impure

        if _side_effect_state(self.graph.side_effects) != self._state:
            raise Unsupported(f"{self.what}: the function changes Python state (only tensor code is captured)")
        self.result = result
        self.leaves, self.spec = _flatten(result, self.what)
        fx_graph = self.graph.graph
        node = self._mark.next if self._mark is not fx_graph._root else next(iter(fx_graph.nodes), fx_graph._root)
        nodes = self.nodes
        while node is not fx_graph._root:
            if node.op != "placeholder":
                nodes.append(node)
            node = node.next
        inside = set(nodes)
        lifted: dict[torch.fx.Node, None] = {}

        def note(arg):
            if isinstance(arg, torch.fx.Node) and arg not in inside:
                lifted.setdefault(arg)
            return arg

        for node in nodes:
            if node.op not in ("call_function", "call_method"):
                raise Unsupported(f"{self.what}: a {node.op} node in the function")
            torch.fx.map_arg((node.args, node.kwargs), note)
            if is_impure(node) and node.target is not region_input:
                self.writes.append(node)
        for leaf in self.leaves:
            note(leaf.node)
        self.lifted = list(lifted)

    def check_writes(self, allowed: set) -> None:
        for node in self.writes:
            written = node.args[0] if node.args else None
            if written not in allowed:
                raise Unsupported(f"{self.what}: the function writes into a tensor in place "
                                  f"({getattr(node.target, '__name__', node.target)})")

    def module(self, lifted: list[torch.fx.Node], name: str) -> torch.fx.GraphModule:
        """The subgraph: placeholders for the inputs then `lifted` (a superset of this region's)."""
        sub = torch.fx.Graph()
        env: dict[torch.fx.Node, torch.fx.Node] = {}
        for index, node in enumerate([*self.inputs, *lifted]):
            placeholder = sub.placeholder(f"arg{index}")
            placeholder.meta.update({k: v for k, v in node.meta.items() if k == "example_value"})
            env[node] = placeholder
        for node in self.nodes:
            if node.target is region_input:
                continue
            env[node] = sub.node_copy(node, lambda arg: env[arg])
        sub.output(_unflatten([env[leaf.node] for leaf in self.leaves], self.spec))
        module = torch.fx.GraphModule(torch.nn.Module(), sub, class_name=name)
        if logs.enabled("graph_code"):
            logs.get("graph_code").debug("subgraph %s (%s):\n%s", name, self.what,
                                         module.print_readable(print_output=False))
        return module

    def remove(self) -> None:
        inside = set(self.nodes)
        for node in self.nodes:
            if any(user not in inside for user in node.users):
                raise Unsupported(f"{self.what}: a value made in the function is used outside it")
        for node in reversed(self.nodes):
            self.graph.graph.erase_node(node)


class _SeededOps(TorchDispatchMode):
    """Notes the first ATen op that draws random numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.found = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.found is None and torch.Tag.nondeterministic_seeded in func.tags:
            self.found = func
        return func(*args, **(kwargs or {}))


def random_op(tx, module: torch.fx.GraphModule):
    """The first random ATen op the subgraph runs (on its inputs' fakes), or None."""
    examples = [node.meta.get("example_value") for node in module.graph.nodes if node.op == "placeholder"]
    detector = _SeededOps()
    try:
        with tx.graph.fake_mode, detector:
            module(*examples)
    except Exception as error:  # noqa: BLE001 - it ran on these fakes once already
        raise Unsupported(f"a captured subgraph failed on fake tensors ({type(error).__name__}: {error})") from None
    return detector.found


def speculate(tx, what: str, function: VariableTracker, args: list, examples: list,
              kwargs: dict | None = None) -> Region:
    """Call `function` on `args` as a region; an argument with a fake in `examples` (else None) is
    passed as a region input with that fake."""
    region = Region(tx, what)
    args = [arg if example is None else region.argument(example) for arg, example in zip(args, examples)]
    result = tx.call(function, args, dict(kwargs or {}))
    region.finish(result)
    return region


def bind_options(what: str, names: tuple, args: list, kwargs: dict, extra: tuple = ()) -> tuple:
    """`what(func, ...)` called with `args`/`kwargs` by the parameter `names` (and keywords `extra`):
    the function and the other arguments, which must be constants, as Python values."""
    keywords = (*names, *extra)
    if len(args) > len(names) or any(key not in keywords for key in kwargs):
        raise Unsupported(f"{what} with these arguments")
    bound = dict(zip(names, args), **kwargs)
    if "func" not in bound:
        raise Unsupported(f"{what} without a function")
    func = bound.pop("func")
    if not all(value.is_python_constant() for value in bound.values()):
        raise Unsupported(f"{what} with non-constant {'/'.join(keywords[1:])}")
    return func, {key: value.as_python_constant() for key, value in bound.items()}


def union(*lists: list) -> list:
    return list(dict.fromkeys(itertools.chain(*lists)))


def unique_name(kind: str) -> str:
    return f"ember_{kind}_{next(_numbers)}"


# -- results as (tensor leaves, structure) ------------------------------------------------------
def _flatten(value: VariableTracker, what: str):
    if isinstance(value, TensorVariable):
        return [value], None
    if isinstance(value, BaseListVariable) and not isinstance(value, NamedTupleVariable) and \
            value.python_type() in (tuple, list):
        leaves, specs = [], []
        for item in value.items:
            item_leaves, item_spec = _flatten(item, what)
            leaves.extend(item_leaves)
            specs.append((len(item_leaves), item_spec))
        return leaves, (value.python_type(), specs)
    raise Unsupported(f"{what}: the function returns {value} (only tensors and tuples/lists of tensors are captured)")


def _unflatten(leaves: list, spec, make=lambda kind, items: kind(items)) -> Any:
    """The structure `spec` of `leaves`, each tuple/list of it made by `make(kind, items)`."""
    if spec is None:
        return leaves[0]
    kind, specs = spec
    items, start = [], 0
    for count, item_spec in specs:
        items.append(_unflatten(leaves[start:start + count], item_spec, make))
        start += count
    return make(kind, items)


def rebuild(leaves: list, spec) -> VariableTracker:
    """The result variable of the function's structure from its leaves' variables."""
    return _unflatten(leaves, spec, lambda kind, items: ListVariable(items) if kind is list else TupleVariable(items))


def flat_leaves(value: Any) -> tuple:
    """At run time: the tensors of a (nested) tuple/list result, in order (what the node returns)."""
    if isinstance(value, (tuple, list)):
        return tuple(leaf for item in value for leaf in flat_leaves(item))
    return (value,)


def leaf_variables(result: VariableTracker, count: int) -> list:
    """The node's result (a tuple of `count` tensors) as a list of variables."""
    items = result.items if hasattr(result, "items") else [result]
    if len(items) != count:
        raise Unsupported("a subgraph call returned another number of tensors than traced")
    return list(items)


def call_region(tx, region: Region, name: str, make_target, args: list) -> tuple:
    """The region's nodes replaced by one node: `make_target(the region's module)`, named `name`, on
    `args` then the values the region lifted.  Returns the target and the node's result."""
    module = region.module(region.lifted, name)
    region.remove()
    target = make_target(module)
    target.__name__ = target.__qualname__ = name
    return target, call_node(tx, target, [*args, *region.lifted])


class TransformedFunctionVariable(VariableTracker):
    """What a transform (torch.vmap, torch.func.grad, ...) returned for `function` and the constant
    `options`; rebuilt after the graph as `transform(function, **options)`."""

    def __init__(self, transform: Any, function: Any, options: dict) -> None:
        super().__init__()
        self.transform = transform
        self.function = function
        self.options = options

    def reconstruct_expr(self, codegen) -> str:
        options = "".join(f", {key}={codegen.literal(value)}" for key, value in self.options.items())
        return f"{codegen.ref(self.transform)}({self.function_expr(codegen)}{options})"

    def function_expr(self, codegen) -> str:
        return codegen.reconstruct(self.function)


UNKNOWN = object()


class TransformCall:
    """A graph node's target: `transform` (torch.vmap, torch.func.grad, ...) of a captured subgraph, its
    results as a flat tuple (their structure noted at the first call, on fakes at capture time)."""

    def __init__(self, transform: Any, module: torch.fx.GraphModule, options: dict) -> None:
        self.transform = transform
        self.module = module
        self.options = options
        self.spec = UNKNOWN
        self.count = 0

    def __call__(self, *args) -> tuple:
        result = self.transform(self.module, **self.options)(*args)
        if self.spec is UNKNOWN:
            self.spec = spec_of(result)
            self.count = len(flat_leaves(result))
        return flat_leaves(result)


def spec_of(value: Any):
    """The structure `rebuild` takes, of a tensor or (nested) tuple/list of tensors."""
    if isinstance(value, torch.Tensor):
        return None
    if type(value) in (tuple, list):
        return type(value), [(len(flat_leaves(item)), spec_of(item)) for item in value]
    raise TypeError(f"a {type(value).__name__} in the result (only tensors are captured)")


def call_node(tx, target, args: list) -> VariableTracker:
    """`target(*args)` as one graph node (args: variables or FX nodes of the region's lifted values)."""
    def variable(arg):
        if not isinstance(arg, torch.fx.Node):
            return arg
        example = arg.meta.get("example_value")
        if isinstance(example, torch.Tensor):
            return TensorVariable(arg, example)
        if example is not None and not isinstance(example, (tuple, list)):
            return SymNodeVariable(arg, example)
        raise Unsupported(f"{getattr(target, '__name__', target)}: a lifted value without an example")

    return tx.graph.call(tx, "call_function", target, [variable(arg) for arg in args], {})
