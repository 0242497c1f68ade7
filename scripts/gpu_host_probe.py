"""Where a compiled training step's host time goes on the GPU machine: the CUDA runtime calls
(launches, allocations, copies, synchronizations) and torch ops by self CPU time, from the
profiler, for ember (and eager and Inductor beside it).  A debugging aid for host-bound steps.

    python scripts/gpu_host_probe.py --model resnet50 --mode train [--variants eager,inductor,ember] --out DIR
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))

from gpu_models import build, step_function  # noqa: E402


def parse_case(mode: str, variants: str):
    """(arguments, model, inputs, one step's function) from --model, --mode, --variants, --out."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--mode", default=mode)
    parser.add_argument("--variants", default=variants)
    parser.add_argument("--out", default=".")
    arguments = parser.parse_args()
    import torch

    model, inputs, loss_of, _ = build(arguments.model, torch)
    model.train(arguments.mode == "train")
    return arguments, model, inputs, step_function(model, inputs, loss_of, arguments.mode, torch)


def main() -> None:
    arguments, model, inputs, run = parse_case("train", "ember")
    import torch
    from torch.profiler import ProfilerActivity, profile

    import ember

    lines = []
    for variant in arguments.variants.split(","):
        ember.reset()
        function = model if variant == "eager" else torch.compile(model) if variant == "inductor" else \
            ember.compile(model, backend="ember")
        for _ in range(4):
            run(function)
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(5):
            run(function)
        torch.cuda.synchronize()
        lines.append(f"=== {variant}: {(time.perf_counter() - started) / 5 * 1e3:.2f} ms/step")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                run(function)
            torch.cuda.synchronize()
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40, max_name_column_width=70)
        lines.append(table)
        model.zero_grad(set_to_none=True)
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(arguments.out, f"gpu_host_probe_{arguments.model}_{arguments.mode}.txt"), "w") as handle:
        handle.write(text + "\n")


if __name__ == "__main__":
    main()
