"""Running a partitioned graph pair from eager PyTorch: an autograd.Function per compiled entry.

    outputs = CompiledFunction.apply(*inputs)
      forward:  compiled_fw(*inputs) -> forward outputs, mutated inputs' new values, saved values
                (mutated inputs are written back with copy_; saved values go to ctx)
      backward: compiled on first use; compiled_bw(*saved, *grad_outputs) -> input gradients

When no input requires grad (or grad mode is off) the forward-only graph runs directly (the
inference path).  Outputs that alias an input come back as views of the real input.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes

from ..errors import CannotCapture, InputShapeMismatch
from ..gc_pause import gc_paused
from ..runtime.autocast import as_traced
from .. import logs
from ..sizes import contiguous_without_guards, has_symbols
from .symbolic import SymbolicSizeError, SymbolNodes
from .joint import JointSpec, extent, replay_views

log_fallbacks = logs.get("fallbacks")
log_perf = logs.get("perf")


class DoubleBackwardError(RuntimeError):
    pass


@dataclasses.dataclass
class CompiledPair:
    spec: JointSpec
    forward: Callable
    backward_graph: torch.fx.GraphModule | None
    bw_compiler: Callable | None
    num_saved: int
    saved_bytes: int
    # The backward begun with the forward (api.py), finished by calling it if the saved values come as traced.
    begun: Callable[[], Callable] | None = None
    _backward: Callable | None = None
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    _pruned: dict = dataclasses.field(default_factory=dict)

    def backward(self, saved: list) -> Callable:
        """The compiled backward, compiled on first use for the layouts of `saved` (a compiled
        forward makes them the same way every call)."""
        if self._backward is None:
            with self._lock, gc_paused():
                begun, self.begun = self.begun, None
                placeholders = _placeholders(self.backward_graph)
                if self._backward is None and begun is not None:
                    if not any(_layout_differs(node, value) for node, value in zip(placeholders, saved)):
                        self._backward = begun()
                    else:
                        log_perf.debug("the backward begun with the forward is dropped: a saved value's "
                                       "layout is not the traced one")
                if self._backward is None:
                    inputs = [n.meta.get("val") for n in self._placeholders_laid_out_as(saved)]
                    self._backward = self._compile_backward(self.backward_graph, inputs)
        return self._backward

    def _compile_backward(self, graph: torch.fx.GraphModule, inputs: list) -> Callable:
        if self.spec.shape_env is None:
            return self.bw_compiler(graph, inputs)
        # Symbolic sizes: a backward the code generator refuses runs as ATen calls (any size).
        try:
            compiled = self.bw_compiler(graph, inputs)
        except Exception as error:  # noqa: BLE001 - only the code generator's refusal is handled
            if type(error).__name__ != "ShapesNotSupported":
                raise
            log_fallbacks.warning("ember: backward with symbolic sizes runs as ATen calls: %s", error)
            return as_traced(graph.forward)
        return _laid_out_as_traced(compiled, graph)

    def _placeholders_laid_out_as(self, saved: list) -> list[torch.fx.Node]:
        placeholders = _placeholders(self.backward_graph)
        for node, value in zip(placeholders, saved):
            _describe_layout_of(node, value)
        return placeholders

    def for_tangents(self, given: set, count: int, saved: list | None, ctx, saved_tensors) -> Callable:
        """The backward given the tangents at positions `given` (of `count`): compiled for the
        layouts of `saved`, or (`saved` None: compiled autograd runs it op by op) its graph.  Given
        fewer, as eager, only what the given tangents reach runs: what depends on missing ones alone
        is zeros (a zero tangent pushed through would make 0 * inf = NaN).  First eager's error if a
        saved tensor it reads was written in place since the forward."""
        if len(given) == count:
            backward, reads = (self.backward_graph if saved is None else self.backward(saved)), None
        else:
            returned = frozenset(k for k, sources in enumerate(self.spec.grad_sources) if sources & given)
            key = (saved is None, returned, frozenset(given))
            with self._lock, gc_paused():
                if key not in self._pruned:
                    if saved is not None:
                        self._placeholders_laid_out_as(saved)  # (copied with the graph)
                    module = _without_missing_tangents(self.backward_graph, returned, key[2])
                    placeholders = _placeholders(module)
                    reads = frozenset(k for k, node in enumerate(placeholders[:self.num_saved]) if node.users)
                    if saved is not None:
                        module = self._compile_backward(module, [n.meta.get("val") for n in placeholders])
                    self._pruned[key] = (module, reads)
                backward, reads = self._pruned[key]
        if ctx.saved_versions is not None:
            _check_versions(saved_tensors, ctx.saved_versions, ctx.saved_layout, reads)
        return backward

    @functools.cached_property
    def tangent_fakes(self) -> list:
        """Each tangent's fake value (an output the loss does not use gets zeros of its shape)."""
        return [n.meta.get("val") for n in _placeholders(self.backward_graph) if n.name.startswith("tangents_")]


