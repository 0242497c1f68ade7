"""Autotuning of Triton kernels' block sizes and warps.

A kernel takes its block sizes as constexpr arguments, so one text runs with any of a few launch
configurations (`candidates`: those its code allows; scatters with atomics and combining kernels
keep theirs).  When a graph is built on a GPU, each kernel that moves enough memory compiles
every candidate, runs each on scratch tensors of its arguments' sizes and keeps the fastest:

    kernel7 (rows_persistent, 8192 x 768): XBLOCK=4 RBLOCK=1024 warps=8 41.2 us | XBLOCK=1 ... 38.0 us -> XBLOCK=1

The choice is stored on disk, keyed by the kernel's code, sizes, dtypes, the GPU and Triton's
version.  `EMBER_LOGS=autotune` prints each choice; `ember.config.autotune = False` keeps the
generated defaults.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os

from ... import logs
from ..kernel import cache_dir

log = logs.get("autotune")

# Kernels that read and write less than this (bytes) keep their default: launch cost dominates.
MIN_BYTES = 16 << 20
CACHE_VERSION = 1
# Under Triton's interpreter kernels are not timed (tests set this and replace `measure` to run
# every candidate there).
ON_INTERPRETER = False


@dataclasses.dataclass(frozen=True)
class Launch:
    """One launch configuration of a kernel."""

    XBLOCK: int
    RBLOCK: int | None
    num_warps: int
    constexprs: tuple = ()  # (name, value) pairs: RCHUNK of a split reduction's first pass

    def text(self) -> str:
        return f"XBLOCK={self.XBLOCK}" + (f" RBLOCK={self.RBLOCK}" if self.RBLOCK else "") + \
            f" warps={self.num_warps}"


def current(source) -> Launch:
    return Launch(source.XBLOCK, source.RBLOCK, source.num_warps, tuple(sorted(source.constexprs.items())))


def apply(source, launch: Launch) -> None:
    source.XBLOCK, source.RBLOCK, source.num_warps = launch.XBLOCK, launch.RBLOCK, launch.num_warps
    source.constexprs = dict(launch.constexprs)


def variant(source, launch: Launch):
    """A copy of `source` launched with `launch`."""
    copy = dataclasses.replace(source)
    apply(copy, launch)
    return copy


def _warps(elements: int) -> int:
    """Warps for a block of this many elements (about 16 per thread at most)."""
    return 8 if elements >= 4096 else 4 if elements >= 1024 else 2 if elements >= 256 else 1


def candidates(source) -> list[Launch]:
    """Launch configurations the kernel's code allows, the generated default first; one (the
    default) for kernels that are not tuned."""
    default = current(source)
    sizes = static_sizes(source)
    if source.tuning == "fixed" or sizes is None:
        return [default]
    from .ops import next_power_of_2

    xcap = next_power_of_2(max(sizes[0], 1))
    options: list[tuple[int, int | None, int]]
    if source.tuning == "flat":
        options = [(1024, None, 4), (512, None, 4), (2048, None, 8)]
    elif source.tuning.endswith("_persistent"):
        rblock = source.RBLOCK
        options = [(x, rblock, _warps(x * rblock))
                   for x in (source.XBLOCK, max(1, source.XBLOCK // 4), source.XBLOCK * 2)]
        options.append((source.XBLOCK, rblock, max(1, _warps(source.XBLOCK * rblock) // 2)))
    elif source.tuning == "columns":
        options = [(64, 8, 4), (128, 32, 4), (64, 16, 8), (32, 16, 4)]  # (the best of a sweep on an H100)
    else:  # rows, looped: on an H100 the default won for every one of GPT-2's and BERT's (12 of 12)
        return [default]
    # a split reduction's RCHUNK (a Welford combine reads it too) stays: its RBLOCK may only shrink
    split = "RCHUNK" in source.constexprs
    found = [default]
    for xblock, rblock, warps in options:
        xblock = min(xblock, xcap)
        if rblock is not None and not source.tuning.endswith("_persistent"):
            rblock = min(rblock, next_power_of_2(max(sizes[1], 1)), *([source.RBLOCK] if split else []))
        launch = Launch(xblock, rblock, warps, default.constexprs)
        if launch not in found and xblock * (rblock or 1) <= 16384:
            found.append(launch)
    return found


def static_sizes(source) -> tuple | None:
    """The kernel's integer arguments after its pointers (xnumel, rnumel), when they are numbers."""
    import sympy

    values = [sympy.sympify(size) for size in (source.xnumel, source.rnumel) if size is not None]
    if source.size_args or not all(value.is_number for value in values):
        return None
    return tuple(int(value) for value in values)


def moved_bytes(source) -> int:
    if not source.pointer_numels or any(numel is None for numel in source.pointer_numels):
        return 0
    return sum(numel * dtype.itemsize for numel, dtype in zip(source.pointer_numels, source.pointer_dtypes))


# Kernels tuned per graph at most: each candidate is a compile (ResNet-50's training step tuning 80
# kernels compiled in 43 s instead of 16 on an H100).
MAX_TUNED = 12
# Kinds by what tuning gained on an H100: persistent row reductions 20-25%, looped column sums 10-20%
# on transformers, pointwise 0-8%.
KIND_RANK = {"rows_persistent": 0, "columns_persistent": 0, "columns": 1, "flat": 2}


