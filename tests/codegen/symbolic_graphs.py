"""ATen graphs with symbolic sizes, built by hand for the code generator's tests.

`trace(fn, inputs)` runs `fn` on symbolic fakes (a FakeTensorMode over a ShapeEnv) under a
TorchDispatchMode that records each ATen call as an FX node whose meta["val"] is the fake result;
SymInt arguments become nodes too (`aten.sym_size.int` of an input, and operator.add/mul/floordiv
of those), as ember's AOT tracer makes them.  No make_fx.
"""
from __future__ import annotations

import operator

import sympy
import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


def _decompositions():
    from ember.decomp import core_decompositions

    return core_decompositions()


class _Recorder(TorchDispatchMode):
    def __init__(self, tracer: "Tracer") -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "prim":  # prim.device and the like: metadata, not graph ops
            return func(*args, **kwargs)
        decomposition = _decompositions().get(func)
        if decomposition is not None:  # as ember's AOT tracer does: its ATen calls are recorded
            with self:
                result = decomposition(*args, **kwargs)
            if result is not NotImplemented:
                return result
        result = func(*args, **kwargs)
        self.tracer.record(func, args, kwargs, result)
        return result


class Tracer:
    def __init__(self) -> None:
        self.env = ShapeEnv()
        self.mode = FakeTensorMode(shape_env=self.env)
        self.graph = torch.fx.Graph()
        self.nodes: dict[int, torch.fx.Node] = {}  # id(fake) -> node
        self.keep: list = []  # fakes kept alive (ids stay unique)
        self.sizes: dict = {}  # sympy expr -> node making it
        self.placeholders: list = []

    def input(self, tensor: torch.Tensor, dynamic=True, name=None):
        if isinstance(tensor, int):
            symbol = self.env.create_symbol(tensor, source=_Source(name or f"n{len(self.placeholders)}"),
                                            dynamic_dim=DimDynamic.DYNAMIC)
            value = self.env.create_symintnode(symbol, hint=tensor)
            node = self.graph.placeholder(name or f"n{len(self.placeholders)}")
            node.meta["val"] = value
            self.sizes[symbol] = node
            self.placeholders.append(node)
            return value
        dims = [DimDynamic.DYNAMIC if (dynamic is True or (dynamic and d in dynamic)) else DimDynamic.STATIC
                for d in range(tensor.dim())]
        fake = self.mode.from_tensor(tensor, symbolic_context=StatelessSymbolicContext(dynamic_sizes=dims))
        node = self.graph.placeholder(name or f"x{len(self.placeholders)}")
        node.meta["val"] = fake
        self.nodes[id(fake)] = node
        self.keep.append(fake)
        self.placeholders.append(node)
        for d, size in enumerate(fake.shape):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol) and \
                    size.node.expr not in self.sizes:
                size_node = self.graph.call_function(torch.ops.aten.sym_size.int, (node, d))
                size_node.meta["val"] = size
                self.sizes[size.node.expr] = size_node
        return fake

    def size_node(self, value: torch.SymInt):
        expr = value.node.expr
        if expr in self.sizes:
            return self.sizes[expr]
        return self._expr_node(expr, value)

    def _expr_node(self, expr, value=None):
        if expr in self.sizes:
            return self.sizes[expr]
        if expr.is_Integer:
            return int(expr)
        if isinstance(expr, (sympy.Add, sympy.Mul)):
            function = operator.add if isinstance(expr, sympy.Add) else operator.mul
            args = [self._expr_node(a) for a in expr.args]
            node = args[0]
            for arg in args[1:]:
                node = self._binary(function, node, arg)
            return node
        if type(expr).__name__ == "FloorDiv":
            return self._binary(operator.floordiv, self._expr_node(expr.args[0]), self._expr_node(expr.args[1]))
        raise NotImplementedError(f"size expression {expr}")

    def _binary(self, function, a, b):
        def val(x):
            return x.meta["val"] if isinstance(x, torch.fx.Node) else x
        node = self.graph.call_function(function, (a, b))
        node.meta["val"] = function(val(a), val(b))
        return node

    def arg(self, value):
        if isinstance(value, torch.Tensor):
            return self.nodes[id(value)]
        if isinstance(value, torch.SymInt):
            return self.size_node(value)
        return value

    def record(self, func, args, kwargs, result) -> None:
        node_args = pytree.tree_map(self.arg, args)
        node_kwargs = pytree.tree_map(self.arg, kwargs)
        node = self.graph.call_function(func, tuple(node_args), dict(node_kwargs))
        node.meta["val"] = result
        if isinstance(result, torch.Tensor):
            self.nodes[id(result)] = node
            self.keep.append(result)
        elif isinstance(result, (tuple, list)):
            for position, item in enumerate(result):
                if isinstance(item, torch.Tensor):
                    item_node = self.graph.call_function(operator.getitem, (node, position))
                    item_node.meta["val"] = item
                    self.nodes[id(item)] = item_node
                    self.keep.append(item)

    def finish(self, outputs) -> torch.fx.GraphModule:
        outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        self.graph.output(tuple(self.arg(o) for o in outputs))
        return torch.fx.GraphModule(torch.nn.Module(), self.graph)


import dataclasses

from torch._guards import Source


@dataclasses.dataclass(frozen=True)
class _Source(Source):
    """A named source for ShapeEnv.create_symbol (an int argument of the graph)."""

    label: str

    @property
    def name(self) -> str:
        return self.label

    def guard_source(self):
        from torch._guards import GuardSource

        return GuardSource.LOCAL

    def reconstruct(self, codegen):
        raise NotImplementedError


def trace(fn, inputs, dynamic=True):
    """(GraphModule over symbolic fakes, ShapeEnv).  `dynamic`: True (every dim of every tensor
    input), or per input: True / False / a set of dims."""
    tracer = Tracer()
    per_input = dynamic if isinstance(dynamic, (list, tuple)) else [dynamic] * len(inputs)
    fakes = [tracer.input(x, d) for x, d in zip(inputs, per_input)]
    with tracer.mode, _Recorder(tracer):
        outputs = fn(*fakes)
    return tracer.finish(outputs), tracer.env
