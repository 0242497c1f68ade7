"""How often ember and torch.compile compile over a sweep of input shapes (issue 9, acceptance 2).

GPT-2, BERT (masked LM) and T5 in small configs, inference (no_grad) and a training step, in the
default (automatic dynamic) mode: sequence lengths 16, 17, 31, 64, 100, 128 at batch 2, then
batch sizes 1 to 8 at length 16.  Every call's output is compared with eager's.  Counted:
captures (graphs made by capture; torch.compile: graphs its backend received) and, for ember,
backend compiles (AOT + C++ compiles: one per graph with symbolic sizes, or per shape where a graph
cannot be compiled symbolically), and the wall time of the whole sweep.

    python benchmarks/dynamic_sweep.py [--models gpt2,bert,t5] [--out DIR]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

LENGTHS = [16, 17, 31, 64, 100, 128]
BATCHES = [1, 2, 3, 4, 5, 6, 7, 8]


def build(name):
    import torch
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel, T5Config, \
        T5ForConditionalGeneration

    torch.manual_seed(0)
    if name == "gpt2":
        return GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=256,
                                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    if name == "bert":
        return BertForMaskedLM(BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=128, max_position_embeddings=256,
                                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    return T5ForConditionalGeneration(T5Config(vocab_size=1000, d_model=64, d_ff=128, d_kv=16, num_layers=2,
                                               num_heads=4, dropout_rate=0.0, decoder_start_token_id=0))


def shapes():
    return [(2, n) for n in LENGTHS] + [(b, 16) for b in BATCHES]


def run(name: str, mode: str, compiler: str) -> dict:
    import torch

    import ember
    from ember.capture.runtime import counters

    torch.set_num_threads(os.cpu_count() or 1)
    model = build(name)
    model.eval() if mode == "inference" else model.train()
    graphs = [0]
    if compiler == "ember":
        ember.reset()
        counters.clear()
        runner = ember.compile(model, backend="ember")
    else:
        import torch._dynamo
        from torch._inductor.compile_fx import compile_fx

        torch._dynamo.reset()

        def counting(gm, example_inputs):
            graphs[0] += 1
            return compile_fx(gm, example_inputs)

        runner = torch.compile(model, backend=counting)
    worst = 0.0
    started = time.perf_counter()
    for batch, length in shapes():
        generator = torch.Generator().manual_seed(batch * 1000 + length)
        ids = torch.randint(0, 1000, (batch, length), generator=generator)
        kwargs = dict(input_ids=ids, labels=ids)
        if mode == "inference":
            with torch.no_grad():
                got, expected = runner(**kwargs).logits, model(**kwargs).logits
        else:
            model.zero_grad()
            expected = model(**kwargs)
            expected.loss.backward()
            expected_grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
            model.zero_grad()
            out = runner(**kwargs)
            out.loss.backward()
            got_grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
            got, expected = out.logits, expected.logits
            worst = max([worst] + [(a - b).abs().max().item() for a, b in zip(got_grads, expected_grads)])
        worst = max(worst, (got - expected).abs().max().item())
    seconds = time.perf_counter() - started
    if compiler == "ember":
        stats = counters["stats"]
        return dict(captures=stats["captures"], backend_compiles=stats["backend_compiles"], seconds=seconds,
                    max_abs_diff=worst)
    return dict(captures=graphs[0], backend_compiles=graphs[0], seconds=seconds, max_abs_diff=worst)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gpt2,bert,t5")
    parser.add_argument("--out", default="ember-bench-results")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(*args.child)))
        return
    rows = []
    for name in args.models.split(","):
        for mode in ("inference", "training"):
            row = {"model": name, "mode": mode}
            for compiler in ("ember", "inductor"):
                # each in its own process with empty kernel caches (ember's and Inductor's on disk)
                with tempfile.TemporaryDirectory() as cache:
                    env = dict(os.environ, EMBER_CACHE_DIR=os.path.join(cache, "ember"),
                               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"))
                    result = subprocess.run([sys.executable, __file__, "--child", name, mode, compiler],
                                            capture_output=True, text=True, check=False, env=env)
                lines = result.stdout.strip().splitlines()
                row[compiler] = json.loads(lines[-1]) if result.returncode == 0 and lines else \
                    {"error": result.stderr.strip().splitlines()[-1:] or ["failed"]}
                print(name, mode, compiler, row[compiler], flush=True)
            rows.append(row)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "dynamic_sweep.json"), "w") as handle:
        json.dump(rows, handle)
    write_table(rows, os.path.join(args.out, "dynamic_sweep.md"))


def write_table(rows: list, path: str) -> None:
    import torch

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    lines = [
        "# Compiles over a sweep of shapes: ember vs torch.compile (automatic dynamic shapes)",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; date: "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; torch {torch.__version__}; ember git {commit}.",
        f"Sweep: lengths {LENGTHS} at batch 2, then batches {BATCHES} at length 16 (14 calls); small configs.",
        "ember captures: graphs capture made; backend compiles: AOT + C++ compiles (a dynamic graph compiles",
        "once, with symbolic sizes, unless it needs a shape of its own).  inductor: graphs its backend received.",
        "Sweep seconds: the whole sweep (compiles + calls + eager reference), empty kernel caches for both.",
        "",
        "| model | mode | ember captures | ember backend compiles | ember sweep s | inductor graphs | inductor sweep s | max abs diff ember / inductor |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        e, i = row["ember"], row["inductor"]
        if "error" in e or "error" in i:
            lines.append(f"| {row['model']} | {row['mode']} | {e.get('error', '')} | | | {i.get('error', '')} | | |")
            continue
        lines.append(f"| {row['model']} | {row['mode']} | {e['captures']} | {e['backend_compiles']} | "
                     f"{e['seconds']:.1f} | {i['captures']} | {i['seconds']:.1f} | "
                     f"{e['max_abs_diff']:.1e} / {i['max_abs_diff']:.1e} |")
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