def most_promising(wanted: dict, sources: dict) -> list:
    """The keys of `wanted` ({key: [(step name, position, launches, function), uses]}) to tune:
    at most MAX_TUNED, by kind, then bytes moved over all uses."""
    def rank(key):
        (name, position, _, _), uses = wanted[key]
        kernel = sources[name].kernels[position]
        return KIND_RANK.get(kernel.tuning, 3), -moved_bytes(kernel) * uses

    return sorted(wanted, key=rank)[:MAX_TUNED]


# Kernels whose generated default won (or came within the noise) nearly every time on an H100 are
# not tuned: each candidate is one more compile in a cold start (kernel._launch's defaults).
TUNE_SETTLED = False  # (tests set it: every candidate of every kind still runs there)


def settled(source) -> bool:
    if source.tuning == "flat":
        return True
    return source.tuning == "rows_persistent" and (source.RBLOCK or 0) >= 1024


def worth_tuning(source) -> bool:
    from ... import config

    return config.get("autotune") and source.pointer_dtypes is not None and moved_bytes(source) >= MIN_BYTES \
        and (TUNE_SETTLED or not settled(source)) and len(candidates(source)) > 1


# ---- the on-disk record of choices ---------------------------------------------------------------

def key(source, device_name: str) -> str:
    """What a choice depends on: the kernel's code, sizes and dtypes, its candidates, the GPU and
    Triton's version."""
    import triton

    from .ops import canonical_kernel

    canonical, _ = canonical_kernel(source.source, source.name)
    parts = [CACHE_VERSION, canonical, static_sizes(source), [str(d) for d in source.pointer_dtypes],
             source.pointer_numels, source.grid_y, device_name, triton.__version__,
             [launch.text() + str(launch.constexprs) for launch in candidates(source)]]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:24]


def _path(key: str) -> str:
    return os.path.join(cache_dir(), "triton_tune", f"{key}.json")


_chosen: dict[str, Launch] = {}  # key -> the launch chosen in this process


def recorded(key: str, launches: list[Launch]) -> Launch | None:
    """The launch chosen before for this key (in this process, or any other: on disk)."""
    if key in _chosen:
        return _chosen[key]
    try:
        with open(_path(key)) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    for launch in launches:
        if launch.text() == data.get("choice") and list(map(list, launch.constexprs)) == data.get("constexprs"):
            _chosen[key] = launch
            return launch
    return None


def record(source, key: str, launch: Launch, times: dict) -> None:
    _chosen[key] = launch
    path = _path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}.tmp"
    with open(partial, "w") as handle:
        json.dump({"kernel": source.name, "tuning": source.tuning, "sizes": static_sizes(source),
                   "choice": launch.text(), "constexprs": list(map(list, launch.constexprs)),
                   "times_us": times}, handle)
    os.replace(partial, path)


# ---- timing ----------------------------------------------------------------------------------------

def scratch_arguments(source, launcher, device) -> list:
    """Tensors of the kernel's argument sizes and dtypes (zeros: in-range indices), then its
    sizes and, with index checks, a flags buffer."""
    import torch

    tensors = [torch.zeros(max(numel, 1), dtype=dtype, device=device)
               for numel, dtype in zip(source.pointer_numels, source.pointer_dtypes)]
    flags = [torch.zeros(max(len(source.index_checks), 1) + 16, dtype=torch.int32, device=device)] \
        if source.index_checks else []
    return tensors + list(launcher.sizes) + flags


def report(source, key: str, launches: list, times: list, best: int) -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":  # (the interpreter's stand-in timings are not kept)
        record(source, key, launches[best], {launch.text(): round(t, 2) for launch, t in zip(launches, times)})
    if log.isEnabledFor(10):
        log.debug("%s (%s, %s): %s -> %s", source.name, source.tuning, " x ".join(map(str, static_sizes(source))),
                  " | ".join(f"{launch.text()} {t:.1f} us" for launch, t in zip(launches, times)),
                  launches[best].text())


def fastest(times: list[float]) -> int:
    """The candidate to keep: the fastest, unless the default (0) is within the timing's noise."""
    best = min(range(len(times)), key=times.__getitem__)
    return best if times[best] < 0.97 * times[0] else 0


def measure(launchers: list, sources: list, step) -> list[float]:
    """Microseconds per launch of each candidate (`launchers[k]` runs `sources[k]`), measured on the
    same scratch tensors: a warm-up launch, then three rounds of launches between CUDA events; the
    median round."""
    import torch

    arguments = scratch_arguments(sources[0], launchers[0], launchers[0].device)
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for launcher, source in zip(launchers, sources):
        grid = (-(-launcher.sizes[0] // source.XBLOCK), source.grid_y)
        start.record()
        launcher(grid, *arguments)
        end.record()
        end.synchronize()
        once = max(start.elapsed_time(end), 1e-3)  # ms, the first launch included
        repeats = max(1, min(20, int(0.25 / once)))
        rounds = []
        for _ in range(3):
            start.record()
            for _ in range(repeats):
                launcher(grid, *arguments)
            end.record()
            end.synchronize()
            rounds.append(start.elapsed_time(end) * 1000 / repeats)
        times.append(sorted(rounds)[1])
    del arguments
    return times
