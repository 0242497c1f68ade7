"""Tensor basics: arithmetic, views, indexing, in-place ops on inputs, attributes, F.*."""
import math

import torch
import torch.nn.functional as F

from .registry import args, pick, program, randint, randn, tensors


@program(tensors((4, 5), (4, 5), vary=True))
def add_mul(x, y):
    return x * 2 + y - 1


@program(tensors((4, 5), (5,), vary=True))
def broadcast_activation(x, b):
    return torch.relu(x + b) * b.sigmoid()


@program(tensors((4, 5), vary=True))
def reductions(x):
    return x.sum(), x.mean(dim=0), x.amax(dim=1), x.argmin(), x.std(dim=1, keepdim=True)


@program(tensors((4, 5), (5, 3)))
def matmul_chain(x, w):
    h = (x @ w).tanh()
    return h @ w.t(), torch.mm(x, w)


@program(lambda s: args(randn(*pick(s, [(4, 6), (4, 6), (2, 6), (8, 3)]))))
def view_reshape(x):
    a = x.view(-1, 3)
    b = x.reshape(x.size(0) * x.size(1))
    c = x.flatten()
    return a.sum(1), b * 2, c.unflatten(0, (-1, 3)), x.view(x.shape[1], -1)


@program(tensors((2, 3, 4)))
def permute_transpose(x):
    p = x.permute(2, 0, 1)
    t = x.transpose(0, 1)
    return p.contiguous(), t + 0, x.mT.shape, p.is_contiguous(), x.movedim(0, -1)


@program(lambda s: args(randn(6, 4), pick(s, [[1, 2, 3], [3, 3], [2, 2, 2], [6]])))
def chunk_split(x, sizes):
    a, b, c = x.chunk(3)
    parts = x.split(sizes)
    return a + b + c, [p.sum(0) for p in parts], len(parts)


@program(tensors((3, 4), (3, 4), vary=True))
def cat_stack(x, y):
    c = torch.cat([x, y], dim=0)
    s = torch.stack([x, y], dim=-1)
    return c, s.sum(-1), torch.hstack((x, y)).shape


@program(tensors((6, 5), vary=True))
def slicing(x):
    return x[1:3, ::2], x[-1], x[:, 1], x[2:, -2:], x[:-1]


@program(tensors((3, 4, 5)))
def index_none_ellipsis(x):
    a = x[None, ..., 1]
    b = x[..., None]
    c = x[:, None, 1:3]
    return a, b.shape, c, x[..., -1, :]


@program(tensors((4, 5), vary=True))
def bool_mask_select(x):
    m = x > 0
    return x[m], x.masked_fill(~m, 0.0), m.sum()


@program(lambda s: args(randn(5, 4), randint(0, 5, (3,))))
def int_tensor_index(x, idx):
    return x[idx], x[:, idx[:2] % 4], x[idx, idx % 4], torch.index_select(x, 0, idx)


@program(lambda s: args(randn(4, 5), randint(0, 5, (4, 2))))
def gather_scatter_add(x, idx):
    g = x.gather(1, idx)
    out = torch.zeros(4, 5).scatter_add(1, idx, g)
    return g, out


@program(tensors((4, 5), (4, 5)))
def inplace_add_mul(x, y):
    x.add_(1)
    x.mul_(y)
    y.clamp_(min=0)
    return x


@program(tensors((4, 5), (4, 5)))
def setitem_input(x, y):
    x[0] = 5
    x[:, 1] = y[:, 0]
    x[2, 3] = y.sum()
    return x.sum()


@program(tensors((4, 5)))
def setitem_mask(x):
    x[x < 0] = 0


@program(tensors((4, 5)))
def slice_augmented_assign(x):
    x[1:3, 2:] += 1
    x[..., 0] *= 2
    return x[1:3]


@program(tensors((4, 5), vary=True))
def tensor_attrs(x):
    return (x.shape, x.dtype, x.device, x.ndim, x.T, x.dim(), x.numel(),
            x.is_contiguous(), x.requires_grad)


@program(tensors((4, 5), vary=True))
def size_arithmetic(x):
    n = x.size(0)
    m = x.size(1)
    flat = x.view(n * m)
    half = n // 2
    return flat * (n + m), x[:half], n * m - 1, x.shape[-1] % 3


@program(tensors((4, 5), vary=True))
def loop_over_rows_by_shape(x):
    acc = torch.zeros(x.shape[1])
    for i in range(x.shape[0]):
        acc = acc + x[i] * (i + 1)
    return acc


@program(tensors((4, 5), (3, 5), (3,)))
def functional_ops(x, w, b):
    h = F.linear(x, w, b)
    return (F.relu(h), F.softmax(h, dim=-1), F.gelu(x), F.layer_norm(x, (5,)),
            F.log_softmax(x, dim=0), F.silu(x), F.normalize(x, dim=1), F.pad(x, (1, 2)))


@program(tensors((1, 2, 6, 6), (3, 2, 3, 3)))
def conv_pool(x, w):
    y = F.conv2d(x, w, padding=1)
    return F.max_pool2d(y, 2), F.avg_pool2d(y, 2), F.adaptive_avg_pool2d(y, 1).flatten(1)


