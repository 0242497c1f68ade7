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


# cuBLAS picks its fast (vectorized, tensor-core) kernels only when every matrix's rows start
# 16 bytes apart: GPT-2's vocabulary of 50257 makes its LM head's three products 3-4x slower
# (6.7 ms instead of ~1.6 on an H100, bf16).  Such products on a GPU run on zero-padded copies
# (zeros add nothing to a dot product), and the result is the slice of the padded product.
PAD_ALIGN = {torch.float16: 8, torch.bfloat16: 8, torch.float32: 4}  # elements in 16 bytes
PAD_MIN_MACS = 2**28  # smaller products: the copies would cost more than they save
PAD_MAX_GROWTH = 1.1  # padded operands at most this much larger


@register(aten.mm.default)
def mm(a, b):
    align = PAD_ALIGN.get(a.dtype)
    if align is None or a.device.type != "cuda" or b.dtype != a.dtype:
        return NotImplemented
    sizes = (*a.shape, b.shape[1])
    if not all(isinstance(size, int) for size in sizes):
        return NotImplemented
    m, k, n = sizes
    a_transposed = a.stride(0) == 1 and a.stride(1) != 1 and m > 1  # (its rows are m apart)
    pad_m = (-m) % align if a_transposed else 0
    pad_k, pad_n = (-k) % align, (-n) % align
    if not (pad_m or pad_k or pad_n) or m * k * n < PAD_MIN_MACS or \
            (m + pad_m) * (k + pad_k) * (n + pad_n) > PAD_MAX_GROWTH * m * k * n:
        return NotImplemented
    if pad_m or pad_k:
        a = aten.constant_pad_nd.default(a, [0, pad_k, 0, pad_m])
    if pad_k or pad_n:
        b = aten.constant_pad_nd.default(b, [0, pad_n, 0, pad_k])
    product = aten.mm.default(a, b)
    return aten.slice.Tensor(aten.slice.Tensor(product, 0, 0, m), 1, 0, n)


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
