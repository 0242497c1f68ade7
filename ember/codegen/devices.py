"""Which kernel backend compiles a graph, by device type: one table.

    cpu   -> config.cpu_kernels: "cpp" (C++/OpenMP), or "triton" (Triton's interpreter; tests of
             the GPU code generator on machines without a GPU)
    cuda  -> "triton"

A backend (`KernelBackend`) makes kernel sources from the schedule (`sources`), turns them into
callables (`start_build`, then `finish_build`), and writes the wrapper's lines that call one
kernel (`call_lines`).  Everything upstream (lowering, scheduling, memory planning) is shared.
"""
from __future__ import annotations

import functools
import importlib.util
import warnings
from typing import Any, Callable, Protocol, runtime_checkable

from .. import config as ember_config
from .. import logs
from ..errors import GraphNotSupported
from .cpp.backend import CppBackend
from .triton.backend import TritonBackend


class KernelSources(Protocol):
    """One scheduled kernel's code, as a backend made it."""
    source: str                 # its whole text (the dumps show it)
    elided: set[str]            # values it keeps in registers: no buffer is allocated for them


@runtime_checkable
class KernelBackend(Protocol):
    """What the graph steps (compile.py) and the wrapper (wrapper.py) ask of a kernel backend."""
    name: str
    background_builds: bool     # start_build returns while worker processes compile

    def sources(self, graph, scheduler, dtypes: dict) -> dict[str, KernelSources]: ...

    def start_build(self, sources: dict[str, KernelSources]) -> Any: ...

    def finish_build(self, started: Any) -> dict[str, Callable | list[Callable]]: ...

    def call_lines(self, wrapper, step, kernel: KernelSources, function, own: set[str]) -> list[str]: ...

    def initial_lines(self, wrapper) -> list[str]: ...

    def final_lines(self, wrapper) -> list[str]: ...


BACKENDS: dict[str, KernelBackend] = {"cpp": CppBackend(), "triton": TritonBackend()}

log_fallbacks = logs.get("fallbacks")


def backend_name(device_type: str) -> str | None:
    return {"cpu": ember_config.cpu_kernels, "cuda": "triton"}.get(device_type)


def kernel_backend(device_type: str) -> KernelBackend:
    name = backend_name(device_type)
    if name not in BACKENDS:
        raise GraphNotSupported(f"no kernel backend for {device_type} graphs")
    return BACKENDS[name]


def missing_for(device_type: str) -> str | None:
    """Why graphs on this device cannot be compiled here (None: they can).  A missing Triton
    warns once: CUDA graphs then run as ATen kernels."""
    name = backend_name(device_type)
    if name is None:
        log_fallbacks.debug("graph on %s: ember has no code generator for it; running it as is", device_type)
        return f"no code generator for {device_type}"
    if name == "triton" and not _triton_available():
        _warn_no_triton()
        return "triton is not installed"
    return None


@functools.lru_cache(maxsize=None)
def _triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


@functools.lru_cache(maxsize=None)
def _warn_no_triton() -> None:
    warnings.warn("ember: triton is not installed, so graphs on CUDA tensors run as ATen kernels "
                  "(pip install triton to compile them)", stacklevel=3)
