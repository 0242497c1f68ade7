"""The CPU kernel backend: C++/OpenMP kernels (kernel.py), built by g++ (build.py), called
from the wrapper through ctypes with raw pointers."""
from __future__ import annotations

import ctypes
import dataclasses
from typing import Callable

from ...lowering.indexing import python_size
from ...scheduling.scheduler import Kernel
from . import build as cpp_build
from .kernel import CppKernel


@dataclasses.dataclass
class KernelSource:
    source: str  # the whole C++ translation unit
    inputs: list[str]  # buffers read, in argument order
    outputs: list[str]  # buffers written, after the inputs
    index_checks: list[str]  # sites of bounds-checked indexing (then one more argument: the flag)
    size_args: list[str] = dataclasses.field(default_factory=list)  # size symbols, int64_t, after the buffers

    @property
    def elided(self) -> set[str]:
        return set()  # (a C++ kernel stores every value it computes)


class CppBackend:
    name = "cpp"
    background_builds = False  # (g++ runs in parallel, but start_build waits for it)

    def sources(self, graph, scheduler, dtypes: dict) -> dict[str, KernelSource]:
        sources = {}
        for step in scheduler.steps:
            if isinstance(step, Kernel):
                kernel = CppKernel(step, dtypes)
                source = kernel.source()
                sources[step.name] = KernelSource(source, kernel.inputs, kernel.outputs, kernel.index_checks,
                                                  kernel.size_arguments())
        return sources

    def start_build(self, sources: dict[str, KernelSource]) -> dict[str, Callable]:
        names = list(sources)
        libraries = cpp_build.build_all([sources[name].source for name in names])
        functions = {}
        for name, library in zip(names, libraries):
            kernel = sources[name]
            function = getattr(cpp_build.load(library), name)
            function.restype = None
            function.argtypes = [ctypes.c_void_p] * (len(kernel.inputs) + len(kernel.outputs)) + \
                [ctypes.c_int64] * len(kernel.size_args) + [ctypes.c_void_p] * bool(kernel.index_checks)
            functions[name] = function
        return functions

    def finish_build(self, built: dict[str, Callable]) -> dict[str, Callable]:
        return built

    def call_lines(self, wrapper, step: Kernel, kernel: KernelSource, function: str, own: set[str]) -> list[str]:
        """`kernel0(ptr(arg0), buf1.data_ptr(), s0)`: buffers ember allocated start at their
        storage's beginning (data_ptr() is the base); others are shifted by the offset planned."""
        function = wrapper.ref(function, step.name)
        planned = wrapper.planned_offsets()
        arguments = [f"{name}.data_ptr()" if name in own else
                     f"ptr({name}, {python_size(planned[name])})" if planned.get(name, 0) != 0 else f"ptr({name})"
                     for name in [*kernel.inputs, *kernel.outputs]]
        arguments += kernel.size_args  # the size symbols' values, computed at the call's start
        if not kernel.index_checks:
            return [f"{function}({', '.join(arguments)})"]
        flag = wrapper.index_flag()
        sites = wrapper.ref(tuple(kernel.index_checks), "sites")
        return [f"{function}({', '.join([*arguments, f'{flag}.address'])})",
                f"if {flag}.cell.value: {flag}.raise_error({step.name!r}, {sites})"]

    def initial_lines(self, wrapper) -> list[str]:
        return []

    def final_lines(self, wrapper) -> list[str]:
        return []  # (each kernel's checks are read right after it)
