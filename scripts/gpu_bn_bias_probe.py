"""Probe for fuzz conv 703382: eager's CUDA gradient of an eval-mode batch_norm's bias with no
weight, input [6, 1, 1, 1] with strides (1, 6, 6, 6): which backward op eager calls, and what it
returns (the sum of dy by definition)."""
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode


class Calls(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if "batch_norm" in str(func):
            print("  ", func, [tuple(r.shape) if isinstance(r, torch.Tensor) else r for r in
                               (result if isinstance(result, tuple) else (result,))])
        return result


for device in ("cpu", "cuda"):
    b = torch.randn((1, 1, 1, 6), generator=torch.Generator().manual_seed(70338202)).to(device).permute(3, 2, 0, 1)
    b.requires_grad_()
    d = torch.randn(1, device=device, requires_grad=True)
    out = F.batch_norm(b, torch.zeros(1, device=device), torch.ones(1, device=device), None, d, training=False)
    dy = torch.randn(out.shape, generator=torch.Generator().manual_seed(5)).to(device)
    with Calls():
        out.backward(dy)
    print(device, "d.grad", d.grad, "sum dy", dy.sum().item())
