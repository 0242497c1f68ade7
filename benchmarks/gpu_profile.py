"""Where a model's time goes on the GPU, ember against eager: the cold call's profile (what
compiling costs, by function) and a warm step's kernels (by CUDA time), in one run.

    python benchmarks/gpu_profile.py --models bert,gpt2 --modes train [--top 30] [--out DIR]

Per case it prints: cold seconds and the top functions of the cold call by cumulative time
(cProfile); then, for eager, ember (and Inductor with --variants eager,inductor,ember), the wall time per step, the summed GPU kernel time per
step (their difference is launch and Python overhead), kernel launches per step, and the top
kernels by CUDA time.  The same tables go to DIR/gpu_profile_<models>.txt, and the sources of each
case's top ember kernels to DIR/gpu_profile_kernels_<model>_<mode>.txt.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_models import build, step_function  # noqa: E402
from output import take_out_option  # noqa: E402

STEPS = 5


def kernel_table(run, function, torch, top: int) -> tuple[str, float, float, int]:
    """(table, wall ms per step, GPU kernel ms per step, launches per step)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        run(function)
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(STEPS):
        run(function)
    torch.cuda.synchronize()
    wall = (time.perf_counter() - started) / STEPS * 1e3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            run(function)
        torch.cuda.synchronize()
    totals: dict[str, list] = {}
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        entry = totals.setdefault(event.name, [0.0, 0])
        entry[0] += event.device_time_total if hasattr(event, "device_time_total") else event.cuda_time_total
        entry[1] += 1
    gpu = sum(t for t, _ in totals.values()) / STEPS / 1e3
    launches = sum(n for _, n in totals.values()) // STEPS
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]
    lines = [f"{'ms/step':>8} {'calls':>6}  kernel"]
    for name, (us, count) in rows:
        lines.append(f"{us / STEPS / 1e3:8.3f} {count // STEPS:6d}  {name[:110]}")
    return "\n".join(lines), wall, gpu, launches


def save_kernel_sources(table: str, path: str, count: int = 12) -> None:
    """The sources of the table's top ember kernels, in one file (read them without another run)."""
    import re

    from ember.codegen.kernel import cache_dir

    names = re.findall(r"\b(ember_(?:red|poi)_[0-9a-f]+)\b", table)[:count]
    parts = []
    for kernel in names:
        source = os.path.join(cache_dir(), "triton", f"{kernel}.py")
        if os.path.exists(source):
            with open(source) as handle:
                text = handle.read()
            parts.append(f"### {kernel}\n" + text[text.find("\n# buf"):])
    with open(path, "w") as handle:
        handle.write("\n\n".join(parts) + "\n")


def main() -> None:
    folder = take_out_option()
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="bert,gpt2")
    parser.add_argument("--modes", default="train")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--variants", default="eager,ember")
    arguments = parser.parse_args()
    import torch

    import ember
    from ember.codegen import compile as codegen_compile

    report = []
    graph_timings: list[dict] = []
    original = codegen_compile.start_graph  # (compile_graph calls it too)

    def recording(gm, example_inputs):
        finish = original(gm, example_inputs)

        def finished():
            result = finish()
            graph_timings.append(result.timings)
            return result

        return finished

    codegen_compile.start_graph = recording

    path = os.path.join(folder, f"gpu_profile_{arguments.models.replace(',', '_')}.txt")

    def say(text: str) -> None:  # (written as it comes: a run cut short keeps what it printed)
        print(text, flush=True)
        report.append(text)
        with open(path, "w") as handle:
            handle.write("\n".join(report) + "\n")

    for name in arguments.models.split(","):
        for mode in arguments.modes.split(","):
            model, inputs, loss_of, _ = build(name, torch)
            model.train(mode == "train")
            if mode == "train":
                for module in model.modules():
                    if isinstance(module, torch.nn.Dropout):
                        module.p = 0.0
            run = step_function(model, inputs, loss_of, mode, torch)
            for variant in arguments.variants.split(","):
                ember.reset()
                if variant == "inductor":  # the side-by-side reference (kernel times, launches)
                    torch._dynamo.reset()
                function = model if variant == "eager" else torch.compile(model) if variant == "inductor" \
                    else ember.compile(model, backend="ember")
                say(f"\n=== {name} {mode} {variant} ===")
                if variant == "ember":
                    graph_timings.clear()
                    profiler = cProfile.Profile()
                    started = time.perf_counter()
                    profiler.enable()
                    run(function)
                    torch.cuda.synchronize()
                    profiler.disable()
                    say(f"cold call: {time.perf_counter() - started:.1f} s (under cProfile)")
                    totals = {}
                    for timings in graph_timings:
                        for stage, seconds in timings.items():
                            totals[stage] = totals.get(stage, 0.0) + seconds
                    say(f"{len(graph_timings)} graphs; codegen stages (s): " +
                        ", ".join(f"{stage} {seconds:.1f}" for stage, seconds in totals.items()))
                    text = io.StringIO()
                    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(arguments.top)
                    say("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:8000])
                table, wall, gpu, launches = kernel_table(run, function, torch, arguments.top)
                if variant == "ember":
                    save_kernel_sources(table, os.path.join(folder, f"gpu_profile_kernels_{name}_{mode}.txt"))
                if variant == "ember":  # where the host's time goes in a warm step
                    profiler = cProfile.Profile()
                    profiler.enable()
                    for _ in range(STEPS):
                        run(function)
                    torch.cuda.synchronize()
                    profiler.disable()
                    text = io.StringIO()
                    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(arguments.top)
                    say("warm steps by own time:\n" + "\n".join(
                        line for line in text.getvalue().splitlines() if line.strip())[:8000])
                say(f"wall {wall:.2f} ms/step, GPU kernels {gpu:.2f} ms/step, {launches} launches/step")
                say(table)
                model.zero_grad(set_to_none=True)
            del model
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
