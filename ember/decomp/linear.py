"""Matrix products and embeddings."""
import torch

from ..device_limits import ATOMIC_UPDATES_PER_ROW_LIMIT
from . import register

aten = torch.ops.aten


def _integer_factor(factor, dtype):
    """A scalar factor as eager's CPU kernel applies it to an integer product: truncated toward
    zero (0.5 -> 0, -1.5 -> -1); None where it does not fit the dtype (eager refuses it)."""
    value = int(factor)
    info = torch.iinfo(dtype)
    return value if info.min <= value <= info.max else None


@register(aten.addmm.default)
def addmm(bias, mat1, mat2, *, beta=1, alpha=1):
    if not mat1.dtype.is_floating_point and not mat1.dtype.is_complex and mat1.dtype != torch.bool:
        # A float factor times an integer tensor would promote to float: eager's result stays in
        # the integer dtype, scaled by the truncated factor (int8 addmm with beta=0.5 adds 0 * bias).
        beta, alpha = _integer_factor(beta, mat1.dtype), _integer_factor(alpha, mat1.dtype)
        if beta is None or alpha is None:
            return NotImplemented
    if alpha == 0:
        # BLAS does not form the product when alpha is 0: eager's result is beta * bias, with
        # no inf or NaN from the product (0 * inf would be NaN)
        size = [mat1.shape[0], mat2.shape[1]]
        if beta == 0:
            return aten.full.default(size, 0, dtype=mat1.dtype, device=mat1.device)
        bias = bias if beta == 1 else aten.mul.Tensor(bias, beta)
        return aten.clone.default(aten.expand.default(bias, size))
    product = aten.mm.default(mat1, mat2)
    if alpha != 1:
        product = aten.mul.Tensor(product, alpha)
    if beta == 0:
        return product
    if beta != 1:
        bias = aten.mul.Tensor(bias, beta)
    return aten.add.Tensor(product, bias)


# cuBLAS picks its vectorized kernels only when every matrix's rows start at least 4 bytes apart
# (GPT-2's vocabulary of 50257: its LM head's bf16 products took 4.3-6.7 ms on an H100, ~1.6
# aligned).  Such products on a GPU run on zero-padded copies, padded in the operand's own memory
# order, and the result is the slice of the padded product.
PAD_ALIGN = {torch.float16: 8, torch.bfloat16: 8}  # pad to 16 bytes ...
PAD_WHEN = {torch.float16: 2, torch.bfloat16: 2}  # ... rows not a multiple of this many elements apart
PAD_MIN_MACS = 2**28  # smaller products: the copies would cost more than they save
PAD_MAX_GROWTH = 1.1  # padded operands at most this much larger


def _transposed(matrix) -> bool:
    return matrix.stride(0) == 1 and matrix.stride(1) != 1 and matrix.shape[0] > 1


def _padded(matrix, pad_rows: int, pad_columns: int):
    """The matrix with zero rows and columns appended, copied in its own memory order."""
    if not (pad_rows or pad_columns):
        return matrix
    if _transposed(matrix):
        flipped = aten.constant_pad_nd.default(aten.t.default(matrix), [0, pad_rows, 0, pad_columns])
        return aten.t.default(flipped)
    return aten.constant_pad_nd.default(matrix, [0, pad_columns, 0, pad_rows])


@register(aten.mm.default)
def mm(a, b):
    align = PAD_ALIGN.get(a.dtype)
    if align is None or a.device.type != "cuda" or b.dtype != a.dtype:
        return NotImplemented
    sizes = (*a.shape, b.shape[1])
    if not all(isinstance(size, int) for size in sizes):
        return NotImplemented
    m, k, n = sizes
    # the sizes that are row pitches: a's rows (k, or m when transposed), b's (n, or k), the product's (n)
    pitches = {"n"} | ({"m"} if _transposed(a) else {"k"}) | ({"k"} if _transposed(b) else set())
    odd = {name for name, size in zip("mkn", sizes) if name in pitches and size % PAD_WHEN[a.dtype]}
    if not odd or m * k * n < PAD_MIN_MACS:
        return NotImplemented
    pad_m, pad_k, pad_n = ((-size) % align if name in odd else 0 for name, size in zip("mkn", sizes))
    if (m + pad_m) * (k + pad_k) * (n + pad_n) > PAD_MAX_GROWTH * m * k * n:
        return NotImplemented
    product = aten.mm.default(_padded(a, pad_m, pad_k), _padded(b, pad_k, pad_n))
    return aten.slice.Tensor(aten.slice.Tensor(product, 0, 0, m), 1, 0, n)


@register(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        return NotImplemented
    # Many indices per row stay ATen's kernel (it sorts them) where accumulating scatters contend:
    # atomic adds on few rows serialize (BERT's token-type embedding: 390 ms, ATen's 0.1 ms).
    limit = ATOMIC_UPDATES_PER_ROW_LIMIT.get(grad_output.device.type)
    if limit is not None and isinstance(indices.numel(), int) and isinstance(num_weights, int) and \
            indices.numel() > limit * max(num_weights, 1):
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
