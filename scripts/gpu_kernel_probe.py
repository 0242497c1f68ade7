"""Probe: kernel2 of fuzz lowp 700735 (a layer_norm recomputed inside a sum over 3 of 4 dims)
run by hand on the GPU, with variants, against torch."""
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice  # noqa: F401

SOURCE = '''
@triton.jit
def kernel2(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0).to(tl.int32) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None].to(tl.int32)
    xmask = xindex < xnumel
    rbase = tl.arange(0, RBLOCK)[None, :].to(tl.int32)
    rindex = rbase
    rmask = rindex < rnumel
    x0 = xindex
    r0_0 = (rindex // 35)
    r0_1 = (rindex // 5) % 7
    r0_2 = rindex % 5
    tmp1 = tl.load(in_ptr0 + (x0 + (4 * r0_2) + (20 * r0_1) + (140 * r0_0)), xmask & rmask, other=0)
    tmp2 = tl.load(in_ptr1 + (r0_1 + (7 * r0_0)), rmask, other=0)
    tmp3 = (tmp1 - tmp2)
    tmp4 = tl.load(in_ptr2 + (r0_1 + (7 * r0_0)), rmask, other=0)
    tmp5 = tl.full([1, 1], 20.0, tl.float32)
    tmp6 = tl.div_rn(tmp4, tmp5)
    tmp7 = tl.full([1, 1], 0.001, tl.float32)
    tmp8 = (tmp6 + tmp7)
    tmp9 = libdevice.rsqrt(tmp8)
    tmp10 = (tmp3 * tmp9)
    tmp11 = tl.load(in_ptr3 + (r0_2 + (5 * x0)), xmask & rmask, other=0)
    tmp12 = tmp11.to(tl.float32)
    tmp14 = (tmp10 * tmp12)
    tmp15 = tl.load(in_ptr4 + (x0 + (4 * r0_2)), xmask & rmask, other=0)
    tmp16 = tmp15.to(tl.float32)
    tmp18 = (tmp14 + tmp16)
    tmp19 = tmp18.to(tl.bfloat16).to(tl.float32)
    tmp26 = tl.where(xmask & rmask, tmp19, 0)
    tmp27 = tl.sum(tmp26, 1)[:, None]
    tl.store(out_ptr0 + x0, tmp27, xmask)
'''

VARIANTS = {
    "as generated": lambda s: s,
    "no bf16 round": lambda s: s.replace("tmp18.to(tl.bfloat16).to(tl.float32)", "tmp18"),
    "xmask on stats loads": lambda s: s.replace("(r0_1 + (7 * r0_0)), rmask,", "(r0_1 + (7 * r0_0)), xmask & rmask,"),
    "no weight": lambda s: s.replace("tmp14 = (tmp10 * tmp12)", "tmp14 = tmp10"),
    "no bias": lambda s: s.replace("tmp18 = (tmp14 + tmp16)", "tmp18 = tmp14"),
    "sqrt_rn": lambda s: s.replace("libdevice.rsqrt(tmp8)", "1.0 / tl.sqrt_rn(tmp8)"),
    "only x": lambda s: s.replace("tmp3 = (tmp1 - tmp2)", "tmp3 = tmp1").replace("tmp10 = (tmp3 * tmp9)", "tmp10 = tmp3"),
}


def build(text):
    import tempfile, importlib.util, os
    path = os.path.join(tempfile.mkdtemp(), "k.py")
    with open(path, "w") as f:
        f.write("import triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n" + text)
    spec = importlib.util.spec_from_file_location("k", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel2


def gen(s):
    return torch.Generator().manual_seed(s)


c = (torch.randn((7, 7, 5, 4), generator=gen(70073503)) * 10.0).to(torch.bfloat16).cuda()
d = (torch.randn((4, 5), generator=gen(70073504)) * 300.0).to(torch.bfloat16).cuda()
d.view(-1)[[5, 6, 15]] = torch.tensor([0.5, -1.0, -1.0], dtype=torch.bfloat16).cuda()
d = d.t()
e = (torch.rand((5, 4), generator=gen(70073505)) + 0.1).to(torch.bfloat16).cuda()
v1 = c.float().sign().log_softmax(0).to(torch.bfloat16).float()
var, mean = torch.var_mean(v1, (2, 3), correction=0)
m2 = var * 20
weight, bias = d.float(), e.float()
for name, edit in VARIANTS.items():
    text = edit(SOURCE)
    kernel = build(text)
    for xblock, rblock, warps in ((4, 256, 2), (1, 256, 2), (4, 256, 4), (4, 512, 4)):
        out = torch.empty(4, device="cuda")
        kernel[(triton.cdiv(4, xblock),)](v1.contiguous(), mean.contiguous(), m2.contiguous(), d, e, out, 4, 245,
                                          XBLOCK=xblock, RBLOCK=rblock, num_warps=warps)
        xhat = (v1 - mean[..., None, None]) * torch.rsqrt(m2[..., None, None] / 20 + 1e-3)
        if "no weight" not in name:
            xhat = xhat * weight
        if "no bias" not in name:
            xhat = xhat + bias
        if "only x" in name:
            xhat = v1 * weight + bias
        ref = xhat.to(torch.bfloat16).float() if "no bf16" not in name else xhat
        expected = ref.sum((0, 1, 2))
        print(f"{name:24s} X{xblock} R{rblock} w{warps}: kernel {out.tolist()} torch {expected.tolist()}", flush=True)
