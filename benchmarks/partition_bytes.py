"""Bytes saved for backward: ember's default partition vs min-cut rematerialization.

Writes DIR/partition_bytes.md (`--out DIR`; default ./ember-bench-results, and
`--out benchmarks/results` rewrites the committed table).  Models: an MLP with GELU and LayerNorm, and
BertForMaskedLM (small config), captured with ember and traced by ember's AOT autograd.
"""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch import nn

import ember
from ember.autograd.api import AotCompiled
from ember.autograd.partition import partition_default, partition_min_cut
from ember.decomp import core_decompositions


def mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 256), nn.GELU(),
                          nn.LayerNorm(256), nn.Linear(256, 10))
    return model, (torch.randn(32, 64),), lambda out: out.sum()


def bert():
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = BertForMaskedLM(config)
    ids = torch.randint(0, 128, (2, 16))
    return model, (ids,), lambda out: out.logits.sum()


def measure(build, partition):
    model, inputs, loss_of = build()
    partitions = []

    def backend(gm, example_inputs):
        compiled = AotCompiled(gm, lambda g, i: g.forward, lambda g, i: g.forward, partition, core_decompositions())

        def run(*args):
            result = compiled(*args)
            partitions.append(compiled.last_partition)
            return result

        return run

    ember.reset()
    compiled = ember.compile(model, backend=backend)
    loss_of(compiled(*inputs)).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    saved = sum(p.saved_bytes for p in partitions if p is not None)
    count = sum(len(p.saved) for p in partitions if p is not None)
    return saved, count, grads


def main() -> None:
    from output import take_out_option

    path = os.path.join(take_out_option(), "partition_bytes.md")
    rows = []
    for name, build in (("MLP (GELU, LayerNorm)", mlp), ("BertForMaskedLM (small)", bert)):
        default_bytes, default_count, default_grads = measure(build, partition_default)
        cut_bytes, cut_count, cut_grads = measure(build, partition_min_cut)
        model, inputs, loss_of = build()
        loss_of(model(*inputs)).backward()
        eager = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        worst = max(float((cut_grads[n] - eager[n]).abs().max()) for n in eager)
        rows.append((name, default_bytes, default_count, cut_bytes, cut_count, worst))
    from machine import cpu_model, ember_revision

    cpu = cpu_model()
    commit = ember_revision()
    lines = [
        "# Bytes saved for backward: default partition vs min-cut",
        "",
        f"Machine: {cpu}; date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC; torch {torch.__version__}; "
        f"ember git {commit}",
        "",
        "| model | default: bytes saved | default: tensors | min-cut: bytes saved | min-cut: tensors | "
        "max abs grad difference vs eager (min-cut) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, d_bytes, d_count, c_bytes, c_count, worst in rows:
        lines.append(f"| {name} | {d_bytes:,} | {d_count} | {c_bytes:,} | {c_count} | {worst:.2e} |")
    text = "\n".join(lines) + "\n"
    with open(path, "w") as handle:
        handle.write(text)
    print(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
