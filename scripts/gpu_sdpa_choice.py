import torch
q = torch.randn(16, 512, 12, 64, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
m = torch.ones(16, 1, 512, 1, dtype=torch.bool, device="cuda").expand(16, 1, 512, 512)
cases = {"expanded bool": m, "contiguous bool": m.contiguous(), "contiguous float": torch.zeros(16, 1, 512, 512, device="cuda", dtype=torch.bfloat16),
         "key-expanded bool": torch.ones(16, 1, 1, 512, dtype=torch.bool, device="cuda").expand(16, 1, 512, 512), "none": None}
for name, mask in cases.items():
    print(name, torch._fused_sdp_choice(q, q, q, mask, 0.0, False), flush=True)
