"""Typed configuration with scoped overrides.

Every setting is declared once, with its type and default, in a dataclass grouped by
pipeline stage.  `ember.config.patch(...)` overrides settings for a `with` block (or a
decorated function) and restores them afterwards.  Settings are read at call time, never
cached at import, so a patch always takes effect.

    with ember.config.patch(recompile_limit=2, fallback_on_backend_error=True):
        ...
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import types
from typing import Any, Callable


def _environment_flag(name: str) -> Callable[[], bool]:
    """A default (on) read from $name at start-up: "0" turns the setting off, anything else on."""
    return lambda: os.environ.get(name, "1") != "0"


def _environment_int(name: str, default: Callable[[], int]) -> Callable[[], int]:
    return lambda: int(os.environ[name]) if os.environ.get(name) else default()


def disabled_by_environment() -> bool:
    """EMBER_DISABLE=1 (or torch's TORCH_COMPILE_DISABLE=1): ember.compile compiles nothing."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
               for name in ("EMBER_DISABLE", "TORCH_COMPILE_DISABLE"))


@dataclasses.dataclass
class Config:
    # ---- the whole compiler ------------------------------------------------------------
    # Off switch: ember.compile returns its argument; functions compiled earlier run eagerly.
    disable: bool = dataclasses.field(default_factory=disabled_by_environment)
    # Debug report folder (debug_dir.py); empty: $EMBER_DEBUG_DIR (read at each capture), else none.
    debug_dir: str = ""

    # ---- capture (ember's TorchDynamo) -------------------------------------------------
    # Cache entries per code object before the function runs eagerly for good.
    recompile_limit: int = 8
    # Under an active TorchDispatchMode a compiled function runs its own code (as torch.compile);
    # True runs the compiled code there too (for a mode that only watches, such as an op counter).
    compiled_under_dispatch_modes: bool = False
    # Deepest chain of inlined user functions before a call stays a call.
    inline_depth_limit: int = 64
    # Graph-break on Tensor.item()/tolist() (torch.compile's default) instead of capturing.
    capture_scalar_outputs: bool = False
    # Graph-break on ops whose output size depends on values (nonzero, unique: torch.compile's default).
    capture_dynamic_output_shape_ops: bool = False
    # A backend that raises: False surfaces the error, True warns and runs the graph eagerly.
    fallback_on_backend_error: bool = False
    # Most instructions one capture may run symbolically (guards against runaway loops).
    max_instructions: int = 200_000
    # An internal error during capture raises (True) instead of running the frame eagerly.
    raise_capture_errors: bool = False
    # Check each captured graph with torch.fx's linter before handing it to the backend.
    verify_graphs: bool = True

    # ---- AOT autograd (before tracing) ---------------------------------------------------------
    # Devices (comma-separated) whose 2-D convolutions take channels-last operands (cuDNN's fast kernels).
    channels_last_convolutions: str = "cuda"
    # A training graph's backward is begun with its forward where possible; False: at its first call.
    begin_backward: bool = dataclasses.field(default_factory=_environment_flag("EMBER_BEGIN_BACKWARD"))
    # A backward's recomputed forward nodes go just before their first user; False: where they were.
    recompute_near_use: bool = dataclasses.field(default_factory=_environment_flag("EMBER_RECOMPUTE_NEAR_USE"))

    # ---- lowering (ATen graph -> loop IR) ----------------------------------------------------
    # A crashing lowering rule raises instead of running its op as an ATen call (which hides the bug).
    raise_lowering_errors: bool = False

    # ---- scheduling -------------------------------------------------------------------------
    # Buffers one kernel may read and write in all (BERT's kernel of 150 pointers took 7 s to compile).
    max_kernel_buffers: int = dataclasses.field(
        default_factory=_environment_int("EMBER_MAX_KERNEL_BUFFERS", lambda: 64))

    # ---- codegen ---------------------------------------------------------------------------
    # Kernels check data-dependent indices and raise IndexError as eager does; off: row 0 (for measuring).
    bounds_checks: bool = True
    # Where built kernels are cached; empty: $EMBER_CACHE_DIR, else ~/.cache/ember (read at each build).
    cache_dir: str = ""
    # Kernels for CPU graphs: "cpp", or "triton" through Triton's interpreter (tests the GPU code; slow).
    cpu_kernels: str = "cpp"
    # Memory-heavy Triton kernels time a few launch configurations and keep the fastest (triton/tune.py).
    autotune: bool = True
    # Worker processes for cold Triton compiles (0: threads only); default: min(32, cores - 1).
    compile_workers: int = dataclasses.field(default_factory=_environment_int(
        "EMBER_COMPILE_WORKERS", lambda: max(0, min(32, (os.cpu_count() or 1) - 1))))
    # The workers start when a GPU graph begins tracing; False: when its kernels are handed over.
    compile_prewarm: bool = dataclasses.field(default_factory=_environment_flag("EMBER_COMPILE_PREWARM"))
    # The wrapper calls each Triton kernel's launcher directly; False: every launch through Triton's JIT.
    triton_direct_launch: bool = dataclasses.field(default_factory=_environment_flag("EMBER_TRITON_DIRECT"))
    # Values read only inside the Triton kernel computing them stay in registers; False: all stored.
    triton_elide_stores: bool = dataclasses.field(default_factory=_environment_flag("EMBER_TRITON_ELIDE_STORES"))

    # ---- compiled autograd and runtime ----------------------------------------------------------
    # Backward calls inside ember.compile'd functions run as one captured graph (ember/compiled_autograd).
    compiled_autograd: bool = False
    # Replay GPU graphs' wrappers as CUDA graphs (mode="reduce-overhead", ember/runtime/cudagraphs.py).
    cudagraphs: bool = False

    def keys(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)]


