"""Triton kernels from ember's IR and schedule, run on CPU tensors by Triton's interpreter
(TRITON_INTERPRET=1), so GPU code generation is tested where there is no GPU."""
import pytest
import torch

from ember.autograd.joint import trace_joint
from ember.codegen.compile import _lower, _schedule
from ember.codegen.triton import TritonKernel, load_kernel
from ember.decomp import core_decompositions
from ember.scheduling.scheduler import Kernel

# Without a GPU, Triton's interpreter runs the kernels on CPU tensors (tests/conftest.py sets
# TRITON_INTERPRET before anything imports triton).  With one, they compile.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

triton = pytest.importorskip("triton")




def _triton_kernels(fn, *args):
    """fn's forward graph lowered and scheduled; each kernel as (TritonKernel, function)."""
    gm, _ = trace_joint(fn, list(args), core_decompositions(), with_backward=False)
    graph = _lower(gm)
    scheduler = _schedule(graph)
    dtypes = {b.name: b.dtype for b in [*graph.inputs, *scheduler.kept] if b.dtype is not None}
    kernels = []
    for step in scheduler.steps:
        if isinstance(step, Kernel):
            kernel = TritonKernel(step, dtypes)
            source = kernel.generate(step.name)
            kernels.append((kernel, load_kernel(source, step.name), source))
    return graph, kernels


def _run(graph, kernel, function, inputs: dict, block: int = 64):
    outputs = {}
    for buffer in kernel.kernel.nodes:
        layout = buffer.layout
        outputs[buffer.name] = torch.empty_strided([int(s) for s in layout.size], [int(s) for s in layout.stride],
                                                   dtype=layout.dtype, device=DEVICE)
    numel = int(kernel.numel)
    grid = (triton.cdiv(numel, block),)
    function[grid](*[inputs[name].to(DEVICE) for name in kernel.inputs], *outputs.values(), numel, XBLOCK=block)
    return {name: value.cpu() for name, value in outputs.items()}


def test_seed_toy_is_one_kernel_with_two_stores():
    """Seed 003's toy, sin then cos: one Triton kernel storing both results, as in the talk."""
    def toy(x):
        a = torch.sin(x)
        return a, torch.cos(a)

    x = torch.randn(37, 5)
    graph, kernels = _triton_kernels(toy, x)
    assert len(kernels) == 1
    kernel, function, source = kernels[0]
    assert source.count("tl.store(") == 2 and "xmask" in source
    out = _run(graph, kernel, function, {graph.inputs[0].name: x})
    a, b = out.values()
    torch.testing.assert_close(a, x.sin())
    torch.testing.assert_close(b, x.sin().cos())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pointwise_chain_with_broadcast_and_transposed_input(dtype):
    """A broadcast bias, a transposed input, NaN-propagating maximum, where: loads at layout
    indices, half types computed in float32 and rounded when stored."""
    def fn(x, bias):
        y = torch.maximum(x.t() * 2 + bias, torch.zeros((), dtype=x.dtype))
        return torch.where(y > 1, y.sigmoid(), y - 1)

    x = torch.randn(7, 9).to(dtype)
    x[0, 0] = float("nan")
    bias = torch.randn(7).to(dtype)
    graph, kernels = _triton_kernels(fn, x, bias)
    assert len(kernels) == 1
    kernel, function, _ = kernels[0]
    names = {graph.inputs[0].name: x, graph.inputs[1].name: bias}
    (out,) = _run(graph, kernel, function, names).values()
    # (bfloat16: one rounding apart where a float32 sigmoid lands on a rounding boundary)
    tolerance = {"atol": 8e-3, "rtol": 1.6e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(out, fn(x, bias), equal_nan=True, **tolerance)
