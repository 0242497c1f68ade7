"""Backward time with and without compiled autograd (issue 11, acceptance 5): BertForMaskedLM,
in one run: eager; ember (its regions' own compiled backwards); ember with compiled autograd (the
whole backward captured, compiled by ember); torch.compile (Inductor), without and with its
compiled autograd.  Each variant: a forward, then `loss.backward()` timed alone (synchronized on
a GPU); median of ROUNDS rounds of STEPS steps, min-max spread; the first backward (captures and
compiles included) reported apart; the gradients' relative difference from eager's (all as one vector).

    python benchmarks/compiled_autograd_bert.py [--device cpu|cuda] [--out DIR]

CPU: a small BERT (4 layers, hidden 256, batch 8 x 128) in float32.  CUDA: bert-base, batch 16 x
512, under bf16 autocast.
"""
from __future__ import annotations

import datetime
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import ember_revision  # noqa: E402
from output import take_out_option, write_table  # noqa: E402

ROUNDS, STEPS = 5, 3


def main() -> None:
    folder = take_out_option()
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    import torch
    import transformers

    import ember

    if device == "cuda":
        config = transformers.BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        batch, length = 16, 512
    else:
        config = transformers.BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                         intermediate_size=1024, hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0)
        batch, length = 8, 128
        torch.set_num_threads(max(1, os.cpu_count() or 1))
    torch.manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (batch, length), device=device)
    labels = torch.randint(0, config.vocab_size, (batch, length), device=device)

    def model_copy():
        torch.manual_seed(0)
        return transformers.BertForMaskedLM(config).to(device)

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)

    def torch_compiled_autograd():
        from torch._dynamo import compiled_autograd  # (the reference: torch's own, in a benchmark)

        return compiled_autograd._enable(torch.compile(backend="inductor"))

    import contextlib

    variants = {
        "eager": (lambda m: m, contextlib.nullcontext),
        "ember": (lambda m: ember.compile(m, backend="ember"), contextlib.nullcontext),
        "ember + compiled autograd": (lambda m: ember.compile(m, backend="ember"),
                                      lambda: ember.compiled_autograd.enable(ember.compile(backend="ember"))),
        "torch.compile": (lambda m: torch.compile(m), contextlib.nullcontext),
        "torch.compile + compiled autograd": (lambda m: torch.compile(m), torch_compiled_autograd),
    }
    if os.environ.get("EMBER_BENCH_VARIANTS"):  # e.g. "eager,ember + compiled autograd" (eager first: the reference)
        chosen = [name.strip() for name in os.environ["EMBER_BENCH_VARIANTS"].split(",")]
        variants = {name: variants[name] for name in chosen}
    reference_grads = None
    rows = {}
    for name, (wrap, backward_context) in variants.items():
        try:
            model = model_copy()
            function = wrap(model)
            times = []
            first = None
            for step in range(1 + ROUNDS * STEPS):
                model.zero_grad(set_to_none=True)
                with autocast:
                    loss = function(input_ids=ids, labels=labels).loss
                sync()
                started = time.perf_counter()
                with backward_context():
                    loss.backward()
                sync()
                elapsed = (time.perf_counter() - started) * 1000
                if step == 0:
                    first = elapsed
                else:
                    times.append(elapsed)
            kernels = _kernel_time(torch, model, function, ids, labels, autocast, backward_context) \
                if device == "cuda" else None
            grads = [p.grad.float() for p in model.parameters() if p.grad is not None]
            if reference_grads is None:
                reference_grads = grads
            difference = sum(float((a - b).norm()) ** 2 for a, b in zip(grads, reference_grads)) ** 0.5
            error = difference / max(sum(float(b.norm()) ** 2 for b in reference_grads) ** 0.5, 1e-12)
            rounds = [statistics.median(times[k * STEPS:(k + 1) * STEPS]) for k in range(ROUNDS)]
            rows[name] = (statistics.median(rounds), min(rounds), max(rounds), first, error, kernels)
        except Exception as failure:  # noqa: BLE001 - a failing variant is a row
            rows[name] = f"failed: {type(failure).__name__}: {str(failure)[:160]}"
        print(name, rows[name], flush=True)
        # (the next variant starts from an empty GPU: nothing of this one's models or graphs stays)
        model = function = loss = grads = None
        ember.reset()
        torch._dynamo.reset()
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    machine = torch.cuda.get_device_name() if device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    lines = [f"# Backward of BertForMaskedLM with and without compiled autograd ({datetime.date.today()}, {machine}, "
             f"torch {torch.__version__}, ember {ember_revision()})", "",
             f"{config.num_hidden_layers} layers, hidden {config.hidden_size}, batch {batch} x {length}"
             f"{', bf16 autocast' if device == 'cuda' else ', float32'}.  ms per `loss.backward()`: median of {ROUNDS} "
             f"rounds of {STEPS} (min-max of the rounds); first: the first backward, compiles included; error: "
             "||grads - eager's|| / ||eager's||, all parameters' gradients as one vector"
             + ("; GPU kernels: the summed time of the backward's kernels (torch.profiler, one backward), and "
                "their count (backward ms less kernel ms: the host's share)" if device == "cuda" else "") + ".", "",
             "| variant | backward ms | first backward ms | error |" + (" GPU kernels ms | kernels |" if device == "cuda"
                                                                      else ""),
             "|---|---:|---:|---:|" + ("---:|---:|" if device == "cuda" else "")]
    for name, row in rows.items():
        if isinstance(row, str):
            lines.append(f"| {name} | {row} | | |")
        else:
            extra = f" {row[5][0]:.1f} | {row[5][1]} |" if row[5] is not None else ""
            lines.append(f"| {name} | {row[0]:.1f} ({row[1]:.1f}-{row[2]:.1f}) | {row[3]:.0f} | {row[4]:.1e} |{extra}")
    write_table(folder, f"compiled_autograd_bert_{device}.md", "\n".join(lines) + "\n")


def _kernel_time(torch, model, function, ids, labels, autocast, backward_context) -> tuple[float, int]:
    """(ms of GPU kernels, kernel count) of one backward, by torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    model.zero_grad(set_to_none=True)
    with autocast:
        loss = function(input_ids=ids, labels=labels).loss
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with backward_context():
            loss.backward()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    total = sum(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total for e in events)
    return total / 1e3, len(events)


if __name__ == "__main__":
    main()