_config = Config()


def _field_types() -> dict[str, type]:
    hints = {"int": int, "bool": bool, "str": str, "float": float}
    return {f.name: hints.get(f.type, object) for f in dataclasses.fields(Config)}


def _check(name: str, value: Any) -> None:
    types = _field_types()
    if name not in types:
        raise AttributeError(f"ember.config has no setting {name!r}; known settings: {', '.join(sorted(types))}")
    expected = types[name]
    if expected is not object and not isinstance(value, expected):
        raise TypeError(f"ember.config.{name} takes a {expected.__name__}, got {type(value).__name__} ({value!r})")


def get(name: str) -> Any:
    return getattr(_config, name)


def set(**settings: Any) -> None:  # noqa: A001 - mirrors the module-level API
    for name, value in settings.items():
        _check(name, value)
        setattr(_config, name, value)


class patch(contextlib.ContextDecorator):
    """Override settings inside a `with` block or for the duration of a decorated function."""

    def __init__(self, **settings: Any) -> None:
        for name, value in settings.items():
            _check(name, value)
        self.settings = settings
        self._saved: list[dict[str, Any]] = []  # one per entry: a decorated function may recurse

    def __enter__(self) -> None:
        self._saved.append({name: getattr(_config, name) for name in self.settings})
        for name, value in self.settings.items():
            setattr(_config, name, value)

    def __exit__(self, *exc) -> None:
        for name, value in self._saved.pop().items():
            setattr(_config, name, value)


def snapshot() -> dict[str, Any]:
    """All settings as a dict (used in cache keys and dumps)."""
    return dataclasses.asdict(_config)


def __getattr__(name: str) -> Any:
    # Module attribute access reads the live config: `ember.config.recompile_limit`.
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_config, name)


def _load_environment() -> None:
    """EMBER_CONFIG="recompile_limit=4,verify_graphs=False" sets values at start-up."""
    spec = os.environ.get("EMBER_CONFIG", "")
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, raw = item.partition("=")
        kind = _field_types().get(name.strip())
        if kind is bool:
            value: Any = raw.strip().lower() in ("1", "true", "yes", "on")
        elif kind in (int, float):
            value = kind(raw)
        else:
            value = raw
        set(**{name.strip(): value})


_load_environment()


class _ConfigModule(types.ModuleType):
    """`ember.config.name = value` sets the setting (checked, as `set`); a name that is neither
    a setting nor one of this module's own raises instead of being silently ignored."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _field_types():
            set(**{name: value})
        elif name in self.__dict__ or name.startswith("__"):
            super().__setattr__(name, value)
        else:
            raise AttributeError(f"ember.config has no setting {name!r}; the settings are: {', '.join(_config.keys())}")


sys.modules[__name__].__class__ = _ConfigModule