def _placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def _laid_out_as_traced(compiled: Callable, graph: torch.fx.GraphModule) -> Callable:
    """A backward compiled with symbolic sizes reads its saved values in the traced layouts; once
    one comes otherwise (its wrapper checks before any kernel runs), it runs as ATen calls."""
    state = {"run": compiled}

    def run(*args):
        try:
            return state["run"](*args)
        except InputShapeMismatch as mismatch:
            if state["run"] is not compiled:
                raise
            log_fallbacks.warning("ember: a saved value's layout differs from the traced one (%s); "
                                  "running this backward as ATen calls", mismatch)
            state["run"] = as_traced(graph.forward)
            return state["run"](*args)

    return run


def _describe_layout_of(node: torch.fx.Node, value) -> None:
    """Give the placeholder's fake `value`'s strides and storage offset: a compiled backward reads its
    inputs as their fakes say, and a saved value can come laid out otherwise (a copy before a write)."""
    if not _layout_differs(node, value):
        return
    fake = node.meta.get("val")
    with fake.fake_mode:
        storage = torch.empty(value.storage_offset() + extent(value), dtype=fake.dtype, device=fake.device)
        node.meta["val"] = storage.as_strided(value.shape, value.stride(), value.storage_offset())


def _layout_differs(node: torch.fx.Node, value) -> bool:
    """Is `value` laid out otherwise than the placeholder's fake value (strides, offset)?  Strides
    of size-1 dimensions address nothing and do not count (batch norm's saved statistics)."""
    fake = node.meta.get("val")
    if not (isinstance(value, torch.Tensor) and isinstance(fake, torch.Tensor)) or has_symbols(fake) \
            or fake.shape != value.shape or getattr(fake, "fake_mode", None) is None:
        return False  # (symbolic sizes: comparing them would guard them; the backward checks its inputs)
    return value.storage_offset() != fake.storage_offset() or \
        any(a != b for a, b, size in zip(value.stride(), fake.stride(), value.shape) if size != 1)


def _returned_outputs(spec: JointSpec) -> list[int]:
    """Forward outputs the graph hands back as tensors (constants, copies and views are filled in later)."""
    return [i for i in range(spec.num_fw_outputs)
            if i not in spec.constant_outputs and i not in spec.output_copies and
            (i not in spec.output_aliases or spec.output_aliases[i].refill)]


def _own_memory(values: list, indices: list[int], spec: JointSpec, args) -> list:
    """An autograd.Function's outputs may not be views (autograd would refuse in-place writes to
    them): a view of a graph intermediate is returned detached (nobody else sees its memory), a
    tensor sharing an input's memory (one the runtime cannot re-make as a view) is copied."""
    inputs = None
    result = []
    for value, index in zip(values, indices):
        if isinstance(value, torch.Tensor):
            if index in spec.outputs_sharing_inputs:
                if inputs is None:
                    inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
                    inputs.discard(0)
                if value.untyped_storage().data_ptr() in inputs:
                    value = value.clone()
            if value._is_view():
                value = value.detach()
        result.append(value)
    return result


