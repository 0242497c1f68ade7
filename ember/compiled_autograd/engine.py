"""One backward call, captured: walk, key, trace on a cache miss, compile, run, accumulate.

    walk   the nodes the engine would run, in its order (walk.py)
    key    node kinds, types and edges, saved values' metadata, hooks, leaves' `.grad`, root gradients
    miss   trace the nodes into one FX graph (nodes.py, tracer.py) and compile it; where only sizes
           changed since a cached key, one graph over symbolic sizes for both (dynamic.py)
    run    the graph on this call's inputs; new gradients become `.grad` (existing ones were added
           to in the graph), then post-accumulate-grad hooks run
What the capture cannot take (CannotCapture) runs in autograd's own engine, the reason logged.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Callable

import torch

from .. import logs
from .dynamic import NotGeneral, Symbols, bind, key_tokens, signature, sizes_input, symbolic_graph, symbols_between
from .nodes import RULES, kind_of, node_key
from .tracer import BackwardTracer, CannotCapture, InputSource, call_module_hooks, call_module_pre_hooks
from .walk import describe, gradient_edge, node_hooks_alive, nodes_in_order

log = logs.get("compiled_autograd")


@dataclasses.dataclass
class Entry:
    graph: torch.fx.GraphModule
    compiled: Callable
    sources: list[InputSource]
    hook_sites: list[tuple]  # (node position, "pre" output number | "leaf", index in that dict)
    new_grads: list[int]  # node positions of the AccumulateGrads whose gradient the graph returns
    takes_hooks: bool
    types: tuple  # the nodes' type names (for recompile reasons)
    found: dict = dataclasses.field(default_factory=dict)  # grad(): input position -> its output slot
    tokens: list | None = None  # the key's tokens (dynamic.py), for finding sizes that changed
    symbols: Symbols | None = None  # a graph over symbolic sizes: its symbols (dynamic.py)
    sizes: list | None = None  # ... bound to one key: the symbols' values, as tensors' sizes

    @functools.cached_property
    def freed(self) -> set:
        """Positions of the nodes whose saved tensors the graph reads (freed after a backward
        without retain_graph, in eager)."""
        return {source.node for source in self.sources if source.kind in ("saved", "ctx")}

    def plan(self) -> tuple:
        """What running the graph needs besides the graph: two traces of one plan take the same
        inputs and hand out their results the same way."""
        return (self.sources, self.hook_sites, self.new_grads, self.takes_hooks, self.types, self.found)


@dataclasses.dataclass
class Stats:
    captures: int = 0  # graphs traced and compiled
    hits: int = 0
    fallbacks: int = 0
    reasons: list = dataclasses.field(default_factory=list)
    dynamic_hits: int = 0  # keys a graph over symbolic sizes ran (checked by a trace), no compile


FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after they have "
         "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
         "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if "
         "you need to access saved tensors after calling backward. (ember compiled autograd)")

# Captured backwards by key, for every compiler function (as torch's compiled autograd: the
# compiler function compiles what misses); `ember.reset()` empties it.
CACHE: dict[tuple, Entry] = {}
# Graphs over symbolic sizes (dynamic.py), tried when a key misses CACHE.
DYNAMIC: list[Entry] = []


class CompiledAutograd:
    """Runs backward calls as captured graphs, compiled by `compiler_fn` on a cache miss."""

    def __init__(self, compiler_fn: Callable | None) -> None:
        self.compiler_fn = compiler_fn
        self.entries = CACHE
        self.stats = Stats()

    def backward(self, tensors: list, grads: list, inputs: list | None = None, retain_graph: bool = True):
        """Runs the backward of `tensors` from `grads`; False where it could not be captured (and
        nothing changed).  With `inputs` (torch.autograd.grad): their gradients, nothing accumulated.
        Without `retain_graph` the nodes whose saved tensors were read count as freed, as in eager."""
        if node_hooks_alive():
            return self._fallback("a hook registered on an autograd node directly (grad_fn.register_hook or "
                                  "register_prehook) is alive, and which node holds it cannot be seen")
        roots = [gradient_edge(tensor) for tensor in tensors]
        targets = [gradient_edge(tensor) for tensor in inputs] if inputs is not None else None
        try:
            order = nodes_in_order([node for node, _ in roots])
            if targets is not None:
                order = _toward(order, targets)
            for node in order:
                if node.metadata.get("ember_freed"):
                    raise RuntimeError(FREED)
            unpacked: dict = {}  # node -> its ctx.saved_tensors (unpacked once per backward)
            key = _key(order, roots, grads, targets, unpacked)
            entry = self.entries.get(key)
            if entry is None:
                entry = self._miss(order, roots, grads, targets, key)
            else:
                self.stats.hits += 1
        except CannotCapture as reason:
            return self._fallback(str(reason))
        inputs = [_fetch(source, order, grads, unpacked) for source in entry.sources]
        if entry.takes_hooks:
            inputs.append(_hooks(entry.hook_sites, order))
        if entry.sizes is not None:
            inputs += entry.sizes
        results = entry.compiled(*inputs)
        if not retain_graph:  # (the tensors stay in the nodes: only autograd's C++ side can free them)
            for position in entry.freed:
                order[position].metadata["ember_freed"] = True
        if targets is not None:
            return [results[entry.found[k]] if k in entry.found else None for k in range(len(targets))]
        if entry.new_grads:
            # (memory a new .grad may not take as its own: the graph's inputs', and a gradient already
            # given to another leaf, as one tensor for two leaves when a node passes it to both: `a + b`)
            storages = {value.untyped_storage().data_ptr() for value in inputs if isinstance(value, torch.Tensor)}
            for position, grad in zip(entry.new_grads, results):
                _set_grad(order[position].variable, grad, storages)
                storages.add(grad.untyped_storage().data_ptr())
        for node in order:
            if type(node).__name__ == "AccumulateGrad":
                variable = node.variable
                for hook in (getattr(variable, "_post_accumulate_grad_hooks", None) or {}).values():
                    hook(variable)
        return True

    def _miss(self, order: list, roots: list, grads: list, targets: list | None, key: tuple) -> Entry:
        """A graph over symbolic sizes that fits a new key (checked against a trace at its sizes),
        else a new capture, made symbolic where it differs from a cached one only in sizes."""
        tokens, places = key_tokens(key)
        for dynamic in DYNAMIC:
            values = bind(dynamic.symbols, tokens, dynamic.tokens)
            if values is None:
                continue
            probe = self._capture(order, roots, grads, targets, compile=False)
            if probe.plan() == dynamic.plan() and \
                    signature(probe.graph.graph) == signature(dynamic.graph.graph, values):
                entry = dataclasses.replace(dynamic, sizes=sizes_input(values, _device(grads)), tokens=tokens)
                self.entries[key] = entry
                self.stats.hits += 1
                self.stats.dynamic_hits += 1
                log.debug("dynamic sizes %s: the graph over symbolic sizes runs (a trace at these sizes "
                          "has its ops)", values)
                return entry
            reason = "changed shapes: a trace at these sizes has other ops than the graph over symbolic sizes"
            return self._store(key, probe, reason, tokens)
        reason = self._reason(order, key)
        entry = self._capture(order, roots, grads, targets, compile=False)
        dynamic = self._generalize(entry, tokens, places)
        if dynamic is not None:
            entry, symbols = dynamic, dynamic.symbols
            marked = ", ".join(_slot_text(slot, entry.types) for slot in symbols.described[:8])
            more = len(symbols.described) - 8
            reason = f"changed shapes: marking {marked}{f' and {more} more' if more > 0 else ''} as dynamic " \
                     f"({len(symbols.new)} symbols)"
            entry = self._store(key, entry, reason, tokens)  # (compiled once: the bound copies share it)
            DYNAMIC.append(entry)
            entry = self.entries[key] = dataclasses.replace(entry, sizes=sizes_input(symbols.new, _device(grads)))
            return entry
        return self._store(key, entry, reason, tokens)

    def _store(self, key: tuple, entry: Entry, reason: str, tokens: list) -> Entry:
        log.debug("Cache miss due to %s", reason)
        if entry.compiled is None:
            entry.compiled = self._compile(entry.graph)
        entry.tokens = tokens
        self.entries[key] = entry
        self.stats.captures += 1
        self.stats.reasons.append(reason)
        return entry

    def _compile(self, graph: torch.fx.GraphModule) -> Callable:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("captured backward graph:\n%s", graph_text(graph))
        return self.compiler_fn(graph) if self.compiler_fn is not None else graph

    def _generalize(self, entry: Entry, tokens: list, places: list) -> Entry | None:
        """A graph over symbolic sizes from this trace and a cached one of the same nodes whose key
        differs only in sizes (the latest such), compiled; None where there is none."""
        for known in reversed(list(self.entries.values())):
            if known.symbols is not None or known.tokens is None or known.types != entry.types or \
                    len(known.tokens) != len(tokens) or known.plan() != entry.plan():
                continue
            try:
                symbols = symbols_between(known.tokens, tokens, places)
                graph = symbolic_graph(known.graph.graph, entry.graph.graph, symbols)
                # (by construction the graph is each trace at its sizes; checked all the same)
                if signature(graph, symbols.old) != signature(known.graph.graph) or \
                        signature(graph, symbols.new) != signature(entry.graph.graph):
                    raise NotGeneral("the symbolic graph does not give back the two traces")
            except NotGeneral as why:
                log.debug("sizes stay static: %s", why)
                return None
            module = torch.fx.GraphModule(torch.nn.Module(), graph, class_name="CompiledAutograd")
            return dataclasses.replace(entry, graph=module, compiled=None, symbols=symbols, tokens=tokens)
        return None

    def _fallback(self, reason: str) -> bool:
        self.stats.fallbacks += 1
        log.debug("not captured, autograd's engine runs this backward: %s", reason)
        return False

    def _reason(self, order: list, key: tuple) -> str:
        types = tuple(type(node).__name__ for node in order)
        if not self.entries:
            return f"new autograd node: {types[0] if types else 'none'} (node 0)"
        for known, entry in self.entries.items():
            if entry.types == types:
                return _difference(known, key, types)
        best = max((sum(1 for a, b in zip(entry.types, types) if a == b), entry.types)
                   for entry in self.entries.values())[1]
        for position, name in enumerate(types):
            if position >= len(best) or best[position] != name:
                return f"new autograd node: {name} (node {position})"
        return f"new autograd graph ({len(types)} nodes)"

    # -- capture ---------------------------------------------------------------------------------------
    def _capture(self, order: list, roots: list, grads: list, targets: list | None = None,
                 compile: bool = True) -> Entry:
        tracer = BackwardTracer()
        wanted: dict = {}  # (node, input number) -> positions in `targets` (torch.autograd.grad)
        for index, edge in enumerate(targets or ()):
            wanted.setdefault(edge, []).append(index)
        found: dict = {}
        position_of = {node: position for position, node in enumerate(order)}
        buffers: dict = {}
        for index, ((node, number), grad) in enumerate(zip(roots, grads)):
            tracer.placeholder(grad, InputSource("root", index), f"grad_{index}")
            _add(buffers, node, number, grad)
        hook_sites, new_grads, accumulations = [], [], []
        module_outputs: dict = {}  # id(BackwardHook) -> its module's output gradients, as traced
        with tracer:
            for position, node in enumerate(order):
                tracer.origin = f"{type(node).__name__} (node {position})"
                tracer.position = position
                inputs = buffers.pop(node, {})
                kind = kind_of(node)
                for number, hooks in sorted(_tensor_hooks(node).items()):
                    for index, hook in enumerate(hooks.values()):
                        if number in inputs:
                            inputs[number] = tracer.call_hook(hook, inputs[number], "tensor_pre_hook")
                            hook_sites.append((position, number, index))
                if kind == "accumulate" and (node.variable._backward_hooks or {}) and 0 in inputs:
                    for index, hook in enumerate(node.variable._backward_hooks.values()):
                        inputs[0] = tracer.call_hook(hook, inputs[0], "tensor_pre_hook")
                        hook_sites.append((position, "leaf", index))
                if targets is not None:
                    for number, grad in inputs.items():
                        for index in wanted.get((node, number), ()):
                            found[index] = grad
                    if kind == "accumulate" or not any(n in position_of for n, _ in node.next_functions):
                        continue  # (grad(): nothing accumulates, and what feeds no input does not run)
                if kind == "accumulate":
                    self._accumulate(tracer, node, position, inputs.get(0), new_grads, accumulations)
                    continue
                given = [inputs.get(k) for k in range(len(node._input_metadata))]
                if kind == "module_hooks":
                    results = _module_hooks(tracer, node, position, given, hook_sites, module_outputs)
                else:
                    results = RULES[kind](tracer, node, position, given)
                edges = node.next_functions
                if len(results) != len(edges):
                    raise CannotCapture(f"{type(node).__name__} gave {len(results)} gradients for {len(edges)} inputs")
                for (next_node, number), grad in zip(edges, results):
                    if next_node is None or grad is None:
                        continue
                    if next_node not in position_of:
                        if targets is not None:
                            continue  # (grad(): a node that feeds none of the inputs)
                        raise CannotCapture(f"{type(node).__name__} feeds a node outside the walk")
                    grad = _validated(grad, next_node._input_metadata[number], tracer.origin)
                    _add(buffers, next_node, number, grad)
        for old, grad in accumulations:  # (in place, as the engine adds to an existing .grad)
            tracer.graph.call_function(torch.ops.aten.add_.Tensor, (old, tracer.node_of(grad)), name="accumulate_grad_")
        found = {index: grad for index, grad in found.items() if grad is not None}
        outputs = [found[index] for index in sorted(found)] if targets is not None else [g for _, g in new_grads]
        tracer.graph.output(tuple(tracer.node_of(grad) for grad in outputs))
        graph = torch.fx.GraphModule(torch.nn.Module(), tracer.graph, class_name="CompiledAutograd")
        compiled = self._compile(graph) if compile else None
        return Entry(graph, compiled, list(tracer.sources), hook_sites, [position for position, _ in new_grads],
                     tracer.hooks_node is not None, tuple(type(node).__name__ for node in order),
                     {index: slot for slot, index in enumerate(sorted(found))} if targets is not None else {})

    def _accumulate(self, tracer, node, position: int, grad, new_grads: list, accumulations: list) -> None:
        if grad is None:
            return
        variable = node.variable
        if variable.grad is None:
            new_grads.append((position, grad))
            return
        if variable.grad.is_sparse or grad.is_sparse:
            raise CannotCapture("sparse gradients are not captured")
        accumulations.append((tracer.placeholder(variable.grad, InputSource("grad", position), f"n{position}_grad"),
                              grad))


def _device(grads: list) -> torch.device:
    return next((grad.device for grad in grads if isinstance(grad, torch.Tensor)), torch.device("cpu"))


def _slot_text(slot, types: tuple) -> str:
    if slot.part == 0:
        return slot.path
    return f"{slot.path} of {types[slot.part - 1]} (node {slot.part - 1})"


def _difference(known: tuple, key: tuple, types: tuple) -> str:
    """Why `key` missed an entry of the same node types: the first part that differs."""
    if known[0] != key[0]:
        return "changed shapes: the root gradients' sizes or dtypes, or the inputs asked for"
    for position, (old, new) in enumerate(zip(known[1:], key[1:])):
        if old == new:
            continue
        if old[0] == "accumulate" and (old[2] is None) != (new[2] is None):
            state = "now has a .grad" if new[2] is not None else "has no .grad now"
            return f"the leaf of {types[position]} (node {position}) {state}"
        if old[0] == "accumulate" and old[3:] != new[3:] or old[0] != "accumulate" and old[3] != new[3]:
            return f"changed hooks at {types[position]} (node {position})"
        return f"changed shapes at {types[position]} (node {position}): {_first_change(old, new)}"
    return "changed shapes"


def _first_change(old, new, path: str = "") -> str:
    """Where two parts of a key first differ, and how (for the recompile reason)."""
    if isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new) and \
            not (old and old[0] == "tensor"):
        for index, (a, b) in enumerate(zip(old, new)):
            if a != b:
                return _first_change(a, b, f"{path}[{index}]")
    return f"{path or 'value'} was {str(old)[:120]}, now {str(new)[:120]}"


def _toward(order: list, targets: list) -> list:
    """The nodes torch.autograd.grad runs: those from which an input's node is reached."""
    target_nodes = {node for node, _ in targets}
    feeds: set = set()
    for node in reversed(order):
        if node in target_nodes or any(next_node in feeds for next_node, _ in node.next_functions):
            feeds.add(node)
    return [node for node in order if node in feeds]


