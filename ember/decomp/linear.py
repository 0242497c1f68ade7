"""Matrix products and embeddings."""
import torch

from . import register

aten = torch.ops.aten


@register(aten.addmm.default)
def addmm(bias, mat1, mat2, *, beta=1, alpha=1):
    product = aten.mm.default(mat1, mat2)
    if alpha != 1:
        product = aten.mul.Tensor(product, alpha)
    if beta == 0:
        return product
    if beta != 1:
        bias = aten.mul.Tensor(bias, beta)
    return aten.add.Tensor(product, bias)


@register(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        return NotImplemented
    embedding_dim = grad_output.shape[-1]
    flat_grad = aten.reshape.default(grad_output, [-1, embedding_dim])
    flat_indices = aten.reshape.default(indices, [-1])
    if padding_idx >= 0:
        keep = aten.ne.Scalar(flat_indices, padding_idx)
        keep = aten.unsqueeze.default(keep, 1)
        flat_grad = aten.where.self(keep, flat_grad, aten.scalar_tensor.default(
            0.0, dtype=grad_output.dtype, device=grad_output.device))
    zeros = aten.new_zeros.default(grad_output, [num_weights, embedding_dim])
    return aten.index_put.default(zeros, [flat_indices], flat_grad, True)
