"""Where a compiled model's time goes: every kernel and extern call of ember's wrappers, timed.

    python benchmarks/profile_steps.py bert training [--top 25]   # models: mlp cnn bert gpt2 t5;
                                                                # modes: inference, training

Each generated wrapper's globals hold its kernels (ctypes functions) and extern targets; this
replaces each with a timing shim, runs the model, and prints the total per step (kernel or ATen op)
with the wrapper line it came from.  Shims add ~0.3 us per call; the "wrapper" row is the wall time
of all wrappers minus what their steps took, i.e. allocation, ptr(), del and the shims.
"""
from __future__ import annotations

import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def parse_arguments(argv: list[str]) -> tuple[str, str, int]:
    """(model, mode, top) from the command line; --help and bad arguments print the usage."""
    import argparse

    from codegen_speed import MODELS

    parser = argparse.ArgumentParser(description="Time every kernel and extern call of ember's generated "
                                                 "wrappers for one model.")
    parser.add_argument("model", choices=MODELS)
    parser.add_argument("mode", choices=["inference", "training"])
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest steps to list (default 25)")
    arguments = parser.parse_args(argv)
    return arguments.model, arguments.mode, arguments.top


def main() -> None:
    import torch

    import ember
    from codegen_speed import build, make_step
    from ember.codegen import compile as codegen_compile

    name, mode, top = parse_arguments(sys.argv[1:])
    torch.set_num_threads(os.cpu_count() or 1)
    compiled_graphs = []
    original = codegen_compile.compile_graph

    def recording(gm, example_inputs):
        result = original(gm, example_inputs)
        compiled_graphs.append(result)
        return result

    codegen_compile.compile_graph = recording
    model, args, kwargs, loss_of = build(name)
    model.train(mode == "training")
    runner = ember.compile(model, backend="ember")

    step = make_step(runner, args, kwargs, loss_of, mode)
    for _ in range(3):
        step()
    totals: dict[str, float] = collections.defaultdict(float)
    counts: dict[str, int] = collections.defaultdict(int)
    wrapper_time = [0.0]

    def shim(label, function):
        def timed(*a, **k):
            started = time.perf_counter()
            result = function(*a, **k)
            totals[label] += time.perf_counter() - started
            counts[label] += 1
            return result
        return timed

    for graph_index, graph in enumerate(compiled_graphs):
        namespace = graph.call.__globals__
        for key, value in list(namespace.items()):
            if callable(value) and key not in ("torch", "ptr", "__builtins__") and not isinstance(value, type):
                label = f"g{graph_index}.{key}" if key.startswith("kernel") else key.split("_default")[0]
                namespace[key] = shim(label, value)
        inner = graph.call

        def outer(*a, _inner=inner):
            started = time.perf_counter()
            result = _inner(*a)
            wrapper_time[0] += time.perf_counter() - started
            return result
        graph.call = outer
    repeats = 20
    for key in list(totals):
        totals[key] = 0.0
        counts[key] = 0
    wrapper_time[0] = 0.0
    started = time.perf_counter()
    for _ in range(repeats):
        step()
    wall = (time.perf_counter() - started) / repeats
    steps_total = sum(totals.values()) / repeats
    print(f"{name} {mode}: {wall * 1e3:.2f} ms per step; in wrappers {wrapper_time[0] / repeats * 1e3:.2f} ms; "
          f"timed steps {steps_total * 1e3:.2f} ms; wrapper overhead "
          f"{(wrapper_time[0] / repeats - steps_total) * 1e3:.2f} ms")
    by_kind = collections.defaultdict(float)
    for key, value in totals.items():
        by_kind["kernels" if ".kernel" in key else key] += value / repeats
    for key, value in sorted(by_kind.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {key:40s} {value * 1e6:9.1f} us")
    print("top steps:")
    lines = {}
    for graph_index, graph in enumerate(compiled_graphs):
        comments: list[str] = []
        for line in graph.wrapper.splitlines():
            stripped = line.strip()
            if stripped.startswith("# "):  # "# buf3: mul = aten.mul.Tensor  (model.py:12 ...)"
                comments.append(stripped[2:].split(": ", 1)[-1].split("  (")[0])
            elif stripped.startswith("kernel"):
                lines[f"g{graph_index}.{stripped.split('(')[0]}"] = "; ".join(comments)[:110]
                comments = []
            else:
                comments = []
    for key, value in sorted(totals.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {value / repeats * 1e6:9.1f} us  x{counts[key] // repeats:<3d} {key:24s} {lines.get(key, '')}")


if __name__ == "__main__":
    main()