def _module_hooks(tracer: BackwardTracer, node, position: int, grads: list, hook_sites: list,
                  module_outputs: dict) -> list:
    """A BackwardHookFunctionBackward node (nn.Module full backward hooks), which passes gradients
    through: on a module's outputs its pre-hooks run (their gradients kept for the other side), on
    its inputs its hooks, given the outputs' gradients."""
    noted = node.metadata.get("ember_module_hooks")
    if not noted or len(noted) != 1:
        raise CannotCapture("module backward hooks registered where ember did not see them")
    side, state = noted[0]
    if side == "output":
        if state.input_tensors_index is None:
            raise CannotCapture("a module backward hook whose module's inputs need no gradient")
        likes = [None] * state.n_outputs
        for slot, grad in zip(state.output_tensors_index, grads):
            likes[slot] = grad
        packed = tracer.call_tuple(call_module_pre_hooks, state, (), grads, likes, "module_pre_hook")
        hook_sites.append((position, "module", 0))
        module_outputs[id(state)] = packed
        return [packed[slot] for slot in state.output_tensors_index]
    if id(state) not in module_outputs:  # (no gradient came through the outputs: eager's hook returns)
        return grads
    results = tracer.call_tuple(call_module_hooks, state, (len(grads),), [*grads, *module_outputs.pop(id(state))],
                                grads, "module_hook")
    hook_sites.append((position, "module", 0))
    return results