@program(lambda s: args(randn(4, 3), randint(0, 3, (4,)), randn(4, 3)))
def losses(logits, target, other):
    return (F.cross_entropy(logits, target), F.mse_loss(logits, other),
            F.smooth_l1_loss(logits, other, reduction="none"),
            F.nll_loss(F.log_softmax(logits, 1), target))


@program(tensors((4, 5), (4, 5)))
def item_scale(x, y):
    v = x.sum().item()
    return y * v, v, round(v, 3)


@program(lambda s: args(randn(6, 3), randint(0, 6, (4,))))
def item_to_slice(x, idx):
    k = int(idx.max().item())
    return x[: k + 1], k


@program(lambda s: args(randn(4, 5).abs() * pick(s, [0.1, 3.0, 3.0, 0.1]),
                        pick(s, [0, 1, 3, 5, 2, -1])))
def chained_comparisons(x, n):
    a = x.mean().item()
    r = x * 2 if -0.5 < a < 0.5 else x - 1
    in_range = 0 <= n < 3
    return r, in_range, 1 < 2 < n, n == n > -5


@program(lambda s: args(randn(4, 5), s % 2 == 0, s))
def ternary(x, flag, n):
    y = x if flag else -x
    k = 2 if n > 2 else 3
    z = y.abs() if y.sum() > 0 else y * 0
    return y * k, z


@program(tensors((4, 5)))
def dtype_casts(x):
    return (x.to(torch.float64), (x * 10).int(), (x > 0).float().sum(), x.long(), x.half(),
            x.to(dtype=torch.bfloat16), x.double().dtype)


@program(lambda s: args(randint(-20, 20, (4, 5)), randint(1, 6, (4, 5))))
def integer_ops(a, b):
    return (a // b, a % b, a & b, a | 3, torch.where(a > 0, a, b), a.abs().max(),
            (a * b).sum(dim=0), a / b)


@program(tensors((4, 5), (4, 5)))
def comparisons(x, y):
    gt = x > y
    return (gt, torch.eq(x, x), x.ge(0).all(), bool((x > 2).any()), torch.equal(x, y),
            (gt & (y > 0)).sum())


@program(tensors((2, 2)))
def return_python_values(x):
    return 3, "hello", None, True, 2.5, x.sum(), (1, "a"), [None]


@program(tensors((4, 5), (4, 5)))
def clamp_where(x, y):
    return torch.where(x > 0, x, y).clamp(-0.5, 0.5), torch.clamp(x, max=0.1), x.clip(min=-0.2)


@program(lambda s: args(randn(4, 5), pick(s, [1, 4, 9, 2]), pick(s, [0.5, 2.25, 7.0])))
def math_with_tensor(x, n, f):
    return (x * math.sqrt(n) + math.pi, math.floor(f), math.log(f) * x, math.ceil(f * n),
            x.pow(math.e))


@program(lambda s: args(randn(4, 1), pick(s, [5, 3])))
def expand_repeat(x, n):
    return (x.expand(4, n) + x.repeat(1, n), x.squeeze(1).unsqueeze(0),
            x.expand(-1, n).contiguous().shape, x.tile((2, 1)))


@program(tensors((4, 5)))
def sort_topk_cumsum(x):
    v, i = torch.sort(x, dim=1)
    return (torch.sort(x, dim=0, descending=True), v, i, x.cumsum(0), x.topk(2),
            x.max(dim=1))


@program(lambda s: args(randn(3, pick(s, [4, 5, 6])), pick(s, [1, 2, 7])))
def factory_functions(x, n):
    return (torch.zeros_like(x), torch.ones(x.shape[0], 3), torch.arange(x.size(1)),
            torch.full((2, 2), n), torch.eye(3) * n, torch.linspace(0, 1, steps=x.size(1)),
            torch.empty(0).shape, torch.ones_like(x, dtype=torch.int32))


@program(tensors((4, 5)))
def scalar_tensor_mix(x):
    return (x + torch.tensor(3.0), x * torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]),
            torch.tensor([1, 2]) + 1, torch.tensor(2.5).item())


@program(tensors((4, 5)))
def inplace_through_view(x):
    v = x[0]
    v.mul_(2)
    x.t()[1].zero_()
    return x


@program(tensors((4, 5)))
def clone_detach(x):
    y = x.clone()
    y += 1
    z = x.detach()
    return x, y, z, z is x


@program(tensors((2, 3, 4), (2, 4, 5)))
def einsum_bmm(a, b):
    return torch.einsum("bij,bjk->bik", a, b), torch.bmm(a, b), a @ b


@program(lambda s: args(randn(4, 5, requires_grad=True), randn(4, 5)))
def autograd_flags(x, y):
    z = (x * y).sum()
    return z, z.requires_grad, x.is_leaf, y.requires_grad, z.grad_fn is not None


@program(lambda s: args(randn(4, 5, requires_grad=True)))
def backward_inside(x):
    loss = (x.sin() * 2).sum()
    loss.backward()
    return x.grad * 1, loss.detach()


@program(tensors((4, 5), vary=True))
def norms(x):
    return (x.norm(), torch.linalg.vector_norm(x, dim=1), x.abs().sum(1).log1p(),
            torch.logsumexp(x, 0))
