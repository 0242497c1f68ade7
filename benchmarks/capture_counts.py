"""Graphs and graph breaks per model: ember (backend "eager") vs torch.compile (TorchDynamo).

For five small models with random weights (BERT, GPT-2 and T5 from tiny transformers configs,
an MLP, a small CNN), one inference forward (eval, no_grad) is captured by each frontend with
a counting backend (a callable that records the graph and returns gm.forward):

* graphs: how many FX graphs the frontend handed to the backend;
* breaks: ember: sum of ember.counters["graph_break"]; torch.compile: sum of
  torch._dynamo.utils.counters["graph_break"] (both: one entry per graph break).

A second table gives, for later (cached) calls with fresh inputs, how many aten ops ran
inside the captured graphs and (ember) how many outside every graph: those were not captured
(a graph break's Python glue, or a frame/submodule that ran eagerly).

    python benchmarks/capture_counts.py [--out DIR]   # writes DIR/capture_counts.md (default ./ember-bench-results;
                                                      # --out benchmarks/results rewrites the committed table)
"""
from __future__ import annotations

import datetime
import os
import platform
import re
import sys
from collections import Counter

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import ember

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, ember_revision  # noqa: E402
from output import take_out_option  # noqa: E402

VOCAB = 128


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        x = self.pool(self.relu(self.bn2(self.conv2(x))))
        x = torch.flatten(x, 1)
        return self.fc(x)


def build(name: str) -> nn.Module:
    import transformers

    torch.manual_seed(0)
    if name == "bert":
        config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=64, max_position_embeddings=64)
        config._attn_implementation = "eager"
        model = transformers.BertForMaskedLM(config)
    elif name == "gpt2":
        config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64)
        config._attn_implementation = "eager"
        model = transformers.GPT2LMHeadModel(config)
    elif name == "t5":
        config = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                                       decoder_start_token_id=0)
        config._attn_implementation = "eager"
        model = transformers.T5ForConditionalGeneration(config)
    elif name == "mlp":
        model = MLP()
    elif name == "cnn":
        model = SmallCNN()
    else:
        raise ValueError(name)
    return model.eval()


def inputs(name: str, seed: int) -> tuple[tuple, dict]:
    gen = torch.Generator().manual_seed(seed)
    if name in ("bert", "gpt2", "t5"):
        kwargs = {"input_ids": torch.randint(0, VOCAB, (2, 16), generator=gen),
                  "attention_mask": torch.ones(2, 16, dtype=torch.long)}
        if name == "t5":
            kwargs["decoder_input_ids"] = torch.randint(0, VOCAB, (2, 8), generator=gen)
        return (), kwargs
    if name == "mlp":
        return (torch.randn(8, 32, generator=gen),), {}
    return (torch.randn(4, 3, 16, 16, generator=gen),), {}


MODELS = ["bert", "gpt2", "t5", "mlp", "cnn"]