def _add(buffers: dict, node, number: int, grad) -> None:
    """A gradient into the node's input buffer, summed with what came before (a traced op)."""
    slot = buffers.setdefault(node, {})
    slot[number] = grad if number not in slot else torch.ops.aten.add.Tensor(slot[number], grad)


def _validated(grad: torch.Tensor, metadata, origin: str) -> torch.Tensor:
    """As the engine checks each gradient a node returns: summed to its input's shape where
    broadcasting made it larger, cast to its dtype."""
    shape = tuple(metadata.shape)
    if tuple(grad.shape) != shape:
        try:
            grad = grad.sum_to_size(shape)
        except RuntimeError:
            raise CannotCapture(f"{origin}'s gradient {tuple(grad.shape)} does not reduce to {shape}") from None
    if grad.dtype != metadata.dtype:
        grad = grad.to(metadata.dtype)
    if grad.device != metadata.device:
        raise CannotCapture(f"{origin}'s gradient is on {grad.device}, its input on {metadata.device}")
    return grad


def _tensor_hooks(node) -> dict:
    """Hooks registered on non-leaf tensors this node made (Tensor.register_hook, noted in the
    node's metadata by __init__.py): {output number: the tensor's hooks dict}."""
    return node.metadata.get("ember_tensor_hooks", {}) if node.metadata else {}


