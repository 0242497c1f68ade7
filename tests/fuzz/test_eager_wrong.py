"""The harness's "eager_wrong" class: eager's CPU batch_norm backward misreads some strided
arguments (torch 2.13, float64 too), and a program ember gets right must not be called wrong for
it; nor may the recheck hide a gradient of ember's that differs from the corrected eager."""
import contextlib

import torch
import torch.nn.functional as F

from .generator import generate
from .harness import _DenseBatchNormBackward, _eager_under_mode_agrees, execute, load, run_program


def _formula_input_grad(x, weight, grad, eps=1e-5):
    """Training batch_norm's input gradient from its definition, by autograd over plain ops."""
    leaf = x.detach().contiguous().requires_grad_()
    dims = [0, *range(2, x.dim())]
    mean = leaf.mean(dims, keepdim=True)
    var = ((leaf - mean) ** 2).mean(dims, keepdim=True)
    out = (leaf - mean) / torch.sqrt(var + eps)
    if weight is not None:
        out = out * weight.contiguous().view(1, -1, *[1] * (x.dim() - 2))
    (found,) = torch.autograd.grad(out, leaf, grad)
    return found


def _input_grad(x, weight, grad, mode=None):
    leaf = x.detach().clone(memory_format=torch.preserve_format).requires_grad_()
    with mode() if mode else contextlib.nullcontext():
        out = F.batch_norm(leaf, None, None, weight, None, training=True)
        (found,) = torch.autograd.grad(out, leaf, grad)
    return found


def test_dense_batch_norm_backward_is_the_formula_where_eager_misreads():
    generator = torch.Generator().manual_seed(0)
    # an input channels-last only by its size-1 dim, with a contiguous grad (conv 14899)
    ambiguous = torch.randn(1, 2, 3, 1, dtype=torch.float64, generator=generator).permute(0, 2, 3, 1)
    # a strided weight, which the channels-last kernel reads as contiguous (conv 12961)
    square = torch.randn(4, 3, 1, 1, dtype=torch.float64, generator=generator)
    weight = torch.randn(6, dtype=torch.float64, generator=generator)[::2]
    for x, w in ((ambiguous, None), (square, weight)):
        grad = torch.randn(x.shape, dtype=torch.float64, generator=generator)
        want = _formula_input_grad(x, w, grad)
        assert torch.allclose(_input_grad(x, w, grad, _DenseBatchNormBackward), want)
        # (torch 2.13's own kernel is wrong here; where a later torch fixes it, it agrees)


def test_a_program_eager_gets_wrong_is_eager_wrong_not_wrong():
    (outcome,) = run_program(generate(14899, "conv"), ("ember",))
    assert outcome.cls == "eager_wrong", (outcome.cls, outcome.check, outcome.detail)


def test_the_recheck_does_not_hide_a_gradient_that_differs():
    program = generate(14899, "conv")
    namespace = load(program)
    corrected = execute(lambda *args: _run_dense(namespace, *args), namespace, program.seed,
                        backward_context=_DenseBatchNormBackward)
    assert _eager_under_mode_agrees(_DenseBatchNormBackward, program, namespace, corrected, 1, {})
    corrected.grads = [g * 1.01 if g is not None else None for g in corrected.grads]
    assert not _eager_under_mode_agrees(_DenseBatchNormBackward, program, namespace, corrected, 1, {})


def _run_dense(namespace, *args):
    with _DenseBatchNormBackward():
        return namespace["program"](*args)