def _write_back(spec: JointSpec, args, new_values, skip=()) -> None:
    """Mutated inputs get their new values.  An input the compiled graph wrote in place
    (`_offer_input_writes`) comes back as itself: only its version counter is bumped, as eager's."""
    if not spec.mutated_inputs:
        return
    pairs = [(args[index], value) for position, (index, value) in enumerate(zip(spec.mutated_inputs, new_values))
             if position not in skip]
    written = [target for target, value in pairs if value is target]
    if written:
        torch.autograd.graph.increment_version(written)
        pairs = [(target, value) for target, value in pairs if value is not target]
    with torch.no_grad():
        if len(pairs) > 1 and all(target.shape == value.shape and target.device == value.device
                                  for target, value in pairs):
            # one multi-tensor copy per dtype pair (many batch-norm statistics: one launch, not
            # one each; ATen's fast path needs one source dtype)
            groups: dict = {}
            for target, value in pairs:
                group = groups.setdefault((target.dtype, value.dtype), ([], []))
                group[0].append(target)
                group[1].append(value)
            for targets, values in groups.values():
                torch._foreach_copy_(targets, values)
            return
        for target, value in pairs:
            target.copy_(value)


def _before_writes(spec: JointSpec, args, saved: list) -> list:
    """Saved values that share memory with an input about to be written are copied first: the
    backward needs them as they were (min-cut may recompute from such an input)."""
    written = {args[index].untyped_storage().data_ptr() for index in spec.mutated_inputs}
    return [value.clone() if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() in written
            else value for value in saved]


def make_autograd_function(pair: CompiledPair) -> Callable:
    spec = pair.spec
    num_outputs = spec.num_fw_outputs
    num_mutated = len(spec.mutated_inputs)
    returned = _returned_outputs(spec)
    # Inputs written in place that require grad: their new values leave through a second Function
    # (MutationFunction) and are copied into the inputs outside, recorded as eager's in-place op.  Two
    # nodes, as eager has two histories: a loss of the outputs alone never runs the input's grad_fn.
    differentiable = [k for k in range(num_mutated) if spec.mutation_is_differentiable(k)]
    forward_tangents = frozenset(p for p, index in enumerate(spec.diff_outputs) if index < num_outputs)

    def reached_by(positions: frozenset[int]) -> set[int]:
        return {index for index, sources in zip(spec.grad_inputs, spec.grad_sources) if sources & positions}

    # A new value computed only from inputs the outputs reach leaves CompiledFunction itself:
    # one backward gets every tangent at once, as eager's one history does (split over two, each
    # would see the other's tangents as zeros: 0 * inf = NaN where eager gives inf).
    reached_by_outputs = reached_by(forward_tangents)
    inline_mutations = [k for k in differentiable
                        if reached_by(frozenset({spec.diff_outputs.index(num_outputs + k)})) <= reached_by_outputs]
    grad_mutations = [k for k in differentiable if k not in inline_mutations]
    position_of = {index: k for k, index in enumerate(returned)}
    position_of.update({num_outputs + k: len(returned) + j for j, k in enumerate(inline_mutations)})
    mutation_position = {num_outputs + k: position for position, k in enumerate(grad_mutations)}
    mutation_tangents = frozenset(p for p, index in enumerate(spec.diff_outputs)
                                  if index - num_outputs in grad_mutations)

    def tangents_at(grad_outputs, position: dict) -> list:
        """The tangents of `spec.diff_outputs` (a copy's gradient arrives through its original)."""
        return [grad_outputs[position[index]] if index in position else None for index in spec.diff_outputs]

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, state, *args):
            results = pair.forward(*args)
            values = list(results[:num_outputs + num_mutated])  # outputs, then new values of mutated inputs
            saved = list(results[num_outputs + num_mutated:])
            if num_mutated:
                saved = _before_writes(spec, args, saved)
            _write_back(spec, args, values[num_outputs:], skip=set(differentiable))
            _save(ctx, saved)
            ctx.ember_tensor_inputs = [isinstance(arg, torch.Tensor) for arg in args]
            if spec.shape_env is not None:  # (symbolic sizes: a missing tangent's zeros take these)
                ctx.tangent_shapes = [tuple(values[i].shape) for i in spec.diff_outputs]
            outputs = _own_memory([values[i] for i in returned], returned, spec, args)
            non_diff = [out for i, out in zip(returned, outputs) if i not in spec.diff_outputs and out is not None]
            if non_diff:
                ctx.mark_non_differentiable(*non_diff)
            ctx.set_materialize_grads(False)  # an output the loss does not use has no gradient: None
            inline = [num_outputs + k for k in inline_mutations]
            outputs += _own_memory([values[i] for i in inline], inline, spec, args)
            if grad_mutations:
                indices = [num_outputs + k for k in grad_mutations]
                # (a new value that is also an output leaves as a tensor of its own over the same
                # memory: the same object would get MutationFunction's grad_fn)
                returned_ids = {id(out) for out in outputs}
                new_values = [value.detach() if id(value) in returned_ids else value
                              for value in _own_memory([values[i] for i in indices], indices, spec, args)]
                state.update(saved=saved, new_values=new_values, tangent_shapes=getattr(ctx, "tangent_shapes", None))
            return tuple(outputs)

        @staticmethod
        def backward(ctx, *grad_outputs):
            return (None, *_run_backward(pair, ctx, tangents_at(grad_outputs, position_of)))

        ember_pair = pair

        @staticmethod
        def ember_traceable_backward(ctx, tracer, *grad_outputs):
            """The backward as ATen ops for compiled autograd's tracer: the gradients of the
            tensor inputs (the node's edges), in order."""
            grads = _traced_backward(pair, ctx, tangents_at(grad_outputs, position_of), tracer)
            return [grad for grad, tensor in zip(grads, ctx.ember_tensor_inputs) if tensor]

    class MutationFunction(torch.autograd.Function):
        """The new values of inputs written in place, differentiable with respect to what they were
        computed from (the same backward graph, given only their tangents).  Inputs: CompiledFunction's
        state, then every input."""

        @staticmethod
        def forward(ctx, state, *args):
            _save(ctx, state["saved"])
            if state.get("tangent_shapes") is not None:  # (symbolic sizes: zeros for the missing tangents)
                ctx.tangent_shapes = state["tangent_shapes"]
            ctx.set_materialize_grads(False)
            return tuple(state.pop("new_values"))

        @staticmethod
        def backward(ctx, *grad_outputs):
            return (None, *_run_backward(pair, ctx, tangents_at(grad_outputs, mutation_position)))

    # Inputs no output reaches enter a Function detached: eager's graph has no edge to them (the
    # engine would run their grad_fn on a None gradient; hooks would fire).
    unreached = [index for index in range(spec.num_primals) if index not in reached_by_outputs]
    unreached_by_mutations = [index for index in range(spec.num_primals)
                              if index not in reached_by(mutation_tangents)]

    early = _made_before_writes(spec)

    def run(*args):
        state: dict = {}
        made = {index: _input_view(spec, index, alias, args) for index, alias in early.items()} if early else None
        with _SavedValues.scope():
            values = CompiledFunction.apply(state, *_detached(args, unreached))
            if grad_mutations:
                new_values = MutationFunction.apply(state, *_detached(args, unreached_by_mutations))
        written = list(zip(inline_mutations, values[len(returned):]))
        if grad_mutations:
            written += list(zip(grad_mutations, new_values))
        for k, value in written:
            args[spec.mutated_inputs[k]].copy_(value)  # recorded by autograd, as eager's in-place op was
        return _assemble(spec, list(values[:len(returned)]), returned, args, made)

    run.autograd_function = CompiledFunction
    return run