def _key(order: list, roots: list, grads: list, targets: list | None = None, unpacked: dict | None = None) -> tuple:
    """The first part: the roots (and grad()'s inputs); then one part per node, in order."""
    position_of = {node: position for position, node in enumerate(order)}
    parts = [(tuple((position_of.get(node, -1), number, describe(grad)) for (node, number), grad in zip(roots, grads)),
              None if targets is None else tuple((position_of.get(node, -1), number) for node, number in targets))]
    for node in order:
        kind = kind_of(node)
        metadata = node.metadata or {}
        if metadata.get("ember_retains_grad"):
            raise CannotCapture(f"a tensor {type(node).__name__} made retains its grad (retain_grad)")
        hooks = tuple((number, len(hooks)) for number, hooks in sorted(_tensor_hooks(node).items()))
        if kind == "accumulate":
            variable = node.variable
            parts.append((kind, describe(variable), describe(variable.grad), hooks,
                          len(variable._backward_hooks or {})))
            continue
        edges = tuple((position_of.get(next_node, -1), number) if next_node is not None else None
                      for next_node, number in node.next_functions)
        if kind == "module_hooks":
            hooks = hooks + tuple((side, state.n_inputs, state.n_outputs, tuple(state.input_tensors_index or ()),
                                   tuple(state.output_tensors_index or ()), len(state.user_hooks),
                                   len(state.user_pre_hooks)) for side, state in metadata.get("ember_module_hooks", ()))
        parts.append((kind, type(node).__name__, edges, hooks, node_key(node, kind, unpacked)))
    return tuple(parts)


