"""reduce-overhead on the GPU (issue 10, acceptance 5): a small MLP at batch 1, inference, in one
run: eager, ember (default), ember mode="reduce-overhead", torch.compile mode="reduce-overhead".

Per variant: microseconds per call measured on the host (N calls, then one synchronize: at batch
1 the launches are the cost), median of ROUNDS rounds with the min-max spread; the rounds
interleave the variants, and each round's speed-up is over eager's time in the same round; the
largest difference from eager's result.

    python benchmarks/gpu_cudagraphs.py [--out DIR] [--profile]

--profile: then where ember reduce-overhead's host time goes (cProfile, by own time).
"""
from __future__ import annotations

import datetime
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import ember_revision  # noqa: E402
from output import take_out_option, write_table  # noqa: E402

ROUNDS, CALLS, WIDTH, DEPTH = 15, 200, 256, 6


def main() -> None:
    folder = take_out_option()
    import torch

    import ember

    torch.manual_seed(0)
    layers = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).cuda().eval()
    inputs = [torch.randn(1, WIDTH, device="cuda") for _ in range(8)]
    variants = {
        "eager": model,
        "ember": ember.compile(model, backend="ember"),
        "ember reduce-overhead": ember.compile(model, backend="ember", mode="reduce-overhead"),
        "inductor reduce-overhead": torch.compile(model, mode="reduce-overhead"),
    }
    rows: dict = {}
    samples: dict = {}
    with torch.no_grad():
        expected = [model(x) for x in inputs]
        errors = {}
        for name, function in list(variants.items()):
            try:
                for _ in range(3):
                    for x in inputs:
                        function(x)
                errors[name] = max(float((function(x) - e).abs().max()) for x, e in zip(inputs, expected))
                samples[name] = []
            except Exception as failure:  # noqa: BLE001 - a failing variant is a row
                rows[name] = f"failed: {type(failure).__name__}: {str(failure)[:100]}"
                del variants[name]
        # Rounds interleave the variants (eager, ember, ..., then again): the machine's speed
        # drifts by tens of percent over seconds, and a ratio of two timings taken far apart
        # measures the drift.  Each round's speed-up is against eager's time in that round.
        for _ in range(ROUNDS):
            for name, function in variants.items():
                torch.cuda.synchronize()
                started = time.perf_counter()
                for k in range(CALLS):
                    function(inputs[k % len(inputs)])
                torch.cuda.synchronize()
                samples[name].append((time.perf_counter() - started) / CALLS * 1e6)
    for name, times in samples.items():
        ratios = [e / t for e, t in zip(samples["eager"], times)]
        rows[name] = (statistics.median(times), min(times), max(times), errors[name],
                      statistics.median(ratios), min(ratios), max(ratios))
        print(name, rows[name], flush=True)
    lines = [f"# reduce-overhead: MLP {DEPTH}x(Linear({WIDTH}, {WIDTH}) + GELU), batch 1, inference "
             f"({datetime.date.today()}, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
             f"ember {ember_revision()})", "",
             f"Host microseconds per call ({CALLS} calls, then one synchronize), median of {ROUNDS} rounds "
             "(min-max); the rounds interleave the variants, and the speed-up is the median (min-max) "
             "over rounds of eager's time in that round over the variant's; largest difference from "
             "eager's result.", "",
             "| variant | us per call | speed-up over eager | max abs difference |", "|---|---:|---:|---:|"]
    for name, row in rows.items():
        if isinstance(row, str):
            lines.append(f"| {name} | {row} | | |")
            continue
        lines.append(f"| {name} | {row[0]:.1f} ({row[1]:.1f}-{row[2]:.1f}) | {row[4]:.2f} ({row[5]:.2f}-{row[6]:.2f}) "
                     f"| {row[3]:.1e} |")
    write_table(folder, "gpu_cudagraphs.md", "\n".join(lines) + "\n")
    if "--profile" in sys.argv:
        import cProfile
        import pstats

        function = variants["ember reduce-overhead"]
        with torch.no_grad():
            profiler = cProfile.Profile()
            profiler.enable()
            for k in range(2000):
                function(inputs[k % len(inputs)])
            torch.cuda.synchronize()
            profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    main()
