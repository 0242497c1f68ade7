"""Real models on the GPU under bf16 autocast: eager, torch.compile (Inductor) and ember (issue
10, acceptance 3).

Cases: transformers' BertForMaskedLM (bert-base config, batch 16, sequence 512) and
GPT2LMHeadModel (gpt2 config, batch 16, sequence 512); timm's resnet50 and
vit_base_patch16_224 (batch 64); each as inference (no_grad) and as a training step (forward,
loss, backward).  Per variant: milliseconds per call (median of ROUNDS rounds of ITERATIONS
calls timed with CUDA events; the spread is the min-max of the rounds), cold compile seconds (the
first call), peak memory, and the result's relative error against eager's (bf16 tolerance).

The three variants of a case are compiled first and kept; then their rounds take turns (eager,
Inductor, ember, then the next round in a rotated order), so that a machine that slows down or
speeds up for a while (these hosts are shared: run 13's eager bert train moved 30 -> 48 ms between
machines) weighs on every variant alike instead of on whichever ran then.

    python benchmarks/gpu_models.py [--models bert,gpt2,resnet50,vit] [--modes infer,train] [--out DIR]
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import ember_revision  # noqa: E402
from output import take_out_option  # noqa: E402

ROUNDS, ITERATIONS, WARMUP = 9, 10, 3


def fresh_compile_caches() -> str:
    """Empty on-disk caches for this run (Triton's, Inductor's, ember's), so that "cold" means cold
    for both compilers even on a machine that ran them before; EMBER_BENCH_WARM_CACHES=1 keeps
    the usual ones (to measure a second process's start)."""
    import tempfile

    if os.environ.get("EMBER_BENCH_WARM_CACHES") == "1":
        return "warm caches"
    root = tempfile.mkdtemp(prefix="ember-bench-caches-")
    for variable, folder in (("TRITON_CACHE_DIR", "triton"), ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
                             ("EMBER_CACHE_DIR", "ember")):
        os.environ[variable] = os.path.join(root, folder)
    return f"fresh caches in {root}"
VARIANTS = ("eager", "inductor", "ember")


def build(name: str, torch):
    """(model, inputs dict or tensor, loss function of the output)."""
    torch.manual_seed(0)
    if name in ("bert", "gpt2"):
        import transformers

        if name == "bert":
            model = transformers.BertForMaskedLM(transformers.BertConfig())
        else:
            model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
        vocab = model.config.vocab_size
        ids = torch.randint(0, vocab, (16, 512), device="cuda")
        return model.cuda(), {"input_ids": ids, "labels": ids}, (lambda out: out.loss), (lambda out: out.logits)
    import timm

    model = timm.create_model("resnet50" if name == "resnet50" else "vit_base_patch16_224", pretrained=False)
    images = torch.randn(64, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (64,), device="cuda")
    loss = torch.nn.CrossEntropyLoss()
    return model.cuda(), images, (lambda out: loss(out, labels)), (lambda out: out)


def step_function(model, inputs, loss_of, mode: str, torch):
    def call(function):
        return function(**inputs) if isinstance(inputs, dict) else function(inputs)

    if mode == "infer":
        def run(function):
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                return call(function)
    else:
        def run(function):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = call(function)
                loss = loss_of(out)
            loss.backward()
            return out
    return run


def warm(run, function, torch) -> float:
    """WARMUP calls after the cold one; the peak memory of a call, in GiB."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(WARMUP):
        run(function)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**30


def timed_in_turns(run, functions: dict, torch) -> dict[str, list[float]]:
    """ms per call of each variant: ROUNDS rounds of ITERATIONS calls, the variants' rounds taking
    turns (each round starts one variant further on)."""
    samples = {name: [] for name in functions}
    names = list(functions)
    for round_ in range(ROUNDS):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            function = functions[name]
            run(function)  # (one untimed call: the variant that ran before leaves nothing queued)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(ITERATIONS):
                run(function)
            end.record()
            torch.cuda.synchronize()
            samples[name].append(start.elapsed_time(end) / ITERATIONS)
    return samples


def relative_error(result, expected) -> float:
    a, b = result.float(), expected.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def main() -> None:
    folder = take_out_option()
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="bert,gpt2,resnet50,vit")
    parser.add_argument("--modes", default="infer,train")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="a subset, for debugging (eager is the reference)")
    arguments = parser.parse_args()
    print(fresh_compile_caches(), flush=True)  # (before torch and triton read their settings)
    import torch

    import ember

    device = torch.cuda.get_device_name()
    began = time.perf_counter()
    rows = []
    for name in arguments.models.split(","):
        for mode in arguments.modes.split(","):
            model, inputs, loss_of, output_of = build(name, torch)
            model.train(mode == "train")
            if mode == "train":  # dropout off, so that the variants compute the same function
                for module in model.modules():
                    if isinstance(module, torch.nn.Dropout):
                        module.p = 0.0
            run = step_function(model, inputs, loss_of, mode, torch)
            expected = output_of(run(model)).detach()
            row = {"case": f"{name} {mode}"}
            functions = {}
            for variant in arguments.variants.split(","):
                model.zero_grad(set_to_none=True)
                torch._dynamo.reset() if variant == "inductor" else None
                ember.reset() if variant == "ember" else None
                function = model if variant == "eager" else torch.compile(model) if variant == "inductor" else \
                    ember.compile(model, backend="ember")
                torch.cuda.synchronize()
                started = time.perf_counter()
                try:
                    result = output_of(run(function)).detach()
                    torch.cuda.synchronize()
                    cold = time.perf_counter() - started
                    error = relative_error(result, expected)
                    peak = warm(run, function, torch)
                    row[variant] = {"cold": cold, "peak": peak, "error": error}
                    functions[variant] = function
                except Exception as failure:  # noqa: BLE001 - a failing variant is a row, not a crash
                    import traceback

                    traceback.print_exc()
                    row[variant] = {"failed": f"{type(failure).__name__}: {str(failure)[:120]}"}
                print(name, mode, variant, row[variant], f"({time.perf_counter() - began:.0f} s in)", flush=True)
            model.zero_grad(set_to_none=True)
            for variant, samples in timed_in_turns(run, functions, torch).items():
                row[variant].update(ms=statistics.median(samples), spread=(min(samples), max(samples)))
                print(name, mode, variant, f"{row[variant]['ms']:.2f} ms", " ".join(f"{t:.1f}" for t in samples),
                      flush=True)
            rows.append(row)
            del model, function, functions
            torch._dynamo.reset()
            ember.reset()
            torch.cuda.empty_cache()
            write(rows, folder, arguments, device, torch)  # (so far: a run cut short keeps its cases)
    print(write(rows, folder, arguments, device, torch))


def write(rows: list, folder: str, arguments, device: str, torch) -> str:
    """The table of the cases so far, written to the folder; returned."""
    lines = [f"# Models on the GPU under bf16 autocast ({datetime.date.today()}, {device}, torch {torch.__version__}, "
             f"ember {ember_revision()})", "",
             f"Median of {ROUNDS} rounds of {ITERATIONS} calls, the variants' rounds taking turns (spread: min-max "
             "of the rounds); cold: the first call, compile included; error: ||out - eager|| / ||eager|| of the "
             "logits.", "",
             "| case | eager ms | inductor ms | ember ms | ember / inductor speed | ember / eager speed | "
             "cold s inductor / ember | peak GiB eager / inductor / ember | ember error |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    speedups = []
    for row in rows:
        cells = {v: row.get(v, {}) for v in VARIANTS}
        if any("ms" not in cells[v] for v in VARIANTS):  # (a failed or skipped variant: what there is)
            lines.append(f"| {row['case']} | " + " | ".join(
                f"{cells[v]['ms']:.1f} ({cells[v]['spread'][0]:.1f}-{cells[v]['spread'][1]:.1f}), cold "
                f"{cells[v]['cold']:.1f} s" if "ms" in cells[v] else cells[v].get("failed", "") for v in VARIANTS) +
                " | | | | | |")
            continue
        e, i, m = (cells[v] for v in VARIANTS)
        speedups.append(i["ms"] / m["ms"])
        lines.append(f"| {row['case']} | {e['ms']:.1f} ({e['spread'][0]:.1f}-{e['spread'][1]:.1f}) | "
                     f"{i['ms']:.1f} ({i['spread'][0]:.1f}-{i['spread'][1]:.1f}) | "
                     f"{m['ms']:.1f} ({m['spread'][0]:.1f}-{m['spread'][1]:.1f}) | {i['ms'] / m['ms']:.2f} | "
                     f"{e['ms'] / m['ms']:.2f} | {i['cold']:.1f} / {m['cold']:.1f} | "
                     f"{e['peak']:.1f} / {i['peak']:.1f} / {m['peak']:.1f} | {m['error']:.1e} |")
    if speedups:
        geomean = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        lines += ["", f"Geomean ember / inductor speed over {len(speedups)} cases: **{geomean:.2f}**"]
    text = "\n".join(lines) + "\n"
    tag = "_".join(arguments.models.split(","))
    with open(os.path.join(folder, f"gpu_models_{tag}.md"), "w") as handle:
        handle.write(text)
    return text


if __name__ == "__main__":
    main()