def _detached(args, indices: list[int]):
    if not any(isinstance(args[i], torch.Tensor) and args[i].requires_grad for i in indices):
        return args
    indices = set(indices)
    return [a.detach() if i in indices and isinstance(a, torch.Tensor) and a.requires_grad else a
            for i, a in enumerate(args)]


def _save(ctx, saved: list) -> None:
    tensors = [s for s in saved if isinstance(s, torch.Tensor)]
    ctx.save_for_backward(*tensors)
    # Under _SavedValues' hooks the backward checks the versions of what it reads itself.
    ctx.saved_versions = [t._version for t in tensors] if _SavedValues.active() else None
    ctx.saved_layout = [isinstance(s, torch.Tensor) for s in saved]
    ctx.saved_other = [s for s in saved if not isinstance(s, torch.Tensor)]


def _run_backward(pair: CompiledPair, ctx, tangents: list) -> list:
    """The gradients of every input, given the tangents of `spec.diff_outputs` (None: not given,
    the loss does not use that output, or another Function carries it)."""
    spec = pair.spec
    if torch.is_grad_enabled():  # create_graph=True: a graph of this backward is wanted
        raise DoubleBackwardError(
            "ember: double backward through a compiled region is not supported; compute the "
            "higher-order gradient outside ember.compile, or call torch.autograd.grad without "
            "create_graph=True")
    saved_tensors, saved = _saved_values(ctx)
    given = {position for position, tangent in enumerate(tangents) if tangent is not None}
    if not given:
        return [None] * spec.num_primals
    shapes = getattr(ctx, "tangent_shapes", None) or [fake.shape for fake in pair.tangent_fakes]
    tangents = [tangent.contiguous() if tangent is not None else
                torch.zeros(shape, dtype=fake.dtype, device=fake.device)
                for tangent, fake, shape in zip(tangents, pair.tangent_fakes, shapes)]
    backward = pair.for_tangents(given, len(tangents), saved, ctx, saved_tensors)
    return _input_gradients(spec, backward(*saved, *tangents), given)


