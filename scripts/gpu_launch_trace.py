"""Probe: every Triton launch of ember's compiled `ln_only` (fuzz lowp 700735), with its block
sizes and grid, and the buffers it wrote, against torch (EMBER_TRITON_DIRECT=0)."""
import os
os.environ["EMBER_TRITON_DIRECT"] = "0"
import torch
import torch.nn.functional as F

import ember
from ember.codegen.triton import backend as triton_backend

calls = []
original = triton_backend.TritonLauncher.__call__


def traced(self, grid, *args):
    original(self, grid, *args)
    torch.cuda.synchronize()
    calls.append((self, self.path, grid, dict(self.constexprs), self.num_warps,
                  [a.clone() if isinstance(a, torch.Tensor) else a for a in args]))


triton_backend.TritonLauncher.__call__ = traced


def gen(s):
    return torch.Generator().manual_seed(s)


c = (torch.randn((7, 7, 5, 4), generator=gen(70073503)) * 10.0).to(torch.bfloat16).cuda()
d = (torch.randn((4, 5), generator=gen(70073504)) * 300.0).to(torch.bfloat16).cuda()
d.view(-1)[[5, 6, 15]] = torch.tensor([0.5, -1.0, -1.0], dtype=torch.bfloat16).cuda()
d = d.t()
e = (torch.rand((5, 4), generator=gen(70073505)) + 0.1).to(torch.bfloat16).cuda()


def ln_only(c, d, e):
    return F.layer_norm(c.sign().log_softmax(0), (5, 4), d, e, eps=1e-3).float().sum((0, 1, 2))


got = ember.compile(ln_only, backend="ember")(c, d, e)
print("ember", got.tolist(), "eager", ln_only(c, d, e).tolist())
v1 = c.float().sign().log_softmax(0).to(torch.bfloat16).float()
var, mean = torch.var_mean(v1, (2, 3), correction=0)
for _, path, grid, constexprs, warps, args in calls:
    print(path.rsplit("/", 1)[-1], grid, constexprs, "warps", warps,
          [(tuple(a.shape), a.dtype, a.stride()) if isinstance(a, torch.Tensor) else a for a in args])
    for a in args:
        if isinstance(a, torch.Tensor) and a.shape == v1.shape:
            print("   v1 buffer max diff", float((a.float() - v1).abs().max()))
        if isinstance(a, torch.Tensor) and tuple(a.shape) == (1, 7, 5, 4):
            signs = c.float().sign()
            top = signs.amax(0, keepdim=True)
            print("   vs max", float((a - top).abs().max()), "vs sum exp", float((a - (signs - top).exp().sum(0, keepdim=True)).abs().max()))
        if isinstance(a, torch.Tensor) and a.numel() == 49:
            flat = a.flatten()
            print("   49-buffer vs mean", float((flat - mean.flatten()).abs().max()), "vs m2",
                  float((flat - (var * 20).flatten()).abs().max()))

import triton
launcher, path = calls[1][0], calls[1][1]
for xblock, rblock, warps in ((64, 32, 4), (32, 32, 4), (64, 32, 1), (8, 32, 1)):
    args = [a.clone() if isinstance(a, torch.Tensor) else a for a in calls[1][5]]
    args[3].zero_()
    launcher.function[(triton.cdiv(49, xblock),)](*args, XBLOCK=xblock, RBLOCK=rblock, num_warps=warps,
                                                  enable_fp_fusion=False)
    print("kernel1 by hand", xblock, rblock, warps, "v1 diff", float((args[3] - v1).abs().max()))

args = calls[1][5]
signs = c.float().sign()
top = signs.amax(0, keepdim=True)
total = (signs - top).exp().sum(0, keepdim=True)
print("buf0 vs max", float((args[1] - top).abs().max()), "buf1 vs sum", float((args[2] - total).abs().max()))
diff = (args[3] - v1).abs()
where = (diff > 0.01).nonzero()
print("differing", where.shape[0], "of", v1.numel(), "first", where[:8].tolist())
for index in where[:6].tolist():
    i, j, k, l = index
    print(index, "ember", float(args[3][i, j, k, l]), "torch", float(v1[i, j, k, l]), "sign", float(signs[i, j, k, l]),
          "max", float(top[0, j, k, l]), "sum", float(total[0, j, k, l]))
