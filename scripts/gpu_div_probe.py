"""Which formula eager's CUDA division by a Python number follows (true and trunc), per dtype."""
import torch
x32 = (torch.arange(-6000, 6000, dtype=torch.float32) * 0.37).cuda()
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    x = x32.to(dtype) if dtype != torch.float32 else x32
    for b in (7.0, 0.3, 0.001, 3.0, 1e-3 * 7):
        for mode in (None, "trunc"):
            eager = torch.div(x, b, rounding_mode=mode)
            bt = torch.tensor(b, dtype=torch.float64)
            cands = {
                "div_gpu_tensor": torch.div(x.float(), torch.tensor(b, device="cuda", dtype=torch.float32).to(dtype).float()),
                "mul_f32_recip_of_common": x.float() * (1.0 / bt.to(dtype).float()).float().cuda(),
                "mul_f32_recip_double": x.float() * (1.0 / bt).float().cuda(),
                "double_product": (x.double() * (1.0 / b)),
                "div_unrounded_scalar": torch.div(x.float(), torch.tensor(b, device="cuda", dtype=torch.float32)),
            }
            row = []
            for name, c in cands.items():
                if mode == "trunc":
                    c = c.trunc()
                c = c.to(dtype)
                row.append(f"{name}={int((c != eager).sum())}")
            print(dtype, b, mode, " ".join(row))