def _saved_values(ctx) -> tuple:
    """(ctx.saved_tensors, the saved values in the graph's order: tensors and others)."""
    saved_tensors = ctx.saved_tensors
    tensors = iter(saved_tensors)
    others = iter(ctx.saved_other)
    return saved_tensors, [next(tensors) if is_tensor else next(others) for is_tensor in ctx.saved_layout]


def _input_gradients(spec: JointSpec, grads, given: set) -> list:
    """Each input's gradient: None for one no given output reaches (as in eager, where autograd
    never reaches it); one that is reached gets its gradient even when that is zeros."""
    result: list = [None] * spec.num_primals
    for index, grad, sources in zip(spec.grad_inputs, grads, spec.grad_sources):
        result[index] = grad if sources & given else None
    return result


_traced_regions: dict[int, int] = {}  # id(pair) -> k: its ops are named aot{k}_ in captured backwards


def _traced_backward(pair: CompiledPair, ctx, tangents: list, tracer) -> list:
    """`_run_backward` for compiled autograd: the backward graph (pruned to what the given
    tangents reach) run op by op under its tracer; ember's compiled kernels would be opaque to it."""
    spec = pair.spec
    if pair.backward_graph is None:
        raise CannotCapture("an ember region kept no backward graph")
    with _disable_current_modes():  # (unpacking runs ops that are not the backward's)
        saved_tensors, saved = _saved_values(ctx)
    given = {position for position, tangent in enumerate(tangents) if tangent is not None}
    if not given:
        return [None] * spec.num_primals
    graph = pair.for_tangents(given, len(tangents), None, ctx, saved_tensors)
    tangents = [tangent.contiguous() if tangent is not None else None for tangent in tangents]
    region = _traced_regions.setdefault(id(pair), len(_traced_regions))
    grads = tracer.run_region(graph, [*saved, *tangents], f"aot{region}_")
    return _input_gradients(spec, grads, given)


