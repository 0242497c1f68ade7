"""Probe fuzz programs that went wrong on the GPU: each output and gradient under eager (CUDA and
CPU), the float64 reference, aot_eager and ember (CUDA; and ember with variants), with the
elements that differ from eager's CUDA run side by side, so one call tells a decomposition's
error (aot_eager wrong too) from a kernel's (ember alone) and from eager's own CUDA behaviour
(eager's CUDA and CPU runs apart, the reference with the CPU).

    EMBER_FUZZ_DEVICE=cuda python3 scripts/gpu_seed_report.py conv:705081,705295 stats:704921
"""
import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import ember
from tests.fuzz.generator import generate
from tests.fuzz.harness import execute, load
from tests.fuzz.replay import seed_groups

VARIANTS = {
    "aot_eager": ("aot_eager", {}),
    "ember": ("ember", {}),
    "ember_no_tune": ("ember", {"autotune": False}),
    "ember_nchw": ("ember", {"channels_last_convolutions": ""}),
    "ember_launch": ("ember", {"triton_direct_launch": False}),  # through Triton's own launcher
    "ember_stores": ("ember", {"triton_elide_stores": False}),
}


class ChannelsLastConvolutions(TorchDispatchMode):
    """Eager with every 4-d convolution's operands in channels-last order, forward and backward
    (what ember's conv_layout pass asks cuDNN for): do eager's own NHWC kernels give ember's
    result?"""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.convolution.default, torch.ops.aten.convolution_backward.default):
            last = torch.channels_last
            args = [a.contiguous(memory_format=last) if isinstance(a, torch.Tensor) and a.dim() == 4 else a
                    for a in args]
        return func(*args, **(kwargs or {}))


def tensors(run):
    named = [(f"out{i}", o) for i, o in enumerate(run.outputs)]
    named += [(f"grad{i}", g) for i, g in enumerate(run.grads)]
    return {name: t for name, t in named if isinstance(t, torch.Tensor)}


def describe(name, runs, base="eager_cuda"):
    expected = runs[base].get(name)
    if expected is None or not expected.is_floating_point():
        return
    e = expected.detach().double().cpu()
    lines = []
    worst = None
    for label, values in runs.items():
        got = values.get(name)
        if got is None or label == base:
            continue
        if got.shape != expected.shape:
            lines.append(f"    {label}: shape {tuple(got.shape)} vs {tuple(expected.shape)}")
            continue
        g = got.detach().double().cpu()
        close = torch.isclose(g, e, rtol=1e-4, atol=1e-6, equal_nan=True)
        differ = int((~close).sum())
        nans = int(g.isnan().sum())
        lines.append(f"    {label}: {differ} of {g.numel()} differ, NaN {nans} (eager {int(e.isnan().sum())})")
        if differ and label.startswith("ember") and worst is None:
            worst = (~close).flatten().nonzero().flatten()[:4].tolist()
    if not any(" 0 of " not in line for line in lines):
        return
    print(f"  {name} {tuple(expected.shape)} {expected.dtype}")
    print("\n".join(lines))
    if worst:
        for position in worst:
            row = "  ".join(f"{label}={float(v[name].detach().flatten()[position]):.9g}"
                            for label, v in runs.items() if name in v and v[name].shape == expected.shape)
            print(f"      [{position}] {row}")


def probe(mode, seed):
    program = generate(seed, mode)
    print(f"== {mode} {seed}")
    namespace = load(program)
    torch.backends.cudnn.allow_tf32 = False
    runs = {}
    eager = execute(namespace["program"], namespace, seed)
    runs["eager_cuda"] = tensors(eager)
    runs["reference"] = tensors(execute(namespace["program"], namespace, seed, reference=True,
                                        grad_dtypes=[getattr(o, "dtype", None) for o in eager.outputs]))
    with ChannelsLastConvolutions():
        runs["eager_cl"] = tensors(execute(namespace["program"], namespace, seed))
    device, namespace["DEVICE"] = namespace["DEVICE"], "cpu"
    runs["eager_cpu"] = tensors(execute(namespace["program"], namespace, seed))
    namespace["DEVICE"] = device
    for label, (backend, patch) in VARIANTS.items():
        ember.reset()
        with ember.config.patch(raise_lowering_errors=True, **patch):
            run = execute(ember.compile(namespace["program"], backend=backend), namespace, seed)
        if run.error is not None:
            print(f"  {label}: {type(run.error).__name__}: {str(run.error)[:300]}")
        runs[label] = tensors(run)
    for name in runs["eager_cuda"]:
        describe(name, runs)
    sys.stdout.flush()


if __name__ == "__main__":
    os.environ.setdefault("EMBER_FUZZ_DEVICE", "cuda")
    for mode, seed in seed_groups(sys.argv[1:]):
        probe(mode, seed)
