"""Which lowering makes a fuzz program wrong on the GPU: the program compiled with ember as it is,
then once per ATen op that ember lowered with that op's lowering removed (the op runs as an ATen
call), each compared with eager's CUDA run.  An op whose removal makes the result right is where
to look (its lowering, or the kernel it fuses into).  With --code, EMBER_LOGS=output_code of the
first compile goes to stderr.

    EMBER_FUZZ_DEVICE=cuda python3 scripts/gpu_lowering_bisect.py stats:704921
"""
import os
import sys

import torch

import ember
from ember.lowering import graph as lowering_graph
from ember.lowering.lowerings import LOWERINGS
from tests.fuzz.generator import generate
from tests.fuzz.harness import execute, load
from tests.fuzz.replay import seed_groups


def _all(run):
    return [t for t in [*run.outputs, *run.grads] if isinstance(t, torch.Tensor)]


def _agree(run, expected) -> bool:
    got = _all(run)
    if run.error is not None or len(got) != len(expected):
        return False
    for g, e in zip(got, expected):
        if g.shape != e.shape:
            return False
        if g.is_floating_point() and not torch.allclose(g.double(), e.double(), rtol=1e-4, atol=1e-5, equal_nan=True):
            return False
        if not g.is_floating_point() and not torch.equal(g, e):
            return False
    return True


def bisect(mode, seed):
    program = generate(seed, mode)
    namespace = load(program)
    torch.backends.cudnn.allow_tf32 = False
    expected = _all(execute(namespace["program"], namespace, seed))
    lowered = []
    original = lowering_graph.GraphLowering.call_function

    def recording(self, target, args, kwargs):
        if target in LOWERINGS and target not in lowered:
            lowered.append(target)
        return original(self, target, args, kwargs)

    lowering_graph.GraphLowering.call_function = recording
    ember.reset()
    run = execute(ember.compile(namespace["program"], backend="ember"), namespace, seed)
    lowering_graph.GraphLowering.call_function = original
    print(f"== {mode} {seed}: ember as it is: {'ok' if _agree(run, expected) else 'DIFF'}; lowered: "
          f"{', '.join(str(t) for t in lowered)}")
    for target in lowered:
        rule = LOWERINGS.pop(target)
        try:
            ember.reset()
            run = execute(ember.compile(namespace["program"], backend="ember"), namespace, seed)
            print(f"  without {target}: {'ok' if _agree(run, expected) else 'DIFF'}")
        finally:
            LOWERINGS[target] = rule
    sys.stdout.flush()


if __name__ == "__main__":
    os.environ.setdefault("EMBER_FUZZ_DEVICE", "cuda")
    for mode, seed in seed_groups(sys.argv[1:]):
        bisect(mode, seed)