class _SavedValues:
    """Saved-tensor hooks around the compiled Function.  Autograd checks the versions of all
    saved tensors on unpacking, where eager checks only those of the nodes the backward reaches:
    the hooks keep the tensors as they are (detached) and the backward checks versions itself.
    Not installed under the user's own hooks (save_on_cpu, checkpointing)."""

    @staticmethod
    def pack(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.detach() if tensor.requires_grad else tensor

    @staticmethod
    def unpack(tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    @staticmethod
    def _top():
        top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
        return top(False) if top is not None else ()

    @classmethod
    def active(cls) -> bool:
        top = cls._top()
        return top is not None and len(top) == 2 and top[0] is cls.pack

    @classmethod
    def scope(cls):
        if cls._top() is None:
            return torch.autograd.graph.saved_tensors_hooks(cls.pack, cls.unpack)
        return contextlib.nullcontext()


def _without_missing_tangents(backward: torch.fx.GraphModule, returned: frozenset[int],
                              given: frozenset[int]) -> torch.fx.GraphModule:
    """A copy of a backward graph where values that depend on missing tangents and on no given
    one are zeros (the backward is linear in its tangents), returning only the gradients at
    positions `returned`."""
    graph = torch.fx.Graph()
    grads = graph.graph_copy(backward.graph, {})
    graph.output(tuple(grad if position in returned else None for position, grad in enumerate(grads)))
    tangents = [n for n in graph.nodes if n.op == "placeholder" and n.name.startswith("tangents_")]
    reaches_given = {node for position, node in enumerate(tangents) if position in given}
    only_missing = {node for position, node in enumerate(tangents) if position not in given}
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        inputs = node.all_input_nodes
        if any(arg in reaches_given for arg in inputs):
            reaches_given.add(node)
        elif any(arg in only_missing for arg in inputs):
            only_missing.add(node)
    symbols = SymbolNodes(graph)  # (symbolic sizes: the zeros' sizes computed from the inputs)
    for node in graph.nodes:
        if node.op == "placeholder":
            symbols.add_input(node, node.meta.get("val"))
    for node in list(graph.nodes):
        value = node.meta.get("val")
        if node not in only_missing or not isinstance(value, torch.Tensor) or \
                all(user in only_missing for user in node.users):
            continue
        with graph.inserting_before(node):
            shape = _size_nodes(symbols, value.shape)
            stride = None if contiguous_without_guards(value) else _size_nodes(symbols, value.stride())
        with graph.inserting_after(node):
            if shape is not None and stride is not None:
                # (zeros in the value's layout, made without the value: compiled autograd passes
                # the missing tangent it may be made from as None)
                empty = graph.call_function(torch.ops.aten.empty_strided.default, (shape, stride),
                                            {"dtype": value.dtype, "device": value.device})
                empty.meta = {"val": value}
                with graph.inserting_after(empty):
                    zeros = graph.call_function(torch.ops.aten.fill.Scalar, (empty, 0))
            elif shape is not None and contiguous_without_guards(value):
                zeros = graph.call_function(torch.ops.aten.zeros.default, (shape,),
                                            {"dtype": value.dtype, "device": value.device})
            else:
                # (a size no input holds: the value is still computed, but its readers see zeros)
                zeros = graph.call_function(torch.ops.aten.zeros_like.default, (node,))
        zeros.meta = {"val": value}
        node.replace_all_uses_with(zeros, delete_user_cb=lambda user: user not in only_missing and user is not zeros)
    graph.eliminate_dead_code()
    return torch.fx.GraphModule(backward, graph, class_name="BackwardGraph")


def _size_nodes(symbols: SymbolNodes, sizes) -> list | None:
    """Sizes as graph arguments (a symbolic one as the node computing it from the inputs), or
    None where one cannot be computed from them."""
    try:
        return [symbols.node_of(size) if isinstance(size, torch.SymInt) else size for size in sizes]
    except SymbolicSizeError:
        return None


def _check_versions(tensors, versions: list[int], layout: list[bool], reads: frozenset[int] | None) -> None:
    """Eager's error for a saved tensor written in place since the forward, if the backward
    reads it (`reads`: positions among the saved values; None: all)."""
    positions = [k for k, is_tensor in enumerate(layout) if is_tensor]  # tensor k -> saved value
    for k, (tensor, version) in enumerate(zip(tensors, versions)):
        if tensor._version != version and (reads is None or positions[k] in reads):
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: [{tensor.type()} {list(tensor.shape)}] is at version {tensor._version}; "
                f"expected version {version} instead (a value ember's compiled graph saved for "
                "its backward)")


def make_inference_function(spec: JointSpec, forward: Callable) -> Callable:
    num_outputs = spec.num_fw_outputs
    num_mutated = len(spec.mutated_inputs)
    returned = _returned_outputs(spec)

    early = _made_before_writes(spec)
    if not num_mutated and not early and not spec.constant_outputs and not spec.output_copies and \
            not spec.output_aliases and returned == list(range(spec.num_user_outputs)) == list(range(num_outputs)):
        # (the common case, nothing to write back or re-make: fewer Python steps per call)
        out_spec, no_grad = spec.out_spec, torch._C._set_grad_enabled
        # (a compiled graph's own function, not its __call__: one Python frame less per call)
        forward = getattr(forward, "plain_call", forward)

        def run_plain(*args):
            if torch.is_grad_enabled():
                no_grad(False)
                try:
                    results = _made_with_grad_mode(forward(*args))
                finally:
                    no_grad(True)
            else:
                results = forward(*args)
            if leaf:
                return results[0]
            if flat_tuple:
                return tuple(results[:num_outputs])
            return pytree.tree_unflatten(results[:num_outputs], out_spec)

        leaf = out_spec.is_leaf()
        # (a flat tuple, the usual output: built directly, pytree's walk costs more)
        flat_tuple = out_spec.type is tuple and \
            out_spec == pytree.tree_flatten(tuple(range(out_spec.num_leaves)))[1]
        return run_plain

    def run(*args):
        made = {index: _input_view(spec, index, alias, args) for index, alias in early.items()} if early else None
        # No output requires grad (the graph has no detach nodes: ATen calls on inputs that
        # require grad would build an autograd graph).
        if torch.is_grad_enabled():
            with torch.no_grad():
                results = _made_with_grad_mode(forward(*args))
        else:
            results = forward(*args)
        _write_back(spec, args, results[num_outputs:num_outputs + num_mutated])
        return _assemble(spec, [results[i] for i in returned], returned, args, made)

    return run


def _made_with_grad_mode(results):
    """A view of an intermediate made under no_grad is one autograd refuses to write in place
    with grad mode on: returned detached (the same memory, which no one else sees)."""
    if not any(isinstance(r, torch.Tensor) and r._is_view() for r in results):
        return results
    return type(results)(r.detach() if isinstance(r, torch.Tensor) and r._is_view() else r for r in results)


def _assemble(spec: JointSpec, values: list, returned: list[int], args, made: dict | None = None) -> Any:
    """The user's outputs: the graph's tensors, constants, copies, and views of inputs and other
    outputs made on the real tensors as eager made them (`made`: views made before the write-back)."""
    flat: list = [None] * spec.num_fw_outputs
    for position, index in enumerate(returned):
        flat[index] = values[position]
    for index, value in spec.constant_outputs.items():
        flat[index] = value
    requires_grad = spec.output_requires_grad or [True] * spec.num_fw_outputs
    for index, source in spec.output_copies.items():
        value = flat[source]
        flat[index] = value if requires_grad[index] or not value.requires_grad else value.detach()
    if spec.output_aliases:
        _make_views(spec, flat, requires_grad, args, made or {})
    return pytree.tree_unflatten(flat[:spec.num_user_outputs], spec.out_spec)


def _made_before_writes(spec: JointSpec) -> dict:
    """Views of inputs eager made before the graph wrote those inputs: made before the write-back."""
    return {index: alias for index, alias in spec.output_aliases.items()
            if alias.kind == "input" and alias.before_write}


def _input_view(spec: JointSpec, index: int, alias, args) -> torch.Tensor:
    requires_grad = spec.output_requires_grad or [True] * spec.num_fw_outputs
    return _view_of(args[alias.source], alias, requires_grad[index])


def _view_of(source: torch.Tensor, alias, requires_grad: bool) -> torch.Tensor:
    if not requires_grad and source.requires_grad:
        source = source.detach()
    if alias.chain is not None:
        return replay_views(alias.chain, source)
    if alias.dtype is not None:
        source = source.view(alias.dtype)
    return source.as_strided(alias.size, alias.stride, source.storage_offset() + alias.offset)


def _make_views(spec: JointSpec, flat: list, requires_grad: list[bool], args, made: dict) -> None:
    fixed: set[int] = set()
    for alias in spec.output_aliases.values():  # bases first: every view of one shares its memory
        if alias.kind == "output" and alias.chain != () and alias.source not in fixed:
            flat[alias.source] = _with_layout(flat[alias.source], alias)
            fixed.add(alias.source)
    for index, alias in spec.output_aliases.items():
        value = flat[index]  # (a refill alias: the graph's value of it)
        if index in made:
            flat[index] = made[index]
        else:
            source = args[alias.source] if alias.kind == "input" else flat[alias.source]
            flat[index] = _view_of(source, alias, requires_grad[index])
        if alias.refill and isinstance(value, torch.Tensor) and value.requires_grad and torch.is_grad_enabled():
            flat[index].copy_(value)  # the same values, written as autograd records it: eager's view requires grad


def _with_layout(base: torch.Tensor, alias) -> torch.Tensor:
    """The base the views' geometry was planned for: the compiled value itself when its layout
    is the traced one (as compiled graphs return it), else a copy in that layout."""
    size, stride = alias.source_size, alias.source_stride
    same = tuple(base.shape) == size and all(
        a == b for a, b, n in zip(base.stride(), stride, size) if n != 1)
    if same:
        return base
    log_fallbacks.debug("ember: an output base came back with strides %s instead of %s: copied",
                        base.stride(), stride)
    fixed = torch.empty_strided(size, stride, dtype=base.dtype, device=base.device)
    fixed.copy_(base)  # (recorded by autograd when the base requires grad)
    return fixed
