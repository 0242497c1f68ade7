"""Compiling a function through ember's AOT autograd and C++ code generator, keeping every
CompiledGraph (forward first, backward when it runs) for structure checks."""
from ember.autograd import aot_function
from ember.codegen.compile import CompiledGraph, compile_graph
from ember.decomp import core_decompositions


def ember_compiled(fn):
    """(compiled function, list that receives each CompiledGraph)."""
    graphs: list[CompiledGraph] = []

    def compiler(gm, example_inputs):
        graph = compile_graph(gm, example_inputs)
        graphs.append(graph)
        return graph

    return aot_function(fn, compiler, compiler, decompositions=core_decompositions()), graphs


def run(fn, *args):
    """fn compiled and called once: (result, graphs)."""
    function, graphs = ember_compiled(fn)
    return function(*args), graphs