class AtenOps(TorchDispatchMode):
    """Counts the aten ops run while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


class OutsideOps(TorchDispatchMode):
    """Counts the aten ops run while it is active and no captured graph is running."""

    def __init__(self, state: dict) -> None:
        super().__init__()
        self.state = state
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.state["in_graph"]:
            self.count += 1
        return func(*args, **(kwargs or {}))


def counting_backend(graphs: list, state: dict):
    """Records each graph and marks (state["in_graph"]) when one runs; while state["counter"]
    is set, counts the aten ops run inside graphs (that dispatch mode is entered inside the
    backend's callable, so the frontend never sees it)."""

    def backend(gm, example_inputs):
        graphs.append(gm)

        def run(*args):
            counter = state["counter"]
            state["in_graph"] += 1
            try:
                if counter is None:
                    return gm.forward(*args)
                with counter:
                    return gm.forward(*args)
            finally:
                state["in_graph"] -= 1

        return run

    return backend


def graph_ops(graphs: list) -> int:
    return sum(1 for gm in graphs for node in gm.graph.nodes
               if node.op in ("call_function", "call_method", "call_module"))


def measure(frontend: str, name: str) -> dict:
    model = build(name)
    graphs: list = []
    state = {"counter": None, "in_graph": 0}
    backend = counting_backend(graphs, state)
    if frontend == "ember":
        ember.reset()
        compiled = ember.compile(model, backend=backend)
    else:
        import torch._dynamo as dynamo
        from torch._dynamo.utils import counters as dynamo_counters

        dynamo.reset()
        dynamo_counters.clear()
        compiled = torch.compile(model, backend=backend)
    args, kwargs = inputs(name, seed=1)
    with torch.no_grad():
        compiled(*args, **kwargs)
    if frontend == "ember":
        breaks = sum(ember.counters["graph_break"].values())
        reasons = Counter(ember.counters["graph_break"])
        eager_frames = ember.counters["stats"]["frames_run_eagerly"]
    else:
        breaks = sum(dynamo_counters["graph_break"].values())
        reasons = Counter(dynamo_counters["graph_break"])
        eager_frames = None
    result = {"graphs": len(graphs), "breaks": breaks, "reasons": reasons, "graph_ops": graph_ops(graphs),
              "eager_frames": eager_frames}
    # A cached call with fresh inputs: aten ops inside captured graphs, out of an eager call's.
    args, kwargs = inputs(name, seed=2)
    eager = AtenOps()
    with torch.no_grad():
        with eager:
            model(*args, **kwargs)
        state["counter"] = AtenOps()
        compiled(*args, **kwargs)
        result["aten_inside"] = state["counter"].count
        state["counter"] = None
        # ember only: count the ops run outside every graph directly, with a dispatch mode
        # around the whole call (Dynamo does not run compiled code while a TorchDispatchMode
        # is active, so this cannot be measured for torch.compile the same way).
        # Under a TorchDispatchMode ember runs a compiled function's own code (the mode may change
        # ops); this mode only watches, so the compiled code is to run under it.
        if frontend == "ember":
            outside = OutsideOps(state)
            with ember.config.patch(compiled_under_dispatch_modes=True), outside:
                compiled(*args, **kwargs)
            result["aten_outside"] = outside.count
        else:
            result["aten_outside"] = None
    result["new_graphs_on_later_calls"] = len(graphs) - result["graphs"]
    result["aten_total"] = eager.count
    return result




def main() -> None:
    import transformers

    results = os.path.join(take_out_option(), "capture_counts.md")

    rows = {}
    for name in MODELS:
        rows[name] = {"ember": measure("ember", name), "torch.compile": measure("torch.compile", name)}
        e, t = rows[name]["ember"], rows[name]["torch.compile"]
        print(f"{name:5s} ember: {e['graphs']} graphs, {e['breaks']} breaks | "
              f"torch.compile: {t['graphs']} graphs, {t['breaks']} breaks", flush=True)
        for frontend, r in rows[name].items():
            if r["new_graphs_on_later_calls"]:
                print(f"warning: {frontend} made {r['new_graphs_on_later_calls']} new graphs on later calls "
                      f"of {name}", flush=True)

    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    header = (f"Machine: {cpu_model()} ({os.cpu_count()} CPUs), {platform.system()} {platform.release()}; "
              f"date: {now}; Python {platform.python_version()}, torch {torch.__version__}, "
              f"transformers {transformers.__version__}, ember {ember.__version__} (git {ember_revision()})")
    lines = ["# Graphs and graph breaks: ember vs torch.compile", "", header, "",
             "Inference forward (eval, `torch.no_grad()`), one call, counting backend (returns `gm.forward`).",
             "", "| model | ember graphs | ember breaks | torch.compile graphs | torch.compile breaks |",
             "|---|---:|---:|---:|---:|"]
    for name, r in rows.items():
        e, t = r["ember"], r["torch.compile"]
        lines.append(f"| {name} | {e['graphs']} | {e['breaks']} | {t['graphs']} | {t['breaks']} |")
    lines += ["", "Graph counts alone do not say how much of a model was captured: see the next table.",
              "", "## How much of the model is inside the graphs", "",
              "Graph nodes: FX call_function/call_method/call_module nodes over all graphs of the first call. "
              "Aten ops (`TorchDispatchMode` counts, cached calls with fresh inputs): *in graphs* is counted by a "
              "mode entered inside the backend's callable; *outside graphs* (ember only) by a mode around the "
              "whole call that skips ops while a graph runs (with `ember.config.compiled_under_dispatch_modes` on, so "
              "that ember runs its compiled code under that mode): these ops were not captured. Dynamo does not run "
              "compiled code while a TorchDispatchMode is active, so torch.compile's outside count is not "
              "measured. *eager* is an eager forward on the same inputs, for scale: under capture, transformers "
              "takes other code paths (`torch.compiler.is_compiling()` is True under both frontends; e.g. "
              "`masking_utils` then never skips an all-ones attention mask), so in-graph counts can exceed it. "
              "\"ember eager frames\" is `ember.counters['stats']['frames_run_eagerly']`.", "",
              "| model | eager aten ops | ember aten ops in / outside graphs | ember graph nodes | "
              "ember eager frames | torch.compile aten ops in graphs | torch.compile graph nodes |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        e, t = r["ember"], r["torch.compile"]
        lines.append(f"| {name} | {e['aten_total']} | {e['aten_inside']} / {e['aten_outside']} | {e['graph_ops']} | "
                     f"{e['eager_frames']} | {t['aten_inside']} | {t['graph_ops']} |")
    lines += ["", "## Graph-break reasons", ""]
    for name, r in rows.items():
        for frontend in ("ember", "torch.compile"):
            reasons = r[frontend]["reasons"]
            if reasons:
                lines.append(f"- {name}, {frontend}:")
                for reason, count in reasons.most_common():
                    text = " ".join(str(reason).split())
                    text = re.sub(r"/\S*?/site-packages/", "", text)   # transformers/..., torch/...
                    text = re.sub(r"/\S*?/lib/python3\.\d+/", "", text)  # copy.py, ...
                    if len(text) > 400:
                        text = text[:397] + "..."
                    lines.append(f"  - {count} x {text}")
    if not any(r[f]["reasons"] for r in rows.values() for f in r):
        lines.append("- none")
    text = "\n".join(lines) + "\n"
    with open(results, "w") as f:
        f.write(text)
    print()
    print(text)
    print(f"wrote {results}")


if __name__ == "__main__":
    sys.exit(main())
