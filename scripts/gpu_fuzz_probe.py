"""Probe one fuzz program on the GPU: each output of the compiled program right after the call,
after backward, and under no_grad, against eager's (for a wrong result seen only on the GPU).
    EMBER_FUZZ_DEVICE=cuda python3 scripts/gpu_fuzz_probe.py inplace 700229"""
import sys

import torch

import ember
from tests.fuzz.generator import generate
from tests.fuzz.harness import load


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def outputs(result):
    return [r.detach().clone() for r in (result if isinstance(result, (tuple, list)) else [result])]


def report(tag, got, expected):
    for i, (g, e) in enumerate(zip(got, expected)):
        same = torch.equal(g.isnan(), e.isnan()) and torch.allclose(g.double(), e.double(), rtol=1e-3, atol=1e-5, equal_nan=True)
        print(f"{tag} out{i} {tuple(g.shape)} {'ok' if same else 'DIFF'}  ember {g.flatten()[:4].tolist()}  eager {e.flatten()[:4].tolist()}")


mode, seed = sys.argv[1], int(sys.argv[2])
program = generate(seed, mode)
ns = load(program)
inputs, _ = ns["make_inputs"]()
expected = outputs(ns["program"](*inputs))
for label, patch in (("default", {}), ("no-autotune", {"autotune": False})):
    ember.reset()
    with ember.config.patch(**patch):
        inputs, _ = ns["make_inputs"]()
        compiled = ember.compile(ns["program"], backend="ember")
        result = compiled(*inputs)
        sync()
        got = outputs(result)
        report(f"{label} call1", got, expected)
        loss = sum(r.float().sum() for r in (result if isinstance(result, (tuple, list)) else [result]) if r.requires_grad)
        if torch.is_tensor(loss):
            loss.backward()
            sync()
            report(f"{label} after-backward", outputs(result), expected)
        with torch.no_grad():
            inputs, _ = ns["make_inputs"]()
            report(f"{label} no_grad", outputs(compiled(*inputs)), expected)
