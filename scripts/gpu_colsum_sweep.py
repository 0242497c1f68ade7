"""Sweep launch configurations of a split column sum (a bias gradient: XBLOCK, RBLOCK, warps, chunks) on
the GPU against ATen's sum(0); the kernel mirrors codegen/triton/kernel.py's split stage and combine.  Where the
column-sum defaults in codegen/triton/ (kernel.py's _launch, scheduling/gpu_partition.py's split_count) come from.

    python scripts/gpu_colsum_sweep.py
"""
import itertools, torch, triton, triton.language as tl
from triton.testing import do_bench

@triton.jit
def stage(in_ptr0, ws_ptr0, xnumel, rnumel, RCHUNK, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0).to(tl.int32) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None].to(tl.int32)
    xmask = xindex < xnumel
    rbase = tl.arange(0, RBLOCK)[None, :].to(tl.int32)
    rstart = tl.program_id(1).to(tl.int32) * RCHUNK
    rend = tl.minimum(rstart + RCHUNK, rnumel)
    acc1 = tl.full([XBLOCK, RBLOCK], 0, tl.float32)
    for roffset in range(rstart, rend, RBLOCK):
        rindex = roffset + rbase
        rmask = rindex < rnumel
        tmp2 = tl.load(in_ptr0 + (xindex + (xnumel * rindex)), xmask & rmask, other=0)
        acc1 = acc1 + tl.where(xmask & rmask, tmp2.to(tl.float32), 0)
    tmp6 = tl.sum(acc1, 1)[:, None]
    tl.store(ws_ptr0 + tl.program_id(1) * xnumel + xindex, tmp6, xmask)

@triton.jit
def combine(ws_ptr0, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rindex = tl.arange(0, RBLOCK)[None, :]
    rmask = rindex < rnumel
    v = tl.load(ws_ptr0 + xindex + xnumel * rindex, xmask & rmask, other=0)
    tl.store(out_ptr0 + xindex, tl.sum(v, 1)[:, None].to(out_ptr0.dtype.element_ty), xmask)

def run(g, out, XB, RB, warps, chunks):
    R, X = g.shape
    per = -(-R // chunks); rchunk = -(-per // RB) * RB
    chunks = -(-R // rchunk)
    ws = torch.empty(chunks * X, device=g.device, dtype=torch.float32)
    cr = triton.next_power_of_2(chunks)
    cx = max(1, min(64, 4096 // cr))
    def f():
        stage[(triton.cdiv(X, XB), chunks)](g, ws, X, R, rchunk, XBLOCK=XB, RBLOCK=RB, num_warps=warps)
        combine[(triton.cdiv(X, cx),)](ws, out, X, chunks, XBLOCK=cx, RBLOCK=cr)
    return f

for R, X in [(12608, 3072), (12608, 2304), (12608, 768), (8192, 3072), (8192, 768), (802816, 64), (50176, 256), (3136*64, 256)]:
    g = torch.randn(R, X, device="cuda", dtype=torch.bfloat16)
    ref = g.float().sum(0)
    out = torch.empty(X, device="cuda", dtype=torch.bfloat16)
    t_aten = do_bench(lambda: g.sum(0), warmup=10, rep=50)
    nbytes = g.numel() * 2
    results = []
    for XB, RB, warps, chunks in itertools.product([32, 64, 128], [8, 16, 32, 64, 128], [4, 8], [2, 8, 16, 32, 64, 128]):
        if XB * RB > 8192 or XB * RB < 512 or chunks * RB > R:
            continue
        f = run(g, out, XB, RB, warps, chunks)
        f()
        assert torch.allclose(out.float(), ref, rtol=2e-2, atol=1e-1), (XB, RB, warps, chunks)
        results.append((do_bench(f, warmup=5, rep=25), XB, RB, warps, chunks))
    results.sort()
    cur = [r for r in results if r[1:4] == (32, 128, 4)]
    print(f"[{R}, {X}] bf16: aten {t_aten*1e3:.1f} us ({nbytes/t_aten/1e9:.2f} TB/s); copy-speed floor at 3 TB/s {nbytes/3e12*1e6:.1f} us")
    for r in results[:6]:
        print(f"   {r[0]*1e3:7.1f} us  XBLOCK {r[1]} RBLOCK {r[2]} warps {r[3]} chunks {r[4]}")
    for r in cur[:3]:
        print(f"   current-like {r[0]*1e3:7.1f} us  XBLOCK {r[1]} RBLOCK {r[2]} warps {r[3]} chunks {r[4]}")
