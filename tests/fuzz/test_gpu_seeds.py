"""Fuzz programs that went wrong on a GPU (EMBER_FUZZ_DEVICE=cuda), each fixed or classified since:
run through the harness on the GPU, none may come out wrong or crash again.  Skipped without one
(the CPU runs of the same seeds are ordinary fuzz programs)."""
import pytest
import torch

from .generator import generate
from .harness import run_program

# (mode, seed): what it was, and what fixed or classified it
GPU_SEEDS = [
    ("special", 705232),    # relu's -0.0 under atan2 (triton: relu makes +0.0 on the GPU)
    ("conv", 704734),       # trunc division by 1e-3 (lowering/division.py: eager's reciprocal)
    ("conv", 705081),       # a weight gradient eager is 1e-4 off nearly everywhere (compare: typical error)
    ("conv", 705295),       # NaN weight spread by cuDNN's NHWC kernels (conditioning: GPU convolution over NaN)
    ("conv", 705710),       # batch_norm of a channel far from 0 (conditioning: cuDNN's batch_norm op)
    ("stats", 704921),      # group_norm backward reading a transposed view (fallback arguments' strides)
    ("stats", 706258),      # a mean kept in the forward over 16 equal values (partition: centering means)
    ("autograd", 706455),   # two backwards added, NaN for inf (AOT runtime: one backward)
    ("special", 706390),    # layer_norm output that is its own noise under a weight of 9e307
    ("conv", 706351),       # relu of a Welford mean that is 0 up to rounding
    ("reductions", 705951),  # v / v of the logsumexp of log-probabilities
    ("autograd", 708256),   # a negative base to a layer_norm zero: NaN or 1 by the noise's sign
    ("lowp", 708927),       # a sum of one -0.0 under atan2 (triton: tl.sum keeps -0.0; eager starts at +0.0)
    ("conv", 710199),       # the gradient of 1 / v for a cancelling convolution (conditioning: derivatives)
    ("layout", 710111),     # index_put_ into an unfold's shared places (eager's threads race: flaky_eager)
    ("stats", 710099),      # an amax over a[1::2] expanded read a[0] (Triton drops an address's constant: on the pointer)
    ("known", 711707),      # bool ** True is bool; capture's fakes said int64 (eager/metadata.py)
    ("conv", 713017),       # two views of one convolution's result as outputs (conv_layout: they share memory)
    ("conv", 712680),       # two results of one unbind of a convolution (the same)
    ("autograd", 712619),   # fmod by a mean near 0.05 of 3000s (conditioning: a sum's noise times the quotient)
    ("index", 712532),      # index_put writing row 3 twice ([3, 2, -1]): eager's threads race (flaky_eager)
    ("autograd", 714661),   # floor(tanh(0 +- noise) / a) (conditioning: noise zeros through tanh and squeeze_)
    ("autograd", 715038),   # floor of a sum of softmax rows, 1.0 exactly in float64 (conditioning: inexact)
    ("conv", 716737),       # a conv bias gradient before a batch_norm, its noise (conditioning: cuDNN's backward)
    ("conv", 717045),       # a batch_norm bias gradient before another (the same)
    ("stats", 717002),      # an amax's NaN as -2**63: its workspace named like a count's, int64 (test_gpu_partition)
]

# Wrong on the GPU and not fixed yet (xfail; an XPASS means look again, and move it up once fixed).
GPU_SEEDS_OPEN: list = []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("mode,seed", GPU_SEEDS)
def test_gpu_fuzz_seed_is_no_longer_wrong(mode, seed, monkeypatch):
    monkeypatch.setenv("EMBER_FUZZ_DEVICE", "cuda")
    (outcome,) = run_program(generate(seed, mode), ("ember",))
    assert outcome.cls not in ("wrong", "crash"), f"{outcome.cls} {outcome.check}: {outcome.detail}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("mode,seed", GPU_SEEDS_OPEN)
@pytest.mark.xfail(strict=False, reason="an open wrong result on the GPU (GPU_SEEDS_OPEN)")
def test_open_gpu_fuzz_seed(mode, seed, monkeypatch):
    monkeypatch.setenv("EMBER_FUZZ_DEVICE", "cuda")
    (outcome,) = run_program(generate(seed, mode), ("ember",))
    assert outcome.cls not in ("wrong", "crash"), f"{outcome.cls} {outcome.check}: {outcome.detail}"
