"""Steady-state time of kernels compiled with symbolic sizes vs static ones (issue 9, acceptance 4).

For each workload, at one measured shape: eager, ember static (`dynamic=False`), ember dynamic
(`dynamic=True`, first called at another shape so that the measured call runs the symbolic
graph: no recompile, checked), torch.compile static and dynamic (Inductor, as the reference).
Each variant runs ROUNDS rounds of ITERATIONS calls after warm-up, interleaved round by round
(the machine's noise hits every variant alike); the table gives the median time per call and the
spread (min-max of the round medians).  First-call seconds include the compile.

    python benchmarks/dynamic_kernels.py [--workloads toy,mlp,gpt2] [--out DIR]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu_model, ember_revision  # noqa: E402
from output import take_out_option  # noqa: E402

ROUNDS = 7
VARIANTS = ["eager", "ember static", "ember dynamic", "inductor static", "inductor dynamic"]


def workloads():
    import torch

    torch.manual_seed(0)

    def toy(x):
        y = x.sin()
        return y, y.cos()

    mlp = torch.nn.Sequential(torch.nn.LayerNorm(256), torch.nn.Linear(256, 512), torch.nn.GELU(),
                              torch.nn.Linear(512, 256)).eval()

    def block(x):
        return x + mlp(x).softmax(-1)

    def gpt2_model():
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=4, n_positions=512,
                                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
        return lambda ids: model(input_ids=ids).logits

    # name -> (function factory, warm-up input, measured input, iterations per round)
    return {
        "toy": (lambda: toy, lambda: torch.randn(517, 1003), lambda: torch.randn(1000, 1000), 30),
        "mlp": (lambda: block, lambda: torch.randn(3, 61, 256), lambda: torch.randn(8, 128, 256), 20),
        "gpt2": (gpt2_model, lambda: torch.randint(0, 1000, (3, 61)), lambda: torch.randint(0, 1000, (4, 128)), 10),
    }


def compile_variant(name: str, function):
    import torch

    import ember

    if name == "eager":
        return function
    dynamic = name.endswith("dynamic")
    if name.startswith("ember"):
        return ember.compile(function, dynamic=dynamic)
    return torch.compile(function, dynamic=dynamic)


def run_workload(name: str, spec) -> dict:
    import torch

    import ember
    from ember.capture.runtime import counters

    factory, warm_input, measured_input, iterations = spec
    function = factory()
    warm, measured = warm_input(), measured_input()
    rows = {}
    runners = {}
    with torch.no_grad():
        expected = function(measured)
        for variant in VARIANTS:
            ember.reset()
            torch._dynamo.reset()
            counters.clear()
            runner = compile_variant(variant, function)
            started = time.perf_counter()
            if variant.endswith("dynamic"):
                runner(warm)  # the measured shape then runs what the first compile made dynamic
            runner(measured)
            first = time.perf_counter() - started
            compiles = counters["stats"].get("backend_compiles", 0)
            runner(measured)
            if variant.startswith("ember") and counters["stats"].get("backend_compiles", 0) != compiles:
                raise SystemExit(f"{name} {variant}: the measured shape compiled again")
            got = runner(measured)
            diff = max((a - b).abs().max().item() for a, b in zip(torch.utils._pytree.tree_leaves(got),
                                                                    torch.utils._pytree.tree_leaves(expected)))
            rows[variant] = {"first_call_s": first, "max_abs_diff": diff, "backend_compiles": compiles,
                             "rounds": []}
            runners[variant] = runner
        for _ in range(ROUNDS):
            for variant, runner in runners.items():
                times = []
                for _ in range(iterations):
                    started = time.perf_counter()
                    runner(measured)
                    times.append(time.perf_counter() - started)
                rows[variant]["rounds"].append(statistics.median(times))
    for row in rows.values():
        row["median_s"] = statistics.median(row["rounds"])
        row["spread"] = (min(row["rounds"]), max(row["rounds"]))
    return rows


def write_table(results: dict, out: str) -> str:
    import torch

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Symbolic-size kernels vs static ones: steady-state time per call",
        "",
        f"Machine: {cpu_model()} ({platform.machine()}, {os.cpu_count()} CPUs); date: {now}; "
        f"torch {torch.__version__}; ember git {ember_revision()}.",
        f"Median ms per call over {ROUNDS} interleaved rounds (spread: min-max of the round medians); "
        "first call s includes compiling (dynamic: two calls, the warm-up shape first). "
        "ember dynamic / static is the acceptance ratio (target <= 1.10).",
        "",
        "| workload | variant | median ms | spread ms | first call s | max abs diff vs eager |",
        "|---|---|---:|---|---:|---:|",
    ]
    for name, rows in results.items():
        for variant, row in rows.items():
            low, high = row["spread"]
            lines.append(f"| {name} | {variant} | {1000 * row['median_s']:.3f} | {1000 * low:.3f}-{1000 * high:.3f} | "
                         f"{row['first_call_s']:.2f} | {row['max_abs_diff']:.1e} |")
    lines += ["", "| workload | ember dynamic / ember static | inductor dynamic / inductor static | "
                  "ember dynamic / inductor dynamic |", "|---|---:|---:|---:|"]
    for name, rows in results.items():
        def ratio(a, b):
            return rows[a]["median_s"] / rows[b]["median_s"]

        lines.append(f"| {name} | {ratio('ember dynamic', 'ember static'):.2f} | "
                     f"{ratio('inductor dynamic', 'inductor static'):.2f} | "
                     f"{ratio('ember dynamic', 'inductor dynamic'):.2f} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "dynamic_kernels.md"), "w") as handle:
        handle.write(text)
    return text


def main() -> None:
    out = take_out_option()
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", default="toy,mlp,gpt2")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    specs = workloads()
    results = {name: run_workload(name, specs[name]) for name in args.workloads.split(",")}
    print(write_table(results, out))


if __name__ == "__main__":
    main()