def _fetch(source: InputSource, order: list, grads: list, unpacked: dict):
    if source.kind == "root":
        return grads[source.node]
    node = order[source.node]
    if source.kind == "saved":
        value = getattr(node, source.name)
        return value[source.item] if source.item >= 0 else value
    if source.kind == "ctx":
        saved = unpacked.get(node)
        if saved is None:
            saved = unpacked[node] = node.saved_tensors
        return saved[source.item]
    if source.kind == "grad":
        return node.variable.grad
    if source.kind == "attr":  # (a tensor an ember region's backward graph holds)
        value = node._forward_cls.ember_pair.backward_graph
        for part in source.name.split("."):
            value = getattr(value, part)
        return value
    raise AssertionError(source)


def _hooks(sites: list, order: list) -> list:
    hooks = []
    for position, where, index in sites:
        node = order[position]
        if where == "module":
            hooks.append(node.metadata["ember_module_hooks"][index][1])
            continue
        table = node.variable._backward_hooks if where == "leaf" else _tensor_hooks(node)[where]
        hooks.append(list(table.values())[index])
    return hooks


def _set_grad(variable: torch.Tensor, grad: torch.Tensor, taken: set) -> None:
    """A new `.grad`, laid out as the engine does: the graph's result where it has the variable's
    layout and memory of its own (`taken`: storages it may not share), else a copy.  A view spanning
    its whole storage (a graph's `view` of a buffer of its own) becomes `.grad` uncopied."""
    storage = grad.untyped_storage()
    if storage.data_ptr() in taken or grad.stride() != variable.stride() or grad.requires_grad:
        grad = torch.empty_like(variable).copy_(grad.detach())
    elif grad._base is not None:
        if grad.storage_offset() == 0 and storage.nbytes() == grad.numel() * grad.element_size():
            grad = grad.detach()  # (the same memory, not a view: `_base` is None)
        else:
            grad = torch.empty_like(variable).copy_(grad)
    variable.grad = grad


def graph_text(graph: torch.fx.GraphModule) -> str:
    """The captured graph's code with the autograd node each op came from, as comments."""
    lines, origin = [], None
    for node in graph.graph.nodes:
        here = node.meta.get("ember_origin")
        if here and here != origin:
            lines.append(f"    # {here}")
            origin = here
        lines.append("    " + node.format_node())
    return "\n".join(lines)
